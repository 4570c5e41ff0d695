package temporal

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"

	"github.com/toolloop/toolloop/loop"
)

// Statuses of a run whose workflow ended without a run's output: the
// server terminated it (a limit passed, or an operator did), it failed,
// or it timed out. Status reports them, with the server's reason as the
// detail.
const (
	StatusTerminated = "workflow_terminated"
	StatusFailed     = "workflow_failed"
	StatusTimedOut   = "workflow_timed_out"
)

// Status returns the run's status whatever became of its workflow, for
// callers that must not be told "running" about a run that is over: the
// StatusQuery's answer while the workflow runs; the output's once it
// completed or was canceled; and for a workflow that ended without an
// output (terminated, failed, timed out) StatusTerminated, StatusFailed
// or StatusTimedOut with the server's reason, and the counters the
// workflow had reached when a worker can replay it. It follows a run
// through its continuations as new (they share the workflow ID).
func Status(ctx context.Context, c client.Client, workflowID string) (RunStatus, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return RunStatus{}, err
	}
	info := desc.GetWorkflowExecutionInfo()
	runID := info.GetExecution().GetRunId()
	query := func() (RunStatus, error) {
		var st RunStatus
		v, err := c.QueryWorkflow(ctx, workflowID, runID, StatusQuery)
		if err == nil {
			err = v.Get(&st)
		}
		return st, err
	}
	switch wf := info.GetStatus(); wf {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return query()
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		var out RunOutput
		err := c.GetWorkflow(ctx, workflowID, runID).Get(ctx, &out)
		var canceled *sdktemporal.CanceledError
		if errors.As(err, &canceled) {
			if !canceled.HasDetails() || canceled.Details(&out) != nil || out.Status == "" {
				return RunStatus{RunID: workflowID, Status: string(loop.Canceled), Detail: "the workflow was canceled before the run started"}, nil
			}
		} else if err != nil {
			return RunStatus{}, err
		}
		return RunStatus{RunID: out.RunID, Status: string(out.Status), Detail: out.Detail, Steps: out.Steps, ToolCalls: out.ToolCalls,
			Usage: out.Usage, Cost: out.Cost, Pending: out.Pending, Events: out.Events, ContinuedAsNew: out.ContinuedAsNew, Log: out.Log}, nil
	default:
		st, qerr := query() // the counters reached, if a worker answers
		if qerr != nil || st.RunID == "" {
			st = RunStatus{RunID: workflowID}
		}
		st.Pending = nil
		st.Status = "workflow_" + strings.ToLower(strings.TrimPrefix(wf.String(), "WORKFLOW_EXECUTION_STATUS_"))
		st.Detail = closeReason(ctx, c, workflowID, runID)
		return st, nil
	}
}

// closeReason reads why a workflow ended without an output from its last
// history event.
func closeReason(ctx context.Context, c client.Client, workflowID, runID string) string {
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return "the server gave no reason: " + err.Error()
		}
		if a := ev.GetWorkflowExecutionTerminatedEventAttributes(); a != nil {
			return fmt.Sprintf("terminated by %s: %s", orUnknown(a.GetIdentity()), orUnknown(a.GetReason()))
		}
		if a := ev.GetWorkflowExecutionFailedEventAttributes(); a != nil {
			return "the workflow failed: " + a.GetFailure().GetMessage()
		}
		if ev.GetWorkflowExecutionTimedOutEventAttributes() != nil {
			return "the workflow timed out"
		}
	}
	return "the server gave no reason"
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
