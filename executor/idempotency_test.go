package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
)

type refundArgs struct {
	OrderID string `json:"order_id"`
}

type refundResult struct {
	RefundID string `json:"refund_id"`
}

// Refund handler behaviours.
const (
	refundOK          = "ok"           // refunds and returns
	refundFails       = "fails"        // returns not_found, refunds nothing
	refundApplyHang   = "apply-hang"   // refunds, then waits for its context to end
	refundHang        = "hang"         // refunds nothing, waits for its context to end
	refundApplyIgnore = "apply-ignore" // refunds, then ignores its context until released
)

// shop is the world a refund tool changes: how many times each order was
// refunded, how many times the handler ran, and what the handler does.
type shop struct {
	mu        sync.Mutex
	refunds   map[string]int
	behaviour string
	lookupErr error

	execs   atomic.Int32
	lookups atomic.Int32

	gate    chan struct{} // releases refundApplyIgnore handlers
	gateOne sync.Once
	running sync.WaitGroup
}

func newShop(t *testing.T, behaviour string) *shop {
	s := &shop{refunds: map[string]int{}, behaviour: behaviour, gate: make(chan struct{})}
	t.Cleanup(s.release)
	return s
}

// release lets stuck handlers return and waits for them.
func (s *shop) release() {
	s.gateOne.Do(func() { close(s.gate) })
	s.running.Wait()
}

func (s *shop) count(order string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refunds[order]
}

func (s *shop) setBehaviour(b string) {
	s.mu.Lock()
	s.behaviour = b
	s.mu.Unlock()
}

func (s *shop) refund(ctx context.Context, in refundArgs) (refundResult, error) {
	s.running.Add(1)
	defer s.running.Done()
	s.execs.Add(1)
	s.mu.Lock()
	b := s.behaviour
	if b != refundFails && b != refundHang {
		s.refunds[in.OrderID]++
	}
	s.mu.Unlock()
	switch b {
	case refundFails:
		return refundResult{}, tool.NotFound("no such order " + in.OrderID)
	case refundApplyHang, refundHang:
		<-ctx.Done()
		return refundResult{}, ctx.Err()
	case refundApplyIgnore:
		<-s.gate
	}
	return refundResult{RefundID: "R-" + in.OrderID}, nil
}

func (s *shop) lookup(ctx context.Context, in refundArgs) (any, bool, error) {
	s.lookups.Add(1)
	if s.lookupErr != nil {
		switch s.lookupErr.Error() {
		case "panic":
			panic("look-up exploded")
		case "hang": // until the executor gives up on it
			<-ctx.Done()
		}
		return nil, false, s.lookupErr
	}
	if s.count(in.OrderID) == 0 {
		return nil, false, nil
	}
	return refundResult{RefundID: "R-" + in.OrderID}, true, nil
}

