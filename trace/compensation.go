package trace

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
)

// Span kinds of a compensation (docs/DESIGN.md §7.1).
const (
	// SpanCompensate is one compensation: the undoing of the writes of an
	// all-or-nothing group that failed, or of a run that stopped, from the
	// event before to the compensated event. Its children are SpanUndo.
	SpanCompensate SpanKind = "compensate"
	// SpanUndo is one compensating call of a compensation, or a write it
	// had to leave. A call that ran is named "execute_tool UNDO_TOOL" and
	// spans the executor's time; a write left without a call is named
	// "compensate_call" and takes no time.
	SpanUndo SpanKind = "compensate_call"
)

// Compensation is what the log says about one compensation: why the
// decider asked for it, the writes it was to undo (latest first) and what
// each compensating call did, in the same order.
type Compensation struct {
	// Why says what failed: a group and its call, or the run's stop.
	Why string
	// Stopping is set when the run was stopping (with Status) and the
	// compensation was its last act; otherwise a group failed mid-run.
	Stopping bool
	Status   loop.Status
	Calls    []loop.CompensationCall
	Outcomes []loop.CompensationOutcome
}

// Undo is one compensating call of a compensation: the write it undoes and
// what became of it.
type Undo struct {
	Call    loop.CompensationCall
	Outcome loop.CompensationOutcome
}

// Key is the ledger key of the compensating call: the executor's, else
// the one derived from the original write's key; "" when no compensating
// call was made (the write has no compensation, or was left unsettled).
func (u *Undo) Key() string {
	if u.Outcome.Outcome != nil && u.Outcome.Outcome.IdempotencyKey != "" {
		return u.Outcome.Outcome.IdempotencyKey
	}
	if u.Outcome.Call == nil || u.Call.Key == "" {
		return ""
	}
	return loop.CompensationKey(u.Call.Key)
}

// compensate returns the spans of a compensated event: the compensation's,
// then one per compensating call. due is the effect the decider asked for
// before ev.
func (t *Timeline) compensate(ev *loop.Event, due loop.Effect, out []Span) []Span {
	comp := &Compensation{Why: due.Detail, Stopping: t.st.Stopping, Status: t.st.Status,
		Calls: due.Compensations, Outcomes: ev.Compensations}
	parent := t.span(SpanCompensate, 1, t.prevAt, later(t.prevAt, ev.At), ev)
	parent.Compensation = comp
	children := make([]Span, 0, len(ev.Compensations))
	for j := range ev.Compensations {
		u := &Undo{Outcome: ev.Compensations[j]}
		if j < len(due.Compensations) {
			u.Call = due.Compensations[j]
		}
		start, end := parent.Start, parent.Start
		name := string(SpanUndo)
		if o := u.Outcome.Outcome; o != nil {
			name = string(SpanTool) + " " + o.Result.Name
			if u.Outcome.Call != nil {
				name = string(SpanTool) + " " + u.Outcome.Call.Name
			}
			// The executor's clock, when it falls within the span on the
			// driver's (a test may fake the latter).
			if !o.Started.Before(parent.Start) && !o.Started.After(parent.End) {
				start = o.Started
			}
			end = start.Add(o.Duration)
		}
		s := t.span(SpanUndo, parent.ID, start, end, ev)
		s.Name, s.Compensation, s.Undo = name, comp, u
		if u.Outcome.State != loop.UndoSucceeded {
			s.Error = string(u.Outcome.State)
		}
		if s.End.After(parent.End) {
			parent.End = s.End
		}
		children = append(children, s)
	}
	for _, o := range ev.Compensations {
		if o.State != loop.UndoSucceeded {
			parent.Error = "compensation_" + string(o.State)
			break
		}
	}
	out = append(out, parent)
	return append(out, children...)
}

// compensateNote is the timeline's note for a compensation's spans.
func compensateNote(s *Span) []string {
	switch {
	case s.Kind == SpanCompensate && s.Compensation != nil:
		n := map[loop.CompensationState]int{}
		for _, o := range s.Compensation.Outcomes {
			n[o.State]++
		}
		return []string{fmt.Sprintf("writes=%d undone=%d failed=%d left=%d", len(s.Compensation.Outcomes),
			n[loop.UndoSucceeded], n[loop.UndoFailed], n[loop.UndoLeft])}
	case s.Kind == SpanUndo && s.Undo != nil:
		return []string{"call_id=" + s.Undo.Call.CallID, "state=" + string(s.Undo.Outcome.State)}
	}
	return nil
}

