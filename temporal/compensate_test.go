package temporal_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/temporal"
)

// A compensation activity whose worker is lost after it reversed the
// refund is tried again: the ledger replays the reversal under its undo:
// key, and the refund is reversed once.
func TestCompensationActivityRetried(t *testing.T) {
	sb := newSandbox(t, scenario(t, "refund_reversed"))
	sb.register()
	attempts := 0
	sb.override(temporal.CompensateActivity, func(ctx context.Context, in temporal.CompensateInput) (loop.CompensationOutcome, error) {
		out, err := sb.acts.Compensate(ctx, in)
		attempts++
		if attempts == 1 {
			return loop.CompensationOutcome{}, errors.New("the worker was lost after the reversal")
		}
		return out, err
	})
	res := sb.run(t, sb.input("run-compensation-retried", ""))
	if res.Status != loop.FinalAnswer {
		t.Fatalf("status %s: %s", res.Status, res.Detail)
	}
	if n, _ := sb.book.ReversalCount(context.Background(), ""); n != 1 || attempts != 2 {
		t.Fatalf("%d reversals in %d attempts; want 1 in 2", n, attempts)
	}
	var comp []loop.CompensationOutcome
	for _, ev := range res.Events {
		comp = append(comp, ev.Compensations...)
	}
	if len(comp) != 1 || comp[0].State != loop.UndoSucceeded || comp[0].Outcome == nil || !comp[0].Outcome.Replayed {
		t.Fatalf("compensations %+v; want one undone, replayed from the ledger", comp)
	}
	if res.Writes == nil || res.Writes.Outcome != loop.WritesUndone {
		t.Errorf("writes = %+v; want undone", res.Writes)
	}
}

// A workflow canceled while its all-or-nothing batch runs still undoes
// the refund the batch made: the compensation runs on a context the
// cancellation does not reach, and the run stops canceled, saying so.
func TestCompensationAfterCancel(t *testing.T) {
	sb := newSandbox(t, scenario(t, "refund_reversed"))
	sb.register()
	sb.override(temporal.ToolActivity, func(ctx context.Context, in temporal.CallInput) (executor.Outcome, error) {
		if in.Call.ID == "call_v1" {
			// The caller gives up while the voucher is being issued.
			sb.env.CancelWorkflow()
		}
		return sb.acts.ExecuteCall(ctx, in)
	})
	res := sb.runToEnd(t, sb.input("run-compensation-canceled", ""))
	if res.Status != loop.Canceled || !strings.Contains(res.Detail, "undone: refund_order call_r1 by reverse_refund") {
		t.Fatalf("status %s (%s); want canceled, the refund undone", res.Status, res.Detail)
	}
	if n, _ := sb.book.ReversalCount(context.Background(), ""); n != 1 {
		t.Fatalf("%d reversals after the cancellation, want 1", n)
	}
}
