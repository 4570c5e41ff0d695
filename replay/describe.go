package replay

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
)

// aspectOf classifies a difference in how the runs stop by the statuses
// involved, the new one first.
func aspectOf(statuses ...loop.Status) Aspect {
	for _, st := range statuses {
		switch st {
		case loop.MaxStepsExceeded, loop.ToolBudgetExceeded, loop.CostBudgetExceeded, loop.DeadlineExceeded:
			return Budget
		case loop.SpinDetected:
			return Spin
		case loop.InvalidOutput:
			return Output
		case loop.ContextExhausted:
			return Context
		}
	}
	return Status
}

// mismatch describes the new run doing eff where the recorded one did rec.
func (d *driver) mismatch(eff loop.Effect, rec *loop.Event) *Difference {
	diff := &Difference{Aspect: Status, Seq: rec.Seq, Step: d.state.Steps,
		Recorded: describeEvent(rec), New: d.describeEffect(eff)}
	var statuses []loop.Status
	if eff.Kind == loop.Stop {
		statuses = append(statuses, eff.Status)
	}
	if rec.Kind == loop.Stopped {
		statuses = append(statuses, rec.Status)
	}
	if rec.Kind == loop.Interrupted && rec.Failure != nil && rec.Failure.Kind == loop.FailDeadline {
		statuses = append(statuses, loop.DeadlineExceeded)
	}
	diff.Aspect = aspectOf(statuses...)
	switch {
	case diff.Aspect != Status:
	case eff.Kind == loop.RequestModel && rec.Kind == loop.Stopped && rec.Status == loop.FinalAnswer,
		eff.Kind == loop.Stop && eff.Status == loop.FinalAnswer && (rec.Kind == loop.ModelResponded || rec.Kind == loop.ModelFailed):
		// One run took the answer, the other sent it back to the model:
		// the output schemas differ.
		diff.Aspect = Output
	case eff.Kind == loop.EditContext || eff.Kind == loop.Summarize || rec.Kind == loop.ContextEdited || rec.Kind == loop.ContextSummarized:
		diff.Aspect = Context
	}
	return diff
}

// describeEvent says what a recorded event shows the run did.
func describeEvent(ev *loop.Event) string {
	switch ev.Kind {
	case loop.ModelResponded:
		return "asked the model for the next turn"
	case loop.ModelFailed:
		return "asked the model for the next turn (it failed)"
	case loop.CallsValidated:
		return "validated the turn's calls"
	case loop.PolicyDecided:
		return "asked the policy about the turn's calls"
	case loop.StagePlanned:
		return "planned the turn's calls"
	case loop.StageFinished:
		return fmt.Sprintf("ran stage %d", ev.Stage)
	case loop.ContextEdited:
		return "cleared old tool results from the context"
	case loop.ContextSummarized:
		return "asked the model for a summary of the earlier turns"
	case loop.Stopped:
		return "stopped: " + string(ev.Status) + ": " + ev.Detail
	case loop.Interrupted:
		if ev.Failure != nil {
			return "was interrupted: " + string(ev.Failure.Kind) + ": " + ev.Failure.Message
		}
		return "was interrupted"
	case loop.ConfirmationDecided:
		return "recorded a person's answer"
	}
	return string(ev.Kind)
}

// describeEffect says what the new run does for eff.
func (d *driver) describeEffect(eff loop.Effect) string {
	switch eff.Kind {
	case loop.RequestModel:
		if d.state.OutputRejected > 0 {
			return fmt.Sprintf("asks the model for turn %d: the answer does not match the output schema (%d rejected)",
				d.state.Steps+1, d.state.OutputRejected)
		}
		return fmt.Sprintf("asks the model for turn %d", d.state.Steps+1)
	case loop.ValidateCalls:
		return "validates the turn's calls"
	case loop.AuthorizeCalls:
		return "asks the policy about calls " + strings.Join(d.stageCallIDs(eff.Calls), ", ")
	case loop.PlanBatch:
		return "plans calls " + strings.Join(d.stageCallIDs(eff.Calls), ", ")
	case loop.ExecuteStage:
		return fmt.Sprintf("runs stage %d: %s", eff.Stage, strings.Join(d.stageCallIDs(eff.Calls), ", "))
	case loop.EditContext:
		return "clears old tool results from the context"
	case loop.Summarize:
		return "asks the model for a summary of the earlier turns"
	case loop.Stop:
		return "stops: " + string(eff.Status) + ": " + eff.Detail
	}
	return string(eff.Kind)
}

