package loop_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/storetest"
	"github.com/toolloop/toolloop/tool"
)

// gatedWrite is a refund that, once applied, waits for the test to let it
// answer: a slow write, during which a second driver tries its luck.
type gatedWrite struct {
	applied atomic.Int32
	started chan struct{}
	release chan struct{}
}

func newGatedWrite() *gatedWrite {
	return &gatedWrite{started: make(chan struct{}, 8), release: make(chan struct{})}
}

func (g *gatedWrite) tool() *tool.Tool {
	return tool.MustNew(tool.Spec[refundIn]{
		Name: "refund_order", Effect: tool.Write, Timeout: time.Minute,
		IdempotencyKey: func(in refundIn) string { return "refund:" + in.OrderID },
	}, func(ctx context.Context, in refundIn) (map[string]any, error) {
		g.applied.Add(1)
		g.started <- struct{}{}
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return map[string]any{"order_id": in.OrderID, "refunded": true}, nil
	})
}

// waitStarted waits for the write to begin.
func (g *gatedWrite) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-g.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the write never started")
	}
}

// pausedWrite records in st a run paused for confirmation of a refund
// through g, approves the refund, and returns the run's ID and a
// configuration to resume it with: each call gives a driver of its own
// (its own executor, on st's ledger), as another process would be.
func pausedWrite(t *testing.T, st interface {
	store.EventLog
	store.Ledger
}, g *gatedWrite) (string, func(owner string) loop.Config) {
	t.Helper()
	f := newFixture(t, g.tool())
	cfg := func(owner string) loop.Config {
		return loop.Config{
			Model: stepModel(llmtest.Calls(call("c1", "refund_order", `{"order_id":"A1"}`)), llmtest.Text("refunded")),
			Tools: f.reg, Store: st, Policy: policy.ConfirmWrites(), LeaseOwner: owner,
			Executor: executor.New(&executor.Options{Ledger: st}),
		}
	}
	ctx := context.Background()
	res, err := loop.Run(ctx, cfg("starter"), user("refund A1"))
	mustStatus(t, res, err, loop.ConfirmationRequired)
	if err := loop.Decide(ctx, st, res.RunID, loop.Confirmation{CallID: "c1", Approved: true, By: "dana"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return res.RunID, cfg
}

type driven struct {
	res *loop.Result
	err error
}

// resumeAsync resumes runID with cfg on another goroutine.
func resumeAsync(t *testing.T, cfg loop.Config, runID string) <-chan driven {
	t.Helper()
	r, err := loop.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan driven, 1)
	go func() {
		res, err := r.Resume(context.Background(), runID)
		done <- driven{res, err}
	}()
	return done
}

// mustBeHeld checks that err refuses a driver because a drive whose owner
// begins with holderPrefix holds the run, and says who.
func mustBeHeld(t *testing.T, res *loop.Result, err error, holderPrefix string) *store.LeaseHeldError {
	t.Helper()
	var held *store.LeaseHeldError
	if res != nil || !errors.Is(err, store.ErrLeaseHeld) || !errors.As(err, &held) {
		t.Fatalf("second driver: result %v, err = %v; want it refused with a *store.LeaseHeldError", res != nil, err)
	}
	if held.Owner == "" || !strings.HasPrefix(held.Owner, holderPrefix) || !strings.Contains(err.Error(), held.Owner) {
		t.Fatalf("refusal %q names %q; want the holder %s:...", err, held.Owner, holderPrefix)
	}
	return held
}

// wait waits for a driver started by resumeAsync to return.
func wait(t *testing.T, done <-chan driven) driven {
	t.Helper()
	select {
	case d := <-done:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("the driver did not return")
		return driven{}
	}
}

func eventCount(t *testing.T, st store.EventLog, runID string) int {
	t.Helper()
	recs, err := st.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// Two drivers resume one run while its write is slow: the second is
// refused, naming the first, and writes nothing; the first finishes
// normally, the write done once. (Before leases, the second drove too,
// found the first's write in flight, and the run ended as one driver's
// guess while the other failed on the sequence check.)
func TestOneDriverPerRun(t *testing.T) {
	st := store.NewMemory()
	g := newGatedWrite()
	runID, cfg := pausedWrite(t, st, g)
	first := resumeAsync(t, cfg("driver-a"), runID)
	g.waitStarted(t)
	before := eventCount(t, st, runID)

	second, err := loop.NewRunner(cfg("driver-b"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := second.Resume(context.Background(), runID)
	mustBeHeld(t, res, err, "driver-a:")
	if n := eventCount(t, st, runID); n != before {
		t.Fatalf("the refused driver changed the log: %d events, were %d", n, before)
	}

	close(g.release)
	d := wait(t, first)
	mustStatus(t, d.res, d.err, loop.FinalAnswer)
	if n := g.applied.Load(); n != 1 {
		t.Fatalf("the refund was applied %d times", n)
	}
	rec, ok, err := st.Lookup(context.Background(), "refund:A1")
	if err != nil || !ok || rec.State != store.Done {
		t.Fatalf("ledger: %+v %v %v; want the refund done", rec, ok, err)
	}
	runs, _ := st.Runs(context.Background(), "")
	if len(runs) != 1 || runs[0].Status != string(loop.FinalAnswer) || eventCount(t, st, runID) != len(d.res.Events) {
		t.Fatalf("stored run %+v, %d events; want final_answer with the driver's %d", runs, eventCount(t, st, runID), len(d.res.Events))
	}
	// The lease was released when the run returned: anyone may take it.
	if _, err := st.AcquireLease(context.Background(), runID, "next", time.Minute); err != nil {
		t.Fatalf("the lease was not released: %v", err)
	}
}

// A driver that died holding a run's lease (it never released it) blocks
// the run until the lease expires, and then the next driver takes it
// over and finishes the run.
func TestCrashedDriversLeaseIsTakenOverAfterExpiry(t *testing.T) {
	clock := storetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	st := store.NewMemoryClock(clock.Now)
	g := newGatedWrite()
	close(g.release)
	runID, cfg := pausedWrite(t, st, g)
	ctx := context.Background()
	dead, err := st.AcquireLease(ctx, runID, "dead-host:4242:0bad", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := eventCount(t, st, runID)

	r, err := loop.NewRunner(cfg("next"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Resume(ctx, runID)
	held := mustBeHeld(t, res, err, "dead-host:4242:0bad")
	if !held.Expires.Equal(dead.Expires) {
		t.Fatalf("refusal says the lease expires at %v, want %v", held.Expires, dead.Expires)
	}
	if g.applied.Load() != 0 || eventCount(t, st, runID) != before {
		t.Fatal("the refused driver acted")
	}

	clock.Advance(time.Minute)
	res, err = r.Resume(ctx, runID)
	mustStatus(t, res, err, loop.FinalAnswer)
	if n := g.applied.Load(); n != 1 {
		t.Fatalf("the refund was applied %d times", n)
	}

	// An ended run is read, not driven: resuming it while someone holds
	// its lease returns it unchanged.
	if _, err := st.AcquireLease(ctx, runID, "someone:1:2", time.Minute); err != nil {
		t.Fatal(err)
	}
	again, err := r.Resume(ctx, runID)
	mustStatus(t, again, err, loop.FinalAnswer)
	if len(again.Events) != len(res.Events) {
		t.Fatalf("resuming the ended run gave %d events, want %d", len(again.Events), len(res.Events))
	}
}

// renewGate is a store whose lease renewals happen only when the test
// allows one, and which reports each: renewals become steps of the test,
// not races against its clock.
type renewGate struct {
	*store.Memory
	permit  chan struct{}
	renewed chan error
}

func (g *renewGate) RenewLease(ctx context.Context, runID, owner string, ttl time.Duration) (store.Lease, error) {
	select {
	case <-g.permit:
	case <-ctx.Done():
		return store.Lease{}, ctx.Err()
	}
	l, err := g.Memory.RenewLease(ctx, runID, owner, ttl)
	g.renewed <- err
	return l, err
}

// renewOnce lets one renewal happen and returns its error.
func (g *renewGate) renewOnce(t *testing.T) error {
	t.Helper()
	select {
	case g.permit <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("no driver tried to renew its lease")
	}
	select {
	case err := <-g.renewed:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal")
		return nil
	}
}

func newRenewGate(clock *storetest.Clock) *renewGate {
	return &renewGate{Memory: store.NewMemoryClock(clock.Now), permit: make(chan struct{}), renewed: make(chan error, 1)}
}

// A driver renews its lease while it waits on a slow write, so that the
// run is not taken from it when the lease's first term runs out.
func TestLeaseIsRenewedWhileDriving(t *testing.T) {
	const ttl = 300 * time.Millisecond
	clock := storetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	st := newRenewGate(clock)
	g := newGatedWrite()
	runID, cfg := pausedWrite(t, st, g)
	a := cfg("driver-a")
	a.LeaseTTL = ttl
	first := resumeAsync(t, a, runID)
	g.waitStarted(t)

	clock.Advance(2 * ttl / 3)
	if err := st.renewOnce(t); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	clock.Advance(2 * ttl / 3) // past the first term, within the renewed one
	second, err := loop.NewRunner(cfg("driver-b"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := second.Resume(context.Background(), runID)
	held := mustBeHeld(t, res, err, "driver-a:")
	if want := clock.Now().Add(-2 * ttl / 3).Add(ttl); !held.Expires.Equal(want) {
		t.Fatalf("the lease runs until %v, want the renewed term's end %v", held.Expires, want)
	}

	close(g.release)
	d := wait(t, first)
	mustStatus(t, d.res, d.err, loop.FinalAnswer)
	if n := g.applied.Load(); n != 1 {
		t.Fatalf("the refund was applied %d times", n)
	}
}

// A driver whose lease was taken over (it was cut off past its expiry)
// stops at its next renewal and records nothing more: its appends are
// fenced by the lease, and the error says who has the run now.
func TestLostLeaseStopsTheDriver(t *testing.T) {
	const ttl = 300 * time.Millisecond
	clock := storetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	st := newRenewGate(clock)
	g := newGatedWrite()
	runID, cfg := pausedWrite(t, st, g)
	a := cfg("driver-a")
	a.LeaseTTL = ttl
	first := resumeAsync(t, a, runID)
	g.waitStarted(t)
	before := eventCount(t, st, runID)

	clock.Advance(ttl)
	if _, err := st.AcquireLease(context.Background(), runID, "usurper:9:9", time.Minute); err != nil {
		t.Fatalf("taking the expired lease over: %v", err)
	}
	if err := st.renewOnce(t); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("renewal after the takeover: err = %v, want ErrLeaseLost", err)
	}
	d := wait(t, first)
	var ie *loop.InterruptedError
	if d.res != nil || !errors.As(d.err, &ie) || !errors.Is(d.err, store.ErrLeaseLost) ||
		!strings.Contains(d.err.Error(), "usurper:9:9") {
		t.Fatalf("driver after losing its lease: result %v, err = %v; want an InterruptedError naming the new holder", d.res != nil, d.err)
	}
	if n := eventCount(t, st, runID); n != before {
		t.Fatalf("the driver that lost its lease recorded %d more events", n-before)
	}
}

func TestNegativeLeaseTTLIsRefused(t *testing.T) {
	f := newFixture(t)
	_, err := loop.NewRunner(loop.Config{Model: stepModel(llmtest.Text("hi")), Tools: f.reg, LeaseTTL: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "LeaseTTL is -1s") {
		t.Fatalf("err = %v, want one naming LeaseTTL", err)
	}
}