// tool returns the shop's refund tool, with or without its status look-up.
func (s *shop) tool(t *testing.T, timeout time.Duration, withLookup bool) *tool.Tool {
	t.Helper()
	spec := tool.Spec[refundArgs]{
		Name: "refund", Effect: tool.Write, Timeout: timeout,
		IdempotencyKey: func(in refundArgs) string { return "refund:" + in.OrderID },
	}
	if withLookup {
		spec.Lookup = s.lookup
	}
	tl, err := tool.New(spec, s.refund)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func refundCall(id string, tl *tool.Tool, order string) executor.Call {
	a := json.RawMessage(`{"order_id":"` + order + `"}`)
	return executor.Call{
		Call: llm.ToolCall{ID: id, Name: tl.Name(), Arguments: a}, Tool: tl,
		IdempotencyKey: tl.IdempotencyKey(a), ArgsHash: "hash-" + order, RunID: "run1",
	}
}

// ledgers are the stores every idempotency test runs against.
var ledgers = []struct {
	name string
	open func(t *testing.T) store.Ledger
}{
	{"memory", func(*testing.T) store.Ledger { return store.NewMemory() }},
	{"sqlite", func(t *testing.T) store.Ledger {
		// NORMAL: a commit survives a process crash, which is all these
		// tests need, without an fsync per commit.
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "ledger.db"), &sqlite.Options{Synchronous: "NORMAL"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
}

// paths are the ways a driver executes a write: Run, which the in-process
// runner (through RunStage) and the Temporal activities both use.
var paths = []struct {
	name string
	run  func(t *testing.T, ex *executor.Executor, ctx context.Context, c executor.Call) executor.Outcome
}{
	{"Run", func(_ *testing.T, ex *executor.Executor, ctx context.Context, c executor.Call) executor.Outcome {
		return ex.Run(ctx, c)
	}},
}

// forEach runs f for every ledger and path.
func forEach(t *testing.T, f func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome)) {
	for _, lg := range ledgers {
		for _, p := range paths {
			t.Run(lg.name+"/"+p.name, func(t *testing.T) {
				l := lg.open(t)
				f(t, l, func(ex *executor.Executor, c executor.Call) executor.Outcome {
					return p.run(t, ex, context.Background(), c)
				})
			})
		}
	}
}

func record(t *testing.T, l store.Ledger, key string) (store.Record, bool) {
	t.Helper()
	rec, ok, err := l.Lookup(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return rec, ok
}

// storedResult decodes a done record's result.
func storedResult(t *testing.T, rec store.Record) llm.ToolResult {
	t.Helper()
	var res llm.ToolResult
	if err := json.Unmarshal(rec.Result, &res); err != nil {
		t.Fatalf("stored result %s: %v", rec.Result, err)
	}
	return res
}

// claimInFlight puts an in-flight record in the ledger, as a crashed or
// timed-out attempt leaves it.
func claimInFlight(t *testing.T, l store.Ledger, c executor.Call, at time.Time) {
	t.Helper()
	_, claimed, err := l.Claim(context.Background(), store.Record{Key: c.IdempotencyKey, ArgsHash: c.ArgsHash,
		RunID: "earlier-run", CallID: "c0", Tool: c.Call.Name, CreatedAt: at})
	if err != nil || !claimed {
		t.Fatalf("claim: claimed=%v err=%v", claimed, err)
	}
}

const refundOutput = `{"refund_id":"R-A1"}`

func TestIdempotentWriteExecutesAndReplays(t *testing.T) {
	forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
		s := newShop(t, refundOK)
		tl := s.tool(t, 0, true)
		ex := executor.New(&executor.Options{Ledger: l})

		c1 := refundCall("c1", tl, "A1")
		if c1.IdempotencyKey != "refund:A1" {
			t.Fatalf("key = %q", c1.IdempotencyKey)
		}
		o := run(ex, c1)
		if o.Result.Status != llm.StatusOK || string(o.Result.Content) != refundOutput || o.Replayed || o.Reconciled ||
			o.IdempotencyKey != "refund:A1" || o.Attempts != 1 {
			t.Fatalf("first call = %+v", o)
		}
		rec, ok := record(t, l, "refund:A1")
		if !ok || rec.State != store.Done || rec.ArgsHash != "hash-A1" || rec.CallID != "c1" || rec.RunID != "run1" || rec.Tool != "refund" {
			t.Fatalf("record = %+v ok=%v", rec, ok)
		}
		if res := storedResult(t, rec); res.Status != llm.StatusOK || string(res.Content) != refundOutput || res.CallID != "c1" {
			t.Errorf("stored result = %+v", res)
		}

		// The same write asked for again, under another call ID.
		for _, id := range []string{"c2", "c3"} {
			o = run(ex, refundCall(id, tl, "A1"))
			if !o.Replayed || o.Result.Status != llm.StatusOK || o.Result.CallID != id || o.Result.Name != "refund" ||
				string(o.Result.Content) != refundOutput || o.IdempotencyKey != "refund:A1" || o.StopRun {
				t.Errorf("replay as %s = %+v", id, o)
			}
		}
		if n := s.execs.Load(); n != 1 {
			t.Errorf("handler ran %d times, want 1", n)
		}
		if n := s.count("A1"); n != 1 {
			t.Errorf("order refunded %d times", n)
		}
		// Another executor on the same ledger (a restarted process)
		// replays too.
		o = run(executor.New(&executor.Options{Ledger: l}), refundCall("c4", tl, "A1"))
		if !o.Replayed || s.execs.Load() != 1 {
			t.Errorf("replay from a new executor = %+v, execs %d", o, s.execs.Load())
		}
	})
}

func TestIdempotentWriteConflict(t *testing.T) {
	forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
		s := newShop(t, refundOK)
		tl := s.tool(t, 0, true)
		ex := executor.New(&executor.Options{Ledger: l})
		if o := run(ex, refundCall("c1", tl, "A1")); o.Result.Status != llm.StatusOK {
			t.Fatalf("first call = %+v", o)
		}
		c2 := refundCall("c2", tl, "A1")
		c2.ArgsHash = "hash-other"
		o := run(ex, c2)
		if o.Result.Status != llm.StatusError || o.Result.ErrorKind != llm.KindIdempotencyConflict ||
			o.Replayed || o.StopRun || o.Result.CallID != "c2" || o.IdempotencyKey != "refund:A1" {
			t.Errorf("conflicting call = %+v", o)
		}
		if msg, _ := errorContent(t, o.Result); !strings.Contains(msg, "c1") || !strings.Contains(msg, "not executed") {
			t.Errorf("conflict message %q", msg)
		}
		if n := s.execs.Load(); n != 1 {
			t.Errorf("handler ran %d times, want 1", n)
		}
		if rec, _ := record(t, l, "refund:A1"); rec.State != store.Done || rec.ArgsHash != "hash-A1" {
			t.Errorf("record changed: %+v", rec)
		}
		// Also while the first write is still in flight.
		claimInFlight(t, l, refundCall("x", tl, "B2"), time.Now())
		c3 := refundCall("c3", tl, "B2")
		c3.ArgsHash = "hash-other"
		if o := run(ex, c3); o.Result.ErrorKind != llm.KindIdempotencyConflict || s.execs.Load() != 1 {
			t.Errorf("conflict with an in-flight key = %+v", o)
		}
	})
}

