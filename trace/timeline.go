package trace

import (
	"encoding/json"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
)

// SpanKind says which stage of a run a span stands for.
type SpanKind string

// Span kinds. The names of the run, model and tool spans are those of the
// OpenTelemetry GenAI conventions; the loop's own stages are named after
// the decider's effects.
const (
	SpanRun       SpanKind = "invoke_agent"
	SpanChat      SpanKind = "chat"
	SpanValidate  SpanKind = "validate_calls"
	SpanAuthorize SpanKind = "authorize_calls"
	SpanPlan      SpanKind = "plan_batch"
	SpanStage     SpanKind = "execute_stage"
	SpanTool      SpanKind = "execute_tool"
	SpanAppend    SpanKind = "append_results"
	SpanBudget    SpanKind = "budget_check"
	// SpanConfirm is the wait for a human's answer to a call that paused
	// the run: from the pause, or the previous answer, to this answer.
	SpanConfirm SpanKind = "await_confirmation"
	// SpanEditContext is a context edit that cleared old tool results
	// (context_edited); Event.Edit says which.
	SpanEditContext SpanKind = "edit_context"
	// SpanSummarize is a compaction: the summary request, a model request
	// of its own, named "chat MODEL" as the conventions name a model
	// request (context_summarized); Event.Edit holds the summary, and
	// Event.Response its usage.
	SpanSummarize SpanKind = "summarize"
)

// Span is one stage of a run, derived from the run's events.
//
// The driver's stages are the gaps between events: a span starts at the
// previous event's time and ends at the time of the event that reports the
// stage's outcome. A model request spans its latency before its event; a
// tool call spans from when the executor started it for its duration, so
// the calls of a parallel stage overlap. The decider's own steps, appending
// a batch's results and checking the budgets, are pure and take no time on
// the driver's clock: they are spans of zero length at the event they
// follow.
type Span struct {
	// ID numbers the spans of a run from 1, the run span; a span's parent
	// always has a smaller ID. Parent is 0 for the run span.
	ID, Parent int
	Kind       SpanKind
	// Name is the span's name: "invoke_agent", "chat MODEL",
	// "execute_tool TOOL", or the kind.
	Name       string
	Start, End time.Time
	// Seq is the event that ended the span (Started for an open run span).
	Seq int
	// Step is the model turn the span belongs to; 0 before the first.
	Step int
	// Event is the event that ended the span; read it only while handling
	// the span, the Timeline does not own it.
	Event *loop.Event
	// Stage is the stage index (execute_stage, execute_tool), else -1.
	Stage int
	// Mode is the stage's mode (execute_stage, execute_tool).
	Mode executor.Mode
	// Calls are the calls the span is about: the whole batch for
	// validate_calls, authorize_calls, plan_batch and append_results, the
	// call itself for execute_tool. The spans of one batch share the slice,
	// which is completed as the batch goes.
	Calls []Call
	// Budget is the check (budget_check).
	Budget *BudgetCheck
	// Run is the run's configuration and, once it has ended, its outcome
	// (invoke_agent).
	Run *RunInfo
	// Compensation is the compensation (compensate, and each of its
	// compensate_call spans), and Undo the call (compensate_call).
	Compensation *Compensation
	Undo         *Undo
	// Error classifies a failed stage: a failure kind, a tool's error
	// kind, a budget's or the run's status. Empty when it did not fail.
	Error string
}

// Open reports whether the span has not ended yet: a run span before its
// Stopped event.
func (s *Span) Open() bool { return s.End.IsZero() }

// Duration is End - Start, or 0 for an open span.
func (s *Span) Duration() time.Duration {
	if s.Open() {
		return 0
	}
	return s.End.Sub(s.Start)
}