// stageCallIDs names the batch's calls listed in idx.
func (d *driver) stageCallIDs(idx []int) []string {
	b := d.state.Batch
	ids := make([]string, 0, len(idx))
	for _, i := range idx {
		if b != nil && i < len(b.Calls) {
			ids = append(ids, b.Calls[i].ID)
		}
	}
	return ids
}

// sameCalls reports whether a recorded stage ran exactly the calls ids.
func sameCalls(ids []string, rec *loop.Event) bool {
	if len(ids) != len(rec.Outcomes) {
		return false
	}
	for j := range ids {
		if rec.Outcomes[j].Result.CallID != ids[j] {
			return false
		}
	}
	return true
}

// outcomeIDs names the calls of a recorded stage.
func outcomeIDs(rec *loop.Event) string {
	ids := make([]string, len(rec.Outcomes))
	for j := range rec.Outcomes {
		ids[j] = rec.Outcomes[j].Result.CallID
	}
	return strings.Join(ids, ", ")
}

// describeStages renders a plan as its stages of call IDs.
func (d *driver) describeStages(stages [][]int) string {
	parts := make([]string, len(stages))
	for k, st := range stages {
		parts[k] = "[" + strings.Join(d.stageCallIDs(st), " ") + "]"
	}
	return strings.Join(parts, " then ")
}

// describeCheck renders one call's validation.
func describeCheck(c loop.CallCheck) string {
	switch {
	case !c.Known:
		return "unknown tool"
	case c.Problem != "":
		return "invalid: " + c.Problem
	}
	s := "valid"
	if c.WriteKey != "" {
		s = "valid write, key " + c.WriteKey
		if c.Undo != "" {
			s += ", undone by " + c.Undo
		} else {
			s += ", no compensation"
		}
	}
	if c.Group != "" {
		s += ", group " + c.Group
	}
	return s
}

// compareChecks returns the validation difference between a recorded
// calls_validated event and the new checks, or nil.
func (d *driver) compareChecks(rec *loop.Event, checks []loop.CallCheck) *Difference {
	var calls []CallDifference
	aspect := Compensation // unless a call differs in more than its group and undo
	for i, c := range checks {
		var r loop.CallCheck
		if i < len(rec.Checks) {
			r = rec.Checks[i]
		}
		if r.Trust == "" {
			// A log from before taint tracking records no trust; the
			// new check's is not a difference in validation.
			c.Trust = ""
		}
		if r != c {
			if r.Known != c.Known || r.Problem != c.Problem || r.Key != c.Key || r.WriteKey != c.WriteKey {
				aspect = Validation
			}
			call := d.state.Batch.Calls[i]
			calls = append(calls, CallDifference{CallID: call.ID, Tool: call.Name, Recorded: describeCheck(r), New: describeCheck(c)})
		}
	}
	if len(calls) == 0 && len(rec.Checks) == len(checks) {
		return nil
	}
	if len(rec.Checks) != len(checks) {
		aspect = Validation
	}
	return &Difference{Aspect: aspect, Seq: rec.Seq, Step: d.state.Steps, Calls: calls,
		Recorded: fmt.Sprintf("%d call(s) checked", len(rec.Checks)), New: fmt.Sprintf("%d call(s) checked", len(checks))}
}

// describeDecision renders one policy decision.
func describeDecision(dec policy.Decision) string {
	if dec.Verdict == "" {
		return "not asked"
	}
	s := string(dec.Verdict) + " (" + dec.Rule + ")"
	if dec.Verdict != policy.Allow && dec.Reason != "" {
		s += ": " + dec.Reason
	}
	return s
}

// compareDecisions returns the authorization difference between a
// recorded policy_decided event and the new decisions, or nil. The
// verdict is the decision: another rule or reason for the same verdict
// (a policy rewritten to the same effect) is not a difference.
func (d *driver) compareDecisions(rec *loop.Event, decisions []policy.Decision) *Difference {
	var calls []CallDifference
	for i, dec := range decisions {
		var r policy.Decision
		if i < len(rec.Decisions) {
			r = rec.Decisions[i]
		}
		if r.Verdict != dec.Verdict {
			call := d.state.Batch.Calls[i]
			calls = append(calls, CallDifference{CallID: call.ID, Tool: call.Name, Recorded: describeDecision(r), New: describeDecision(dec)})
		}
	}
	if len(calls) == 0 && len(rec.Decisions) == len(decisions) {
		return nil
	}
	return &Difference{Aspect: Authorization, Seq: rec.Seq, Step: d.state.Steps, Calls: calls,
		Recorded: "the policy's verdicts", New: "the new policy's verdicts"}
}

