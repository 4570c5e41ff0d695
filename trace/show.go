package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
)

// ShowOptions configure Show. Nil means the defaults.
type ShowOptions struct {
	// Width is the width of the timeline's bars. Default 40.
	Width int
	// Redactor, if set, is applied to what the log holds before it is
	// printed, e.g. to show a full-content log as summaries. The calls
	// table always shows argument summaries.
	Redactor *Redactor
}

// ErrNotARun says that events do not begin with a run's Started event.
var ErrNotARun = errors.New("trace: the log does not begin with a started event")

// Show renders one run's log for a person: the run's configuration, the
// message chain with each result beside its call ID, the calls with their
// validation, policy decision, stage, attempts, latency and status, the
// planner's decision tables, the tokens of each model turn (input split
// into cache reads, cache writes and new input) with the context edits
// between them, a timeline of spans with durations and a bar per span (the
// calls of a parallel stage side by side), the budget checks, and the stop
// line.
func Show(w io.Writer, events []loop.Event, opts *ShowOptions) error {
	if len(events) == 0 || events[0].Kind != loop.Started || events[0].Start == nil {
		return ErrNotARun
	}
	var o ShowOptions
	if opts != nil {
		o = *opts
	}
	if o.Width <= 0 {
		o.Width = 40
	}
	summ := o.Redactor
	if summ == nil {
		summ = NewRedactor(nil)
	}
	ew := &errWriter{w: w}
	spans := Spans(events)
	var st loop.State
	var due loop.Effect
	for i := range events {
		due = loop.Next(&st, &events[i])
	}
	start := events[0].Start
	showHeader(ew, start, events[0].At)
	showMessages(ew, &st, events, o.Redactor)
	showCalls(ew, spans, summ)
	showPlans(ew, events)
	showTokens(ew, events)
	showTimeline(ew, spans, events[len(events)-1].At, o.Width)
	showBudgets(ew, spans)
	showCompensations(ew, spans)
	showCompensationDue(ew, due)
	showWrites(ew, &st, start)
	showStop(ew, &st, spans, events, o.Redactor)
	return ew.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func showHeader(w io.Writer, s *loop.StartInfo, at time.Time) {
	fmt.Fprintf(w, "run %s\n", s.RunID)
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+" "+v)
		}
	}
	add("session", s.SessionID)
	add("model", s.Model)
	add("prompt", s.PromptVersion)
	add("tools", s.ToolsVersion)
	if len(parts) > 0 {
		fmt.Fprintf(w, "  %s\n", strings.Join(parts, "  "))
	}
	who := s.Identity.Name
	if who == "" {
		who = "(anonymous)"
	}
	if len(s.Identity.Roles) > 0 {
		who += " roles=" + strings.Join(s.Identity.Roles, ",")
	}
	b := s.Budgets
	fmt.Fprintf(w, "  identity %s  budgets max_steps=%d max_tool_calls=%s deadline=%s max_tokens=%s max_cost=%s\n",
		who, b.MaxSteps, limit(int64(b.MaxToolCalls)), durLimit(b.Deadline), limit(b.MaxTokens), costLimit(b.MaxCost))
	if c := s.Context; c != nil {
		fmt.Fprintf(w, "  context window=%s margin=%d low_water=%d keep_tool_results=%d", limit(int64(c.Window)), c.Margin, c.LowWater, c.KeepToolResults)
		if len(c.ExcludeTools) > 0 {
			fmt.Fprintf(w, " exclude=%s", strings.Join(c.ExcludeTools, ","))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  started %s\n", at.Format(time.RFC3339Nano))
}

func limit(n int64) string {
	if n <= 0 {
		return "off"
	}
	return strconv.FormatInt(n, 10)
}

func durLimit(d time.Duration) string {
	if d <= 0 {
		return "off"
	}
	return d.String()
}

func costLimit(c float64) string {
	if c <= 0 {
		return "off"
	}
	return fmt.Sprintf("$%.4f", c)
}

func showMessages(w io.Writer, st *loop.State, events []loop.Event, red *Redactor) {
	fmt.Fprintf(w, "\nmessages\n")
	pad := strings.Repeat(" ", 14)
	// The assistant messages after the opening ones are accepted
	// responses, which say what their adapter dropped. A compaction takes
	// earlier ones out of the history, so a message finds its response by
	// its first call's ID (unique in a run), or, with no calls, by its
	// text among the later responses without calls.
	byCall := map[string]*llm.Response{}
	var texts []*llm.Response
	for i := range events {
		if ev := &events[i]; ev.Kind == loop.ModelResponded && ev.Response != nil {
			if calls := ev.Response.Message.ToolCalls; len(calls) > 0 {
				byCall[calls[0].ID] = ev.Response
			} else {
				texts = append(texts, ev.Response)
			}
		}
	}
	opening, nextText := len(events[0].Start.Messages), 0
	for i, m := range st.History() {
		prefix := fmt.Sprintf("  %3d %-9s", i+1, m.Role)
		var resp *llm.Response
		switch {
		case m.Role != llm.RoleAssistant || i < opening:
		case len(m.ToolCalls) > 0:
			resp = byCall[m.ToolCalls[0].ID]
		default:
			for j := nextText; j < len(texts); j++ {
				if texts[j].Message.Text == m.Text {
					resp, nextText = texts[j], j+1
					break
				}
			}
		}
		for _, r := range m.Reasoning {
			switch {
			case r.Text != "":
				text := r.Text
				if red != nil {
					text = red.Text(text)
				}
				fmt.Fprintf(w, "%s reasoning %q\n", prefix, text)
			case r.Hidden:
				fmt.Fprintf(w, "%s reasoning (hidden by the provider)\n", prefix)
			default:
				fmt.Fprintf(w, "%s reasoning (no text)\n", prefix)
			}
			prefix = pad
		}
		if m.Text != "" || (m.Role != llm.RoleTool && len(m.ToolCalls) == 0) {
			text := m.Text
			if red != nil {
				text = red.Text(text)
			}
			fmt.Fprintf(w, "%s text   %q\n", prefix, text)
			prefix = pad
		}
		for _, c := range m.ToolCalls {
			args := c.Arguments
			if red != nil {
				args = red.Arguments(c.Name, args)
			}
			state := ""
			if c.State != nil {
				state = " state=" + stateNote(c.State)
			}
			fmt.Fprintf(w, "%s call   call_id=%s tool=%s args=%s%s\n", prefix, c.ID, c.Name, OneLine(args), state)
			prefix = pad
		}
		if m.State != nil {
			fmt.Fprintf(w, "%s state  %s\n", prefix, stateNote(m.State))
			prefix = pad
		}
		if resp != nil && resp.DroppedState > 0 {
			fmt.Fprintf(w, "%s note   %s\n", prefix, droppedNote(resp.DroppedState))
			prefix = pad
		}
		if resp != nil && resp.DroppedReasoning > 0 {
			fmt.Fprintf(w, "%s note   %s\n", prefix, droppedReasoningNote(resp.DroppedReasoning))
			prefix = pad
		}
		if r := m.Result; r != nil {
			content := r.Content
			if red != nil && r.Status == llm.StatusOK {
				content = red.Result(r.Name, content)
			}
			kind := ""
			if r.ErrorKind != "" {
				kind = " kind=" + string(r.ErrorKind)
			}
			fmt.Fprintf(w, "%s result call_id=%s tool=%s status=%s%s content=%s\n",
				prefix, r.CallID, r.Name, r.Status, kind, OneLine(content))
		}
	}
	if st.Status == loop.ProtocolError {
		// The offending response never entered the history; the log keeps it.
		for i := len(events) - 1; i >= 0; i-- {
			if ev := events[i]; ev.Kind == loop.ModelResponded && ev.Response != nil {
				for _, c := range ev.Response.Message.ToolCalls {
					fmt.Fprintf(w, "      rejected  call   call_id=%s tool=%s args=%s\n", c.ID, c.Name, OneLine(c.Arguments))
				}
				break
			}
		}
	}
}

// stateNote describes provider state without its bytes: whose it is, and
// its size when known (a run log keeps only the provider).
func stateNote(s *llm.ProviderState) string {
	if len(s.Data) == 0 {
		return s.Provider
	}
	return fmt.Sprintf("%s (%d bytes)", s.Provider, len(s.Data))
}

// droppedNote says what an adapter left out of a request.
func droppedNote(n int) string {
	return fmt.Sprintf("the model client left out %d piece(s) of another provider's state: "+
		"the history switched providers, and this answer was made without that provider's reasoning", n)
}

// droppedReasoningNote says that the provider dropped reasoning of
// earlier turns from the request (llm.Response.DroppedReasoning).
func droppedReasoningNote(n int) string {
	return fmt.Sprintf("the provider dropped %d reasoning block(s) of earlier turns from the request, as the history before them "+
		"had changed since they were written (a context edit): the model lost that earlier reasoning for this answer", n)
}

// Batches returns the calls of each batch of a run, in order, from its
// spans (see Spans): what the log says about every call a model turn asked
// for, from validation to its result, for renderings other than Show's.
func Batches(spans []Span) [][]Call {
	var out [][]Call
	seen := map[*Call]bool{}
	for _, s := range spans {
		switch s.Kind {
		case SpanValidate, SpanAuthorize, SpanPlan, SpanAppend:
		default:
			continue
		}
		if len(s.Calls) == 0 || seen[&s.Calls[0]] {
			continue
		}
		seen[&s.Calls[0]] = true
		out = append(out, s.Calls)
	}
	return out
}

func showCalls(w io.Writer, spans []Span, summ *Redactor) {
	steps := map[*Call]int{}
	for _, s := range spans {
		if len(s.Calls) > 0 {
			if _, ok := steps[&s.Calls[0]]; !ok {
				steps[&s.Calls[0]] = s.Step
			}
		}
	}
	all := Batches(spans)
	if len(all) == 0 {
		return
	}
	fmt.Fprintf(w, "\ncalls\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\tCALL_ID\tTOOL\tARGS\tVALID\tPOLICY\tSTAGE\tATTEMPTS\tLATENCY\tSTATUS\tNOTES")
	for _, calls := range all {
		step := steps[&calls[0]]
		for _, c := range calls {
			valid := "-"
			switch {
			case !c.Validated:
			case !c.Check.Known:
				valid = "unknown"
			case c.Check.Problem != "":
				valid = "invalid"
			default:
				valid = "ok"
			}
			pol := "-"
			if c.Decision.Verdict != "" {
				pol = string(c.Decision.Verdict)
				if c.Decision.Rule != "" {
					pol += " (" + c.Decision.Rule + ")"
				}
			}
			if cf := c.Confirmation; cf != nil {
				verb := "denied"
				if cf.Approved {
					verb = "approved"
				}
				pol += ", " + verb + " by " + cf.By
			}
			stage := "-"
			if c.Planned {
				stage = fmt.Sprintf("%d %s", c.Row.Stage, c.Row.Mode)
			}
			attempts, latency := "-", "-"
			if c.Executed {
				attempts, latency = strconv.Itoa(c.Outcome.Attempts), fmtDur(c.Outcome.Duration)
			}
			status := "-"
			if c.Result.Status != "" {
				status = string(c.Result.Status)
				if c.Result.ErrorKind != "" {
					status += " " + string(c.Result.ErrorKind)
				}
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", step, c.ID, c.Tool,
				summ.Summary(c.Tool, c.Arguments), valid, pol, stage, attempts, latency, status, callNotes(&c))
		}
	}
	tw.Flush()
}

func callNotes(c *Call) string {
	var notes []string
	if c.Check.Problem != "" {
		notes = append(notes, strconv.Quote(c.Check.Problem))
	}
	if v := c.Decision.Verdict; v != "" && v != policy.Allow {
		notes = append(notes, strconv.Quote(c.Decision.Reason))
	}
	if c.Check.UntrustedResult() {
		// The result tainted the run: the call a taint decision's
		// reason names is found by this mark.
		notes = append(notes, "untrusted result")
	}
	if cf := c.Confirmation; cf != nil && cf.Note != "" {
		notes = append(notes, "confirmation note "+strconv.Quote(cf.Note))
	}
	o := &c.Outcome
	if o.IdempotencyKey != "" {
		notes = append(notes, "key="+o.IdempotencyKey)
	}
	for _, f := range []struct {
		on   bool
		text string
	}{{o.Replayed, "replayed"}, {o.Reconciled, "reconciled"}, {o.TimedOut, "timed_out"},
		{o.OutcomeUnknown, "outcome_unknown"}, {o.StopRun, "stop_run"}} {
		if f.on {
			notes = append(notes, f.text)
		}
	}
	if c.Executed && c.Outcome.Attempts > 1 {
		notes = append(notes, fmt.Sprintf("%d retries", c.Outcome.Attempts-1))
	}
	if o.CutBytes > 0 {
		notes = append(notes, fmt.Sprintf("result_cut=%dB", o.CutBytes))
	}
	return strings.Join(notes, " ")
}

func showPlans(w io.Writer, events []loop.Event) {
	first := true
	step := 0
	for _, ev := range events {
		if ev.Kind == loop.ModelResponded {
			step++
		}
		if ev.Kind != loop.StagePlanned || ev.Plan == nil {
			continue
		}
		if first {
			fmt.Fprintf(w, "\ndecision tables\n")
			first = false
		}
		fmt.Fprintf(w, "  step %d (seq %d): %d call(s) in %d stage(s)\n", step, ev.Seq, len(ev.Plan.Table), len(ev.Plan.Stages))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    CALL_ID\tTOOL\tEFFECT\tRESOURCES\tSTAGE\tMODE\tREASON")
		for _, r := range ev.Plan.Table {
			res := strings.Join(r.Resources, ",")
			if res == "" {
				res = "-"
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.CallID, r.Tool, r.Effect, res, r.Stage, r.Mode, r.Reason)
		}
		tw.Flush()
	}
}

func showTimeline(w io.Writer, spans []Span, last time.Time, width int) {
	if len(spans) == 0 {
		return
	}
	root := spans[0]
	end := root.End
	if root.Open() {
		end = last
	}
	total := end.Sub(root.Start)
	fmt.Fprintf(w, "\ntimeline (total %s)\n", fmtDur(total))
	depth := map[int]int{}
	names := make([]string, len(spans))
	nameW := len("SPAN")
	for i, s := range spans {
		if s.Parent != 0 {
			depth[s.ID] = depth[s.Parent] + 1
		}
		names[i] = strings.Repeat("  ", depth[s.ID]) + s.Name
		nameW = max(nameW, len(names[i]))
	}
	fmt.Fprintf(w, "  %-*s  %9s  %9s  %s\n", nameW, "SPAN", "START", "DURATION", "|"+strings.Repeat(" ", width)+"|")
	for i, s := range spans {
		e := s.End
		if s.Open() {
			e = end
		}
		fmt.Fprintf(w, "  %-*s  %9s  %9s  %s  %s\n", nameW, names[i], "+"+fmtDur(s.Start.Sub(root.Start)),
			fmtDur(e.Sub(s.Start)), bar(s.Start.Sub(root.Start), e.Sub(root.Start), total, width), spanNote(&s))
	}
}

// bar draws a span from offset a to offset b of total as width columns.
func bar(a, b, total time.Duration, width int) string {
	col := func(d time.Duration, up bool) int {
		if total <= 0 {
			return 0
		}
		x := float64(d) * float64(width) / float64(total)
		c := int(x)
		if up && float64(c) < x {
			c++
		}
		return min(max(c, 0), width)
	}
	from, to := col(a, false), col(b, true)
	cells := []byte(strings.Repeat(" ", width))
	if to <= from {
		// Too short to fill a column: mark where it happened.
		cells[min(from, width-1)] = '|'
	} else {
		for i := from; i < to; i++ {
			cells[i] = '#'
		}
	}
	return "|" + string(cells) + "|"
}

func spanNote(s *Span) string {
	var parts []string
	ev := s.Event
	switch s.Kind {
	case SpanRun:
		if s.Run != nil && s.Run.Status != "" {
			parts = append(parts, "status="+string(s.Run.Status))
		} else if s.Open() {
			parts = append(parts, "open: the log has no stopped event")
		}
	case SpanChat:
		if ev.Response != nil {
			u := ev.Response.Usage
			parts = append(parts, fmt.Sprintf("step=%d calls=%d tokens=%d+%d", s.Step,
				len(ev.Response.Message.ToolCalls), u.InputTokens, u.OutputTokens))
		}
		if ev.Attempts > 1 {
			parts = append(parts, fmt.Sprintf("attempts=%d", ev.Attempts))
		}
		if ev.Response != nil && ev.Response.DroppedState > 0 {
			parts = append(parts, fmt.Sprintf("dropped_state=%d", ev.Response.DroppedState))
		}
		if ev.Response != nil && ev.Response.DroppedReasoning > 0 {
			parts = append(parts, fmt.Sprintf("dropped_reasoning=%d", ev.Response.DroppedReasoning))
		}
	case SpanStage:
		parts = append(parts, fmt.Sprintf("stage=%d mode=%s calls=%d", s.Stage, s.Mode, len(ev.Outcomes)))
	case SpanTool:
		if len(s.Calls) == 1 {
			c := &s.Calls[0]
			parts = append(parts, "call_id="+c.ID, "status="+string(c.Outcome.Result.Status))
			if c.Outcome.Attempts > 1 {
				parts = append(parts, fmt.Sprintf("attempts=%d", c.Outcome.Attempts))
			}
		}
	case SpanAppend:
		n := 0
		for _, c := range s.Calls {
			if c.Result.Status != "" {
				n++
			}
		}
		parts = append(parts, fmt.Sprintf("results=%d", n))
	case SpanConfirm:
		if cf := ev.Confirmation; cf != nil {
			verb := "denied"
			if cf.Approved {
				verb = "approved"
			}
			parts = append(parts, "call_id="+cf.CallID, verb+" by "+cf.By)
		}
	case SpanEditContext, SpanSummarize:
		parts = append(parts, editNote(ev)...)
	case SpanCompensate, SpanUndo:
		parts = append(parts, compensateNote(s)...)
	case SpanBudget:
		parts = append(parts, s.Budget.Point)
		if s.Budget.Passed() {
			parts = append(parts, "ok")
		}
	}
	if s.Error != "" {
		parts = append(parts, "error="+s.Error)
	}
	return strings.Join(parts, " ")
}

func showBudgets(w io.Writer, spans []Span) {
	first := true
	for _, s := range spans {
		if s.Kind != SpanBudget {
			continue
		}
		if first {
			fmt.Fprintf(w, "\nbudget checks\n")
			first = false
		}
		b := s.Budget
		outcome := "ok"
		if !b.Passed() {
			outcome = "STOP " + string(b.Status)
		}
		calls := fmt.Sprintf("%d", b.ToolCalls)
		if b.Requested > 0 {
			calls += fmt.Sprintf("+%d", b.Requested)
		}
		fmt.Fprintf(w, "  seq %-3d step %-2d %-14s steps %d/%d  tool_calls %s/%s  tokens %d/%s  cost $%.6f/%s  elapsed %s/%s  %s\n",
			s.Seq, s.Step, b.Point, b.Steps, b.MaxSteps, calls, limit(int64(b.MaxToolCalls)), b.Tokens, limit(b.MaxTokens),
			b.Cost, costLimit(b.MaxCost), fmtDur(b.Elapsed), durLimit(b.Deadline), outcome)
	}
}

func showStop(w io.Writer, st *loop.State, spans []Span, events []loop.Event, red *Redactor) {
	fmt.Fprintln(w)
	for _, p := range st.Pending {
		args := json.RawMessage(p.Arguments)
		if red != nil {
			args = red.Arguments(p.Tool, args)
		}
		fmt.Fprintf(w, "pending call_id=%s tool=%s args=%s reason=%q\n", p.CallID, p.Tool, OneLine(args), p.Reason)
	}
	if loop.ListStatus(st, events) == loop.AnsweredStatus {
		// Paused, then answered: the stopped event of the pause closed
		// the run's span, but the run has not stopped; it waits to be
		// resumed.
		for _, p := range loop.Listed(st, events) {
			fmt.Fprintf(w, "answered call_id=%s tool=%s %s by %s note=%q\n", p.CallID, p.Tool, p.Confirmation.Verb(), p.Confirmation.By, p.Confirmation.Note)
		}
		fmt.Fprintf(w, "%s\n", AnsweredLine(st))
		return
	}
	root := spans[0]
	if root.Open() {
		fmt.Fprintf(w, "not stopped: the log ends at seq %d (%s) without a stopped event\n",
			events[len(events)-1].Seq, events[len(events)-1].Kind)
		return
	}
	fmt.Fprintf(w, "stopped status=%s steps=%d tool_calls=%d tokens=%d duration=%s%s detail=%q\n",
		string(st.Status), st.Steps, st.ToolCalls, st.Usage.Total(), fmtDur(root.Duration()), writesStop(st), st.Detail)
}

// AnsweredLine is the last line of a run that paused, has an answer to
// every call it paused for, and waits to be resumed (its list status is
// loop.AnsweredStatus), in place of a stop line.
func AnsweredLine(st *loop.State) string {
	return fmt.Sprintf("answered: every call the run paused for has its answer; it waits to be resumed (status=%s steps=%d tool_calls=%d tokens=%d)",
		loop.AnsweredStatus, st.Steps, st.ToolCalls, st.Usage.Total())
}

// OneLine shows raw JSON as it was logged, unless it spans several lines:
// then valid JSON is compacted and anything else quoted, so that one entry
// of a rendered trace stays one line.
func OneLine(b []byte) string {
	switch {
	case len(b) == 0:
		return "(none)"
	case !bytes.ContainsAny(b, "\r\n"):
		return string(b)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) == nil {
		return buf.String()
	}
	return strconv.Quote(string(b))
}

// fmtDur rounds a duration for reading.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Microsecond:
		return d.String()
	case d < time.Millisecond:
		return d.Round(100 * time.Nanosecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}
