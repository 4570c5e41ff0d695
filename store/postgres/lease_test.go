package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/postgres"
	"github.com/toolloop/toolloop/store/postgres/pgtest"
	"github.com/toolloop/toolloop/store/storetest"
)

// serverNow reads the database server's clock.
func serverNow(t *testing.T, s *postgres.Store) time.Time {
	t.Helper()
	var now time.Time
	if err := s.Pool().QueryRow(context.Background(), `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// Without Options.Now, leases expire on the server's clock: a lease runs
// from the server's now() (which has whole microseconds, unlike a Go
// clock's reading) for its time to live, and is taken over once the
// server's clock has passed its expiry.
func TestLeaseOnServerClock(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t, nil)
	const ttl = 300 * time.Millisecond
	before := serverNow(t, s)
	alice, err := s.AcquireLease(ctx, "r1", "alice", ttl)
	if err != nil {
		t.Fatal(err)
	}
	after := serverNow(t, s)
	start := alice.Expires.Add(-ttl)
	if start.Before(before) || start.After(after) || start.Nanosecond()%1000 != 0 {
		t.Fatalf("the lease runs from %v, want a reading of the server's clock between %v and %v", start, before, after)
	}
	var lh *store.LeaseHeldError
	if _, err := s.AcquireLease(ctx, "r1", "bob", ttl); !errors.As(err, &lh) || lh.Owner != "alice" || !lh.Expires.Equal(alice.Expires) {
		t.Fatalf("bob's acquisition before the expiry: %v, want alice's lease until %v", err, alice.Expires)
	}
	for serverNow(t, s).Before(alice.Expires) {
		time.Sleep(20 * time.Millisecond)
	}
	bob, err := s.AcquireLease(ctx, "r1", "bob", ttl)
	if err != nil {
		t.Fatalf("bob's acquisition after the expiry on the server's clock: %v", err)
	}
	if _, err := s.RenewLease(ctx, "r1", "alice", ttl); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("alice renews after bob took over: %v, want ErrLeaseLost", err)
	}
	renewed, err := s.RenewLease(ctx, "r1", "bob", time.Minute)
	if err != nil || !renewed.Expires.After(bob.Expires) || renewed.Expires.Nanosecond()%1000 != 0 {
		t.Fatalf("bob renews: %+v, %v; want a later expiry on the server's clock than %v", renewed, err, bob.Expires)
	}
}

// Two stores (two pools, as two workers would have) on one schema: a lease
// taken over from one fences its appends, which write nothing, and it
// cannot renew; the new holder's appends go on from the log as it was.
func TestTwoPoolsFenceTakeover(t *testing.T) {
	ctx := context.Background()
	u, _ := pgtest.FreshSchema(t)
	clock := storetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	a := open(t, u, &postgres.Options{Now: clock.Now})
	b := open(t, u, &postgres.Options{Now: clock.Now})
	const ttl = 30 * time.Second
	ev := func(seq int) []store.EventRecord {
		return []store.EventRecord{{Seq: seq, Kind: "k", At: clock.Now(), Data: []byte(`{}`)}}
	}
	sum := store.RunSummary{StartedAt: clock.Now()}
	alice, err := a.AcquireLease(ctx, "r1", "alice", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireLease(ctx, "r1", "bob", ttl); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("bob's acquisition from the other pool: %v, want ErrLeaseHeld", err)
	}
	if err := a.AppendLeased(ctx, alice, ev(1), sum); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * ttl)
	bob, err := b.AcquireLease(ctx, "r1", "bob", ttl)
	if err != nil {
		t.Fatal(err)
	}
	var lh *store.LeaseHeldError
	if err := a.AppendLeased(ctx, alice, ev(2), sum); !errors.Is(err, store.ErrLeaseLost) || !errors.As(err, &lh) || lh.Owner != "bob" {
		t.Fatalf("alice appends after bob took over: %v, want ErrLeaseLost naming bob", err)
	}
	if _, err := a.RenewLease(ctx, "r1", "alice", ttl); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("alice renews after bob took over: %v, want ErrLeaseLost", err)
	}
	if err := b.AppendLeased(ctx, bob, ev(2), sum); err != nil {
		t.Fatal(err)
	}
	if evs, err := a.Events(ctx, "r1"); err != nil || len(evs) != 2 {
		t.Fatalf("%d events, %v; want 2", len(evs), err)
	}
}

// A takeover waits for a fenced append in flight: the append holds the
// lease row until it commits, so the new holder reads a log that already
// has it, and never one that gains an event behind its back.
func TestTakeoverWaitsForAppendInFlight(t *testing.T) {
	ctx := context.Background()
	u, _ := pgtest.FreshSchema(t)
	clock := storetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	a := open(t, u, &postgres.Options{Now: clock.Now})
	b := open(t, u, &postgres.Options{Now: clock.Now})
	const ttl = 30 * time.Second
	alice, err := a.AcquireLease(ctx, "r1", "alice", ttl)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * ttl)
	// Hold alice's append inside its transaction: a lock on the run's next
	// event number, taken by another session, makes its insert wait.
	blocker, err := a.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx)
	if _, err := blocker.Exec(ctx, `INSERT INTO run_events (run_id, seq, kind, at, data) VALUES ('r1', 1, 'blocker', 0, '')`); err != nil {
		t.Fatal(err)
	}
	appended := make(chan error, 1)
	go func() {
		appended <- a.AppendLeased(ctx, alice, []store.EventRecord{{Seq: 1, Kind: "k", At: clock.Now(), Data: []byte(`{}`)}}, store.RunSummary{})
	}()
	// Wait until alice's append holds the lease row and waits on the
	// blocker, then let bob try to take over.
	waitFor(t, func() bool {
		var n int
		err := b.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO run_events%unnest%'`).Scan(&n)
		return err == nil && n > 0
	})
	took := make(chan error, 1)
	go func() {
		_, err := b.AcquireLease(ctx, "r1", "bob", ttl)
		took <- err
	}()
	select {
	case err := <-took:
		t.Fatalf("bob took the lease while alice's append was in flight: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-appended; err != nil {
		t.Fatalf("alice's append, in flight before the takeover: %v", err)
	}
	if err := <-took; err != nil {
		t.Fatalf("bob's takeover after alice's append: %v", err)
	}
	if evs, err := b.Events(ctx, "r1"); err != nil || len(evs) != 1 || evs[0].Kind != "k" {
		t.Fatalf("bob reads %+v, %v; want alice's event", evs, err)
	}
}

// waitFor polls cond until it holds, for at most 10 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
