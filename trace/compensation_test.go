package trace_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/trace"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

type orderIn struct {
	OrderID string `json:"order_id"`
}

type refundOut struct {
	RefundID string `json:"refund_id"`
}

type reverseIn struct {
	RefundID string `json:"refund_id"`
	Reason   string `json:"reason"`
}

// payDesk returns refund_order (compensated by reverse_refund, through
// the declarative mapping) and issue_voucher, both in group, and
// reverse_refund, which fails when reverseFails is set. issue_voucher
// fails for order B.
func payDesk(t *testing.T, group string, reverseFails bool) *tool.Registry {
	t.Helper()
	refund := tool.MustNew(tool.Spec[orderIn]{
		Name: "refund_order", Effect: tool.Write, AtomicGroup: group,
		IdempotencyKey: func(in orderIn) string { return "refund:" + in.OrderID },
		Compensation: &tool.Compensation{Tool: "reverse_refund",
			Args: map[string]string{"refund_id": "result.refund_id", "reason": `="voucher failed"`}},
	}, func(_ context.Context, in orderIn) (refundOut, error) {
		return refundOut{RefundID: "R-" + in.OrderID}, nil
	})
	voucher := tool.MustNew(tool.Spec[orderIn]{Name: "issue_voucher", Effect: tool.Write, AtomicGroup: group,
		IdempotencyKey: func(in orderIn) string { return "voucher:" + in.OrderID }},
		func(_ context.Context, in orderIn) (string, error) {
			if in.OrderID == "B" {
				return "", &tool.Error{Kind: llm.KindInvalidArguments, Msg: "order B has not shipped"}
			}
			return "V-" + in.OrderID, nil
		})
	reverse := tool.MustNew(tool.Spec[reverseIn]{Name: "reverse_refund", Effect: tool.Write},
		func(_ context.Context, in reverseIn) (string, error) {
			if reverseFails {
				return "", &tool.Error{Kind: llm.KindInvalidArguments, Msg: "the bank refuses to reverse " + in.RefundID}
			}
			return "reversed " + in.RefundID, nil
		})
	reg, err := tool.NewRegistry(refund, voucher, reverse)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// compensationRun runs refund A then voucher B in one batch, with the
// given policy and atomic batches, and returns its log with times made
// fixed, so that its rendering can be compared with a golden file.
func compensationRun(t *testing.T, policy loop.CompensationPolicy, reverseFails bool, turns ...llmtest.Turn) *loop.Result {
	t.Helper()
	turns = append([]llmtest.Turn{llmtest.Calls(
		llmtest.Call("c1", "refund_order", map[string]string{"order_id": "A"}),
		llmtest.Call("c2", "issue_voucher", map[string]string{"order_id": "B"}))}, turns...)
	res, _ := loop.Run(context.Background(), loop.Config{
		Model: llmtest.New(turns...), Tools: payDesk(t, "", reverseFails),
		Compensation: policy, AtomicBatches: true,
		Executor: executor.New(&executor.Options{Ledger: store.NewMemory()}),
		NewRunID: func() string { return "run-comp" },
	}, []llm.Message{llm.UserMessage("refund A and a voucher for B, both or neither")})
	fixTimes(res.Events)
	return res
}

// fixTimes gives events times 1 ms apart, model responses 0.5 ms of
// latency and every tool call, compensating ones too, 0.2 ms from 0.1 ms
// after the event before.
func fixTimes(events []loop.Event) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i := range events {
		ev := &events[i]
		prev := at
		at = at.Add(time.Millisecond)
		ev.At = at
		if ev.Latency > 0 {
			ev.Latency = 500 * time.Microsecond
		}
		for j := range ev.Outcomes {
			ev.Outcomes[j].Started, ev.Outcomes[j].Duration = prev.Add(100*time.Microsecond), 200*time.Microsecond
		}
		for _, c := range ev.Compensations {
			if c.Outcome != nil {
				c.Outcome.Started, c.Outcome.Duration = prev.Add(100*time.Microsecond), 200*time.Microsecond
			}
		}
	}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("trace show differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestShowCompensated: an all-or-nothing batch whose voucher fails has its
// refund undone, and the run goes on. trace show gives the compensation
// (why, the compensating call, its ledger key, undone), the writes report
// (undone) and the stop line's writes outcome.
func TestShowCompensated(t *testing.T) {
	res := compensationRun(t, loop.CompensateWrites, false, llmtest.Text("Neither was done."))
	if res.Status != loop.FinalAnswer || res.Writes == nil || res.Writes.Outcome != loop.WritesUndone {
		t.Fatalf("status %s, writes %+v", res.Status, res.Writes)
	}
	// What the log file holds, read back.
	events, err := trace.ReadLog(bytes.NewReader(writeLog(t, res.Events, nil)))
	if err != nil {
		t.Fatal(err)
	}
	out := show(t, events, nil)
	golden(t, "show_compensated.txt", out)
	for _, want := range []string{
		"compensations\n  seq 8 after step 1 (during the run): group turn-1 failed: call c2 (issue_voucher) failed with invalid_arguments",
		"c1       refund_order  reverse_refund  undo_c1    undo:refund:A",
		"writes undone (policy compensate, atomic batches)\n  undone: undone refund_order c1; not done issue_voucher c2 (failed)",
		"compensate ",
		"execute_tool reverse_refund",
		`writes="undone: undone refund_order c1; not done issue_voucher c2 (failed)" detail=`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestShowCompensationDue: a log that ends after the decider asked for a
// compensation and before it was recorded (the process died while
// undoing) says so, naming the writes still to undo.
func TestShowCompensationDue(t *testing.T) {
	res := compensationRun(t, loop.CompensateWrites, false, llmtest.Text("Neither was done."))
	cut := len(res.Events)
	for i, ev := range res.Events {
		if ev.Kind == loop.Compensated {
			cut = i
		}
	}
	out := show(t, res.Events[:cut], nil)
	for _, want := range []string{
		"compensation due, not recorded (a resume performs it): group turn-1 failed: call c2 (issue_voucher) failed with invalid_arguments\n" +
			"  call_id=c1 tool=refund_order key=refund:A undo=reverse_refund\n",
		"not stopped: the log ends at seq 7",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(show(t, res.Events, nil), "compensation due") {
		t.Errorf("the whole log has a compensation due")
	}
}

// TestShowCompensationFailed: the compensating call fails; trace show
// names the failure and its reason, the write is left for a person, and
// the run stops with compensation_failed and writes partial.
func TestShowCompensationFailed(t *testing.T) {
	res := compensationRun(t, loop.CompensateWrites, true)
	if res.Status != loop.CompensationFailed {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	out := show(t, res.Events, nil)
	golden(t, "show_compensation_failed.txt", out)
	for _, want := range []string{
		"failed  kind=invalid_arguments",
		"the bank refuses to reverse R-A",
		"writes partial (policy compensate, atomic batches)",
		"left for a person refund_order c1 (left)",
		"stopped status=compensation_failed",
		`writes="partial: not done issue_voucher c2 (failed); left for a person refund_order c1 (left)" detail=`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestShowWritesLeft: the policy leaves the writes; there is no
// compensation, and the writes report says partial, naming the refund
// done and the voucher not done.
func TestShowWritesLeft(t *testing.T) {
	res := compensationRun(t, loop.LeaveWrites, false, llmtest.Text("The refund went through; the voucher did not."))
	out := show(t, res.Events, nil)
	if strings.Contains(out, "\ncompensations\n") {
		t.Errorf("a compensation section without a compensation:\n%s", out)
	}
	for _, want := range []string{
		"writes partial (policy leave, atomic batches)\n  partial: done refund_order c1; not done issue_voucher c2 (failed)",
		`kept by the run's policy (leave)`,
		"stopped status=final_answer",
		`writes="partial: done refund_order c1; not done issue_voucher c2 (failed)" detail=`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestShowNoWrites: a run without writes shows neither section, and its
// stop line says nothing of writes.
func TestShowNoWrites(t *testing.T) {
	out := show(t, scenario(t, "normal").Events, nil)
	if strings.Contains(out, "writes") || strings.Contains(out, "compensations") {
		t.Errorf("a run without writes:\n%s", out)
	}
}
