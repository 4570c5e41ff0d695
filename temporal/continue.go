package temporal

import (
	"encoding/json"
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
// when its history nears these guards, or when the decider's state, which
// the next workflow run receives as its input, is too large to carry
// (Temporal refuses a payload past 2 MB; the state grows by some tens of
// bytes a call, so that is tens of thousands of calls).
const (
	historyEventsGuard = 40_000
	historyBytesGuard  = 40 << 20
	carriedStateGuard  = 1 << 20
)

// continueAsNew continues the workflow as new, before a model turn, once
// the server suggests it or the history holds RunInput.ContinueAsNewAfter
// events: it stores the log and returns the ContinueAsNewError that ends
// this workflow run, whose input carries the log by reference and the
// decider's state (loop.State's encoding); otherwise it returns nil. The new
// workflow run has the same workflow ID, so the run ID, queries, updates
// and result the caller sees do not change, and it starts from the state
// without reading the log back: a continuation adds the same to the
// history whatever the run's length, apart from the state's call IDs and
// result hashes. A workflow run that has not yet made a model turn of
// its own does not continue, nor does one canceled, or one whose state is
// too large to carry (historyFull stops it instead).
func (d *driver) continueAsNew(ctx workflow.Context) error {
	info := workflow.GetInfo(ctx)
	due := info.GetContinueAsNewSuggested() ||
		(d.in.ContinueAsNewAfter > 0 && d.historyLength(ctx) >= d.in.ContinueAsNewAfter)
	if !due || d.turns == 0 || ctx.Err() != nil || d.stateBytes > 0 {
		return nil
	}
	// An update being handled (a confirmation) finishes here first.
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return nil
	}
	// A continuation closes this workflow run: the markers of the current
	// workflow task reach the history first (commitBeforeClose).
	d.commitBeforeClose(ctx)
	if ctx.Err() != nil {
		return nil // the loop records the cancellation
	}
	if err := d.saveLog(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // the loop records the cancellation
		}
		return fmt.Errorf("toolloop: run %s: storing its log to continue as new: %w", d.state.RunID, err)
	}
	if d.saved != len(d.log) {
		return nil // an event came in meanwhile: continue at the next turn
	}
	snap := d.state
	snap.Messages = nil // not encoded; the copy need not hold them
	if b, err := json.Marshal(&snap); err != nil || len(b) > carriedStateGuard {
		d.stateBytes = max(len(b), 1)
		return nil
	}
	in := d.in
	in.Messages = nil // in the log's Started event
	in.Continued = &Continuation{Log: d.head, Events: d.events(), Times: d.continued + 1, State: &snap}
	return workflow.NewContinueAsNewError(ctx, WorkflowName, in)
}

// historyFull returns the failure that stops the run before a model turn
// when its history nears Temporal's limits, or the decider's state is too
// large to carry into a new workflow run; nil otherwise. The run stops with
// deadline_exceeded, the status of a run whose room (here not its time
// but its history) is spent, and a detail naming the limit.
func (d *driver) historyFull(ctx workflow.Context) *loop.Failure {
	info := workflow.GetInfo(ctx)
	n, size := d.historyLength(ctx), info.GetCurrentHistorySize()
	var why string
	switch {
	case d.stateBytes > 0:
		why = fmt.Sprintf("its state takes %d bytes after %d steps, more than the %d a new workflow run can carry", d.stateBytes, d.state.Steps, carriedStateGuard)
	case n >= d.in.HistoryLimit:
		why = fmt.Sprintf("its workflow history holds %d events, its limit is %d (Temporal terminates a workflow at 51,200)", n, d.in.HistoryLimit)
	case size >= historyBytesGuard:
		why = fmt.Sprintf("its workflow history holds %d bytes (Temporal terminates a workflow at 50 MB)", size)
	default:
		return nil
	}
	return &loop.Failure{Kind: loop.FailDeadline, Message: "the run stopped itself before Temporal's limits: " + why}
}

// reload rebuilds the decider's state from the log of a run continued by
// an earlier version of this package (a Continuation without State), page
// by page, and returns the effect its last event called for. The events
// are not stamped again: they are the log as it was.
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