// showCompensations prints a section per compensation: why it happened,
// and a line per write it was to undo with the compensating call, its
// ledger key, and whether it undid the write, failed, or left it (and
// why).
func showCompensations(w io.Writer, spans []Span) {
	first := true
	for _, s := range spans {
		if s.Kind != SpanCompensate || s.Compensation == nil {
			continue
		}
		if first {
			fmt.Fprintf(w, "\ncompensations\n")
			first = false
		}
		c := s.Compensation
		then := "during the run"
		if c.Stopping {
			then = "as the run stopped with " + string(c.Status)
		}
		fmt.Fprintf(w, "  seq %d after step %d (%s): %s\n", s.Seq, s.Step, then, c.Why)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    CALL_ID\tTOOL\tUNDO\tUNDO_CALL\tKEY\tATTEMPTS\tLATENCY\tSTATE\tNOTES")
		for j, o := range c.Outcomes {
			u := Undo{Outcome: o}
			if j < len(c.Calls) {
				u.Call = c.Calls[j]
			}
			undo, id, key, attempts, latency := dash(u.Call.Undo), "-", dash(u.Key()), "-", "-"
			if o.Call != nil {
				id = o.Call.ID
			}
			if ex := o.Outcome; ex != nil {
				attempts, latency = strconv.Itoa(ex.Attempts), fmtDur(ex.Duration)
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", u.Call.CallID, u.Call.Tool, undo, id, key,
				attempts, latency, o.State, undoNotes(&u))
		}
		tw.Flush()
	}
}

// showCompensationDue prints the compensation a log ends before: the
// decider asked for it (due) and no compensated event records it, as when
// the run's process died while undoing; a resume performs it.
func showCompensationDue(w io.Writer, due loop.Effect) {
	if due.Kind != loop.Compensate {
		return
	}
	fmt.Fprintf(w, "\ncompensation due, not recorded (a resume performs it): %s\n", due.Detail)
	for _, c := range due.Compensations {
		undo := c.Undo
		if undo == "" {
			undo = "(none declared)"
		}
		unknown := ""
		if c.Unknown {
			unknown = " original_outcome_unknown"
		}
		fmt.Fprintf(w, "  call_id=%s tool=%s key=%s undo=%s%s\n", c.CallID, c.Tool, dash(c.Key), undo, unknown)
	}
}

// undoNotes says why a compensation failed or was left, and what the
// executor noted about its call.
func undoNotes(u *Undo) string {
	var notes []string
	if u.Call.Unknown {
		notes = append(notes, "original_outcome_unknown")
	}
	if o := u.Outcome.Outcome; o != nil {
		for _, f := range []struct {
			on   bool
			text string
		}{{o.Replayed, "replayed"}, {o.Reconciled, "reconciled"}, {o.TimedOut, "timed_out"}, {o.OutcomeUnknown, "outcome_unknown"}} {
			if f.on {
				notes = append(notes, f.text)
			}
		}
		if o.Result.Status == llm.StatusError && o.Result.ErrorKind != "" {
			notes = append(notes, "kind="+string(o.Result.ErrorKind))
		}
	}
	if u.Outcome.Reason != "" {
		notes = append(notes, strconv.Quote(u.Outcome.Reason))
	}
	return strings.Join(notes, " ")
}

// showWrites prints the run's writes report: its outcome and policy, the
// one-line summary, and a line per write with its group and what became
// of it. A run that asked for no write prints nothing.
func showWrites(w io.Writer, st *loop.State, start *loop.StartInfo) {
	if len(st.Writes) == 0 {
		return
	}
	rep := st.WritesReport()
	policy := "leave"
	if c := start.Compensation; c != nil {
		policy = string(c.Policy)
		if c.AtomicBatches {
			policy += ", atomic batches"
		}
	}
	fmt.Fprintf(w, "\nwrites %s (policy %s)\n  %s\n", rep.Outcome, policy, rep.Summary())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\tCALL_ID\tTOOL\tGROUP\tKEY\tUNDO\tSTATE\tNOTE")
	for _, r := range rep.Writes {
		state := string(r.State)
		if r.Open {
			state += " (open)"
		}
		note := "-"
		if r.Note != "" {
			note = strconv.Quote(r.Note)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Step, r.CallID, r.Tool, dash(r.Group), dash(r.Key),
			dash(r.Undo), state, note)
	}
	tw.Flush()
}

// writesStop is what the stop line says about the run's writes (see
// WritesField), or nothing for a run without writes.
func writesStop(st *loop.State) string {
	if len(st.Writes) == 0 {
		return ""
	}
	return WritesField(st.WritesReport())
}

// WritesField is a stop line's field for a run's writes report:
// ` writes="…"`, its Summary, which says all done, partial, undone or none
// and names the writes in each state; "" for a run without writes (w
// nil). trace show, toolloop run and the console put it in their stop
// lines.
func WritesField(w *loop.WritesReport) string {
	if w == nil {
		return ""
	}
	return fmt.Sprintf(" writes=%q", w.Summary())
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
