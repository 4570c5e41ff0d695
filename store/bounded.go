package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// DefaultCallTimeout is how long one store call may take, by default,
// before its caller stops waiting for it: far longer than a healthy
// store's slowest commit, short enough that a frozen store (a stopped
// server, a network partition that drops packets without a reset) does
// not hold a run for good.
const DefaultCallTimeout = 10 * time.Second

// DeadlineGrace is how long after a run's deadline its store calls may
// still take: long enough to record how the run ended on a healthy store,
// short enough that a frozen one ends the run soon after its deadline.
const DeadlineGrace = 2 * time.Second

// CallTimeoutError says a store call did not answer in time. Its outcome
// is unknown: it may yet have happened. A run that gets one stops
// (interrupted) and resumes from what the store holds.
type CallTimeoutError struct {
	// Op is the call, such as "Append" or "Finish".
	Op string
	// After is how long the caller waited.
	After time.Duration
	// Err is the context's error, or the store's own when it gave up at
	// the same moment.
	Err error
}

func (e *CallTimeoutError) Error() string {
	return fmt.Sprintf("store: %s did not answer within %v (is the store frozen or cut off?): %v",
		e.Op, e.After.Round(time.Millisecond), e.Err)
}

// Unwrap returns the cause, which matches context.DeadlineExceeded.
func (e *CallTimeoutError) Unwrap() error { return e.Err }

// callDeadlineKey carries a time by which store calls must end.
type callDeadlineKey struct{}

// WithCallDeadline returns ctx carrying t as the time by which the store
// calls of a bounded store (BoundEventLog, BoundLedger) made under it end.
// Unlike a context deadline it survives context.WithoutCancel, which is
// how a run records its end after its context has ended: with a frozen
// store that record gives up at t. A later t than ctx already carries is
// ignored.
func WithCallDeadline(ctx context.Context, t time.Time) context.Context {
	if old, ok := CallDeadline(ctx); ok && !t.Before(old) {
		return ctx
	}
	return context.WithValue(ctx, callDeadlineKey{}, t)
}

// CallDeadline returns the time WithCallDeadline set in ctx, if any.
func CallDeadline(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(callDeadlineKey{}).(time.Time)
	return t, ok
}

// Detach returns a context for recording what happened after ctx ends:
// not canceled with ctx, but, when ctx has a deadline, carrying that
// deadline plus DeadlineGrace as its call deadline (WithCallDeadline).
func Detach(ctx context.Context) context.Context {
	out := context.WithoutCancel(ctx)
	if d, ok := ctx.Deadline(); ok {
		out = WithCallDeadline(out, d.Add(DeadlineGrace))
	}
	return out
}

// callWithin runs f with ctx bounded by the earliest of ctx's deadline,
// its call deadline and timeout from now, and returns when f does or when that
// time comes, whichever is first. In the second case f may still be
// running; it is left to finish on its own (its result is dropped), so
// that a store that ignores its context cannot hold the caller either.
// The caller's own cancellation is left to f, as without the bound: a
// store decides what a canceled call did.
func callWithin[T any](ctx context.Context, timeout time.Duration, op string, f func(context.Context) (T, error)) (T, error) {
	start := time.Now()
	end := start.Add(timeout)
	if t, ok := CallDeadline(ctx); ok && t.Before(end) {
		end = t
	}
	if t, ok := ctx.Deadline(); ok && t.Before(end) {
		end = t
	}
	var zero T
	wait := time.Until(end)
	if wait <= 0 {
		return zero, &CallTimeoutError{Op: op, Err: context.DeadlineExceeded}
	}
	cctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	type answer struct {
		v        T
		err      error
		panicked any
	}
	done := make(chan answer, 1) // f never blocks on sending, even once abandoned
	go func() {
		// A store that panics panics on the caller's goroutine, as it
		// would without the bound, so that the caller's deferred calls
		// run; a call already given up on has no caller left to tell.
		defer func() {
			if p := recover(); p != nil {
				done <- answer{panicked: p}
			}
		}()
		v, err := f(cctx)
		done <- answer{v: v, err: err}
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case a := <-done:
		if a.panicked != nil {
			panic(a.panicked)
		}
		if a.err != nil && ctx.Err() == nil && cctx.Err() != nil {
			// The store gave up on the bound's deadline itself.
			return a.v, timedOut(op, time.Since(start), a.err)
		}
		return a.v, a.err
	case <-timer.C:
		return zero, timedOut(op, time.Since(start), context.DeadlineExceeded)
	}
}

// timedOut is the error of a call that ran out of time.
func timedOut(op string, after time.Duration, err error) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
	}
	return &CallTimeoutError{Op: op, After: after, Err: err}
}

