package temporal

import (
	"fmt"
	"time"

	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolloop/toolloop/loop"
)

// Temporal's hard limits are 51,200 events and 50 MB of history per
// workflow run; the server terminates a workflow that passes them. A run
// continues as new long before (the server suggests it at a few thousand
// events or a few MB), and stops itself with a status if it could not:
// when its history nears these guards, or when its log, which the next
// workflow run must read back into its own history, is too large to
// carry.
const (
	historyEventsGuard = 40_000
	historyBytesGuard  = 40 << 20
	carriedLogGuard    = 24 << 20
)

// continueAsNew continues the workflow as new, before a model turn, once
// the server suggests it or the history holds RunInput.ContinueAsNewAfter
// events: it stores the log and returns the ContinueAsNewError that ends
// this workflow run; otherwise it returns nil. The new workflow run has
// the same workflow ID, so the run ID, queries, updates and result the
// caller sees do not change. A workflow run that has not yet made a model
// turn of its own does not continue (reading a long log back may alone
// pass the threshold), nor does one canceled, or one whose log is too
// large to carry (historyFull stops it instead).
func (d *driver) continueAsNew(ctx workflow.Context) error {
	info := workflow.GetInfo(ctx)
	due := info.GetContinueAsNewSuggested() ||
		(d.in.ContinueAsNewAfter > 0 && info.GetCurrentHistoryLength() >= d.in.ContinueAsNewAfter)
	if !due || d.turns == 0 || ctx.Err() != nil || d.logBytes > carriedLogGuard {
		return nil
	}
	if err := d.saveLog(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // the loop records the cancellation
		}
		return fmt.Errorf("toolloop: run %s: storing its log to continue as new: %w", d.state.RunID, err)
	}
	// An update being handled (a confirmation) finishes here first.
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return nil
	}
	in := d.in
	in.Messages = nil // in the log's Started event
	in.Continued = &Continuation{Log: d.head, Events: len(d.log), Times: d.continued + 1}
	return workflow.NewContinueAsNewError(ctx, WorkflowName, in)
}

// historyFull returns the failure that stops the run before a model turn
// when its history nears Temporal's limits, or its log is too large to
// carry into a new workflow run; nil otherwise. The run stops with
// deadline_exceeded, the status of a run whose room (here not its time
// but its history) is spent, and a detail naming the limit.
func (d *driver) historyFull(ctx workflow.Context) *loop.Failure {
	info := workflow.GetInfo(ctx)
	n, size := info.GetCurrentHistoryLength(), info.GetCurrentHistorySize()
	var why string
	switch {
	case d.logBytes > carriedLogGuard:
		why = fmt.Sprintf("its log holds %d bytes after %d steps, more than the %d a new workflow run can carry", d.logBytes, d.state.Steps, carriedLogGuard)
	case n >= d.in.HistoryLimit:
		why = fmt.Sprintf("its workflow history holds %d events, its limit is %d (Temporal terminates a workflow at 51,200)", n, d.in.HistoryLimit)
	case size >= historyBytesGuard:
		why = fmt.Sprintf("its workflow history holds %d bytes (Temporal terminates a workflow at 50 MB)", size)
	default:
		return nil
	}
	return &loop.Failure{Kind: loop.FailDeadline, Message: "the run stopped itself before Temporal's limits: " + why}
}

// reload rebuilds the decider's state from the log a continued run
// carries, page by page, and returns the effect its last event called
// for. The events are not stamped again: they are the log as it was.
func (d *driver) reload(ctx workflow.Context) (loop.Effect, error) {
	c := d.in.Continued
	o := workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &sdktemporal.RetryPolicy{MaximumAttempts: 10, MaximumInterval: 10 * time.Second},
	}
	actx := workflow.WithActivityOptions(ctx, o)
	var eff loop.Effect
	for len(d.log) < c.Events {
		var page LoadLogOutput
		if err := workflow.ExecuteActivity(actx, LoadLogActivity, LoadLogInput{Log: c.Log, From: len(d.log)}).Get(ctx, &page); err != nil {
			return eff, err
		}
		if len(page.Events) == 0 {
			break
		}
		for _, ev := range page.Events {
			eff = d.append(ev)
		}
		if !page.More {
			break
		}
	}
	if len(d.log) != c.Events {
		return eff, fmt.Errorf("the log %s holds %d events, the continuation says %d", c.Log, len(d.log), c.Events)
	}
	d.saved = len(d.log)
	return eff, nil
}
