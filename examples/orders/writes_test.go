package orders_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// plans returns the plans of a run's batches, in order.
func plans(res *loop.Result) []*executor.Plan {
	var out []*executor.Plan
	for _, ev := range res.Events {
		if ev.Kind == loop.StagePlanned && ev.Plan != nil {
			out = append(out, ev.Plan)
		}
	}
	return out
}

// outcome returns the logged outcome of callID.
func outcome(t *testing.T, res *loop.Result, callID string) executor.Outcome {
	t.Helper()
	for _, ev := range res.Events {
		if ev.Kind != loop.StageFinished {
			continue
		}
		for _, o := range ev.Outcomes {
			if o.Result.CallID == callID {
				return o
			}
		}
	}
	t.Fatalf("no outcome for call %s in the log", callID)
	return executor.Outcome{}
}

// refundOf decodes a refund result.
func refundOf(t *testing.T, r llm.ToolResult) orders.Refund {
	t.Helper()
	var rf orders.Refund
	if err := json.Unmarshal(r.Content, &rf); err != nil {
		t.Fatalf("result of %s is not a refund: %s (%v)", r.CallID, r.Content, err)
	}
	return rf
}

func TestParallelPlan(t *testing.T) {
	res, book := run(t, "parallel")
	ps := plans(res)
	if len(ps) != 1 {
		t.Fatalf("%d plans, want one for the single batch", len(ps))
	}
	p := ps[0]
	rows := map[string]executor.Row{}
	for _, r := range p.Table {
		rows[r.CallID] = r
	}
	q1, t1, r1, q2 := rows["call_q1"], rows["call_t1"], rows["call_r1"], rows["call_q2"]
	if len(p.Table) != 4 || q1.CallID == "" || t1.CallID == "" || r1.CallID == "" || q2.CallID == "" {
		t.Fatalf("table %+v, want rows for call_q1, call_t1, call_r1 and call_q2", p.Table)
	}
	// The two independent reads share a stage and run in parallel.
	if q1.Stage != t1.Stage || q1.Mode != executor.Parallel || t1.Mode != executor.Parallel {
		t.Errorf("reads: call_q1 stage %d %s, call_t1 stage %d %s; want one parallel stage", q1.Stage, q1.Mode, t1.Stage, t1.Mode)
	}
	if q1.Effect != tool.ReadOnly || t1.Effect != tool.ReadOnly || r1.Effect != tool.Write {
		t.Errorf("effects %s %s %s", q1.Effect, t1.Effect, r1.Effect)
	}
	// The write is alone in its stage, after the reads (the model's order).
	if r1.Stage <= q1.Stage || r1.Mode != executor.Serial || len(p.Stages[r1.Stage]) != 1 {
		t.Errorf("write: stage %d %s with %d call(s), want alone after the reads", r1.Stage, r1.Mode, len(p.Stages[r1.Stage]))
	}
	if len(r1.Resources) != 1 || r1.Resources[0] != "order:A103" {
		t.Errorf("write resources %v", r1.Resources)
	}
	// The read of the written order waits for the write, and says why.
	if q2.Stage <= r1.Stage || !strings.Contains(q2.Reason, "call_r1") {
		t.Errorf("call_q2: stage %d (write at %d), reason %q; want a later stage naming call_r1", q2.Stage, r1.Stage, q2.Reason)
	}
	if len(p.Stages) != 3 {
		t.Errorf("stages %v, want three", p.Stages)
	}
	// Results come back in the model's order, whatever order they ran in.
	at := callIndex(res.Messages, "call_q1")
	for k, id := range []string{"call_q1", "call_t1", "call_r1", "call_q2"} {
		r, i := result(t, res.Messages, id)
		if i != at+1+k {
			t.Errorf("result of %s at message %d, want %d", id, i, at+1+k)
		}
		if r.Status != llm.StatusOK {
			t.Errorf("%s: status %s: %s", id, r.Status, r.Content)
		}
	}
	// The read after the write sees it.
	q, _ := result(t, res.Messages, "call_q2")
	var o orders.Order
	if err := json.Unmarshal(q.Content, &o); err != nil || o.Status != orders.StatusRefunded {
		t.Errorf("call_q2 saw %s (%v), want the refunded order", q.Content, err)
	}
	if book.Refunds("A103") != 1 {
		t.Errorf("A103 refunded %d times, want once", book.Refunds("A103"))
	}
}