func TestIdempotentWriteFailureReleasesKey(t *testing.T) {
	forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
		s := newShop(t, refundFails)
		tl := s.tool(t, 0, true)
		ex := executor.New(&executor.Options{Ledger: l})
		o := run(ex, refundCall("c1", tl, "A1"))
		if o.Result.Status != llm.StatusError || o.Result.ErrorKind != llm.KindNotFound || o.StopRun || o.OutcomeUnknown ||
			o.IdempotencyKey != "refund:A1" {
			t.Fatalf("failed call = %+v", o)
		}
		if rec, ok := record(t, l, "refund:A1"); ok {
			t.Fatalf("key kept after a failure: %+v", rec)
		}
		s.setBehaviour(refundOK)
		o = run(ex, refundCall("c2", tl, "A1"))
		if o.Result.Status != llm.StatusOK || o.Replayed || string(o.Result.Content) != refundOutput {
			t.Errorf("retry = %+v", o)
		}
		if n := s.execs.Load(); n != 2 {
			t.Errorf("handler ran %d times, want 2", n)
		}
		if rec, _ := record(t, l, "refund:A1"); rec.State != store.Done || rec.CallID != "c2" {
			t.Errorf("record = %+v", rec)
		}
	})
}

// A write that times out after its side effect is settled by the tool's
// status look-up: the call succeeded, late.
func TestIdempotentWriteTimeoutReconciled(t *testing.T) {
	forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
		s := newShop(t, refundApplyHang)
		tl := s.tool(t, 100*time.Millisecond, true)
		ex := executor.New(&executor.Options{Ledger: l})
		o := run(ex, refundCall("c1", tl, "A1"))
		if !o.Reconciled || o.Result.Status != llm.StatusOK || string(o.Result.Content) != refundOutput || o.Result.CallID != "c1" ||
			o.TimedOut || o.StopRun || o.OutcomeUnknown {
			t.Fatalf("outcome = %+v", o)
		}
		rec, _ := record(t, l, "refund:A1")
		if rec.State != store.Done || storedResult(t, rec).Status != llm.StatusOK {
			t.Fatalf("record = %+v", rec)
		}
		// Asked again, it is replayed.
		s.setBehaviour(refundOK)
		if o := run(ex, refundCall("c2", tl, "A1")); !o.Replayed || s.execs.Load() != 1 || s.count("A1") != 1 {
			t.Errorf("after reconciling: %+v, execs %d", o, s.execs.Load())
		}
	})
}

// Without a status look-up, a timed-out write's outcome is unknown and the
// run stops; the key stays in flight.
func TestIdempotentWriteTimeoutUnknown(t *testing.T) {
	forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
		s := newShop(t, refundApplyHang)
		tl := s.tool(t, 100*time.Millisecond, false)
		ex := executor.New(&executor.Options{Ledger: l})
		o := run(ex, refundCall("c1", tl, "A1"))
		if !o.OutcomeUnknown || !o.StopRun || !o.TimedOut || o.Reconciled || o.Result.Status == llm.StatusOK ||
			o.IdempotencyKey != "refund:A1" {
			t.Fatalf("outcome = %+v", o)
		}
		if rec, _ := record(t, l, "refund:A1"); rec.State != store.InFlight {
			t.Errorf("record = %+v", rec)
		}
		// A later attempt cannot know either, and does not execute.
		s.setBehaviour(refundOK)
		o = run(ex, refundCall("c2", tl, "A1"))
		if !o.OutcomeUnknown || !o.StopRun || o.Result.Status != llm.StatusSkipped || o.Result.ErrorKind != llm.KindOutcomeUnknown {
			t.Errorf("second attempt = %+v", o)
		}
		if s.execs.Load() != 1 {
			t.Errorf("handler ran %d times", s.execs.Load())
		}
	})
}

