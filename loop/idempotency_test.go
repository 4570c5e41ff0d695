package loop_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// refunds is a write tool over a tiny "bank" that counts what it applied.
type refunds struct {
	mu      sync.Mutex
	applied map[string]int
	hang    atomic.Bool // apply, then overrun the timeout
	calls   atomic.Int32
}

type refundIn struct {
	OrderID string `json:"order_id"`
}

func (r *refunds) tool(t *testing.T, withLookup bool) *tool.Tool {
	spec := tool.Spec[refundIn]{
		Name: "refund_order", Effect: tool.Write, Timeout: 30 * time.Millisecond,
		IdempotencyKey: func(in refundIn) string { return "refund:" + in.OrderID },
	}
	if withLookup {
		spec.Lookup = func(_ context.Context, in refundIn) (any, bool, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.applied[in.OrderID] > 0 {
				return map[string]any{"order_id": in.OrderID, "refunded": true}, true, nil
			}
			return nil, false, nil
		}
	}
	return tool.MustNew(spec, func(ctx context.Context, in refundIn) (map[string]any, error) {
		r.calls.Add(1)
		r.mu.Lock()
		r.applied[in.OrderID]++
		r.mu.Unlock()
		if r.hang.Load() {
			<-ctx.Done() // the refund is applied; the answer never arrives in time
			return nil, ctx.Err()
		}
		return map[string]any{"order_id": in.OrderID, "refunded": true}, nil
	})
}

func refundRun(t *testing.T, r *refunds, withLookup bool, ledger store.Ledger, requestID string, turns ...llmtest.Turn) *loop.Result {
	t.Helper()
	reg, err := tool.NewRegistry(r.tool(t, withLookup))
	if err != nil {
		t.Fatal(err)
	}
	res, _ := loop.Run(context.Background(), loop.Config{
		Model: llmtest.New(turns...), Tools: reg, RequestID: requestID,
		Executor: executor.New(&executor.Options{Ledger: ledger}),
	}, user("refund A1"))
	return res
}

func outcomeFor(t *testing.T, res *loop.Result, callID string) executor.Outcome {
	t.Helper()
	for _, ev := range res.Events {
		for _, o := range ev.Outcomes {
			if o.Result.CallID == callID {
				return o
			}
		}
	}
	t.Fatalf("no outcome for %s", callID)
	return executor.Outcome{}
}

func TestWriteReplayedWithinARun(t *testing.T) {
	r := &refunds{applied: map[string]int{}}
	res := refundRun(t, r, true, store.NewMemory(), "",
		llmtest.Calls(call("c1", "refund_order", `{"order_id":"A1"}`)),
		llmtest.Calls(call("c2", "refund_order", `{"order_id":"A1"}`)),
		llmtest.Text("refunded once"))
	mustStatus(t, res, res.Err(), loop.FinalAnswer)
	if r.calls.Load() != 1 || r.applied["A1"] != 1 {
		t.Fatalf("handler ran %d times, %d refunds", r.calls.Load(), r.applied["A1"])
	}
	if o := outcomeFor(t, res, "c2"); !o.Replayed || o.Result.Status != llm.StatusOK || o.IdempotencyKey != "refund:A1" {
		t.Fatalf("c2 outcome = %+v", o)
	}
}

func TestThirdRequestOfTheSameWriteIsASpin(t *testing.T) {
	r := &refunds{applied: map[string]int{}}
	res := refundRun(t, r, true, store.NewMemory(), "",
		llmtest.Calls(call("c1", "refund_order", `{"order_id":"A1"}`)),
		llmtest.Calls(call("c2", "refund_order", `{"order_id":"A1"}`)),
		llmtest.Calls(call("c3", "refund_order", `{"order_id":"A1"}`)))
	mustStatus(t, res, res.Err(), loop.SpinDetected)
	if !strings.Contains(res.Detail, "refund:A1") || r.applied["A1"] != 1 {
		t.Fatalf("detail %q, %d refunds", res.Detail, r.applied["A1"])
	}
}

func TestTimedOutWriteReconciledByLookup(t *testing.T) {
	r := &refunds{applied: map[string]int{}}
	r.hang.Store(true)
	res := refundRun(t, r, true, store.NewMemory(), "",
		llmtest.Calls(call("c1", "refund_order", `{"order_id":"A1"}`)),
		llmtest.Text("refunded"))
	mustStatus(t, res, res.Err(), loop.FinalAnswer)
	if o := outcomeFor(t, res, "c1"); !o.Reconciled || o.Result.Status != llm.StatusOK {
		t.Fatalf("c1 outcome = %+v", o)
	}
	if r.applied["A1"] != 1 {
		t.Fatalf("%d refunds", r.applied["A1"])
	}
}

func TestTimedOutWriteWithoutLookupIsUnknown(t *testing.T) {
	r := &refunds{applied: map[string]int{}}
	r.hang.Store(true)
	ledger := store.NewMemory()
	res := refundRun(t, r, false, ledger, "",
		llmtest.Calls(call("c1", "refund_order", `{"order_id":"A1"}`)),
		llmtest.Text("never reached"))
	mustStatus(t, res, res.Err(), loop.ToolOutcomeUnknown)
	rec, ok, _ := ledger.Lookup(context.Background(), "refund:A1")
	if !ok || rec.State != store.InFlight {
		t.Fatalf("ledger record = %+v, %v; an unknown write must stay in flight", rec, ok)
	}
}

