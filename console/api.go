package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/trace"
)

// Paging of the runs list.
const (
	DefaultPerPage = 25
	MaxPerPage     = 200
)

// listQuery is what the runs list selects: from the query string's
// status, session, pending (1 or true), page (from 1) and per_page.
type listQuery struct {
	Status, Session string
	Pending         bool
	Page, PerPage   int
}

// parseList reads a runs list's query; bad values are errors naming them.
func parseList(q url.Values) (listQuery, error) {
	l := listQuery{Status: q.Get("status"), Session: q.Get("session"), Page: 1, PerPage: DefaultPerPage}
	if l.Status != "" {
		valid := loop.ListStatuses()
		if !slices.Contains(valid, l.Status) {
			return l, fmt.Errorf("unknown status %q; want one of %s", l.Status, strings.Join(valid, ", "))
		}
	}
	switch p := q.Get("pending"); p {
	case "", "0", "false":
	case "1", "true", "on":
		l.Pending = true
	default:
		return l, fmt.Errorf("pending=%q: want 1 or 0", p)
	}
	num := func(name string, dst *int, hi int) error {
		v := q.Get(name)
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || (hi > 0 && n > hi) {
			if hi > 0 {
				return fmt.Errorf("%s=%q: want a number from 1 to %d", name, v, hi)
			}
			return fmt.Errorf("%s=%q: want a number from 1", name, v)
		}
		*dst = n
		return nil
	}
	if err := num("page", &l.Page, 0); err != nil {
		return l, err
	}
	if err := num("per_page", &l.PerPage, MaxPerPage); err != nil {
		return l, err
	}
	return l, nil
}