// A timed-out write that the look-up finds not applied keeps its key in
// flight. The record's age counts from the claim, so by the time the
// attempt has timed out it is already older than the tool's timeout: the
// next attempt looks again, takes the key over and executes, once. (A
// record younger than the timeout is refused: TestIdempotentWriteInFlightRecord.)
func TestIdempotentWriteTimeoutNotApplied(t *testing.T) {
	forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
		s := newShop(t, refundHang)
		tl := s.tool(t, 100*time.Millisecond, true)
		ex := executor.New(&executor.Options{Ledger: l})
		o := run(ex, refundCall("c1", tl, "A1"))
		// Not settled: the look-up ran but found nothing, so the timeout
		// stands and Reconciled stays false.
		if o.Reconciled || !o.TimedOut || !o.StopRun || o.OutcomeUnknown || o.Result.ErrorKind != llm.KindTimeout ||
			s.lookups.Load() != 1 {
			t.Fatalf("outcome = %+v", o)
		}
		rec, _ := record(t, l, "refund:A1")
		if rec.State != store.InFlight || rec.CallID != "c1" {
			t.Fatalf("record = %+v", rec)
		}
		s.setBehaviour(refundOK)
		// The timed-out handler returns as soon as it sees its context end,
		// but on its own goroutine: until it has, the key is refused as in
		// progress (its write could still land), and each refusal looks up
		// once more.
		lookups := int32(2)
		o = run(ex, refundCall("c2", tl, "A1"))
		for i := 0; o.Result.ErrorKind == llm.KindWriteInProgress && i < 200; i++ {
			time.Sleep(5 * time.Millisecond)
			o = run(ex, refundCall("c2", tl, "A1"))
			lookups++
		}
		if o.Result.Status != llm.StatusOK || o.Reconciled || o.Replayed || s.execs.Load() != 2 || s.count("A1") != 1 ||
			s.lookups.Load() != lookups {
			t.Errorf("next attempt = %+v, execs %d, refunds %d, lookups %d (want %d)", o, s.execs.Load(), s.count("A1"), s.lookups.Load(), lookups)
		}
		if rec, _ := record(t, l, "refund:A1"); rec.State != store.Done || rec.CallID != "c2" {
			t.Errorf("record = %+v", rec)
		}
	})
}

// A write that ignores its context and times out after its side effect:
// Run returns at the timeout, the look-up settles the outcome and the
// ledger records it.
func TestIdempotentWriteIgnoresContext(t *testing.T) {
	for _, lg := range ledgers {
		t.Run(lg.name+"/Run", func(t *testing.T) {
			l := lg.open(t)
			s := newShop(t, refundApplyIgnore)
			tl := s.tool(t, 50*time.Millisecond, true)
			o := within(t, time.Minute, func() executor.Outcome {
				return executor.New(&executor.Options{Ledger: l}).Run(context.Background(), refundCall("c1", tl, "A1"))
			})
			if !o.Reconciled || o.Result.Status != llm.StatusOK || o.StopRun {
				t.Errorf("outcome = %+v", o)
			}
			if rec, _ := record(t, l, "refund:A1"); rec.State != store.Done {
				t.Errorf("record = %+v", rec)
			}
			s.release()
		})
	}
}

// An in-flight record left by an earlier attempt (a crash) is settled by
// the look-up, which is asked before the record's age matters.
func TestIdempotentWriteInFlightRecord(t *testing.T) {
	old, young := time.Now().Add(-time.Hour), time.Now()
	for _, tc := range []struct {
		name       string
		claimedAt  time.Time
		applied    bool
		withLookup bool
		lookupErr  error
		// expectations
		kind       llm.ErrorKind
		status     llm.ResultStatus
		reconciled bool
		unknown    bool
		execs      int32
		state      store.WriteState // "" = no record
	}{
		{"stale, applied", old, true, true, nil, "", llm.StatusOK, true, false, 0, store.Done},
		{"stale, not applied", old, false, true, nil, "", llm.StatusOK, false, false, 1, store.Done},
		{"young, applied", young, true, true, nil, "", llm.StatusOK, true, false, 0, store.Done},
		{"young, not applied", young, false, true, nil, llm.KindWriteInProgress, llm.StatusError, false, false, 0, store.InFlight},
		{"no look-up", old, true, false, nil, llm.KindOutcomeUnknown, llm.StatusSkipped, false, true, 0, store.InFlight},
		{"look-up fails", old, false, true, errors.New("shop down"), llm.KindOutcomeUnknown, llm.StatusSkipped, false, true, 0, store.InFlight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
				s := newShop(t, refundOK)
				s.lookupErr = tc.lookupErr
				if tc.applied {
					s.refunds["A1"] = 1
				}
				tl := s.tool(t, time.Minute, tc.withLookup)
				c := refundCall("c1", tl, "A1")
				claimInFlight(t, l, c, tc.claimedAt)
				o := run(executor.New(&executor.Options{Ledger: l}), c)
				if o.Result.Status != tc.status || o.Result.ErrorKind != tc.kind || o.Reconciled != tc.reconciled ||
					o.OutcomeUnknown != tc.unknown || o.StopRun != tc.unknown || o.Result.CallID != "c1" || o.IdempotencyKey != "refund:A1" {
					t.Errorf("outcome = %+v", o)
				}
				if tc.status == llm.StatusOK && string(o.Result.Content) != refundOutput {
					t.Errorf("content = %s", o.Result.Content)
				}
				if n := s.execs.Load(); n != tc.execs {
					t.Errorf("handler ran %d times, want %d", n, tc.execs)
				}
				if n := s.count("A1"); n != 1 && tc.status == llm.StatusOK {
					t.Errorf("order refunded %d times, want 1", n)
				}
				rec, ok := record(t, l, "refund:A1")
				if !ok || rec.State != tc.state {
					t.Errorf("record = %+v (ok=%v), want state %q", rec, ok, tc.state)
				}
				if tc.state == store.Done {
					if res := storedResult(t, rec); res.Status != llm.StatusOK {
						t.Errorf("stored result = %+v", res)
					}
				}
			})
		})
	}
}

