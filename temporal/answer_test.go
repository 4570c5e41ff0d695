package temporal_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	sdktemporal "go.temporal.io/sdk/temporal"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/temporal"
)

// Each reason the workflow refuses an answer (its update's validator)
// reaches a client as the *loop.AnswerError the in-process check makes:
// through the test environment, and through the SDK's failure encoding,
// as it crosses a real server.
func TestAnswerRefusedByReason(t *testing.T) {
	sb := newSandbox(t, scenario(t, "confirmation_required"))
	sb.register()
	type refusal struct {
		name   string
		answer loop.Confirmation
		want   error
		says   string
		upd    *updateResult
	}
	cases := []*refusal{
		{name: "no one", answer: loop.Confirmation{CallID: "call_r1", Approved: true}, want: loop.ErrNoAnswerer, says: "must say who decided"},
		{name: "long note", answer: loop.Confirmation{CallID: "call_r1", By: "ops", Note: strings.Repeat("x", loop.MaxNoteBytes+1)}, want: loop.ErrNoteTooLong, says: "16385 bytes"},
		{name: "unknown call", answer: loop.Confirmation{CallID: "call_zz", By: "ops"}, want: loop.ErrUnknownCall, says: "pending: call_r1 (refund_order)"},
		{name: "answered call", answer: loop.Confirmation{CallID: "call_r1", By: "ops-2"}, want: loop.ErrAlreadyAnswered, says: "already approved by ops-1"},
		{name: "not paused", answer: loop.Confirmation{CallID: "call_q1", By: "ops-2"}, want: loop.ErrNotPaused, says: "is not waiting for confirmation"},
	}
	// One update a callback while the run waits (a workflow task that
	// validates many at once can trip the test environment's deadlock
	// detector on a loaded machine); the approval and the answers after
	// it in one, before the run goes on to its end.
	for i, c := range cases[:3] {
		sb.env.RegisterDelayedCallback(func() { c.upd = sb.update("u-"+c.name, c.answer) }, time.Minute+time.Duration(i)*time.Second)
	}
	sb.env.RegisterDelayedCallback(func() {
		if ok := sb.update("u-approve", loop.Confirmation{CallID: "call_r1", Approved: true, By: "ops-1"}); ok.rejected != nil {
			t.Errorf("approval refused: %v", ok.rejected)
		}
		for _, c := range cases[3:] {
			c.upd = sb.update("u-"+c.name, c.answer)
		}
	}, 2*time.Minute)
	out := sb.run(t, sb.input("run-refusals", "sandbox"))
	if out.Status != loop.FinalAnswer {
		t.Fatalf("status %s", out.Status)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.upd == nil || c.upd.accepted || c.upd.rejected == nil {
				t.Fatalf("update %+v, want it rejected", c.upd)
			}
			// As a client of a real server gets it: encoded as a failure
			// by the worker, decoded by the client.
			fc := sdktemporal.GetDefaultFailureConverter()
			wire := fc.FailureToError(fc.ErrorToFailure(c.upd.rejected))
			for via, rejected := range map[string]error{"test environment": c.upd.rejected, "wire": wire} {
				err := temporal.AnswerRefusal(rejected)
				var ae *loop.AnswerError
				if !errors.Is(err, c.want) || !errors.As(err, &ae) || ae.RunID != "run-refusals" || ae.CallID != c.answer.CallID || !strings.Contains(err.Error(), c.says) {
					t.Errorf("%s: %v, want an *AnswerError with %v saying %q", via, err, c.want, c.says)
				}
			}
		})
	}
}

// An answer that comes while the workflow closes is refused as
// loop.ErrNotPaused.
func TestAnswerWhileClosingIsNotPaused(t *testing.T) {
	sb := newSandbox(t, scenario(t, "confirmation_required"))
	sb.register()
	in := sb.input("run-closing", "sandbox")
	in.ConfirmationTimeout = time.Minute
	var upd *updateResult
	sb.env.RegisterDelayedCallback(func() {
		upd = sb.update("run-closing", loop.Confirmation{CallID: sb.status(t).Pending[0].CallID, Approved: true, By: "ops"})
	}, time.Minute)
	sb.env.ExecuteWorkflow(temporal.WorkflowName, in)
	if upd == nil || upd.rejected == nil {
		t.Fatalf("the answer: %+v; want it refused", upd)
	}
	if err := temporal.AnswerRefusal(upd.rejected); !errors.Is(err, loop.ErrNotPaused) || !strings.Contains(err.Error(), "confirmation timeout passed") {
		t.Errorf("refused with %v, want loop.ErrNotPaused saying why", err)
	}
}

// Errors that are no refusal of an answer pass AnswerRefusal unchanged.
func TestAnswerRefusalLeavesOtherErrors(t *testing.T) {
	for _, err := range []error{
		errors.New("connection refused"),
		sdktemporal.NewApplicationError("boom", "Other"),
		sdktemporal.NewApplicationError("no details", temporal.AnswerErrorType),
	} {
		if got := temporal.AnswerRefusal(err); got != err {
			t.Errorf("AnswerRefusal(%v) = %v, want it unchanged", err, got)
		}
	}
}
