package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// frozenStore is a store that freezes on demand, as a stopped database
// server or a partitioned network would: while frozen, every call waits
// until it thaws, whatever its context says.
type frozenStore struct {
	*store.Memory
	mu      sync.Mutex
	thawed  chan struct{} // nil while not frozen
	waiting sync.WaitGroup
	blocked atomic.Int32
}

func (f *frozenStore) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.thawed == nil {
		f.thawed = make(chan struct{})
	}
}

// thaw lets the waiting calls go on and waits for them to finish.
func (f *frozenStore) thaw() {
	f.mu.Lock()
	if f.thawed != nil {
		close(f.thawed)
		f.thawed = nil
	}
	f.mu.Unlock()
	f.waiting.Wait()
}

// wait holds a call while the store is frozen.
func (f *frozenStore) wait() func() {
	f.mu.Lock()
	ch := f.thawed
	f.waiting.Add(1)
	f.mu.Unlock()
	if ch != nil {
		f.blocked.Add(1)
		<-ch
	}
	return f.waiting.Done
}

func (f *frozenStore) Append(ctx context.Context, runID string, evs []store.EventRecord, sum store.RunSummary) error {
	defer f.wait()()
	return f.Memory.Append(ctx, runID, evs, sum)
}

func (f *frozenStore) AppendLeased(ctx context.Context, l store.Lease, evs []store.EventRecord, sum store.RunSummary) error {
	defer f.wait()()
	return f.Memory.AppendLeased(ctx, l, evs, sum)
}

func (f *frozenStore) Events(ctx context.Context, runID string) ([]store.EventRecord, error) {
	defer f.wait()()
	return f.Memory.Events(ctx, runID)
}

func (f *frozenStore) AcquireLease(ctx context.Context, runID, owner string, ttl time.Duration) (store.Lease, error) {
	defer f.wait()()
	return f.Memory.AcquireLease(ctx, runID, owner, ttl)
}

func (f *frozenStore) RenewLease(ctx context.Context, runID, owner string, ttl time.Duration) (store.Lease, error) {
	defer f.wait()()
	return f.Memory.RenewLease(ctx, runID, owner, ttl)
}

func (f *frozenStore) ReleaseLease(ctx context.Context, runID, owner string) error {
	defer f.wait()()
	return f.Memory.ReleaseLease(ctx, runID, owner)
}

func (f *frozenStore) Claim(ctx context.Context, rec store.Record) (store.Record, bool, error) {
	defer f.wait()()
	return f.Memory.Claim(ctx, rec)
}

func (f *frozenStore) Finish(ctx context.Context, key string, result json.RawMessage, at time.Time) error {
	defer f.wait()()
	return f.Memory.Finish(ctx, key, result, at)
}

func (f *frozenStore) ReleaseClaim(ctx context.Context, claim store.Record) error {
	defer f.wait()()
	return f.Memory.ReleaseClaim(ctx, claim)
}

// A store that freezes while a write runs holds the run no longer than
// its deadline plus store.DeadlineGrace (the ledger's Finish and the last
// append give up then), or than the store's per-call timeout: the run ends
// interrupted, with the usual message, and resumes once the store is back,
// the write applied once. (Without the bounds the run waited for the store
// for good.)
func TestFrozenStoreInterruptsTheRun(t *testing.T) {
	for _, tc := range []struct {
		name              string
		deadline, timeout time.Duration
		within            time.Duration
		// resumed is how the resumed run ends: one whose deadline has
		// passed stops at once, saying so.
		resumed loop.Status
	}{
		{"by the deadline plus the grace", 300 * time.Millisecond, time.Hour, 300*time.Millisecond + store.DeadlineGrace, loop.DeadlineExceeded},
		{"by the per-call timeout", time.Hour, 200 * time.Millisecond, 3 * 200 * time.Millisecond, loop.FinalAnswer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &frozenStore{Memory: store.NewMemory()}
			var applied atomic.Int32
			refund := tool.MustNew(tool.Spec[refundIn]{
				Name: "refund_order", Effect: tool.Write, Timeout: time.Minute,
				IdempotencyKey: func(in refundIn) string { return "refund:" + in.OrderID },
			}, func(ctx context.Context, in refundIn) (map[string]any, error) {
				applied.Add(1)
				st.freeze() // the store stops answering while the write runs
				return map[string]any{"order_id": in.OrderID, "refunded": true}, nil
			})
			f := newFixture(t, refund)
			cfg := loop.Config{
				Model: stepModel(llmtest.Calls(call("c1", "refund_order", `{"order_id":"A1"}`)), llmtest.Text("refunded")),
				Tools: f.reg, Store: st, StoreTimeout: tc.timeout,
				Executor: executor.New(&executor.Options{Ledger: st, LedgerTimeout: tc.timeout}),
				Budgets:  loop.Budgets{Deadline: tc.deadline},
				NewRunID: func() string { return "frozen-1" },
				LeaseTTL: time.Second,
			}
			type ran struct {
				res *loop.Result
				err error
			}
			done := make(chan ran, 1)
			start := time.Now()
			go func() {
				res, err := loop.Run(context.Background(), cfg, user("refund A1"))
				done <- ran{res, err}
			}()
			var got ran
			select {
			case got = <-done:
			case <-time.After(tc.within + 5*time.Second):
				st.thaw()
				<-done
				t.Fatalf("the run was still going %v after it started, with its store frozen", time.Since(start).Round(time.Millisecond))
			}
			took := time.Since(start)
			if took > tc.within+time.Second {
				t.Errorf("the run took %v with its store frozen, want at most about %v", took.Round(time.Millisecond), tc.within)
			}
			var ie *loop.InterruptedError
			var te *store.CallTimeoutError
			if got.res != nil || !errors.As(got.err, &ie) || !errors.As(got.err, &te) || !errors.Is(got.err, context.DeadlineExceeded) {
				t.Fatalf("frozen store: result %v, err = %v; want an *InterruptedError from a store call that timed out", got.res != nil, got.err)
			}
			if msg := got.err.Error(); !strings.Contains(msg, "run frozen-1 interrupted") || !strings.Contains(msg, "resume it once the store is back") {
				t.Errorf("message %q is not the usual interrupted one", msg)
			}
			if st.blocked.Load() == 0 {
				t.Fatal("no store call was held: the test froze nothing")
			}

			// The store comes back; the calls it held finish, and the run
			// goes on from what it recorded, once the lease that could not
			// be released has expired (it is this live process's, so it is
			// not taken over at once).
			st.thaw()
			r, err := loop.NewRunner(cfg)
			if err != nil {
				t.Fatal(err)
			}
			out, err := r.Resume(context.Background(), "frozen-1")
			for end := time.Now().Add(5 * time.Second); errors.Is(err, store.ErrLeaseHeld) && time.Now().Before(end); {
				time.Sleep(50 * time.Millisecond)
				out, err = r.Resume(context.Background(), "frozen-1")
			}
			mustStatus(t, out, err, tc.resumed)
			if n := applied.Load(); n != 1 {
				t.Fatalf("the refund was applied %d times", n)
			}
		})
	}
}