// values is the query that selects l again, on page.
func (l listQuery) values(page int) url.Values {
	v := url.Values{}
	if l.Status != "" {
		v.Set("status", l.Status)
	}
	if l.Session != "" {
		v.Set("session", l.Session)
	}
	if l.Pending {
		v.Set("pending", "1")
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if l.PerPage != DefaultPerPage {
		v.Set("per_page", strconv.Itoa(l.PerPage))
	}
	return v
}

// runList is one page of the runs list.
type runList struct {
	Runs    []Run `json:"runs"`
	Page    int   `json:"page"`
	PerPage int   `json:"per_page"`
	// Total is how many runs the filters select, on all pages.
	Total int `json:"total"`
	Pages int `json:"pages"`
}

// listRuns selects and pages the backend's runs.
func (s *Server) listRuns(ctx context.Context, l listQuery) (*runList, error) {
	all, err := s.opts.Backend.Runs(ctx, Filter{Status: l.Status})
	if err != nil {
		return nil, err
	}
	var sel []Run
	for _, r := range all {
		if l.Session != "" && r.SessionID != l.Session {
			continue
		}
		if l.Pending && len(r.Waiting()) == 0 {
			continue
		}
		sel = append(sel, r)
	}
	out := &runList{Page: l.Page, PerPage: l.PerPage, Total: len(sel), Pages: (len(sel) + l.PerPage - 1) / l.PerPage}
	// A page past the last is empty (compared before multiplying, which
	// a page number near the int limit would overflow).
	if l.Page <= out.Pages {
		from := (l.Page - 1) * l.PerPage
		out.Runs = sel[from:min(from+l.PerPage, len(sel))]
	}
	if out.Runs == nil {
		out.Runs = []Run{}
	}
	return out, nil
}

// writeJSON answers with v as JSON. It encodes to a buffer first: a value
// that cannot be encoded (a number JSON has no word for) is a 500 that
// says so, not a 200 with half a body or none.
func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		slog.Error("console: encoding an answer", "err", err)
		buf.Reset()
		code = http.StatusInternalServerError
		enc.Encode(map[string]string{"error": "internal error: the answer could not be encoded as JSON: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// writeError answers with {"error": msg}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// apiFail answers with err: its own code for an httpError, 500 otherwise,
// logged and shown (only people in the users file get this far, and the
// backend's errors say what to do, e.g. which flag names a store).
func apiFail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if errors.As(err, &he) {
		writeError(w, he.code, he.msg)
		return
	}
	slog.ErrorContext(r.Context(), "console", "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "internal error: "+err.Error())
}

func (s *Server) apiRuns(w http.ResponseWriter, r *http.Request, _ *who) {
	l, err := parseList(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	list, err := s.listRuns(r.Context(), l)
	if err != nil {
		apiFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// runDoc is GET /api/runs/{id}.
type runDoc struct {
	Summary  Summary         `json:"summary"`
	Budgets  []Budget        `json:"budgets"`
	Findings []trace.Finding `json:"findings"`
	Messages []llm.Message   `json:"messages"`
	// Pending are the calls of the paused batch, answered or not;
	// Answered those answered in earlier pauses.
	Pending  []loop.Pending `json:"pending"`
	Answered []loop.Pending `json:"answered,omitempty"`
	// Tokens is the run's token account, as on its page: a row per turn
	// and per context edit, then the total; none for a run whose turns
	// report no tokens.
	Tokens []tokenRow   `json:"tokens,omitempty"`
	Events []shownEvent `json:"events,omitempty"`
}

func (s *Server) apiRun(w http.ResponseWriter, r *http.Request, _ *who) {
	shown, err := s.viewEvents(r.Context(), r.PathValue("id"))
	if err != nil {
		apiFail(w, r, err)
		return
	}
	events := plainEvents(shown)
	sum, st := summarize(events)
	doc := runDoc{Summary: sum, Budgets: budgets(st, sum), Findings: trace.Diagnose(events),
		Messages: st.Result(events).Messages, Pending: st.Pending, Answered: st.Answered, Tokens: tokenRows(events)}
	if doc.Findings == nil {
		doc.Findings = []trace.Finding{}
	}
	if doc.Pending == nil {
		doc.Pending = []loop.Pending{}
	}
	if r.URL.Query().Get("events") != "0" {
		doc.Events = shown
	}
	writeJSON(w, http.StatusOK, doc)
}

// apiEvents is a run's events after the query's "after" (a seq), as JSON,
// or with stream=1 as server-sent events as they come.
func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request, u *who) {
	if r.URL.Query().Get("stream") == "1" {
		s.stream(w, r, u)
		return
	}
	after, err := afterSeq(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	runID := r.PathValue("id")
	out, err := s.readShown(r.Context(), runID, after)
	if err == nil && after == 0 && (len(out) == 0 || out[0].Start == nil) {
		err = &httpError{http.StatusNotFound, fmt.Sprintf("run %s has no events yet", runID)}
	}
	if err != nil {
		apiFail(w, r, err)
		return
	}
	if out == nil {
		out = []shownEvent{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": out})
}

// apiEvent is one event of a run whole, however large: where the pages
// and the other answers, which cut large events short, point to.
func (s *Server) apiEvent(w http.ResponseWriter, r *http.Request, _ *who) {
	runID, v := r.PathValue("id"), r.PathValue("seq")
	seq, err := strconv.Atoi(v)
	if err != nil || seq < 1 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("event %q: want a sequence number (1 or more)", v))
		return
	}
	missing := &httpError{http.StatusNotFound, fmt.Sprintf("run %s has no event %d", runID, seq)}
	release, err := s.readSlot(r.Context())
	if err != nil {
		apiFail(w, r, err)
		return
	}
	defer release() // held while the whole event is written out
	if rr, ok := s.opts.Backend.(RecordReader); ok {
		// The stored JSON as it is: one copy of the event, not two.
		recs, err := rr.Records(r.Context(), runID, seq-1)
		if errors.Is(err, store.ErrUnknownRun) {
			err = &httpError{http.StatusNotFound, fmt.Sprintf("no run %s", runID)}
		}
		if err == nil && (len(recs) == 0 || recs[0].Seq != seq) {
			err = missing
		}
		if err != nil {
			apiFail(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Length", strconv.Itoa(len(recs[0].Data)))
		w.WriteHeader(http.StatusOK)
		w.Write(recs[0].Data)
		return
	}
	events, err := s.opts.Backend.Events(r.Context(), runID)
	if errors.Is(err, store.ErrUnknownRun) {
		err = &httpError{http.StatusNotFound, fmt.Sprintf("no run %s", runID)}
	}
	if err != nil {
		apiFail(w, r, err)
		return
	}
	for i := range events {
		if events[i].Seq == seq {
			writeJSON(w, http.StatusOK, &events[i])
			return
		}
	}
	apiFail(w, r, missing)
}

// afterSeq reads where a client's copy of a log ends: the Last-Event-ID
// header of a reconnecting event stream (which is newer than the URL it
// reconnects to), else the query's after.
func afterSeq(r *http.Request) (int, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("after=%q: want a sequence number (0 or more)", v)
	}
	return n, nil
}

// verb reads the {verb} of a decision's path: true for approve.
func verb(r *http.Request) (approve bool, err error) {
	switch v := r.PathValue("verb"); v {
	case "approve":
		return true, nil
	case "deny":
		return false, nil
	default:
		return false, &httpError{http.StatusNotFound, fmt.Sprintf("no action %q: want approve or deny", v)}
	}
}

func (s *Server) apiDecide(w http.ResponseWriter, r *http.Request, u *who) {
	approve, err := verb(r)
	if err != nil {
		apiFail(w, r, err)
		return
	}
	var body struct {
		Note string `json:"note"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, `the body must be JSON like {"note": "why"}: `+err.Error())
		return
	}
	d, err := s.decide(r.Context(), r.PathValue("id"), r.PathValue("call"), approve, u.name, body.Note)
	if err != nil {
		apiFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}
