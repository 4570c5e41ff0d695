package main

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
)

// refusingClient is a server that refuses every update with err, as a
// worker's validator does, and knows no workflow.
type refusingClient struct {
	client.Client
	err error
}

func (c *refusingClient) UpdateWorkflow(context.Context, client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	return nil, c.err
}

func (c *refusingClient) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, serviceerror.NewNotFound("workflow not found")
}

// The backend's Decide gives the commands and the console the workflow's
// refusal as the *loop.AnswerError it was, after the SDK's failure
// encoding: its reason is found with errors.Is, as on the other backends.
func TestDecideRefusedByReason(t *testing.T) {
	fc := sdktemporal.GetDefaultFailureConverter()
	for _, reason := range []error{loop.ErrNoAnswerer, loop.ErrNoteTooLong, loop.ErrNotPaused, loop.ErrUnknownCall, loop.ErrAlreadyAnswered} {
		// The workflow's check refuses; the client gets it decoded.
		refused := temporal.RefuseAnswer(&loop.AnswerError{Err: reason, RunID: "r1", CallID: "c1", Status: "running", Answer: &loop.Confirmation{By: "bob"}})
		wire := fc.FailureToError(fc.ErrorToFailure(refused))
		b := &backend{cn: &conn{addr: "127.0.0.1:7233", namespace: "default"}, cl: &refusingClient{err: wire}}
		err := b.Decide(context.Background(), "r1", loop.Confirmation{CallID: "c1", By: "ann"})
		var ae *loop.AnswerError
		if !errors.Is(err, reason) || !errors.As(err, &ae) || ae.RunID != "r1" || ae.CallID != "c1" {
			t.Errorf("%v: Decide returned %v, want an *AnswerError with that reason", reason, err)
		}
	}
	b := &backend{cn: &conn{addr: "127.0.0.1:7233", namespace: "default"}, cl: &refusingClient{err: serviceerror.NewNotFound("workflow not found")}}
	if err := b.Decide(context.Background(), "nope", loop.Confirmation{CallID: "c1", By: "ann"}); !errors.Is(err, store.ErrUnknownRun) {
		t.Errorf("a run the server does not have: %v, want store.ErrUnknownRun", err)
	}
}