func TestRequestIDCarriesWritesAcrossRuns(t *testing.T) {
	// No business key: keys come from the request ID, so a retried request
	// (a new run, new call IDs) finds its write already done.
	var applied atomic.Int32
	write := tool.MustNew(tool.Spec[refundIn]{Name: "refund_order", Effect: tool.Write},
		func(_ context.Context, in refundIn) (string, error) { applied.Add(1); return "ok", nil })
	reg, _ := tool.NewRegistry(write)
	ledger := store.NewMemory()
	exec := executor.New(&executor.Options{Ledger: ledger})
	for i, id := range []string{"first", "second"} {
		model := llmtest.New(llmtest.Calls(call("c-"+id, "refund_order", `{"order_id":"A1"}`)), llmtest.Text("done"))
		res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: reg, Executor: exec, RequestID: "req-42"}, user("refund"))
		mustStatus(t, res, err, loop.FinalAnswer)
		if o := outcomeFor(t, res, "c-"+id); o.Replayed != (i == 1) {
			t.Fatalf("run %d: replayed = %v", i+1, o.Replayed)
		}
	}
	if applied.Load() != 1 {
		t.Fatalf("applied %d times across two runs of one request", applied.Load())
	}
	// Without a request ID, each run's key is its own: two runs, two writes.
	for _, id := range []string{"third", "fourth"} {
		model := llmtest.New(llmtest.Calls(call("c-"+id, "refund_order", `{"order_id":"A1"}`)), llmtest.Text("done"))
		res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: reg, Executor: exec}, user("refund"))
		mustStatus(t, res, err, loop.FinalAnswer)
	}
	if applied.Load() != 3 {
		t.Fatalf("applied %d times", applied.Load())
	}
}

func TestIdempotencyConflictIsNotExecuted(t *testing.T) {
	type amountIn struct {
		OrderID string `json:"order_id"`
		Amount  int    `json:"amount"`
	}
	var applied atomic.Int32
	write := tool.MustNew(tool.Spec[amountIn]{Name: "refund_order", Effect: tool.Write,
		IdempotencyKey: func(in amountIn) string { return "refund:" + in.OrderID }},
		func(_ context.Context, in amountIn) (string, error) { applied.Add(1); return "ok", nil })
	reg, _ := tool.NewRegistry(write)
	model := llmtest.New(
		llmtest.Calls(call("c1", "refund_order", `{"order_id":"A1","amount":10}`)),
		llmtest.Calls(call("c2", "refund_order", `{"order_id":"A1","amount":99}`)),
		llmtest.Text("the second refund was refused"))
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: reg}, user("refund"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if r := resultFor(t, res.Messages, "c2"); r.ErrorKind != llm.KindIdempotencyConflict || applied.Load() != 1 {
		t.Fatalf("c2 = %+v, applied %d", r, applied.Load())
	}
}

// TestPersistedFormats pins the formats that outlive a process: the
// ledger keeps write keys and argument fingerprints across runs, processes
// and versions, so a change here would make a retried write run twice.
func TestPersistedFormats(t *testing.T) {
	for _, k := range []struct {
		key  uint64
		want string
	}{{0, "0000000000000000"}, {1, "0000000000000001"}, {0xdeadbeef, "00000000deadbeef"},
		{1 << 63, "8000000000000000"}, {^uint64(0), "ffffffffffffffff"}, {0x0123456789abcdef, "0123456789abcdef"}} {
		if got := loop.ArgsHash(k.key); got != k.want {
			t.Errorf("ArgsHash(%#x) = %q, want %q", k.key, got, k.want)
		}
	}
	type in struct {
		OrderID string `json:"order_id"`
	}
	plain := tool.MustNew(tool.Spec[in]{Name: "refund", Effect: tool.Write},
		func(context.Context, in) (string, error) { return "", nil })
	keyed := tool.MustNew(tool.Spec[in]{Name: "refund", Effect: tool.Write,
		IdempotencyKey: func(x in) string { return "refund:" + x.OrderID }},
		func(context.Context, in) (string, error) { return "", nil })
	c := llm.ToolCall{ID: "call_7", Name: "refund", Arguments: []byte(`{"order_id":"A1"}`)}
	for _, tc := range []struct {
		t                *tool.Tool
		runID, requestID string
		want             string
	}{
		{plain, "run1", "", "run1/call_7"},
		{plain, "run1", "req-42", "req-42/refund/00000000075bcd15"},
		{keyed, "run1", "req-42", "refund:A1"},
		{keyed, "run1", "", "refund:A1"},
	} {
		if got := loop.WriteKey(tc.t, c, 123456789, tc.runID, tc.requestID); got != tc.want {
			t.Errorf("WriteKey(run %q, request %q) = %q, want %q", tc.runID, tc.requestID, got, tc.want)
		}
	}
}