func TestRefundRetry(t *testing.T) {
	res, book := run(t, "refund_retry")
	o := outcome(t, res, "call_r1")
	if !o.Reconciled || o.Replayed || o.OutcomeUnknown || o.IdempotencyKey != "refund:A103" {
		t.Errorf("outcome %+v, want reconciled under key refund:A103", o)
	}
	r, _ := result(t, res.Messages, "call_r1")
	if r.Status != llm.StatusOK {
		t.Fatalf("call_r1: status %s %s, want ok", r.Status, r.Content)
	}
	// The model is told what the look-up found: the refund record.
	if rf := refundOf(t, r); rf.RefundID != "R-A103-1" || rf.AmountCents != 6400 || rf.Method != orders.ToPayment {
		t.Errorf("refund %+v", rf)
	}
	if book.Refunds("A103") != 1 || book.TotalRefunds() != 1 {
		t.Errorf("refunds A103=%d total=%d, want exactly one", book.Refunds("A103"), book.TotalRefunds())
	}
	if !strings.Contains(res.Answer(), "R-A103-1") {
		t.Errorf("answer %q", res.Answer())
	}
}

func TestRefundTwice(t *testing.T) {
	res, book := run(t, "refund_twice")
	first, second := outcome(t, res, "call_r1"), outcome(t, res, "call_r2")
	if first.Replayed || first.Reconciled || first.IdempotencyKey != "refund:A103" {
		t.Errorf("first refund %+v, want executed under key refund:A103", first)
	}
	if !second.Replayed || second.IdempotencyKey != "refund:A103" {
		t.Errorf("second refund %+v, want replayed from the ledger", second)
	}
	r1, _ := result(t, res.Messages, "call_r1")
	r2, _ := result(t, res.Messages, "call_r2")
	if r2.Status != llm.StatusOK || r2.Name != orders.RefundOrder || string(r2.Content) != string(r1.Content) {
		t.Errorf("replayed result %+v, want the first result %s under call_r2", r2, r1.Content)
	}
	if book.Refunds("A103") != 1 || book.TotalRefunds() != 1 {
		t.Errorf("refunds A103=%d total=%d, want exactly one", book.Refunds("A103"), book.TotalRefunds())
	}
}

func TestRefundUnknown(t *testing.T) {
	res, book := run(t, "refund_unknown")
	o := outcome(t, res, "call_v1")
	if !o.OutcomeUnknown || !o.TimedOut || o.Reconciled || o.IdempotencyKey != "run-refund_unknown/call_v1" {
		t.Errorf("outcome %+v, want unknown under the default key run-refund_unknown/call_v1", o)
	}
	r, _ := result(t, res.Messages, "call_v1")
	if r.Status == llm.StatusOK {
		t.Errorf("call_v1 reported ok: %s", r.Content)
	}
	if !strings.Contains(res.Detail, "call_v1") {
		t.Errorf("detail %q does not name the call", res.Detail)
	}
	// The voucher was applied; only the answer was lost. This is the
	// count the run could not know, and why it must not carry on.
	if book.Refunds("A101") != 1 || book.TotalRefunds() != 1 {
		t.Errorf("refunds A101=%d total=%d, want the one applied voucher", book.Refunds("A101"), book.TotalRefunds())
	}
	if v, ok, _ := book.RefundOf(context.Background(), "A101", orders.AsVoucher); !ok || v.RefundID != "V-A101-1" {
		t.Errorf("voucher %+v %v", v, ok)
	}
}

// TestLedgerSharedAcrossRuns gives two scenarios one in-memory ledger: the
// refund of A103 that parallel did is replayed in refund_twice's run (a new
// run, a new book), so that book is never refunded at all.
func TestLedgerSharedAcrossRuns(t *testing.T) {
	mem := store.NewMemory()
	for _, name := range []string{"parallel", "refund_twice"} {
		s, _ := orders.Lookup(name)
		s.Ledger = mem
		res, book, err := s.Run(context.Background())
		if err != nil || res.Status != loop.FinalAnswer {
			t.Fatalf("%s: %v %v", name, err, res)
		}
		if name == "parallel" {
			if book.Refunds("A103") != 1 {
				t.Fatalf("parallel: %d refunds", book.Refunds("A103"))
			}
			continue
		}
		if book.Refunds("A103") != 0 {
			t.Errorf("refund_twice after parallel: %d refunds, want 0 (both replayed)", book.Refunds("A103"))
		}
		for _, id := range []string{"call_r1", "call_r2"} {
			if o := outcome(t, res, id); !o.Replayed {
				t.Errorf("%s not replayed: %+v", id, o)
			}
		}
	}
	rec, ok, err := mem.Lookup(context.Background(), "refund:A103")
	if err != nil || !ok || rec.State != store.Done || rec.RunID != "run-parallel" || rec.CallID != "call_r1" {
		t.Errorf("ledger record %+v %v %v", rec, ok, err)
	}
}

