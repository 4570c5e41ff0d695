package temporal

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolloop/toolloop/loop"
)

// CompensateActivity performs one compensation of a Compensate effect
// (loop.PerformCompensation) on a worker: the original's status look-up
// when its outcome is unknown, then the compensating call through the
// executor and the ledger.
const CompensateActivity = "toolloop.Compensate"

// compensateActivityBound is a compensation activity's StartToClose
// timeout: the settling of an unknown original (up to ten of its
// timeouts), the call, its executor retries and the waits for a
// compensation an earlier attempt may still be running. A lost worker is
// noticed sooner, by the activity's heartbeats (RunInput.ToolHeartbeat),
// and the compensation tried again elsewhere; the ledger key makes that
// safe.
const compensateActivityBound = 30 * time.Minute

// CompensateInput is the input of CompensateActivity.
type CompensateInput struct {
	RunID string `json:"run_id"`
	// Timeout overrides the compensating tool's timeout when positive
	// (the run's Budgets.ToolTimeout).
	Timeout time.Duration         `json:"timeout,omitempty"`
	Call    loop.CompensationCall `json:"call"`
}

// Compensate performs one compensation (loop.PerformCompensation). Its
// outcome, failed or not, is the activity's result: only a lost worker
// fails the activity.
func (a *Activities) Compensate(ctx context.Context, in CompensateInput) (loop.CompensationOutcome, error) {
	done := make(chan loop.CompensationOutcome, 1)
	go func() {
		done <- loop.PerformCompensation(ctx, a.cfg.Executor, a.cfg.Tools, in.RunID, in.Timeout, in.Call)
	}()
	every := activity.GetInfo(ctx).HeartbeatTimeout / 3
	if every <= 0 {
		return <-done, nil
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case out := <-done:
			return out, nil
		case <-tick.C:
			activity.RecordHeartbeat(ctx)
		}
	}
}

// Compensate performs the compensations one activity each, in order
// (loop.Compensations), on a context the workflow's cancellation does not
// reach: a canceled run still undoes its writes. An activity that fails
// for good leaves its write for a person.
func (w *workflowDriver) Compensate(calls []loop.CompensationCall) loop.Event {
	ctx, _ := workflow.NewDisconnectedContext(w.ctx)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: compensateActivityBound,
		HeartbeatTimeout:    w.d.in.ToolHeartbeat,
		RetryPolicy:         &sdktemporal.RetryPolicy{MaximumAttempts: int32(w.d.in.ToolActivityAttempts)},
	})
	s := &w.d.state
	return loop.Compensations(calls, func(c loop.CompensationCall) loop.CompensationOutcome {
		var out loop.CompensationOutcome
		in := CompensateInput{RunID: s.RunID, Timeout: s.Budgets.ToolTimeout, Call: c}
		if err := workflow.ExecuteActivity(ctx, CompensateActivity, in).Get(ctx, &out); err != nil {
			return loop.CompensationOutcome{CallID: c.CallID, State: loop.UndoLeft,
				Reason: "the compensation's activity failed (" + cause(err) + "); whether it ran is not known"}
		}
		return out
	})
}