// Call is what the log says about one tool call of a batch.
type Call struct {
	ID   string
	Tool string
	// Arguments are as the log holds them (see Redactor).
	Arguments json.RawMessage
	// Check is the call's validation, once Validated.
	Check     loop.CallCheck
	Validated bool
	// Decision is the policy's; zero when the call was not asked about.
	Decision policy.Decision
	// Row is the call's line of the plan's decision table; zero when the
	// call was not planned.
	Row     executor.Row
	Planned bool
	// Outcome is what the executor reported; zero when the call did not
	// run (Executed is false).
	Outcome  executor.Outcome
	Executed bool
	// Result is the call's result as appended to the history; zero (empty
	// Status) until then.
	Result llm.ToolResult
	// Confirmation is a human's answer, for a call that needed one.
	Confirmation *loop.Confirmation
}

// Budget check points.
const (
	// AfterResponse is the check of a response's tool calls against the
	// step, token, cost and tool-call budgets, before they are validated.
	AfterResponse = "after_response"
	// BeforeTurn is the check of tokens and cost after a batch's results
	// are appended, before the model is asked again.
	BeforeTurn = "before_turn"
	// DeadlineCheck is the run's deadline, checked at every event; only
	// the check that stops the run is recorded.
	DeadlineCheck = "deadline"
	// AfterSummary is the check of tokens and cost once a compaction's
	// summary request is counted, before the model is asked again.
	AfterSummary = "after_summary"
)

// BudgetCheck is one check of the run's budgets by the decider.
type BudgetCheck struct {
	// Point is AfterResponse, BeforeTurn or DeadlineCheck.
	Point string
	// Status is the stop status when the check failed, else "".
	Status loop.Status
	// Steps are the model turns taken, of MaxSteps.
	Steps, MaxSteps int
	// ToolCalls were made before this batch; Requested is this batch's
	// (AfterResponse). MaxToolCalls is 0 when unbounded.
	ToolCalls, Requested, MaxToolCalls int
	// Tokens used, of MaxTokens (0: unbounded).
	Tokens, MaxTokens int64
	// Cost in US dollars, of MaxCost (0: unbounded).
	Cost, MaxCost float64
	// Elapsed is the run's time so far, of Deadline (0: none).
	Elapsed, Deadline time.Duration
}

// Passed reports whether the run may go on.
func (b *BudgetCheck) Passed() bool { return b.Status == "" }

// RunInfo is what a run span knows about its run.
type RunInfo struct {
	Start *loop.StartInfo
	// The rest is set when the run has stopped.
	Status    loop.Status
	Detail    string
	Steps     int
	ToolCalls int
	Usage     llm.Usage
	Cost      float64
	// Pending are the calls awaiting a human's confirmation.
	Pending []loop.Pending
	// Writes is what the run's writes ended as; nil for a run that asked
	// for no write.
	Writes *loop.WritesReport
}

// Timeline derives the spans of one run from its events, in order. It
// replays the events through the decider (loop.Next), exactly as a
// durable runner resumes a run, to learn what the decider did at each one:
// which budget checks ran, which results were appended, why the run
// stopped. Like the decider's state it keeps references to event data,
// which the runner never changes once an event is in the log.
//
// The zero value is ready for a run's Started event. A Timeline is not
// safe for concurrent use.
type Timeline struct {
	st      loop.State
	started bool
	root    Span
	nextID  int
	prevAt  time.Time
	calls   []Call
	// eff is the effect the decider asked for at the last event.
	eff loop.Effect
}

