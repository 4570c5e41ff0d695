package otel_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
	traceotel "github.com/toolloop/toolloop/trace/otel"
)

type orderIn struct {
	OrderID string `json:"order_id"`
}

type refundOut struct {
	RefundID string `json:"refund_id"`
}

// compensatedRun runs refund A and voucher B (which fails) as one
// all-or-nothing batch under the compensate policy, with obs attached;
// the reversal of the refund fails when reverseFails is set.
func compensatedRun(t *testing.T, obs loop.Observer, reverseFails bool) *loop.Result {
	t.Helper()
	refund := tool.MustNew(tool.Spec[orderIn]{
		Name: "refund_order", Effect: tool.Write,
		IdempotencyKey: func(in orderIn) string { return "refund:" + in.OrderID },
		Compensation:   &tool.Compensation{Tool: "reverse_refund", Args: map[string]string{"refund_id": "result.refund_id"}},
	}, func(_ context.Context, in orderIn) (refundOut, error) {
		return refundOut{RefundID: "R-" + in.OrderID}, nil
	})
	voucher := tool.MustNew(tool.Spec[orderIn]{Name: "issue_voucher", Effect: tool.Write},
		func(context.Context, orderIn) (string, error) {
			return "", &tool.Error{Kind: llm.KindInvalidArguments, Msg: "not shipped"}
		})
	reverse := tool.MustNew(tool.Spec[refundOut]{Name: "reverse_refund", Effect: tool.Write},
		func(_ context.Context, in refundOut) (string, error) {
			if reverseFails {
				return "", &tool.Error{Kind: llm.KindInvalidArguments, Msg: "the bank refuses"}
			}
			return "reversed " + in.RefundID, nil
		})
	reg, err := tool.NewRegistry(refund, voucher, reverse)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := loop.Run(context.Background(), loop.Config{
		Model: llmtest.New(llmtest.Calls(
			llmtest.Call("c1", "refund_order", map[string]string{"order_id": "A"}),
			llmtest.Call("c2", "issue_voucher", map[string]string{"order_id": "B"})), llmtest.Text("neither")),
		ModelName: "scripted-1", Tools: reg, Observer: obs, Compensation: loop.CompensateWrites, AtomicBatches: true,
		Executor: executor.New(&executor.Options{Ledger: store.NewMemory()}),
		NewRunID: func() string { return "run-comp" },
	}, []llm.Message{llm.UserMessage("both or neither")})
	return res
}

// TestCompensationSpans: the compensation is a child of the run span, with
// a child per compensating call that names the original call, the
// compensating tool, the ledger key and the state; the run span has the
// writes' outcome.
func TestCompensationSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	res := compensatedRun(t, traceotel.NewObserver(tp, nil), false)
	if res.Status != loop.FinalAnswer {
		t.Fatalf("status %s: %s", res.Status, res.Detail)
	}
	spans := rec.Ended()
	root := one(t, spans, "invoke_agent")
	comp := one(t, spans, "compensate")
	if comp.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Errorf("the compensate span's parent is not the run span")
	}
	requireAttrs(t, comp, map[attribute.Key]any{
		"gen_ai.operation.name":        "compensate",
		"toolloop.compensation.reason": "group turn-1 failed: call c2 (issue_voucher) failed with invalid_arguments",
		"toolloop.compensation.writes": 1,
		"toolloop.compensation.undone": 1,
		"toolloop.compensation.failed": 0,
		"toolloop.compensation.left":   0,
	})
	undo := one(t, spans, "execute_tool reverse_refund")
	if undo.Parent().SpanID() != comp.SpanContext().SpanID() {
		t.Errorf("the compensating call's parent is not the compensate span")
	}
	requireAttrs(t, undo, map[attribute.Key]any{
		"toolloop.compensation.original.call_id": "c1",
		"toolloop.compensation.original.tool":    "refund_order",
		"toolloop.compensation.original.key":     "refund:A",
		"toolloop.compensation.tool":             "reverse_refund",
		"toolloop.compensation.state":            "undone",
		"toolloop.idempotency.key":               "undo:refund:A",
		"gen_ai.tool.call.id":                    "undo_c1",
		"gen_ai.tool.name":                       "reverse_refund",
		"toolloop.tool.status":                   "ok",
	})
	if undo.Status().Code == codes.Error || comp.Status().Code == codes.Error {
		t.Errorf("a compensation that undid its write is marked an error")
	}
	requireAttrs(t, root, map[attribute.Key]any{
		"toolloop.writes.outcome":  "undone",
		"toolloop.writes.undone":   []string{"c1"},
		"toolloop.writes.not_done": []string{"c2"},
		"toolloop.writes.summary":  nil,
	})
}

// TestCompensationFailedSpans: a compensating call that fails is an error
// span with its reason, as are the compensation and the run, which
// stopped compensation_failed with writes partial.
func TestCompensationFailedSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	res := compensatedRun(t, traceotel.NewObserver(tp, nil), true)
	if res.Status != loop.CompensationFailed {
		t.Fatalf("status %s: %s", res.Status, res.Detail)
	}
	spans := rec.Ended()
	undo := one(t, spans, "execute_tool reverse_refund")
	requireAttrs(t, undo, map[attribute.Key]any{"toolloop.compensation.state": "failed", "error.type": "failed",
		"toolloop.tool.error_kind": "invalid_arguments"})
	if undo.Status().Code != codes.Error || !strings.Contains(undo.Status().Description, "the bank refuses") {
		t.Errorf("the failed compensating call's status: %+v", undo.Status())
	}
	comp := one(t, spans, "compensate")
	if comp.Status().Code != codes.Error {
		t.Errorf("the compensate span's status: %+v", comp.Status())
	}
	requireAttrs(t, one(t, spans, "invoke_agent"), map[attribute.Key]any{
		"toolloop.status":         "compensation_failed",
		"error.type":              "compensation_failed",
		"toolloop.writes.outcome": "partial",
		"toolloop.writes.left":    []string{"c1"},
	})
}