// Finished keys older than LedgerRetention are pruned as the executor
// goes; in-flight ones are kept whatever their age.
func TestLedgerRetention(t *testing.T) {
	forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
		ctx := context.Background()
		now := time.Now()
		put := func(key string, at time.Time, done bool) {
			if _, _, err := l.Claim(ctx, store.Record{Key: key, ArgsHash: "h", CreatedAt: at}); err != nil {
				t.Fatal(err)
			}
			if done {
				if err := l.Finish(ctx, key, json.RawMessage(`{"status":"ok"}`), at); err != nil {
					t.Fatal(err)
				}
			}
		}
		put("old-done", now.Add(-2*time.Hour), true)
		put("recent-done", now.Add(-10*time.Minute), true)
		put("old-in-flight", now.Add(-3*time.Hour), false)

		s := newShop(t, refundOK)
		tl := s.tool(t, 0, true)
		ex := executor.New(&executor.Options{Ledger: l, LedgerRetention: time.Hour})
		if got := ex.Options().LedgerRetention; got != time.Hour {
			t.Fatalf("LedgerRetention = %v", got)
		}
		if o := run(ex, refundCall("c1", tl, "A1")); o.Result.Status != llm.StatusOK {
			t.Fatalf("outcome = %+v", o)
		}
		for key, want := range map[string]bool{"old-done": false, "recent-done": true, "old-in-flight": true, "refund:A1": true} {
			if _, ok := record(t, l, key); ok != want {
				t.Errorf("%s kept = %v, want %v", key, ok, want)
			}
		}
		// Pruning runs at most once per tenth of the retention period.
		put("old-done-2", now.Add(-2*time.Hour), true)
		if o := run(ex, refundCall("c2", tl, "B2")); o.Result.Status != llm.StatusOK {
			t.Fatalf("outcome = %+v", o)
		}
		if _, ok := record(t, l, "old-done-2"); !ok {
			t.Error("pruned again within a tenth of the retention period")
		}
		// A new executor (a restarted process) prunes on its first write.
		ex2 := executor.New(&executor.Options{Ledger: l, LedgerRetention: time.Hour})
		if o := run(ex2, refundCall("c3", tl, "C3")); o.Result.Status != llm.StatusOK {
			t.Fatalf("outcome = %+v", o)
		}
		if _, ok := record(t, l, "old-done-2"); ok {
			t.Error("old-done-2 not pruned by a new executor")
		}
		// Negative retention keeps everything.
		put("ancient", now.Add(-365*24*time.Hour), true)
		ex3 := executor.New(&executor.Options{Ledger: l, LedgerRetention: -1})
		if got := ex3.Options().LedgerRetention; got != 0 {
			t.Errorf("negative LedgerRetention became %v, want 0", got)
		}
		run(ex3, refundCall("c4", tl, "D4"))
		if _, ok := record(t, l, "ancient"); !ok {
			t.Error("pruned with a negative retention")
		}
	})
}

func TestLedgerDefaults(t *testing.T) {
	o := executor.New(nil).Options()
	if o.Ledger == nil || o.LedgerRetention != 7*24*time.Hour {
		t.Errorf("defaults: ledger %v, retention %v", o.Ledger, o.LedgerRetention)
	}
	// The default ledger guards writes too.
	s := newShop(t, refundOK)
	tl := s.tool(t, 0, true)
	ex := executor.New(nil)
	ex.Run(context.Background(), refundCall("c1", tl, "A1"))
	if o := ex.Run(context.Background(), refundCall("c2", tl, "A1")); !o.Replayed || s.execs.Load() != 1 {
		t.Errorf("second call with the default ledger = %+v", o)
	}
}

// Calls without a key, and reads with one, are not guarded.
func TestUnguardedCalls(t *testing.T) {
	forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
		s := newShop(t, refundOK)
		tl := s.tool(t, 0, true)
		ex := executor.New(&executor.Options{Ledger: l})
		for _, id := range []string{"c1", "c2"} {
			c := refundCall(id, tl, "A1")
			c.IdempotencyKey = ""
			if o := run(ex, c); o.Result.Status != llm.StatusOK || o.Replayed || o.IdempotencyKey != "" {
				t.Errorf("unkeyed write = %+v", o)
			}
		}
		if s.execs.Load() != 2 {
			t.Errorf("unkeyed write ran %d times, want 2", s.execs.Load())
		}
		read := mkTool(t, tool.Spec[args]{Name: "get"}, func(_ context.Context, in args) (any, error) { return in.N, nil })
		c := call("r1", read, 1)
		c.IdempotencyKey = "get:1"
		run(ex, c)
		run(ex, c)
		if _, ok := record(t, l, "get:1"); ok {
			t.Error("a read went through the ledger")
		}
	})
}

