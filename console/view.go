package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
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
	Status    string        `json:"status"`
	Detail    string        `json:"detail,omitempty"`
	Stopped   bool          `json:"stopped"`
	Steps     int           `json:"steps"`
	ToolCalls int           `json:"tool_calls"`
	Tokens    int64         `json:"tokens"`
	Cost      float64       `json:"cost"`
	StartedAt time.Time     `json:"started_at"`
	Duration  time.Duration `json:"duration_ns"`
	// LastSeq is the sequence number of the log's last event.
	LastSeq int `json:"last_seq"`
	// StopLine is the run's one-line outcome, as toolloop trace show
	// ends with it.
	StopLine string `json:"stop_line"`
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
	Timeline timeline
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
	start := events[0].Start
	last := events[len(events)-1]
	s := Summary{
		RunID: start.RunID, SessionID: start.SessionID, Model: start.Model, Identity: start.Identity,
		Status: loop.RunningStatus, Steps: st.Steps, ToolCalls: st.ToolCalls, Tokens: st.Usage.Total(),
		Cost: st.Cost, StartedAt: events[0].At, Duration: last.At.Sub(events[0].At), LastSeq: last.Seq,
	}
	if st.Done {
		s.Status, s.Detail, s.Stopped = string(st.Status), st.Detail, true
		s.StopLine = fmt.Sprintf("stopped status=%s steps=%d tool_calls=%d tokens=%d detail=%q",
			s.Status, s.Steps, s.ToolCalls, s.Tokens, s.Detail)
	} else if loop.ListStatus(st, events) == loop.AnsweredStatus {
		s.Status, s.StopLine = loop.AnsweredStatus, trace.AnsweredLine(st)
	} else {
		s.StopLine = fmt.Sprintf("running: the log is at seq %d (%s)", last.Seq, last.Kind)
	}
	return s, st
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
		{Name: "cost", Used: fmt.Sprintf("$%.6f", st.Cost), Limit: cost, Exceeded: stopped == loop.CostBudgetExceeded && b.MaxCost > 0 && st.Cost >= b.MaxCost},
		{Name: "time", Used: runTime(st, sum).Round(time.Millisecond).String(), Limit: dl, Exceeded: stopped == loop.DeadlineExceeded},
	}
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
	v.Timeline = drawTimeline(spans, events[len(events)-1].At)
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
