package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/storetest"
)

// A bounded store is still a store: the conformance suites pass through
// the bounds, and the optional abilities are there exactly when the store
// has them.
func TestBoundedStoresConform(t *testing.T) {
	storetest.TestLedger(t, func(*testing.T) store.Ledger { return store.BoundLedger(store.NewMemory(), 0) })
	storetest.TestEventLog(t, func(*testing.T) store.EventLog { return store.BoundEventLog(store.NewMemory(), 0) })
	storetest.TestLeaser(t, func(_ *testing.T, now func() time.Time) storetest.LeasedLog {
		return store.BoundEventLog(store.NewMemoryClock(now), 0).(storetest.LeasedLog)
	})
	type logOnly struct{ store.EventLog }
	if _, ok := store.BoundEventLog(logOnly{store.NewMemory()}, 0).(store.Leaser); ok {
		t.Error("a bounded event log without leases has leases")
	}
	type ledgerOnly struct{ store.Ledger }
	if _, ok := store.BoundLedger(ledgerOnly{store.NewMemory()}, 0).(store.ClaimReleaser); ok {
		t.Error("a bounded ledger without ReleaseClaim has it")
	}
	if _, ok := store.BoundLedger(store.NewMemory(), 0).(store.ClaimReleaser); !ok {
		t.Error("a bounded ledger lost ReleaseClaim")
	}
}

// stuckLog is an event log whose Events never answers and ignores its
// context, the worst a frozen store can do.
type stuckLog struct {
	store.EventLog
	release chan struct{}
}

func (s stuckLog) Events(context.Context, string) ([]store.EventRecord, error) {
	<-s.release
	return nil, store.ErrUnknownRun
}

// A call is given up at its timeout and at its context's call deadline,
// which survives context.WithoutCancel (Detach), with a *CallTimeoutError
// that matches context.DeadlineExceeded; the caller's cancellation alone
// is left to the store.
func TestBoundedCallsEnd(t *testing.T) {
	s := stuckLog{EventLog: store.NewMemory(), release: make(chan struct{})}
	defer close(s.release)
	check := func(name string, ctx context.Context, timeout, within time.Duration) {
		t.Helper()
		start := time.Now()
		_, err := store.BoundEventLog(s, timeout).Events(ctx, "r1")
		var te *store.CallTimeoutError
		if !errors.As(err, &te) || te.Op != "Events" || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want a *CallTimeoutError for Events", name, err)
		}
		if took := time.Since(start); took > within {
			t.Errorf("%s: took %v, want at most %v", name, took, within)
		}
	}
	check("timeout", context.Background(), 50*time.Millisecond, time.Second)
	dl, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	check("detached from a context with a deadline", store.Detach(dl), time.Hour, store.DeadlineGrace+time.Second)
	past := store.WithCallDeadline(context.Background(), time.Now().Add(-time.Second))
	check("call deadline passed", past, time.Hour, 100*time.Millisecond)
	if later := store.WithCallDeadline(past, time.Now().Add(time.Hour)); !sameDeadline(later, past) {
		t.Error("a later call deadline replaced an earlier one")
	}
}

func sameDeadline(a, b context.Context) bool {
	x, _ := store.CallDeadline(a)
	y, _ := store.CallDeadline(b)
	return x.Equal(y)
}

// panickyLog is an event log whose Events panics.
type panickyLog struct{ store.EventLog }

func (panickyLog) Events(context.Context, string) ([]store.EventRecord, error) {
	panic("the store's driver broke")
}

// A store that panics inside a bounded call panics on the caller's
// goroutine, as it would unbounded, where the caller can recover it; it
// does not crash the process from a goroutine of the bound's own.
func TestBoundedCallPanicsOnTheCaller(t *testing.T) {
	el := store.BoundEventLog(panickyLog{store.NewMemory()}, time.Second)
	defer func() {
		if p := recover(); p != "the store's driver broke" {
			t.Fatalf("recovered %v, want the store's panic", p)
		}
	}()
	el.Events(context.Background(), "run-1")
	t.Fatal("Events returned instead of panicking")
}