// Add takes the run's next event and returns the spans it ends, each
// parent before its children. The run span is returned open (End zero) for
// the Started event and again, with the same ID and End set, for the
// Stopped event. A run paused for confirmation goes on after its answers
// (ConfirmationDecided events): its later spans keep the run span as their
// parent, and its next Stopped event returns the run span once more, with
// the later End. Events before Started, and after the run has stopped for
// good, give none.
func (t *Timeline) Add(ev *loop.Event) []Span {
	if ev.Kind == loop.Started {
		if ev.Start == nil {
			return nil
		}
		*t = Timeline{started: true, nextID: 2, prevAt: ev.At}
		t.eff = loop.Next(&t.st, ev)
		t.root = Span{ID: 1, Kind: SpanRun, Name: string(SpanRun), Start: ev.At, Seq: ev.Seq, Event: ev,
			Stage: -1, Run: &RunInfo{Start: ev.Start}}
		return []Span{t.root}
	}
	if !t.started || (t.st.Done && ev.Kind != loop.ConfirmationDecided) {
		return nil
	}
	var out []Span
	switch ev.Kind {
	case loop.ModelResponded, loop.ModelFailed:
		out = append(out, t.chat(ev))
	case loop.CallsValidated:
		for i := range t.calls {
			if i < len(ev.Checks) {
				t.calls[i].Check, t.calls[i].Validated = ev.Checks[i], true
			}
		}
		out = append(out, t.gap(SpanValidate, ev))
	case loop.PolicyDecided:
		for i := range t.calls {
			if i < len(ev.Decisions) {
				t.calls[i].Decision = ev.Decisions[i]
			}
		}
		out = append(out, t.gap(SpanAuthorize, ev))
	case loop.StagePlanned:
		if ev.Plan != nil {
			for _, row := range ev.Plan.Table {
				if c := t.call(row.CallID); c != nil {
					c.Row, c.Planned = row, true
				}
			}
		}
		out = append(out, t.gap(SpanPlan, ev))
	case loop.StageFinished:
		out = t.execStage(ev, out)
	case loop.ContextEdited:
		out = append(out, t.span(SpanEditContext, 1, t.prevAt, later(t.prevAt, ev.At), ev))
	case loop.ContextSummarized:
		out = append(out, t.summary(ev))
	case loop.ConfirmationDecided:
		if c := ev.Confirmation; c != nil && t.st.Status == loop.ConfirmationRequired {
			s := t.span(SpanConfirm, 1, t.prevAt, later(t.prevAt, ev.At), ev)
			for i := range t.calls {
				if t.calls[i].ID == c.CallID {
					cc := *c
					t.calls[i].Confirmation = &cc
					s.Calls = t.calls[i : i+1 : i+1]
				}
			}
			if !c.Approved {
				s.Error = "denied"
			}
			out = append(out, s)
		}
	case loop.Compensated:
		out = t.compensate(ev, t.eff, out)
	}

	before := len(t.st.Messages)
	batchOpen := t.st.Batch != nil
	wasStopping := t.st.Stopping
	eff := loop.Next(&t.st, ev)
	t.eff = eff
	out = t.deciderSpans(ev, eff, before, batchOpen, wasStopping, out)

	if ev.Kind == loop.Stopped {
		t.root.End, t.root.Seq, t.root.Event = ev.At, ev.Seq, ev
		s := &t.st
		run := *t.root.Run
		run.Status, run.Detail, run.Steps, run.ToolCalls, run.Usage, run.Cost, run.Pending =
			s.Status, s.Detail, s.Steps, s.ToolCalls, s.Usage, s.Cost, s.Pending
		if len(s.Writes) > 0 {
			run.Writes = s.WritesReport()
		}
		t.root.Run, t.root.Error = &run, ""
		if s.Status != loop.FinalAnswer && s.Status != loop.ConfirmationRequired {
			t.root.Error = string(s.Status)
		}
		out = append(out, t.root)
	}
	t.prevAt = ev.At
	return out
}

func (t *Timeline) span(kind SpanKind, parent int, start, end time.Time, ev *loop.Event) Span {
	s := Span{ID: t.nextID, Parent: parent, Kind: kind, Name: string(kind), Start: start, End: end,
		Seq: ev.Seq, Step: t.st.Steps, Event: ev, Stage: -1}
	t.nextID++
	return s
}

