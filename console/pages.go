package console

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolloop/toolloop/loop"
)

// assets are the templates and the static files, in the binary: the
// console works offline and loads nothing from elsewhere.
//
//go:embed assets
var assets embed.FS

// pageNames are the pages, each assets/NAME.html in assets/layout.html.
var pageNames = []string{"signin", "runs", "run", "approvals", "error", "replay"}

// pathSegment escapes s for one segment of a URL path. "." and ".." are
// escaped too (url.PathEscape leaves them): a browser would resolve them,
// and a call the model named ".." could not be answered from its page.
func pathSegment(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	return url.PathEscape(s)
}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"content": content,
		"when":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"dur":     func(d time.Duration) string { return d.Round(time.Millisecond).String() },
		"pathesc": pathSegment,
		"dict":    dict,
		"size":    byteSize,
	}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: page %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes page name with data; it renders to a buffer first, so a
// template error becomes a clean 500 rather than half a page.
func (s *Server) render(w http.ResponseWriter, code int, name string, data map[string]any) {
	var buf bytes.Buffer
	if err := s.pages[name].Execute(&buf, data); err != nil {
		slog.Error("console: render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// common is what every signed-in page's layout needs.
func (s *Server) common(u *who, title string) map[string]any {
	d := map[string]any{"User": u.name, "CSRF": u.csrf, "Title": title}
	if u.session != "" {
		d["Flash"] = s.sessions.takeFlash(u.session)
	}
	return d
}

// pageFail shows err on the error page with its code (500 for an error
// that is not an httpError, whose text is logged and shown, as apiFail
// does).
func (s *Server) pageFail(w http.ResponseWriter, r *http.Request, u *who, err error) {
	code, msg := http.StatusInternalServerError, "internal error"
	var he *httpError
	if errors.As(err, &he) {
		code, msg = he.code, he.msg
	} else {
		slog.ErrorContext(r.Context(), "console", "path", r.URL.Path, "err", err)
		msg += ": " + err.Error()
	}
	d := s.common(u, http.StatusText(code))
	d["Code"], d["Message"] = code, msg
	s.render(w, code, "error", d)
}

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request, u *who) {
	l, err := parseList(r.URL.Query())
	if err != nil {
		s.pageFail(w, r, u, &httpError{http.StatusBadRequest, err.Error()})
		return
	}
	list, err := s.listRuns(r.Context(), l)
	if err != nil {
		s.pageFail(w, r, u, err)
		return
	}
	d := s.common(u, "Runs")
	d["List"], d["Query"] = list, l
	d["Statuses"] = loop.ListStatuses()
	if l.Page > 1 {
		d["Prev"] = "/runs?" + l.values(l.Page-1).Encode()
	}
	if l.Page < list.Pages {
		d["Next"] = "/runs?" + l.values(l.Page+1).Encode()
	}
	s.render(w, http.StatusOK, "runs", d)
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request, u *who) {
	runID := r.PathValue("id")
	events, err := s.viewEvents(r.Context(), runID)
	if err != nil {
		s.pageFail(w, r, u, err)
		return
	}
	v := buildRun(plainEvents(events))
	d := s.common(u, "Run "+runID)
	d["Run"], d["Events"] = v, events
	note := s.lastResume(runID)
	if v.Summary.Status == loop.AnsweredStatus && s.opts.ResumeCommand != nil && note != resumingNote {
		note = strings.TrimSpace(note + " Every call is answered; the run goes on once resumed with: " + s.opts.ResumeCommand(runID))
	}
	d["Resume"] = note
	d["Live"] = !v.Summary.Stopped || v.Summary.Status == string(loop.ConfirmationRequired)
	// A run that has stopped can be replayed, when the console was given
	// a way to: the link leads to its replay view.
	d["Replayable"] = s.opts.Replay != nil && v.Summary.Stopped
	s.render(w, http.StatusOK, "run", d)
}

// inboxItem is one call waiting for an answer, in the approvals inbox.
type inboxItem struct {
	Run     Run
	Pending loop.Pending
}

func (s *Server) approvalsPage(w http.ResponseWriter, r *http.Request, u *who) {
	runs, err := s.opts.Backend.Runs(r.Context(), Filter{Status: string(loop.ConfirmationRequired)})
	if err != nil {
		s.pageFail(w, r, u, err)
		return
	}
	var items []inboxItem
	for _, run := range runs {
		for _, p := range run.Waiting() {
			items = append(items, inboxItem{Run: run, Pending: p})
		}
	}
	d := s.common(u, "Approvals")
	d["Items"] = items
	s.render(w, http.StatusOK, "approvals", d)
}

// decidePage takes an approve or deny form, records it, and goes back to
// the page the form was on with the outcome as a message.
func (s *Server) decidePage(w http.ResponseWriter, r *http.Request, u *who) {
	approve, err := verb(r)
	if err != nil {
		s.pageFail(w, r, u, err)
		return
	}
	runID := r.PathValue("id")
	dec, err := s.decide(r.Context(), runID, r.PathValue("call"), approve, u.name, r.PostFormValue("note"))
	if err != nil {
		s.pageFail(w, r, u, err)
		return
	}
	if u.session != "" {
		s.sessions.setFlash(u.session, dec.Message)
	}
	back := "/runs/" + pathSegment(runID)
	if r.PostFormValue("back") == "approvals" {
		back = "/approvals"
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// dict makes a map of its key, value pairs, for passing several values to
// a template.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, errors.New("dict: want key, value pairs")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

// urlQueryEscape escapes a query value.
func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// byteSize says a number of bytes for a person: 512 bytes, 64.0 KiB,
// 64.0 MiB.
func byteSize(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}
