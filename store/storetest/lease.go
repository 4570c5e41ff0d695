package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolloop/toolloop/store"
)

// LeasedLog is an event log with run leases, what TestLeaser checks.
type LeasedLog interface {
	store.EventLog
	store.Leaser
}

// Clock is a clock a test moves by hand, for stores whose leases expire on
// an injected clock. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock that reads t until moved.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestLeaser runs the run-lease conformance suite. open must return a new,
// empty store each time it is called whose leases expire on the clock now.
func TestLeaser(t *testing.T, open func(t *testing.T, now func() time.Time) LeasedLog) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const ttl = 30 * time.Second
	fresh := func(t *testing.T) (LeasedLog, *Clock) {
		c := NewClock(t0)
		return open(t, c.Now), c
	}
	ev := func(seq int) []store.EventRecord {
		return []store.EventRecord{{Seq: seq, Kind: "k", At: t0, Data: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}}
	}
	sum := store.RunSummary{StartedAt: t0, UpdatedAt: t0}
	// held checks that err refuses a lease because holder holds it until
	// expires, and says so.
	held := func(t *testing.T, err error, runID, holder string, expires time.Time) {
		t.Helper()
		var lh *store.LeaseHeldError
		if !errors.Is(err, store.ErrLeaseHeld) || !errors.As(err, &lh) {
			t.Fatalf("err = %v, want a *store.LeaseHeldError", err)
		}
		if lh.RunID != runID || lh.Owner != holder || !lh.Expires.Equal(expires) {
			t.Fatalf("held by %q until %v (run %q), want %q until %v (run %q)", lh.Owner, lh.Expires, lh.RunID, holder, expires, runID)
		}
		if msg := err.Error(); !strings.Contains(msg, holder) || !strings.Contains(msg, runID) ||
			!strings.Contains(msg, expires.UTC().Format(time.RFC3339)[:19]) {
			t.Fatalf("message %q does not name the run, the holder and the expiry", msg)
		}
	}

	t.Run("acquire, and a second owner is refused", func(t *testing.T) {
		l, _ := fresh(t)
		got, err := l.AcquireLease(ctx, "r1", "alice", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if got.RunID != "r1" || got.Owner != "alice" || !got.Expires.Equal(t0.Add(ttl)) {
			t.Fatalf("lease = %+v, want alice's on r1 until %v", got, t0.Add(ttl))
		}
		_, err = l.AcquireLease(ctx, "r1", "bob", ttl)
		held(t, err, "r1", "alice", t0.Add(ttl))
		if errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("a refused acquisition says a lease was lost: %v", err)
		}
		if _, err := l.AcquireLease(ctx, "r2", "bob", ttl); err != nil {
			t.Fatalf("another run's lease: %v", err)
		}
	})

	t.Run("the owner acquires again, which renews", func(t *testing.T) {
		l, c := fresh(t)
		if _, err := l.AcquireLease(ctx, "r1", "alice", ttl); err != nil {
			t.Fatal(err)
		}
		c.Advance(ttl / 2)
		got, err := l.AcquireLease(ctx, "r1", "alice", ttl)
		if err != nil || !got.Expires.Equal(t0.Add(ttl/2+ttl)) {
			t.Fatalf("re-acquired: %+v, %v; want it until %v", got, err, t0.Add(ttl/2+ttl))
		}
		c.Advance(ttl / 2)
		_, err = l.AcquireLease(ctx, "r1", "bob", ttl)
		held(t, err, "r1", "alice", t0.Add(ttl/2+ttl))
	})

	t.Run("an expired lease is taken over", func(t *testing.T) {
		l, c := fresh(t)
		if _, err := l.AcquireLease(ctx, "r1", "dead", ttl); err != nil {
			t.Fatal(err)
		}
		c.Advance(ttl - time.Nanosecond)
		_, err := l.AcquireLease(ctx, "r1", "bob", ttl)
		held(t, err, "r1", "dead", t0.Add(ttl))
		c.Advance(time.Nanosecond)
		got, err := l.AcquireLease(ctx, "r1", "bob", ttl)
		if err != nil || got.Owner != "bob" || !got.Expires.Equal(t0.Add(2*ttl)) {
			t.Fatalf("takeover at expiry: %+v, %v", got, err)
		}
		_, err = l.AcquireLease(ctx, "r1", "dead", ttl)
		held(t, err, "r1", "bob", t0.Add(2*ttl))
	})

	t.Run("renew extends; a lost lease is never taken back", func(t *testing.T) {
		l, c := fresh(t)
		if _, err := l.AcquireLease(ctx, "r1", "alice", ttl); err != nil {
			t.Fatal(err)
		}
		c.Advance(ttl - time.Second)
		got, err := l.RenewLease(ctx, "r1", "alice", ttl)
		if err != nil || got.Owner != "alice" || !got.Expires.Equal(t0.Add(2*ttl-time.Second)) {
			t.Fatalf("renew: %+v, %v", got, err)
		}
		c.Advance(ttl - 2*time.Second)
		_, err = l.AcquireLease(ctx, "r1", "bob", ttl)
		held(t, err, "r1", "alice", t0.Add(2*ttl-time.Second))
		// Expired, but nobody took it: still alice's to renew.
		c.Advance(time.Hour)
		if _, err := l.RenewLease(ctx, "r1", "alice", ttl); err != nil {
			t.Fatalf("renewing an expired lease nobody took: %v", err)
		}
		c.Advance(ttl)
		bobs, err := l.AcquireLease(ctx, "r1", "bob", ttl)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.RenewLease(ctx, "r1", "alice", ttl)
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("renewing a lease taken over: err = %v, want ErrLeaseLost", err)
		}
		held(t, err, "r1", "bob", bobs.Expires)
		var lh *store.LeaseHeldError
		if errors.As(err, &lh); lh.Lost != "alice" || !strings.Contains(err.Error(), "alice") {
			t.Fatalf("the loss does not name alice: %+v, %v", lh, err)
		}
		_, err = l.AcquireLease(ctx, "r1", "carol", ttl)
		held(t, err, "r1", "bob", bobs.Expires)
		if _, err := l.RenewLease(ctx, "nope", "alice", ttl); !errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrLeaseHeld) {
			t.Fatalf("renewing a lease never taken: err = %v, want ErrLeaseLost only", err)
		}
	})

	t.Run("release frees the run at once, only by its owner", func(t *testing.T) {
		l, _ := fresh(t)
		if _, err := l.AcquireLease(ctx, "r1", "alice", ttl); err != nil {
			t.Fatal(err)
		}
		if err := l.ReleaseLease(ctx, "r1", "bob"); err != nil {
			t.Fatalf("releasing another's lease: %v, want nothing done and no error", err)
		}
		_, err := l.AcquireLease(ctx, "r1", "bob", ttl)
		held(t, err, "r1", "alice", t0.Add(ttl))
		if err := l.ReleaseLease(ctx, "r1", "alice"); err != nil {
			t.Fatal(err)
		}
		if err := l.ReleaseLease(ctx, "r1", "alice"); err != nil {
			t.Fatalf("releasing twice: %v", err)
		}
		if _, err := l.RenewLease(ctx, "r1", "alice", ttl); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("renewing a released lease: err = %v, want ErrLeaseLost", err)
		}
		if _, err := l.AcquireLease(ctx, "r1", "bob", ttl); err != nil {
			t.Fatalf("acquiring a released lease: %v", err)
		}
	})

	t.Run("appends are fenced by the lease", func(t *testing.T) {
		l, c := fresh(t)
		alice, err := l.AcquireLease(ctx, "r1", "alice", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.AppendLeased(ctx, alice, ev(1), sum); err != nil {
			t.Fatal(err)
		}
		// Expired but not taken over: alice's appends still go through.
		c.Advance(2 * ttl)
		if err := l.AppendLeased(ctx, alice, ev(2), sum); err != nil {
			t.Fatalf("append after expiry, before any takeover: %v", err)
		}
		bob, err := l.AcquireLease(ctx, "r1", "bob", ttl)
		if err != nil {
			t.Fatal(err)
		}
		err = l.AppendLeased(ctx, alice, ev(3), sum)
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("append by the owner the lease was taken from: err = %v, want ErrLeaseLost", err)
		}
		held(t, err, "r1", "bob", bob.Expires)
		if got, _ := l.Events(ctx, "r1"); len(got) != 2 {
			t.Fatalf("the refused append wrote: %d events, want 2", len(got))
		}
		if err := l.AppendLeased(ctx, bob, ev(2), sum); !errors.Is(err, store.ErrSeqConflict) {
			t.Fatalf("a leased append out of sequence: err = %v, want ErrSeqConflict", err)
		}
		if err := l.AppendLeased(ctx, bob, ev(3), sum); err != nil {
			t.Fatal(err)
		}
		// Append ignores leases (a recorded approval needs none).
		if err := l.Append(ctx, "r1", ev(4), sum); err != nil {
			t.Fatalf("a plain append while bob holds the lease: %v", err)
		}
		if err := l.ReleaseLease(ctx, "r1", "bob"); err != nil {
			t.Fatal(err)
		}
		if err := l.AppendLeased(ctx, bob, ev(5), sum); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("append after release: err = %v, want ErrLeaseLost", err)
		}
		if got, _ := l.Events(ctx, "r1"); len(got) != 4 {
			t.Fatalf("%d events, want 4", len(got))
		}
	})

	t.Run("concurrent acquisitions: exactly one wins", func(t *testing.T) {
		l, _ := fresh(t)
		const n = 16
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []string
		refused := map[string]int{}
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprint("owner", i)
				_, err := l.AcquireLease(ctx, "hot", owner, ttl)
				var lh *store.LeaseHeldError
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, owner)
				case errors.As(err, &lh):
					refused[lh.Owner]++
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if len(winners) != 1 || refused[winners[0]] != n-1 {
			t.Fatalf("winners %v; refusals name %v", winners, refused)
		}
	})

	t.Run("bad arguments", func(t *testing.T) {
		l, _ := fresh(t)
		for _, tc := range []struct {
			run, owner string
			ttl        time.Duration
			want       string
		}{{"", "alice", ttl, "run ID"}, {"r1", "", ttl, "owner"}, {"r1", "alice", 0, "time to live"}, {"r1", "alice", -time.Second, "time to live"}} {
			if _, err := l.AcquireLease(ctx, tc.run, tc.owner, tc.ttl); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("AcquireLease(%q, %q, %v): err = %v, want one naming the %s", tc.run, tc.owner, tc.ttl, err, tc.want)
			}
			if _, err := l.RenewLease(ctx, tc.run, tc.owner, tc.ttl); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("RenewLease(%q, %q, %v): err = %v, want one naming the %s", tc.run, tc.owner, tc.ttl, err, tc.want)
			}
		}
	})
}