// gap is a driver stage between the previous event and ev.
func (t *Timeline) gap(kind SpanKind, ev *loop.Event) Span {
	s := t.span(kind, 1, t.prevAt, later(t.prevAt, ev.At), ev)
	s.Calls = t.calls
	return s
}

func (t *Timeline) call(id string) *Call {
	for i := range t.calls {
		if t.calls[i].ID == id {
			return &t.calls[i]
		}
	}
	return nil
}

func (t *Timeline) chat(ev *loop.Event) Span {
	// The latency comes from the real clock and At from the driver's,
	// which a test may fake: never start before the previous event.
	start := later(t.prevAt, ev.At.Add(-ev.Latency))
	s := t.span(SpanChat, 1, start, ev.At, ev)
	s.Step = t.st.Steps + 1
	if m := t.st.Model; m != "" {
		s.Name = string(SpanChat) + " " + m
	}
	if ev.Failure != nil {
		s.Error = string(ev.Failure.Kind)
	}
	if ev.Kind == loop.ModelResponded && ev.Response != nil {
		t.calls = nil
		if calls := ev.Response.Message.ToolCalls; len(calls) > 0 {
			t.calls = make([]Call, len(calls))
			for i, c := range calls {
				t.calls[i] = Call{ID: c.ID, Tool: c.Name, Arguments: c.Arguments}
			}
		}
	}
	return s
}

// summary is the span of a compaction's summary request: a model request
// to the summary model, or the run's.
func (t *Timeline) summary(ev *loop.Event) Span {
	s := t.span(SpanSummarize, 1, later(t.prevAt, ev.At.Add(-ev.Latency)), ev.At, ev)
	model := t.st.Model
	if c := t.root.Run.Start.Context; c != nil && c.SummaryModel != "" {
		model = c.SummaryModel
	}
	s.Name = string(SpanChat)
	if model != "" {
		s.Name += " " + model
	}
	if ev.Failure != nil {
		s.Error = string(ev.Failure.Kind)
	}
	return s
}

// execStage returns the stage's span followed by one span per call.
func (t *Timeline) execStage(ev *loop.Event, out []Span) []Span {
	stage := t.span(SpanStage, 1, t.prevAt, later(t.prevAt, ev.At), ev)
	stage.Stage = ev.Stage
	if ev.Failure != nil {
		stage.Error = string(ev.Failure.Kind)
	}
	var idx []int
	if b := t.st.Batch; b != nil && ev.Stage >= 0 && ev.Stage < len(b.Plan.Stages) {
		idx = b.Plan.Stages[ev.Stage]
	}
	stage.Mode = executor.Serial
	for _, i := range idx {
		if i < len(t.calls) && t.calls[i].Row.Mode == executor.Parallel {
			stage.Mode = executor.Parallel
		}
	}
	// Tool times come from the executor's real clock. When they fall
	// within the stage on the driver's clock, as they do unless a test
	// fakes it, use them; otherwise keep their offsets from the first.
	inside, first := true, time.Time{}
	for _, o := range ev.Outcomes {
		if o.Started.IsZero() || o.Started.Before(stage.Start) || o.Started.After(stage.End) {
			inside = false
		}
		if !o.Started.IsZero() && (first.IsZero() || o.Started.Before(first)) {
			first = o.Started
		}
	}
	tools := make([]Span, 0, len(ev.Outcomes))
	for j := range ev.Outcomes {
		o := &ev.Outcomes[j]
		start := o.Started
		if !inside {
			start = stage.Start
			if !o.Started.IsZero() {
				start = stage.Start.Add(o.Started.Sub(first))
			}
		}
		s := t.span(SpanTool, stage.ID, start, start.Add(o.Duration), ev)
		s.Stage, s.Mode, s.Name = ev.Stage, stage.Mode, string(SpanTool)+" "+o.Result.Name
		if j < len(idx) && idx[j] < len(t.calls) {
			c := &t.calls[idx[j]]
			c.Outcome, c.Executed = *o, true
			s.Calls = t.calls[idx[j] : idx[j]+1 : idx[j]+1]
			s.Name = string(SpanTool) + " " + c.Tool
		}
		if o.Result.Status == llm.StatusError {
			s.Error = string(o.Result.ErrorKind)
			if s.Error == "" {
				s.Error = "error"
			}
		}
		if s.End.After(stage.End) {
			stage.End = s.End
		}
		tools = append(tools, s)
	}
	out = append(out, stage)
	return append(out, tools...)
}