// TestDefaultLedgerIsTheRunsOwn: a run that brings no ledger gets a fresh
// one, as it gets a fresh book, so the second run of refund_twice refunds
// its own book rather than replaying the first run's refund, and
// refund_twice's replay of its own call still works.
func TestDefaultLedgerIsTheRunsOwn(t *testing.T) {
	for i := range 2 {
		res, book := run(t, "refund_twice")
		if res.Status != loop.FinalAnswer || book.Refunds("A103") != 1 {
			t.Fatalf("run %d: status %s, %d refunds of A103; want final_answer and 1", i+1, res.Status, book.Refunds("A103"))
		}
		if o := outcome(t, res, "call_r1"); o.Replayed {
			t.Errorf("run %d: call_r1 replayed an earlier run's refund: %+v", i+1, o)
		}
		if o := outcome(t, res, "call_r2"); !o.Replayed {
			t.Errorf("run %d: call_r2 not replayed from the run's own ledger: %+v", i+1, o)
		}
	}
}

func TestRefundLookup(t *testing.T) {
	book := orders.NewBook()
	reg, _ := orders.Tools(book)
	refund, _ := reg.Lookup(orders.RefundOrder)
	args := json.RawMessage(`{"order_id":"A103","reason":"broken"}`)
	if k := refund.IdempotencyKey(args); k != "refund:A103" {
		t.Errorf("refund_order key %q, want refund:A103", k)
	}
	if !refund.CanReconcile() {
		t.Fatal("refund_order has no status look-up")
	}
	ctx := context.Background()
	if _, applied, err := refund.Reconcile(ctx, args); applied || err != nil {
		t.Errorf("look-up before any refund: applied=%v err=%v", applied, err)
	}
	out, err := refund.Call(ctx, args)
	if err != nil {
		t.Fatal(err)
	}
	got, applied, err := refund.Reconcile(ctx, args)
	if !applied || err != nil || string(got) != string(out) {
		t.Errorf("look-up after the refund: %s applied=%v err=%v; want the refund %s", got, applied, err, out)
	}
	// A voucher is another action: refund_order's look-up does not take
	// it for its own refund.
	book2 := orders.NewBook()
	if _, err := book2.Voucher(context.Background(), "A103", ""); err != nil {
		t.Fatal(err)
	}
	reg2, _ := orders.Tools(book2)
	refund2, _ := reg2.Lookup(orders.RefundOrder)
	if _, applied, _ := refund2.Reconcile(ctx, args); applied {
		t.Error("refund_order's look-up took a voucher for a refund")
	}
	voucher, _ := reg.Lookup(orders.IssueVoucher)
	if voucher.CanReconcile() || voucher.IdempotencyKey(args) != "" {
		t.Error("issue_voucher must have no status look-up and no business key")
	}
}

// TestHangAfterWrite checks that a hanging write applies first and then
// honours its context, so that no goroutine outlives the call.
func TestHangAfterWrite(t *testing.T) {
	for _, c := range []struct {
		name, order string
		count       func(*orders.Book) int
	}{
		{orders.RefundOrder, "A103", func(b *orders.Book) int { return b.Refunds("A103") }},
		{orders.IssueVoucher, "A101", func(b *orders.Book) int { return b.Refunds("A101") }},
		{orders.CancelOrder, "A102", func(b *orders.Book) int { return b.Cancels("A102") }},
	} {
		book := orders.NewBook()
		book.HangAfterWrite(c.order)
		reg, _ := orders.Tools(book)
		tl, _ := reg.Lookup(c.name)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		start := time.Now()
		_, err := tl.Call(ctx, json.RawMessage(`{"order_id":"`+c.order+`"}`))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
			t.Errorf("%s: %v after %v; want the context's error, quickly", c.name, err, time.Since(start))
		}
		if n := c.count(book); n != 1 {
			t.Errorf("%s: applied %d times, want once (before hanging)", c.name, n)
		}
		// Another order's writes answer at once.
		refund, _ := reg.Lookup(orders.RefundOrder)
		if _, err := refund.Call(context.Background(), json.RawMessage(`{"order_id":"A100"}`)); err != nil {
			t.Errorf("%s: refund of A100: %v", c.name, err)
		}
	}
}

func TestBookVoucher(t *testing.T) {
	b := orders.NewBook()
	v, err := b.Voucher(context.Background(), "A101", "store credit")
	if err != nil || v.Method != orders.AsVoucher || v.RefundID != "V-A101-1" || v.AmountCents != 2400 {
		t.Fatalf("voucher %+v %v", v, err)
	}
	if _, err := b.Refund(context.Background(), "A101", ""); tool.KindOf(err) != llm.KindInvalidArguments {
		t.Errorf("refund after a voucher: %v, want invalid_arguments", err)
	}
	if _, ok, _ := b.RefundOf(context.Background(), "A101", orders.ToPayment); ok {
		t.Error("RefundOf(ToPayment) found the voucher")
	}
	if got, ok, _ := b.RefundOf(context.Background(), "A101", orders.AsVoucher); !ok || got != v {
		t.Errorf("RefundOf(AsVoucher) = %+v %v", got, ok)
	}
	if b.Refunds("A101") != 1 || b.TotalRefunds() != 1 {
		t.Errorf("refunds %d/%d", b.Refunds("A101"), b.TotalRefunds())
	}
}