func callWithin0(ctx context.Context, timeout time.Duration, op string, f func(context.Context) error) error {
	_, err := callWithin(ctx, timeout, op, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}

// BoundEventLog returns el with every call bounded: each ends within
// timeout (DefaultCallTimeout if it is not positive), and by its context's
// call deadline (WithCallDeadline), whether or not el honours its context.
// The result implements Leaser exactly when el does.
func BoundEventLog(el EventLog, timeout time.Duration) EventLog {
	if el == nil {
		return nil
	}
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	switch b := el.(type) {
	case *boundedLeaser:
		el = b.el
	case *boundedLog:
		el = b.el
	}
	bl := boundedLog{el: el, timeout: timeout}
	if l, ok := el.(Leaser); ok {
		return &boundedLeaser{boundedLog: bl, l: l}
	}
	return &bl
}

// boundedLog is an EventLog whose calls are bounded.
type boundedLog struct {
	el      EventLog
	timeout time.Duration
}

func (b *boundedLog) Append(ctx context.Context, runID string, events []EventRecord, summary RunSummary) error {
	return callWithin0(ctx, b.timeout, "Append", func(ctx context.Context) error {
		return b.el.Append(ctx, runID, events, summary)
	})
}

func (b *boundedLog) Events(ctx context.Context, runID string) ([]EventRecord, error) {
	return callWithin(ctx, b.timeout, "Events", func(ctx context.Context) ([]EventRecord, error) {
		return b.el.Events(ctx, runID)
	})
}

func (b *boundedLog) Runs(ctx context.Context, status string) ([]RunSummary, error) {
	return callWithin(ctx, b.timeout, "Runs", func(ctx context.Context) ([]RunSummary, error) {
		return b.el.Runs(ctx, status)
	})
}

// Unwrap returns the event log that was bounded.
func (b *boundedLog) Unwrap() EventLog { return b.el }

// boundedLeaser is a bounded EventLog that has leases.
type boundedLeaser struct {
	boundedLog
	l Leaser
}

func (b *boundedLeaser) AcquireLease(ctx context.Context, runID, owner string, ttl time.Duration) (Lease, error) {
	return callWithin(ctx, b.timeout, "AcquireLease", func(ctx context.Context) (Lease, error) {
		return b.l.AcquireLease(ctx, runID, owner, ttl)
	})
}

func (b *boundedLeaser) RenewLease(ctx context.Context, runID, owner string, ttl time.Duration) (Lease, error) {
	return callWithin(ctx, b.timeout, "RenewLease", func(ctx context.Context) (Lease, error) {
		return b.l.RenewLease(ctx, runID, owner, ttl)
	})
}

func (b *boundedLeaser) ReleaseLease(ctx context.Context, runID, owner string) error {
	return callWithin0(ctx, b.timeout, "ReleaseLease", func(ctx context.Context) error {
		return b.l.ReleaseLease(ctx, runID, owner)
	})
}

func (b *boundedLeaser) AppendLeased(ctx context.Context, lease Lease, events []EventRecord, summary RunSummary) error {
	return callWithin0(ctx, b.timeout, "AppendLeased", func(ctx context.Context) error {
		return b.l.AppendLeased(ctx, lease, events, summary)
	})
}

// BoundLedger returns l with every call bounded as BoundEventLog bounds an
// event log's. The result implements ClaimReleaser exactly when l does.
func BoundLedger(l Ledger, timeout time.Duration) Ledger {
	if l == nil {
		return nil
	}
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	switch b := l.(type) {
	case *boundedClaimLedger:
		l = b.l
	case *boundedLedger:
		l = b.l
	}
	bl := boundedLedger{l: l, timeout: timeout}
	if cr, ok := l.(ClaimReleaser); ok {
		return &boundedClaimLedger{boundedLedger: bl, cr: cr}
	}
	return &bl
}

// boundedLedger is a Ledger whose calls are bounded.
type boundedLedger struct {
	l       Ledger
	timeout time.Duration
}

type claimAnswer struct {
	rec     Record
	claimed bool
}

func (b *boundedLedger) Claim(ctx context.Context, rec Record) (Record, bool, error) {
	a, err := callWithin(ctx, b.timeout, "Claim", func(ctx context.Context) (claimAnswer, error) {
		existing, claimed, err := b.l.Claim(ctx, rec)
		return claimAnswer{existing, claimed}, err
	})
	return a.rec, a.claimed, err
}

func (b *boundedLedger) Finish(ctx context.Context, key string, result json.RawMessage, at time.Time) error {
	return callWithin0(ctx, b.timeout, "Finish", func(ctx context.Context) error {
		return b.l.Finish(ctx, key, result, at)
	})
}

func (b *boundedLedger) Release(ctx context.Context, key string) error {
	return callWithin0(ctx, b.timeout, "Release", func(ctx context.Context) error {
		return b.l.Release(ctx, key)
	})
}

func (b *boundedLedger) Lookup(ctx context.Context, key string) (Record, bool, error) {
	a, err := callWithin(ctx, b.timeout, "Lookup", func(ctx context.Context) (claimAnswer, error) {
		rec, ok, err := b.l.Lookup(ctx, key)
		return claimAnswer{rec, ok}, err
	})
	return a.rec, a.claimed, err
}

func (b *boundedLedger) Prune(ctx context.Context, cutoff time.Time) (int, error) {
	return callWithin(ctx, b.timeout, "Prune", func(ctx context.Context) (int, error) {
		return b.l.Prune(ctx, cutoff)
	})
}

// Unwrap returns the ledger that was bounded.
func (b *boundedLedger) Unwrap() Ledger { return b.l }

// boundedClaimLedger is a bounded Ledger that can release a given claim.
type boundedClaimLedger struct {
	boundedLedger
	cr ClaimReleaser
}

func (b *boundedClaimLedger) ReleaseClaim(ctx context.Context, claim Record) error {
	return callWithin0(ctx, b.timeout, "ReleaseClaim", func(ctx context.Context) error {
		return b.cr.ReleaseClaim(ctx, claim)
	})
}