// deciderSpans returns the budget checks and appends the decider made at ev.
func (t *Timeline) deciderSpans(ev *loop.Event, eff loop.Effect, before int, batchOpen, wasStopping bool, out []Span) []Span {
	s := &t.st
	stopped := eff.Kind == loop.Stop && !wasStopping
	check := func(point string, status loop.Status) {
		sp := t.span(SpanBudget, 1, ev.At, ev.At, ev)
		b := &BudgetCheck{Point: point, Status: status, Steps: s.Steps, MaxSteps: s.Budgets.MaxSteps,
			ToolCalls: s.ToolCalls, MaxToolCalls: s.Budgets.MaxToolCalls, Tokens: s.Usage.Total(),
			MaxTokens: s.Budgets.MaxTokens, Cost: s.Cost, MaxCost: s.Budgets.MaxCost,
			Elapsed: ev.At.Sub(s.StartedAt), Deadline: s.Budgets.Deadline}
		if point == AfterResponse {
			b.Requested = len(t.calls)
			if status == "" {
				b.ToolCalls -= b.Requested // already counted
			}
		}
		sp.Budget = b
		sp.Error = string(status)
		out = append(out, sp)
	}
	if stopped && eff.Status == loop.DeadlineExceeded {
		check(DeadlineCheck, loop.DeadlineExceeded)
	}
	if ev.Kind == loop.ModelResponded && len(t.calls) > 0 {
		switch {
		case eff.Kind == loop.ValidateCalls:
			check(AfterResponse, "")
		case stopped && (eff.Status == loop.MaxStepsExceeded || eff.Status == loop.ToolBudgetExceeded ||
			eff.Status == loop.CostBudgetExceeded):
			check(AfterResponse, eff.Status)
		}
	}
	appended := 0
	for _, m := range s.Messages[min(before, len(s.Messages)):] {
		if m.Role == llm.RoleTool && m.Result != nil {
			if c := t.call(m.Result.CallID); c != nil {
				c.Result = *m.Result
			}
			appended++
		}
	}
	if appended > 0 {
		sp := t.span(SpanAppend, 1, ev.At, ev.At, ev)
		sp.Calls = t.calls
		out = append(out, sp)
	}
	if ev.Kind == loop.ContextSummarized && ev.Edit != nil {
		switch {
		case !stopped:
			check(AfterSummary, "")
		case eff.Status == loop.CostBudgetExceeded:
			check(AfterSummary, eff.Status)
		}
	}
	// A batch's results are in when its batch closes, or, when they led
	// to a compensation mid-run, once that is done.
	if (batchOpen && s.Batch == nil && ev.Kind != loop.ModelResponded) || (ev.Kind == loop.Compensated && !wasStopping) {
		switch {
		case eff.Kind == loop.RequestModel:
			check(BeforeTurn, "")
		case stopped && eff.Status == loop.CostBudgetExceeded:
			check(BeforeTurn, eff.Status)
		}
	}
	return out
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if b.Before(a) {
		return a
	}
	return b
}

// Spans returns the spans of one run's log, each once, in ID order: the
// run span first (open if the log has no Stopped event), every parent
// before its children.
func Spans(events []loop.Event) []Span {
	var t Timeline
	var out []Span
	for i := range events {
		for _, s := range t.Add(&events[i]) {
			if s.ID == 1 && len(out) > 0 {
				out[0] = s
				continue
			}
			out = append(out, s)
		}
	}
	return out
}
