// Package report writes what the commands print about a finished run: its
// one-line summary (the sandbox's stop lines, toolloop run's last line), its
// message chain with each call ID beside its result (--trace), and the
// planner's table of each batch (--plan). It imports only the loop's types,
// the sandbox and the trace package, so that the sandbox alone (cmd/sandbox) prints the
// same lines as toolloop demo without compiling the providers, the stores or
// OpenTelemetry.
package report

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/trace"
)

// ContractLines is how many of the first scenarios have stop lines that
// docs/DESIGN.md §9 fixes exactly ("mode=NAME status=STATUS", nothing after).
// The other scenarios' stop lines add the run's counters and detail.
const ContractLines = 3

// Shown says what a demo prints of a scenario's run before its stop line.
type Shown struct {
	// Trace is --trace (WriteTrace), Plans --plan (WritePlans).
	Trace, Plans bool
}

// Scenario writes to w what a demo prints of the run res of scenario s,
// the index-th of orders.Scenarios(): a blank line before it when traces
// or plans are shown and it is not the first run printed, its trace and
// plans as shown asks, and its stop line, with the book's refund count
// for a scenario that shows it and, with showRun, its run and pending
// calls. A refund count that cannot be read is written to errw, prefixed
// by cmd and the mode, and makes Scenario return false.
func Scenario(ctx context.Context, w, errw io.Writer, cmd string, first bool, s orders.Scenario, index int,
	res *loop.Result, book orders.OrderBook, shown Shown, showRun bool) bool {
	ok := true
	if (shown.Trace || shown.Plans) && !first {
		fmt.Fprintln(w)
	}
	if shown.Trace {
		WriteTrace(w, s.Name, res)
	}
	if shown.Plans {
		WritePlans(w, s.Name, res)
	}
	refunds := -1
	if s.ShowRefunds {
		var err error
		if refunds, err = book.RefundCount(ctx, ""); err != nil {
			fmt.Fprintf(errw, "%s: mode %s: %v\n", cmd, s.Name, err)
			ok = false
		}
	}
	fmt.Fprintln(w, StopLine(s.Name, res, index < ContractLines, refunds, showRun))
	return ok
}

// StopLine is the one-line summary of a sandbox run. A bare line is
// exactly "mode=NAME status=STATUS"; the others add the run's counters,
// the book's refund count unless refunds is negative, with showRun the
// run's ID and those of its pending calls, and the stop detail.
func StopLine(name string, res *loop.Result, bare bool, refunds int, showRun bool) string {
	if bare {
		// Status implements error, and fmt prefers Error() to the string
		// value: convert, so the line never depends on how the error reads.
		return fmt.Sprintf("mode=%s status=%s", name, string(res.Status))
	}
	return SummaryLine("mode="+name+" ", res, refunds, false, showRun)
}

// SummaryLine is prefix, then the run's status and counters, its cost
// when withCost is set, the refund count unless refunds is negative, what
// the run's writes ended as when they did not all stay, with
// showRun "run=RUN_ID" and, when calls await confirmation,
// "call=CALL_ID[,CALL_ID...]", and last the quoted stop detail.
func SummaryLine(prefix string, res *loop.Result, refunds int, withCost, showRun bool) string {
	line := fmt.Sprintf("%sstatus=%s steps=%d tool_calls=%d tokens=%d", prefix, string(res.Status), res.Steps, res.ToolCalls, res.Usage.Total())
	if withCost {
		line += fmt.Sprintf(" cost=$%.6f", res.Cost)
	}
	if refunds >= 0 {
		line += fmt.Sprintf(" refunds=%d", refunds)
	}
	if w := res.Writes; w != nil && (withCost || w.Outcome == loop.WritesPartial || w.Outcome == loop.WritesUndone) {
		// Writes that did not all stay are named: what was done, undone,
		// not done, and left for a person (docs/DESIGN.md §7.1).
		// toolloop run's line (withCost) says all done and none too: a
		// real run's writes are what its user asked about.
		line += trace.WritesField(w)
	}
	if showRun {
		line += " run=" + res.RunID
		if len(res.Pending) > 0 {
			ids := make([]string, len(res.Pending))
			for i, p := range res.Pending {
				ids[i] = p.CallID
			}
			line += " call=" + strings.Join(ids, ",")
		}
	}
	return fmt.Sprintf("%s detail=%q", line, res.Detail)
}

