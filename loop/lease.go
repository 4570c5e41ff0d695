package loop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/toolloop/toolloop/store"
)

// DefaultLeaseTTL is Config.LeaseTTL's default: long enough that a busy
// store or a slow machine does not lose a lease between renewals (every
// third of it), short enough that a crashed driver's run can be taken
// over within half a minute.
const DefaultLeaseTTL = 30 * time.Second

// leaseHold is a drive's hold on its run's lease: taken before the run's
// log is read, renewed in the background, released when the drive ends.
// Its zero value holds nothing (a store without leases).
type leaseHold struct {
	st    store.Leaser
	lease *store.Lease
	// stop ends the renewals, also one under way (release need not
	// wait for a renewal a frozen store holds).
	stop context.CancelFunc
	done chan struct{}
	// cancel ends the drive's context when the lease is lost.
	cancel context.CancelCauseFunc
	// until is the call deadline of the drive's last append (unix
	// nanoseconds; 0 for none): the release gives up by then too, so
	// that a frozen store holds the run no longer than its appends.
	until atomic.Int64
}

// leaseHoldKey finds a drive's leaseHold in its context.
type leaseHoldKey struct{}

// releaseBy bounds the release by t.
func (h *leaseHold) releaseBy(t time.Time) { h.until.Store(t.UnixNano()) }

// holdLease takes runID's lease for a new owner when Config.Store has
// leases (store.Leaser) and keeps it renewed every third of Config.LeaseTTL
// until release. The context returned (ctx itself on an error) ends, with
// the loss as its cause, if the lease is lost meanwhile (another driver
// took it over after it expired): the drive then stops acting, and its
// appends, fenced by the lease, record nothing. A renewal that fails for
// another reason (the store is briefly unreachable) is tried again at the
// next tick; if the lease expires meanwhile and nobody takes it, the drive
// keeps it.
//
// A store without leases gets no hold: the sequence check of Append is its
// only guard against a second driver.
func (r *Runner) holdLease(ctx context.Context, runID string) (context.Context, *leaseHold, error) {
	l, ok := r.cfg.Store.(store.Leaser)
	if !ok {
		return ctx, &leaseHold{}, nil
	}
	ttl := r.cfg.LeaseTTL
	owner := r.cfg.LeaseOwner + ":" + randomID()[:8]
	lease, err := l.AcquireLease(ctx, runID, owner, ttl)
	if err != nil {
		var held *store.LeaseHeldError
		if errors.As(err, &held) {
			return ctx, nil, err
		}
		return ctx, nil, fmt.Errorf("loop: taking the lease of run %s: %w", runID, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	h := &leaseHold{st: l, lease: &lease, done: make(chan struct{}), cancel: cancel}
	ctx = context.WithValue(ctx, leaseHoldKey{}, h)
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	h.stop = stop
	go h.renew(rctx, ttl)
	return ctx, h, nil
}

// renew renews the lease every third of ttl until release, and ends the
// drive if it was lost.
func (h *leaseHold) renew(ctx context.Context, ttl time.Duration) {
	defer close(h.done)
	every := ttl / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return // released while the tick came
		}
		rctx, cancel := context.WithTimeout(ctx, every)
		_, err := h.st.RenewLease(rctx, h.lease.RunID, h.lease.Owner, ttl)
		cancel()
		if errors.Is(err, store.ErrLeaseLost) && ctx.Err() == nil {
			h.cancel(err)
			return
		}
	}
}

// release stops the renewals and gives the lease back, so that the next
// driver need not wait for it to expire. It reports no error: the run's
// outcome is recorded by then, and a lease that could not be released
// expires.
func (h *leaseHold) release(ctx context.Context) {
	if h.lease == nil {
		return
	}
	h.stop()
	<-h.done
	h.cancel(nil)
	rctx := context.WithoutCancel(ctx)
	if until := h.until.Load(); until != 0 {
		rctx = store.WithCallDeadline(rctx, time.Unix(0, until))
	}
	_ = h.st.ReleaseLease(rctx, h.lease.RunID, h.lease.Owner)
}

// defaultLeaseOwner names this process in leases: host and process ID.
func defaultLeaseOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}