// failingLedger is a ledger that cannot be reached.
type failingLedger struct{ store.Ledger }

func (failingLedger) Claim(context.Context, store.Record) (store.Record, bool, error) {
	return store.Record{}, false, errors.New("disk on fire")
}

// Without the ledger a keyed write cannot be made safe: it does not run.
func TestLedgerUnavailable(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			s := newShop(t, refundOK)
			tl := s.tool(t, 0, true)
			ex := executor.New(&executor.Options{Ledger: failingLedger{store.NewMemory()}})
			o := p.run(t, ex, context.Background(), refundCall("c1", tl, "A1"))
			if o.Result.Status != llm.StatusError || o.Result.ErrorKind != llm.KindUnavailable || s.execs.Load() != 0 ||
				!strings.Contains(o.Err, "disk on fire") {
				t.Errorf("outcome = %+v, execs %d", o, s.execs.Load())
			}
		})
	}
}

// Concurrent attempts at one write: exactly one executes; the others are
// replayed or refused as in progress, never executed.
func TestIdempotentWriteConcurrentAttempts(t *testing.T) {
	for _, lg := range ledgers {
		t.Run(lg.name, func(t *testing.T) {
			l := lg.open(t)
			s := newShop(t, refundOK)
			tl := s.tool(t, time.Minute, true)
			ex := executor.New(&executor.Options{Ledger: l})
			var wg sync.WaitGroup
			outs := make([]executor.Outcome, 8)
			for i := range outs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					outs[i] = ex.Run(context.Background(), refundCall("c"+string(rune('0'+i)), tl, "A1"))
				}()
			}
			wg.Wait()
			if n := s.count("A1"); n != 1 {
				t.Errorf("refunded %d times", n)
			}
			for i, o := range outs {
				switch {
				case o.Result.Status == llm.StatusOK:
				case o.Result.ErrorKind == llm.KindWriteInProgress:
				default:
					t.Errorf("attempt %d = %+v", i, o)
				}
			}
		})
	}
}

// A canceled run does not start a keyed write, and leaves no record that
// would block a later attempt: neither when the run had ended before the
// write (the ledger is not touched), nor when it ends between the claim
// and the first attempt (the key is released).
func TestIdempotentWriteCanceledBefore(t *testing.T) {
	for _, when := range []string{"before the claim", "after the claim"} {
		t.Run(when, func(t *testing.T) {
			forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
				s := newShop(t, refundOK)
				tl := s.tool(t, 0, false) // no look-up: a key left in flight would block for good
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				ledger := l
				if when == "before the claim" {
					cancel()
				} else {
					ledger = cancelOnClaim{l, cancel}
				}
				ex := executor.New(&executor.Options{Ledger: ledger})
				check := func(o executor.Outcome, path string) {
					t.Helper()
					if o.Result.Status != llm.StatusSkipped || o.Result.ErrorKind != llm.KindCanceled || !o.StopRun ||
						o.OutcomeUnknown || o.Attempts != 0 || o.IdempotencyKey == "" || s.execs.Load() != 0 {
						t.Errorf("%s: outcome = %+v", path, o)
					}
				}
				check(ex.Run(ctx, refundCall("c1", tl, "A1")), "Run")
				if rec, ok := record(t, l, "refund:A1"); ok {
					t.Errorf("record left behind: %+v", rec)
				}
				// A later attempt in a live run executes.
				ex = executor.New(&executor.Options{Ledger: l})
				if o := run(ex, refundCall("c3", tl, "A1")); o.Result.Status != llm.StatusOK || s.execs.Load() != 1 {
					t.Errorf("later attempt = %+v", o)
				}
			})
		})
	}
}

// cancelOnClaim ends the run right after a successful claim.
type cancelOnClaim struct {
	store.Ledger
	cancel context.CancelFunc
}

func (l cancelOnClaim) Claim(ctx context.Context, rec store.Record) (store.Record, bool, error) {
	old, claimed, err := l.Ledger.Claim(ctx, rec)
	l.cancel()
	return old, claimed, err
}

