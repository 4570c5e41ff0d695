package console

import (
	"strconv"
	"time"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/trace"
)

// compensationView is one compensation on a run's page: why it happened,
// what the run did after it, and a row per write it was to undo.
type compensationView struct {
	Seq, Step int
	Why       string
	// Then says whether it came during the run (a group failed), or as
	// the run stopped (and with what).
	Then string
	Rows []undoRow
}

// undoRow is one compensating call: the write it undoes, the call, its
// ledger key, and whether it undid the write, failed or left it, and why.
type undoRow struct {
	CallID, Tool   string
	Undo, UndoCall string
	Key            string
	Attempts       string
	Latency        string
	State          string
	Reason         string
	// Unknown says the original write's outcome was unknown, to be
	// settled before it could be undone.
	Unknown bool
}

// writesView is the run's writes report on its page: the policy it ran
// with, the outcome, its summary and a row per write.
type writesView struct {
	Policy  string
	Outcome string
	Summary string
	Writes  []loop.WriteRecord
}

// compensations reads the run's compensations from its spans.
func compensations(spans []trace.Span) []compensationView {
	var out []compensationView
	for _, s := range spans {
		if s.Kind != trace.SpanCompensate || s.Compensation == nil {
			continue
		}
		c := s.Compensation
		v := compensationView{Seq: s.Seq, Step: s.Step, Why: c.Why, Then: "during the run"}
		if c.Stopping {
			v.Then = "as the run stopped with " + string(c.Status)
		}
		for j, o := range c.Outcomes {
			u := trace.Undo{Outcome: o}
			if j < len(c.Calls) {
				u.Call = c.Calls[j]
			}
			row := undoRow{CallID: u.Call.CallID, Tool: u.Call.Tool, Undo: u.Call.Undo, Key: u.Key(),
				State: string(o.State), Reason: o.Reason, Unknown: u.Call.Unknown, Attempts: "-", Latency: "-"}
			if o.Call != nil {
				row.UndoCall = o.Call.ID
			}
			if ex := o.Outcome; ex != nil {
				row.Attempts, row.Latency = strconv.Itoa(ex.Attempts), ex.Duration.Round(time.Microsecond).String()
			}
			v.Rows = append(v.Rows, row)
		}
		out = append(out, v)
	}
	return out
}

// writes is the run's writes report for its page; nil for a run without
// writes.
func writes(start *loop.StartInfo, rep *loop.WritesReport) *writesView {
	if rep == nil {
		return nil
	}
	v := &writesView{Policy: string(loop.LeaveWrites), Outcome: string(rep.Outcome), Summary: rep.Summary(), Writes: rep.Writes}
	if c := start.Compensation; c != nil {
		v.Policy = string(c.Policy)
		if c.AtomicBatches {
			v.Policy += ", atomic batches"
		}
	}
	return v
}