// WritePlans prints the planner's decision table of each batch of a run,
// as the log's stage_planned events record it: one aligned table per
// batch, headed by the batch's number and the model turn that asked for
// it, with one row per call. Stages are numbered from 0, as in the log.
func WritePlans(w io.Writer, name string, res *loop.Result) {
	batch, step := 0, 0
	for _, ev := range res.Events {
		switch {
		case ev.Kind == loop.ModelResponded:
			step++
		case ev.Kind == loop.StagePlanned && ev.Plan != nil:
			batch++
			fmt.Fprintf(w, "# plan mode=%s batch=%d step=%d calls=%d stages=%d\n",
				name, batch, step, len(ev.Plan.Table), len(ev.Plan.Stages))
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "    CALL_ID\tTOOL\tEFFECT\tRESOURCES\tSTAGE\tMODE\tREASON")
			for _, r := range ev.Plan.Table {
				resources := strings.Join(r.Resources, ",")
				if resources == "" {
					resources = "-"
				}
				fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%d\t%s\t%s\n",
					r.CallID, r.Tool, r.Effect, resources, r.Stage, r.Mode, r.Reason)
			}
			tw.Flush()
		}
	}
	if batch == 0 {
		fmt.Fprintf(w, "# plan mode=%s: no batch was planned\n", name)
	}
}

// WriteTrace prints a run's history in order: text, each tool call with its
// call ID, tool and arguments, and each result with its call ID, status,
// error kind, what the idempotency ledger made of a write, and content;
// then a response rejected for breaking the protocol, the calls awaiting
// confirmation, and why the run stopped.
func WriteTrace(w io.Writer, name string, res *loop.Result) {
	fmt.Fprintf(w, "# trace mode=%s run=%s\n", name, res.RunID)
	writes := ledgerNotes(res)
	for i, m := range res.Messages {
		prefix := fmt.Sprintf("%3d %-9s", i+1, m.Role)
		if m.Text != "" || (m.Role != llm.RoleTool && len(m.ToolCalls) == 0) {
			fmt.Fprintf(w, "%s text %q\n", prefix, m.Text)
			prefix = fmt.Sprintf("%3s %-9s", "", "")
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(w, "%s call   call_id=%s tool=%s args=%s\n", prefix, c.ID, c.Name, trace.OneLine(c.Arguments))
			prefix = fmt.Sprintf("%3s %-9s", "", "")
		}
		if r := m.Result; r != nil {
			kind := ""
			if r.ErrorKind != "" {
				kind = " kind=" + string(r.ErrorKind)
			}
			fmt.Fprintf(w, "%s result call_id=%s tool=%s status=%s%s%s content=%s\n",
				prefix, r.CallID, r.Name, r.Status, kind, writes[r.CallID], trace.OneLine(r.Content))
		}
	}
	if res.Status == loop.ProtocolError {
		// The offending response never enters the history; the log keeps it.
		for i := len(res.Events) - 1; i >= 0; i-- {
			if ev := res.Events[i]; ev.Kind == loop.ModelResponded && ev.Response != nil {
				for _, c := range ev.Response.Message.ToolCalls {
					fmt.Fprintf(w, "    rejected  call   call_id=%s tool=%s args=%s\n", c.ID, c.Name, trace.OneLine(c.Arguments))
				}
				break
			}
		}
	}
	for _, p := range res.Pending {
		fmt.Fprintf(w, "    pending   call_id=%s tool=%s args=%s reason=%q\n", p.CallID, p.Tool, trace.OneLine(p.Arguments), p.Reason)
	}
	fmt.Fprintf(w, "    stopped   status=%s detail=%q\n", string(res.Status), res.Detail)
}

// ledgerNotes returns, for each write the run executed through the
// idempotency ledger, " key=KEY ledger=WHAT", where WHAT is executed,
// replayed (the stored result of an earlier call), reconciled (settled by
// the tool's status look-up) or outcome_unknown.
func ledgerNotes(res *loop.Result) map[string]string {
	notes := map[string]string{}
	for _, ev := range res.Events {
		if ev.Kind != loop.StageFinished {
			continue
		}
		for _, o := range ev.Outcomes {
			if o.IdempotencyKey == "" {
				continue
			}
			what := "executed"
			switch {
			case o.Replayed:
				what = "replayed"
			case o.OutcomeUnknown:
				what = "outcome_unknown"
			case o.Reconciled:
				what = "reconciled"
			}
			notes[o.Result.CallID] = fmt.Sprintf(" key=%s ledger=%s", o.IdempotencyKey, what)
		}
	}
	return notes
}