// An attempt that finds the key in flight and the write applied, while
// the attempt that claimed the key records its result first, still
// reports the write as done (not as a ledger failure).
func TestIdempotentWriteReconcileRacesOwner(t *testing.T) {
	for _, lg := range ledgers {
		t.Run(lg.name, func(t *testing.T) {
			l := lg.open(t)
			s := newShop(t, refundApplyIgnore)
			lookup := func(ctx context.Context, in refundArgs) (any, bool, error) {
				// Let the owner finish and wait until it has recorded its
				// result, then answer.
				s.gateOne.Do(func() { close(s.gate) })
				for deadline := time.Now().Add(margin); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
					if rec, _, _ := l.Lookup(ctx, "refund:"+in.OrderID); rec.State == store.Done {
						break
					}
				}
				return s.lookup(ctx, in)
			}
			tl := tool.MustNew(tool.Spec[refundArgs]{Name: "refund", Effect: tool.Write, Timeout: time.Minute,
				IdempotencyKey: func(in refundArgs) string { return "refund:" + in.OrderID }, Lookup: lookup}, s.refund)
			ex := executor.New(&executor.Options{Ledger: l})
			owner := make(chan executor.Outcome, 1)
			go func() { owner <- ex.Run(context.Background(), refundCall("c1", tl, "A1")) }()
			for deadline := time.Now().Add(margin); s.count("A1") == 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the owner never refunded")
				}
			}
			o := ex.Run(context.Background(), refundCall("c2", tl, "A1"))
			if o.Result.Status != llm.StatusOK || !o.Reconciled || string(o.Result.Content) != refundOutput || o.StopRun {
				t.Errorf("reconciling attempt = %+v", o)
			}
			if o := <-owner; o.Result.Status != llm.StatusOK || o.Err != "" {
				t.Errorf("owner = %+v", o)
			}
			if s.execs.Load() != 1 || s.count("A1") != 1 {
				t.Errorf("execs %d, refunds %d", s.execs.Load(), s.count("A1"))
			}
		})
	}
}

// A status look-up that fails, panics or does not answer in time settles
// nothing: the outcome is unknown, the run stops, and the key stays in
// flight. Both after a timeout of this attempt and for a record left by
// an earlier one.
func TestIdempotentWriteLookupFails(t *testing.T) {
	for _, failure := range []string{"error", "panic", "hang"} {
		t.Run(failure, func(t *testing.T) {
			forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
				s := newShop(t, refundApplyHang)
				s.lookupErr = errors.New(failure)
				tl := s.tool(t, 50*time.Millisecond, true)
				ex := executor.New(&executor.Options{Ledger: l})
				o := run(ex, refundCall("c1", tl, "A1"))
				if !o.OutcomeUnknown || !o.StopRun || o.Reconciled || o.Result.Status == llm.StatusOK || !strings.Contains(o.Err, "look-up") {
					t.Errorf("after a timeout: %+v", o)
				}
				claimInFlight(t, l, refundCall("c0", tl, "B2"), time.Now().Add(-time.Hour))
				o = run(ex, refundCall("c2", tl, "B2"))
				if !o.OutcomeUnknown || !o.StopRun || o.Result.ErrorKind != llm.KindOutcomeUnknown || s.execs.Load() != 1 {
					t.Errorf("in-flight record: %+v", o)
				}
				for _, key := range []string{"refund:A1", "refund:B2"} {
					if rec, _ := record(t, l, key); rec.State != store.InFlight {
						t.Errorf("%s: record = %+v", key, rec)
					}
				}
			})
		})
	}
}

// A done record whose result cannot be read is reported, not replayed as
// garbage, and nothing is executed.
func TestIdempotentWriteUnreadableStoredResult(t *testing.T) {
	forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
		s := newShop(t, refundOK)
		tl := s.tool(t, 0, true)
		c := refundCall("c1", tl, "A1")
		claimInFlight(t, l, c, time.Now())
		if err := l.Finish(context.Background(), c.IdempotencyKey, json.RawMessage(`"not a result"`), time.Now()); err != nil {
			t.Fatal(err)
		}
		o := run(executor.New(&executor.Options{Ledger: l}), c)
		if o.Replayed || o.Result.Status != llm.StatusError || o.Result.ErrorKind != llm.KindInternal || s.execs.Load() != 0 {
			t.Errorf("outcome = %+v", o)
		}
	})
}