// Format writes the report for a person: the verdict, the first
// difference side by side with its call IDs, and how each run ended.
func (r *Report) Format(w io.Writer) error {
	var b strings.Builder
	if r.Live != nil {
		r.formatLive(&b)
		_, err := io.WriteString(w, b.String())
		return err
	}
	switch {
	case r.Diff == nil && r.Truncated:
		fmt.Fprintf(&b, "run %s: no difference as far as its log goes (%d events; the log ends before the run did)\n", r.RunID, len(r.Events))
	case r.Diff == nil:
		fmt.Fprintf(&b, "run %s: no difference (%s)\n", r.RunID, r.NewStatus)
	default:
		df := r.Diff
		where := fmt.Sprintf("event %d", df.Seq)
		if df.Seq == 0 {
			where = "the end of the recorded log"
		}
		fmt.Fprintf(&b, "run %s: differs at %s, turn %d: %s\n", r.RunID, where, df.Step, df.Aspect)
		tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', 0)
		if len(df.Calls) > 0 {
			fmt.Fprintf(tw, "  call\ttool\trecorded\tnew\n")
			for _, c := range df.Calls {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.CallID, c.Tool, c.Recorded, c.New)
			}
		} else {
			fmt.Fprintf(tw, "  recorded:\t%s\n", df.Recorded)
			fmt.Fprintf(tw, "  new:\t%s\n", df.New)
		}
		tw.Flush()
	}
	if len(r.LiveCalls) > 0 {
		fmt.Fprintf(&b, "  ran for real (live tools): %s\n", strings.Join(r.LiveCalls, ", "))
	}
	if g := r.Gap; g != nil && !r.Truncated {
		fmt.Fprintf(&b, "  replay stopped at turn %d: %s\n", g.Step, g.Reason)
	}
	rec := string(r.RecordedStatus)
	if rec == "" {
		rec = "(not ended)"
	}
	if r.Diff != nil {
		fmt.Fprintf(&b, "  status: recorded %s", rec)
		if r.NewStatus != "" {
			fmt.Fprintf(&b, ", new %s: %s\n", r.NewStatus, r.NewDetail)
		} else {
			fmt.Fprintf(&b, ", new unknown (the replay stopped first)\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// formatLive writes the report of a run answered by a live model.
func (r *Report) formatLive(b *strings.Builder) {
	l := r.Live
	verdict := "the same status and calls"
	if !r.Equal() {
		verdict = "differs"
	}
	fmt.Fprintf(b, "run %s (live model): %s\n", r.RunID, verdict)
	newStatus := string(r.NewStatus)
	if newStatus == "" {
		newStatus = "unknown (the replay stopped first)"
	}
	fmt.Fprintf(b, "  status:  recorded %s, new %s\n", orNone(string(r.RecordedStatus)), newStatus)
	if l.SameCalls {
		fmt.Fprintf(b, "  calls:   the same %d\n", len(l.NewCalls))
	} else {
		fmt.Fprintf(b, "  calls:   recorded %s\n           new      %s\n", callsLine(l.RecordedCalls), callsLine(l.NewCalls))
	}
	fmt.Fprintf(b, "  tokens:  recorded %d, new %d\n", l.RecordedTokens, l.NewTokens)
	if l.RecordedCost != 0 || l.NewCost != 0 {
		fmt.Fprintf(b, "  cost:    recorded $%.6f, new $%.6f\n", l.RecordedCost, l.NewCost)
	}
	if len(r.LiveCalls) > 0 {
		fmt.Fprintf(b, "  ran for real (live tools): %s\n", strings.Join(r.LiveCalls, ", "))
	}
	if g := r.Gap; g != nil {
		fmt.Fprintf(b, "  replay stopped at turn %d: %s\n", g.Step, g.Reason)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(not ended)"
	}
	return s
}

// callsLine lists calls on one line, or says there were none.
func callsLine(calls []string) string {
	if len(calls) == 0 {
		return "(none)"
	}
	return strings.Join(calls, ", ")
}
