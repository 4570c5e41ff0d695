package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/trace"
)

// Summary is a run's state in brief, as its log says it now.
type Summary struct {
	RunID     string          `json:"run_id"`
	SessionID string          `json:"session_id,omitempty"`
	Model     string          `json:"model,omitempty"`
	Identity  policy.Identity `json:"identity"`
	// Status is the run's loop.Status once it has stopped,
	// loop.AnsweredStatus once answered and waiting to be resumed, else
	// loop.RunningStatus.
	Status    string `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Stopped   bool   `json:"stopped"`
	Steps     int    `json:"steps"`
	ToolCalls int    `json:"tool_calls"`
	Tokens    int64  `json:"tokens"`
	// Cost is what the run cost at its price; nil when that is not a
	// finite number (a price so large that the sum overflows), and then
	// CostError says so: JSON has no infinity.
	Cost      *float64      `json:"cost"`
	CostError string        `json:"cost_error,omitempty"`
	StartedAt time.Time     `json:"started_at"`
	Duration  time.Duration `json:"duration_ns"`
	// LastSeq is the sequence number of the log's last event.
	LastSeq int `json:"last_seq"`
	// StopLine is the run's one-line outcome, as toolloop trace show
	// ends with it.
	StopLine string `json:"stop_line"`
	// Writes is what the run's writes ended as, so far (loop.Result's
	// Writes); nil for a run that asked for no write.
	Writes *loop.WritesReport `json:"writes,omitempty"`
}

// Budget is one of a run's bounds: what it used of what it was given.
type Budget struct {
	Name string `json:"name"`
	Used string `json:"used"`
	// Limit is "off" for a bound that is switched off.
	Limit string `json:"limit"`
	// Exceeded reports the bound that stopped the run.
	Exceeded bool `json:"exceeded,omitempty"`
}

// runView is everything a run's page shows.
type runView struct {
	Summary  Summary
	Budgets  []Budget
	Findings []trace.Finding
	Messages []llm.Message
	Pending  []loop.Pending
	Answered []loop.Pending
	Calls    []callRow
	Plans    []planView
	// Tokens is the token account: each turn's input split by the
	// prompt cache, the context edits between the turns, a total.
	Tokens   []tokenRow
	Timeline timeline
	// Compensations and Writes are the run's compensations and its
	// writes report (compensation.go).
	Compensations []compensationView
	Writes        *writesView
	// Text is toolloop trace show's rendering, for the details.
	Text string
	// Waiting reports a run paused for answers nobody has given yet.
	Waiting bool
}

// callRow is one call in the table of policy decisions.
type callRow struct {
	Step         int
	ID, Tool     string
	Arguments    string
	Verdict      string
	Rule, Reason string
	Confirmation *loop.Confirmation
	Stage        string
	Status       string
}

// planView is one planner's decision table.
type planView struct {
	Step, Seq int
	Stages    int
	Rows      []executor.Row
}

// summarize replays a run's events into its summary.
func summarize(events []loop.Event) (Summary, *loop.State) {
	st := loop.Replay(events)
	return summary(st, &events[0], &events[len(events)-1]), st
}

// summary is the summary of a run whose log begins with first and ends,
// for now, with last, and replays into st.
func summary(st *loop.State, first, last *loop.Event) Summary {
	start := first.Start
	s := Summary{
		RunID: start.RunID, SessionID: start.SessionID, Model: start.Model, Identity: start.Identity,
		Status: loop.RunningStatus, Steps: st.Steps, ToolCalls: st.ToolCalls, Tokens: st.Usage.Total(),
		StartedAt: first.At, Duration: last.At.Sub(first.At), LastSeq: last.Seq,
	}
	if cost := st.Cost; math.IsInf(cost, 0) || math.IsNaN(cost) {
		s.CostError = costError(cost)
	} else {
		s.Cost = &cost
	}
	if len(st.Writes) > 0 {
		s.Writes = st.WritesReport()
	}
	if st.Done {
		s.Status, s.Detail, s.Stopped = string(st.Status), st.Detail, true
		s.StopLine = fmt.Sprintf("stopped status=%s steps=%d tool_calls=%d tokens=%d%s detail=%q",
			s.Status, s.Steps, s.ToolCalls, s.Tokens, trace.WritesField(s.Writes), s.Detail)
	} else if loop.ListStatus(st, []loop.Event{*last}) == loop.AnsweredStatus {
		s.Status, s.StopLine = loop.AnsweredStatus, trace.AnsweredLine(st)
	} else {
		s.StopLine = fmt.Sprintf("running: the log is at seq %d (%s)", last.Seq, last.Kind)
	}
	return s
}

// costError says why a cost is not shown as a number.
func costError(cost float64) string {
	return fmt.Sprintf("the cost is not a finite number (%v): a price in the run's settings is too large", cost)
}

// budgets lists what the run used of each of its bounds.
func budgets(st *loop.State, sum Summary) []Budget {
	b := st.Budgets
	stopped := loop.Status(sum.Status)
	count := func(n int64) string {
		if n <= 0 {
			return "off"
		}
		return fmt.Sprint(n)
	}
	dl := "off"
	if b.Deadline > 0 {
		dl = b.Deadline.String()
	}
	cost := "off"
	if b.MaxCost > 0 {
		cost = fmt.Sprintf("$%.4f", b.MaxCost)
	}
	return []Budget{
		{Name: "steps", Used: fmt.Sprint(st.Steps), Limit: count(int64(b.MaxSteps)), Exceeded: stopped == loop.MaxStepsExceeded},
		{Name: "tool calls", Used: fmt.Sprint(st.ToolCalls), Limit: count(int64(b.MaxToolCalls)), Exceeded: stopped == loop.ToolBudgetExceeded},
		{Name: "tokens", Used: fmt.Sprint(st.Usage.Total()), Limit: count(b.MaxTokens), Exceeded: stopped == loop.CostBudgetExceeded && b.MaxTokens > 0 && st.Usage.Total() >= b.MaxTokens},
		{Name: "cost", Used: usedCost(st.Cost), Limit: cost, Exceeded: stopped == loop.CostBudgetExceeded && b.MaxCost > 0 && st.Cost >= b.MaxCost},
		{Name: "time", Used: runTime(st, sum).Round(time.Millisecond).String(), Limit: dl, Exceeded: stopped == loop.DeadlineExceeded},
	}
}

// usedCost shows a run's cost, or why it cannot.
func usedCost(cost float64) string {
	if math.IsInf(cost, 0) || math.IsNaN(cost) {
		return costError(cost)
	}
	return fmt.Sprintf("$%.6f", cost)
}

// runTime is the time a run has spent against its deadline: the waits
// for people's answers do not count (the decider moves the deadline on by
// each), nor does the time since it paused.
func runTime(st *loop.State, sum Summary) time.Duration {
	end := sum.StartedAt.Add(sum.Duration)
	if !st.PausedAt.IsZero() {
		end = st.PausedAt
	}
	d := end.Sub(sum.StartedAt)
	if b := st.Budgets.Deadline; b > 0 && !st.Deadline.IsZero() {
		d -= st.Deadline.Sub(sum.StartedAt.Add(b))
	}
	return max(d, 0)
}

// buildRun makes a run's page from its events, with the trace package's
// readings of them: spans, batches, findings, and Show's text.
func buildRun(events []loop.Event) *runView {
	sum, st := summarize(events)
	v := &runView{Summary: sum, Budgets: budgets(st, sum), Findings: trace.Diagnose(events)}
	v.Messages = st.Result(events).Messages
	v.Pending = st.Pending
	v.Answered = st.Answered
	for _, p := range st.Pending {
		if p.Confirmation == nil && st.Done && st.Status == loop.ConfirmationRequired {
			v.Waiting = true
		}
	}
	spans := trace.Spans(events)
	steps := map[*trace.Call]int{}
	for _, s := range spans {
		if len(s.Calls) > 0 {
			if _, ok := steps[&s.Calls[0]]; !ok {
				steps[&s.Calls[0]] = s.Step
			}
		}
	}
	summ := trace.NewRedactor(nil)
	for _, batch := range trace.Batches(spans) {
		step := steps[&batch[0]]
		for _, c := range batch {
			row := callRow{Step: step, ID: c.ID, Tool: c.Tool, Arguments: summ.Summary(c.Tool, c.Arguments),
				Verdict: string(c.Decision.Verdict), Rule: c.Decision.Rule, Reason: c.Decision.Reason,
				Confirmation: c.Confirmation, Stage: "-", Status: "-"}
			if c.Planned {
				row.Stage = fmt.Sprintf("%d %s", c.Row.Stage, c.Row.Mode)
			}
			if c.Result.Status != "" {
				row.Status = string(c.Result.Status)
				if c.Result.ErrorKind != "" {
					row.Status += " " + string(c.Result.ErrorKind)
				}
			}
			v.Calls = append(v.Calls, row)
		}
	}
	step := 0
	for _, ev := range events {
		if ev.Kind == loop.ModelResponded {
			step++
		}
		if ev.Kind == loop.StagePlanned && ev.Plan != nil {
			v.Plans = append(v.Plans, planView{Step: step, Seq: ev.Seq, Stages: len(ev.Plan.Stages), Rows: ev.Plan.Table})
		}
	}
	v.Tokens = tokenRows(events)
	v.Timeline = drawTimeline(spans, events[len(events)-1].At)
	v.Compensations = compensations(spans)
	v.Writes = writes(events[0].Start, sum.Writes)
	var text bytes.Buffer
	if err := trace.Show(&text, events, nil); err == nil {
		v.Text = text.String()
	}
	return v
}

// timeline is the picture of a run's spans: one bar a row, placed on a
// common time axis, so that the calls of a parallel stage stand side by
// side and a retried call shows its length.
type timeline struct {
	Width, Height int
	Total         string
	Rows          []timelineRow
}

// timelineRow is one span of the picture.
type timelineRow struct {
	Y, TextY   int
	X, W       int
	Indent     int
	Kind, Name string
	Note       string
	Error      bool
}

// The timeline's geometry, in SVG user units.
const (
	tlLabel = 260 // the names' column
	tlBars  = 560 // the bars' width
	tlRow   = 18
)

func drawTimeline(spans []trace.Span, last time.Time) timeline {
	t := timeline{Width: tlLabel + tlBars + 10}
	if len(spans) == 0 {
		return t
	}
	root := spans[0]
	end := root.End
	if root.Open() {
		end = last
	}
	total := end.Sub(root.Start)
	t.Total = total.Round(time.Microsecond).String()
	depth := map[int]int{}
	for i, s := range spans {
		if s.Parent != 0 {
			depth[s.ID] = depth[s.Parent] + 1
		}
		e := s.End
		if s.Open() {
			e = end
		}
		x0, x1 := scale(s.Start.Sub(root.Start), total), scale(e.Sub(root.Start), total)
		w := max(x1-x0, 2) // a span too short to see still shows where it was
		y := i * tlRow
		t.Rows = append(t.Rows, timelineRow{Y: y + 3, TextY: y + 13, X: tlLabel + min(x0, tlBars-2), W: w, Indent: 4 + 12*depth[s.ID],
			Kind: string(s.Kind), Name: s.Name, Note: spanNote(&s, e.Sub(s.Start)), Error: s.Error != ""})
	}
	t.Height = len(spans)*tlRow + 4
	return t
}

// scale places an offset of total on the bars' width.
func scale(d, total time.Duration) int {
	if total <= 0 {
		return 0
	}
	return int(min(max(float64(d)*tlBars/float64(total), 0), tlBars))
}

// spanNote says what a bar's tooltip says.
func spanNote(s *trace.Span, d time.Duration) string {
	parts := []string{s.Name, d.Round(time.Microsecond).String()}
	if s.Step > 0 {
		parts = append(parts, fmt.Sprintf("step %d", s.Step))
	}
	if s.Kind == trace.SpanTool && len(s.Calls) == 1 {
		c := &s.Calls[0]
		parts = append(parts, "call "+c.ID)
		if c.Outcome.Attempts > 1 {
			parts = append(parts, fmt.Sprintf("%d attempts", c.Outcome.Attempts))
		}
	}
	if e := s.Event; e != nil && e.Edit != nil && (s.Kind == trace.SpanEditContext || s.Kind == trace.SpanSummarize) {
		if e.Edit.Reason == loop.EditCompaction {
			parts = append(parts, fmt.Sprintf("summary of messages %d to %d", e.Edit.From, e.Edit.Through-1))
		} else {
			parts = append(parts, fmt.Sprintf("cleared %d tool result(s)", len(e.Edit.Cleared)))
		}
		parts = append(parts, fmt.Sprintf("estimate %d -> %d tokens", e.Edit.TokensBefore, e.Edit.TokensAfter))
	}
	if s.Kind == trace.SpanUndo && s.Undo != nil {
		parts = append(parts, "undoes call "+s.Undo.Call.CallID, string(s.Undo.Outcome.State))
	}
	if s.Kind == trace.SpanChat && s.Event != nil && s.Event.Attempts > 1 {
		parts = append(parts, fmt.Sprintf("%d attempts", s.Event.Attempts))
	}
	if s.Error != "" {
		parts = append(parts, "error "+s.Error)
	}
	return strings.Join(parts, ", ")
}

// content renders a tool result's or call's JSON for a person: indented
// when it is JSON, as it is otherwise.
func content(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") == nil {
		return buf.String()
	}
	return string(raw)
}

// Large payloads: a stored event can hold a model turn or a tool result of
// many megabytes, and decoding it whole for every page view costs twice
// its size each time. The console decodes an event longer than cutAbove
// with each of its strings cut to cutTo bytes (a note at the cut says how
// long the string was and where the whole event is), so that what a view
// holds is bounded by the number of strings, not by their length; the
// whole event is one request away (GET /api/runs/ID/events/SEQ).
const (
	cutAbove = 64 << 10
	cutTo    = 8 << 10
)

// shownEvent is an event as the console shows it: Cut is set when its
// long strings were cut short.
type shownEvent struct {
	loop.Event
	Cut *cutInfo `json:"cut,omitempty"`
}

// cutInfo says that an event was shown cut: how long it is whole (as
// JSON), and the path that serves it whole.
type cutInfo struct {
	Bytes int    `json:"bytes"`
	Whole string `json:"whole"`
}

// wholeEventPath is where the API serves event seq of runID whole.
func wholeEventPath(runID string, seq int) string {
	return fmt.Sprintf("/api/runs/%s/events/%d", pathSegment(runID), seq)
}

// decodeShown decodes one event's JSON as the console shows it: whole if
// it is short, else with its long strings cut. The cut is a view of the
// event only: nothing the console decides from is read through it.
func decodeShown(runID string, seq int, data []byte) (shownEvent, error) {
	var ev shownEvent
	if len(data) <= cutAbove {
		err := json.Unmarshal(data, &ev.Event)
		return ev, err
	}
	whole := wholeEventPath(runID, seq)
	cut := cutStrings(data, cutTo, whole)
	if err := json.Unmarshal(cut, &ev.Event); err != nil {
		// A field the cut made invalid for its type: show the event whole
		// rather than not at all.
		ev = shownEvent{}
		if err := json.Unmarshal(data, &ev.Event); err != nil {
			return ev, err
		}
		return ev, nil
	}
	ev.Cut = &cutInfo{Bytes: len(data), Whole: whole}
	return ev, nil
}

// cutStrings returns the JSON document data with every string literal
// longer than limit bytes (as written, escapes included) cut to about
// limit bytes and ended with a note saying its length and where the whole
// is. It cuts between characters and escapes, never inside one, so the
// result is valid JSON when data is. A string of base64 characters only
// (the encoding of a []byte) is cut to a multiple of four with no note,
// so that it still decodes. data is not changed.
func cutStrings(data []byte, limit int, whole string) []byte {
	out := make([]byte, 0, min(len(data), 4*limit))
	i := 0
	for i < len(data) {
		q := bytes.IndexByte(data[i:], '"')
		if q < 0 {
			out = append(out, data[i:]...)
			break
		}
		out = append(out, data[i:i+q+1]...)
		start := i + q + 1
		end := stringEnd(data, start) // index of the closing quote, or len(data)
		body := data[start:end]
		if len(body) <= limit {
			out = append(out, body...)
		} else if k := base64Prefix(body, limit); k > 0 {
			out = append(out, body[:k]...)
		} else {
			k := textPrefix(body, limit)
			out = append(out, body[:k]...)
			out = fmt.Appendf(out, " … [cut by the console: %d bytes in all; whole at %s]", len(body), whole)
		}
		if end < len(data) {
			out = append(out, '"')
		}
		i = end + 1
	}
	return out
}

// stringEnd returns the index of the quote that closes the JSON string
// whose body starts at data[start], or len(data) if none does.
func stringEnd(data []byte, start int) int {
	for i := start; i < len(data); {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			return len(data)
		}
		i += j
		// Escaped if an odd number of backslashes stand before it.
		n := 0
		for k := i - 1; k >= start && data[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return i
		}
		i++
	}
	return len(data)
}

// base64Prefix returns how much of body to keep when it looks like
// base64 (its first limit bytes are all of the base64 alphabet): limit
// rounded down to a multiple of four. It returns 0 for other text.
func base64Prefix(body []byte, limit int) int {
	for _, c := range body[:limit] {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_') {
			return 0
		}
	}
	return limit - limit%4
}

// textPrefix returns the length of the longest prefix of the string body
// body, at most limit bytes, that ends between two characters: not inside
// an escape (\n, \u00e9) nor inside a UTF-8 sequence.
func textPrefix(body []byte, limit int) int {
	k := 0
	for k < len(body) {
		n := 1
		switch c := body[k]; {
		case c == '\\':
			n = 2
			if k+1 < len(body) && body[k+1] == 'u' {
				n = 6
			}
		case c >= 0x80:
			_, n = utf8.DecodeRune(body[k:])
		}
		if k+n > limit {
			break
		}
		k += n
	}
	return k
}

// readShown reads the events of runID after seq after, as the console
// shows them: from the stored JSON when the backend is a RecordReader
// (long strings of a large event are then never decoded), else from
// Backend.Events, with large events cut the same way. A run the backend
// does not have is a 404.
func (s *Server) readShown(ctx context.Context, runID string, after int) ([]shownEvent, error) {
	unknown := func(err error) error {
		if errors.Is(err, store.ErrUnknownRun) {
			return &httpError{http.StatusNotFound, fmt.Sprintf("no run %s", runID)}
		}
		return err
	}
	// A page or an API answer reads from the start of the log: one of
	// the MaxReads slots, held until the records are decoded with their
	// long strings cut. A live view's follower reads only what is new.
	if after == 0 {
		release, err := s.readSlot(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	if rr, ok := s.opts.Backend.(RecordReader); ok {
		recs, err := rr.Records(ctx, runID, after)
		if err != nil {
			return nil, unknown(err)
		}
		out := make([]shownEvent, 0, len(recs))
		for i := range recs {
			rec := &recs[i]
			if want := after + i + 1; rec.Seq != want {
				return nil, fmt.Errorf("run %s: the store has event %d where event %d should be; the log cannot be read in order", runID, rec.Seq, want)
			}
			ev, err := decodeShown(runID, rec.Seq, rec.Data)
			if err != nil {
				return nil, fmt.Errorf("run %s, event %d: %w", runID, rec.Seq, err)
			}
			if ev.Seq != rec.Seq {
				return nil, fmt.Errorf("run %s: event %d is stored as %d", runID, ev.Seq, rec.Seq)
			}
			out = append(out, ev)
		}
		return out, nil
	}
	events, err := s.opts.Backend.Events(ctx, runID)
	if err != nil {
		return nil, unknown(err)
	}
	var out []shownEvent
	for i := range events {
		if events[i].Seq <= after {
			continue
		}
		ev := shownEvent{Event: events[i]}
		if data, err := json.Marshal(&events[i]); err == nil && len(data) > cutAbove {
			if ev, err = decodeShown(runID, events[i].Seq, data); err != nil {
				return nil, fmt.Errorf("run %s, event %d: %w", runID, events[i].Seq, err)
			}
		}
		out = append(out, ev)
	}
	return out, nil
}

// viewEvents reads a run's whole log as the console shows it (see
// readShown): 404 for a run the backend does not have, or whose log does
// not begin with its started event yet.
func (s *Server) viewEvents(ctx context.Context, runID string) ([]shownEvent, error) {
	events, err := s.readShown(ctx, runID, 0)
	if err != nil {
		return nil, err
	}
	if len(events) == 0 || events[0].Start == nil {
		return nil, &httpError{http.StatusNotFound, fmt.Sprintf("run %s has no events yet", runID)}
	}
	return events, nil
}

// plainEvents returns the events of shown, for replaying and reading them.
func plainEvents(shown []shownEvent) []loop.Event {
	out := make([]loop.Event, len(shown))
	for i := range shown {
		out[i] = shown[i].Event
	}
	return out
}
