package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

type orderIn struct {
	OrderID string `json:"order_id"`
}

type refundOut struct {
	RefundID string `json:"refund_id"`
}

// compensationRun records in e's store a run that refunds A and fails the
// voucher for B in one all-or-nothing batch, under the compensate policy;
// the refund's reversal fails when reverseFails is set.
func (e *env) compensationRun(id string, reverseFails bool) *loop.Result {
	e.t.Helper()
	refund := tool.MustNew(tool.Spec[orderIn]{
		Name: "refund_order", Effect: tool.Write,
		IdempotencyKey: func(in orderIn) string { return "refund:" + in.OrderID },
		Compensation:   &tool.Compensation{Tool: "reverse_refund", Args: map[string]string{"refund_id": "result.refund_id"}},
	}, func(_ context.Context, in orderIn) (refundOut, error) {
		return refundOut{RefundID: "R-" + in.OrderID}, nil
	})
	voucher := tool.MustNew(tool.Spec[orderIn]{Name: "issue_voucher", Effect: tool.Write},
		func(context.Context, orderIn) (string, error) {
			return "", &tool.Error{Kind: llm.KindInvalidArguments, Msg: "order B has not shipped"}
		})
	reverse := tool.MustNew(tool.Spec[refundOut]{Name: "reverse_refund", Effect: tool.Write},
		func(_ context.Context, in refundOut) (string, error) {
			if reverseFails {
				return "", &tool.Error{Kind: llm.KindInvalidArguments, Msg: "the bank refuses to reverse " + in.RefundID}
			}
			return "reversed " + in.RefundID, nil
		})
	reg, err := tool.NewRegistry(refund, voucher, reverse)
	if err != nil {
		e.t.Fatal(err)
	}
	res, _ := loop.Run(context.Background(), loop.Config{
		Model: llmtest.New(llmtest.Calls(
			llmtest.Call("c1", "refund_order", map[string]string{"order_id": "A"}),
			llmtest.Call("c2", "issue_voucher", map[string]string{"order_id": "B"})), llmtest.Text("Neither was done.")),
		Tools: reg, Compensation: loop.CompensateWrites, AtomicBatches: true, Store: e.mem,
		Executor: executor.New(&executor.Options{Ledger: e.mem}),
		NewRunID: func() string { return id },
	}, []llm.Message{llm.UserMessage("refund A and a voucher for B, both or neither")})
	return res
}

// TestRunPageCompensation: a run's page shows its writes report (undone,
// naming each write) and its compensation: why, the compensating call,
// its ledger key and that it undid the write; the stop line and the API's
// summary say the writes' outcome.
func TestRunPageCompensation(t *testing.T) {
	e := newEnv(t, nil)
	if res := e.compensationRun("run-comp", false); res.Status != loop.FinalAnswer {
		t.Fatalf("status %s: %s", res.Status, res.Detail)
	}
	_, page := e.do(req{path: "/runs/run-comp", token: aliceToken})
	for _, want := range []string{
		`data-testid="writes" data-outcome="undone"`,
		`<h2>Writes: undone</h2>`,
		`undone: undone refund_order c1; not done issue_voucher c2 (failed)`,
		`(policy compensate, atomic batches)`,
		`data-testid="write" data-call-id="c1" data-state="undone"`,
		`data-testid="write" data-call-id="c2" data-state="failed"`,
		`data-testid="compensations"`,
		`group turn-1 failed: call c2 (issue_voucher) failed with invalid_arguments`,
		`(during the run)`,
		`data-testid="undo" data-call-id="c1" data-state="undone"`,
		`<code>undo_c1</code>`,
		`<code>undo:refund:A</code>`,
		`writes=&#34;undone: undone refund_order c1; not done issue_voucher c2 (failed)&#34; detail=`,
		`execute_tool reverse_refund`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page lacks %s", want)
		}
	}
	var run struct {
		Summary console.Summary `json:"summary"`
	}
	e.getJSON("/api/runs/run-comp", &run)
	if w := run.Summary.Writes; w == nil || w.Outcome != loop.WritesUndone || len(w.Writes) != 2 {
		t.Errorf("the API's summary: writes %+v", w)
	}
}

// TestRunPageCompensationFailed: a compensation that failed shows its
// reason on the page, the write left for a person, and the run
// compensation_failed with writes partial.
func TestRunPageCompensationFailed(t *testing.T) {
	e := newEnv(t, nil)
	if res := e.compensationRun("run-comp-failed", true); res.Status != loop.CompensationFailed {
		t.Fatalf("status %s: %s", res.Status, res.Detail)
	}
	_, page := e.do(req{path: "/runs/run-comp-failed", token: aliceToken})
	for _, want := range []string{
		`data-testid="run-status" data-status="compensation_failed"`,
		`data-testid="writes" data-outcome="partial"`,
		`data-testid="write" data-call-id="c1" data-state="left"`,
		`data-testid="undo" data-call-id="c1" data-state="failed"`,
		`the bank refuses to reverse R-A`,
		`left for a person refund_order c1 (left)`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page lacks %s", want)
		}
	}
	// A run without writes has neither section.
	_, page = e.do(req{path: "/runs/" + e.scenario("normal"), token: aliceToken})
	if strings.Contains(page, `data-testid="writes"`) || strings.Contains(page, `data-testid="compensations"`) {
		t.Errorf("a run without writes shows a writes or compensations section")
	}
}