// A handler that ignores its context and writes only after it was given up
// on: while it still runs, no other attempt may take its key over, even
// though the look-up finds nothing yet and the record is old.
func TestAbandonedWriteBlocksItsKeyUntilItReturns(t *testing.T) {
	for _, path := range []string{"Run"} {
		t.Run(path, func(t *testing.T) {
			var mu sync.Mutex
			applied := 0
			release := make(chan struct{})
			returned := make(chan struct{})
			type in struct {
				OrderID string `json:"order_id"`
			}
			lateWriter := true
			tl := tool.MustNew(tool.Spec[in]{Name: "refund", Effect: tool.Write, Timeout: 20 * time.Millisecond,
				IdempotencyKey: func(x in) string { return "refund:" + x.OrderID },
				Lookup: func(context.Context, in) (any, bool, error) {
					mu.Lock()
					defer mu.Unlock()
					return "refunded", applied > 0, nil
				}},
				func(ctx context.Context, x in) (string, error) {
					mu.Lock()
					late := lateWriter
					lateWriter = false
					mu.Unlock()
					if late {
						defer close(returned)
						<-release // ignores ctx, then writes anyway
					}
					mu.Lock()
					applied++
					mu.Unlock()
					return "refunded", nil
				})
			ex := executor.New(&executor.Options{Ledger: store.NewMemory()})
			var wg sync.WaitGroup
			defer wg.Wait()
			var releaseOnce sync.Once
			free := func() { releaseOnce.Do(func() { close(release) }) }
			defer free() // even when the test fails early, no goroutine is left stuck
			call := func(id string) executor.Outcome {
				c := executor.Call{Call: llm.ToolCall{ID: id, Name: "refund", Arguments: []byte(`{"order_id":"A1"}`)}, Tool: tl,
					IdempotencyKey: "refund:A1", ArgsHash: "h"}
				return ex.Run(context.Background(), c)
			}
			first := call("c1")
			if !first.TimedOut || first.OutcomeUnknown {
				t.Fatalf("first = %+v", first)
			}
			second := call("c2")
			if second.Result.ErrorKind != llm.KindWriteInProgress {
				t.Fatalf("second attempt while the first handler runs = %+v", second)
			}
			free()
			<-returned
			// The abandoned handler has written now; its goroutine may
			// still be unwinding, so wait until it gives the key back.
			var third executor.Outcome
			for i := 0; i < 100; i++ {
				third = call(fmt.Sprint("c3-", i))
				if third.Result.ErrorKind != llm.KindWriteInProgress {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if !third.Reconciled || third.Result.Status != llm.StatusOK || applied != 1 {
				t.Fatalf("third = %+v, applied %d times", third, applied)
			}
		})
	}
}

// lookupFails is a ledger whose Lookup fails, as a ledger that went away
// between a claim and a look-up does.
type lookupFails struct{ store.Ledger }

func (lookupFails) Lookup(context.Context, string) (store.Record, bool, error) {
	return store.Record{}, false, errors.New("disk I/O error")
}

// A write whose compensation ran is not replayed as done to a later call
// of its key, from any run: the ledger keeps the original's key done, and
// only the compensation's record says the refund no longer holds.
func TestUndoneWriteIsNotReplayed(t *testing.T) {
	forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
		ctx := context.Background()
		s := newShop(t, refundOK)
		tl := s.tool(t, 0, true)
		ex := executor.New(&executor.Options{Ledger: l})
		if o := run(ex, refundCall("c1", tl, "A1")); o.Result.Status != llm.StatusOK {
			t.Fatalf("refund = %+v", o)
		}
		undoKey := executor.UndoKey("refund:A1")
		if undoKey != "undo:refund:A1" {
			t.Fatalf("undo key = %q", undoKey)
		}
		// The compensation claims its key: while it is in flight, whether
		// the refund holds is not known.
		_, claimed, err := l.Claim(ctx, store.Record{Key: undoKey, ArgsHash: "undo-hash", RunID: "run1", CallID: "c1~undo",
			Tool: "reverse_refund", CreatedAt: time.Now()})
		if err != nil || !claimed {
			t.Fatalf("claim undo: claimed=%v err=%v", claimed, err)
		}
		c2 := refundCall("c2", tl, "A1")
		c2.RunID = "run2"
		o := run(ex, c2)
		if o.Replayed || o.Result.Status != llm.StatusError || o.Result.ErrorKind != llm.KindWriteInProgress ||
			!strings.Contains(string(o.Result.Content), "is being undone by its compensation (run run1, call c1~undo)") {
			t.Fatalf("call while the undo is in flight = %+v, content %s", o, o.Result.Content)
		}
		// The compensation is done: the refund was reversed.
		if err := l.Finish(ctx, undoKey, json.RawMessage(`{"call_id":"c1~undo","name":"reverse_refund","status":"ok"}`), time.Now()); err != nil {
			t.Fatal(err)
		}
		for _, lg := range []store.Ledger{l, lookupFails{l}} {
			o = run(executor.New(&executor.Options{Ledger: lg}), c2)
			if _, broken := lg.(lookupFails); broken {
				if o.Replayed || o.Result.ErrorKind != llm.KindUnavailable ||
					!strings.Contains(string(o.Result.Content), `could not say whether the write with key \"refund:A1\" was undone`) {
					t.Errorf("call when the ledger cannot look up = %+v, content %s", o, o.Result.Content)
				}
				continue
			}
			if o.Replayed || o.Result.Status != llm.StatusError || o.Result.ErrorKind != llm.KindIdempotencyConflict ||
				!strings.Contains(string(o.Result.Content), "(run run1, call c1) was undone by its compensation (run run1, call c1~undo)") {
				t.Errorf("call after the undo = %+v, content %s", o, o.Result.Content)
			}
		}
		if n := s.execs.Load(); n != 1 {
			t.Errorf("handler ran %d times, want 1", n)
		}
		// The compensation's own key replays as any done write does: a
		// resumed run asking for it again must not undo twice.
		rec, _ := record(t, l, undoKey)
		if rec.State != store.Done {
			t.Fatalf("undo record = %+v", rec)
		}
		undo := refundCall("c1~undo", tl, "A1")
		undo.IdempotencyKey, undo.ArgsHash = undoKey, "undo-hash"
		if o := run(ex, undo); !o.Replayed || o.Result.Status != llm.StatusOK {
			t.Errorf("the compensation asked again = %+v", o)
		}
		if n := s.execs.Load(); n != 1 {
			t.Errorf("handler ran %d times, want 1", n)
		}
	})
}
