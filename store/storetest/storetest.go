package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolloop/toolloop/store"
)

// TestLedger runs the ledger conformance suite. open must return a new,
// empty ledger each time it is called.
func TestLedger(t *testing.T, open func(t *testing.T) store.Ledger) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := func(key, hash string) store.Record {
		return store.Record{Key: key, ArgsHash: hash, RunID: "run1", CallID: "call1", Tool: "refund_order", CreatedAt: t0}
	}

	t.Run("claim once", func(t *testing.T) {
		l := open(t)
		if _, claimed, err := l.Claim(ctx, rec("k", "h1")); err != nil || !claimed {
			t.Fatalf("first claim: claimed=%v err=%v", claimed, err)
		}
		old, claimed, err := l.Claim(ctx, rec("k", "h2"))
		if err != nil || claimed {
			t.Fatalf("second claim: claimed=%v err=%v", claimed, err)
		}
		if old.Key != "k" || old.ArgsHash != "h1" || old.State != store.InFlight || old.RunID != "run1" ||
			old.CallID != "call1" || old.Tool != "refund_order" || !old.CreatedAt.Equal(t0) {
			t.Fatalf("existing record = %+v", old)
		}
	})

	t.Run("finish then replay", func(t *testing.T) {
		l := open(t)
		if _, _, err := l.Claim(ctx, rec("k", "h")); err != nil {
			t.Fatal(err)
		}
		result := json.RawMessage(`{"call_id":"call1","status":"ok","content":{"refunded":true}}`)
		t1 := t0.Add(time.Second)
		if err := l.Finish(ctx, "k", result, t1); err != nil {
			t.Fatal(err)
		}
		got, ok, err := l.Lookup(ctx, "k")
		if err != nil || !ok || got.State != store.Done || !got.UpdatedAt.Equal(t1) || !jsonEqual(got.Result, result) {
			t.Fatalf("lookup = %+v ok=%v err=%v", got, ok, err)
		}
		old, claimed, err := l.Claim(ctx, rec("k", "h"))
		if err != nil || claimed || old.State != store.Done || !jsonEqual(old.Result, result) {
			t.Fatalf("claim after finish = %+v claimed=%v err=%v", old, claimed, err)
		}
		if err := l.Finish(ctx, "k", result, t1); !errors.Is(err, store.ErrNotInFlight) {
			t.Fatalf("finishing twice: err = %v", err)
		}
	})

	t.Run("finish or release an unknown key", func(t *testing.T) {
		l := open(t)
		if err := l.Finish(ctx, "nope", json.RawMessage(`{}`), t0); !errors.Is(err, store.ErrNotInFlight) {
			t.Fatalf("finish: err = %v", err)
		}
		if err := l.Release(ctx, "nope"); !errors.Is(err, store.ErrNotInFlight) {
			t.Fatalf("release: err = %v", err)
		}
		if _, ok, err := l.Lookup(ctx, "nope"); ok || err != nil {
			t.Fatalf("lookup: ok=%v err=%v", ok, err)
		}
	})

	t.Run("release lets the key be claimed again", func(t *testing.T) {
		l := open(t)
		l.Claim(ctx, rec("k", "h"))
		if err := l.Release(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if _, claimed, err := l.Claim(ctx, rec("k", "h")); err != nil || !claimed {
			t.Fatalf("claim after release: claimed=%v err=%v", claimed, err)
		}
		l.Finish(ctx, "k", json.RawMessage(`{}`), t0)
		if err := l.Release(ctx, "k"); !errors.Is(err, store.ErrNotInFlight) {
			t.Fatalf("releasing a done key: err = %v", err)
		}
	})

	t.Run("release a claim only while it is that claim", func(t *testing.T) {
		l := open(t)
		cr, ok := l.(store.ClaimReleaser)
		if !ok {
			t.Skip("the ledger cannot release by claim")
		}
		first := rec("k", "h")
		l.Claim(ctx, first)
		stale := first
		stale.CreatedAt = t0.Add(-time.Hour)
		if err := cr.ReleaseClaim(ctx, stale); !errors.Is(err, store.ErrNotInFlight) {
			t.Fatalf("releasing another claim: err = %v", err)
		}
		other := first
		other.CallID = "call2"
		if err := cr.ReleaseClaim(ctx, other); !errors.Is(err, store.ErrNotInFlight) {
			t.Fatalf("releasing another call's claim: err = %v", err)
		}
		if err := cr.ReleaseClaim(ctx, first); err != nil {
			t.Fatalf("releasing the claim itself: %v", err)
		}
		if _, ok, _ := l.Lookup(ctx, "k"); ok {
			t.Fatal("the claim is still there")
		}
	})

	t.Run("concurrent claims: exactly one wins", func(t *testing.T) {
		l := open(t)
		const n = 16
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, claimed, err := l.Claim(ctx, rec("hot", fmt.Sprint("h", i)))
				if err != nil {
					t.Error(err)
					return
				}
				if claimed {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d claims won", wins)
		}
	})

	t.Run("prune keeps in-flight and recent records", func(t *testing.T) {
		l := open(t)
		for i, k := range []string{"old-done", "new-done", "old-inflight"} {
			r := rec(k, "h")
			r.CreatedAt = t0.Add(time.Duration(i) * time.Minute)
			l.Claim(ctx, r)
		}
		l.Finish(ctx, "old-done", json.RawMessage(`{}`), t0)
		l.Finish(ctx, "new-done", json.RawMessage(`{}`), t0.Add(time.Hour))
		n, err := l.Prune(ctx, t0.Add(time.Minute))
		if err != nil || n != 1 {
			t.Fatalf("prune: n=%d err=%v", n, err)
		}
		for k, want := range map[string]bool{"old-done": false, "new-done": true, "old-inflight": true} {
			if _, ok, _ := l.Lookup(ctx, k); ok != want {
				t.Errorf("%s present=%v, want %v", k, ok, want)
			}
		}
	})
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}
