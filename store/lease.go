package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Lease is one driver's hold on a run: while it lasts, no other driver may
// take the run. Expires is on the store's clock.
type Lease struct {
	RunID   string    `json:"run_id"`
	Owner   string    `json:"owner"`
	Expires time.Time `json:"expires"`
}

// Leaser is an optional ability of an EventLog: a lease per run, so that
// one driver at a time drives it. The sequence check of Append already
// keeps a log from forking, but only once both drivers append; by then
// both may have acted on the world (the second one finding the first's
// write in flight, and stopping the run with tool_outcome_unknown). A
// driver that holds the lease before it reads the log never overlaps
// another.
//
// A lease is held by an owner (a string that must be unique to one
// driver) until it expires; the holder renews it while it drives and
// releases it when it stops. An expired lease is anyone's: that is how a
// crashed holder's run is taken over. Expiry is decided on the store's own
// clock, never the caller's, so drivers on different machines agree.
//
// The methods are named for leases, not plainly Acquire and Release,
// because stores implement Ledger too, whose Release takes a key.
type Leaser interface {
	// AcquireLease gives runID's lease to owner for ttl from now, if the
	// run has no lease, its lease has expired, or owner holds it already
	// (then it is renewed). Otherwise nothing changes and the error is a
	// *LeaseHeldError naming the holder. The check and the change are one
	// atomic step, also across processes for stores on disk.
	AcquireLease(ctx context.Context, runID, owner string, ttl time.Duration) (Lease, error)
	// RenewLease extends owner's lease to ttl from now. It fails with an
	// error matching ErrLeaseLost if owner no longer holds the lease
	// (another owner took it after it expired, or it was released), and
	// never takes a lease back: a driver that lost its lease must stop,
	// since the run may have moved on without it. A lease that expired but
	// that nobody took is still owner's, and is renewed.
	RenewLease(ctx context.Context, runID, owner string, ttl time.Duration) (Lease, error)
	// ReleaseLease ends owner's lease, so the next driver need not wait
	// for it to expire. Releasing a lease owner does not hold does
	// nothing and is not an error.
	ReleaseLease(ctx context.Context, runID, owner string) error
	// AppendLeased is Append fenced by the lease: it appends only while
	// lease.Owner holds lease.RunID's lease, checked in the same atomic
	// step, and otherwise writes nothing and fails with an error matching
	// ErrLeaseLost. A driver whose lease was taken over (it was paused, or
	// cut off from the store, past its expiry) thus cannot add to a log
	// that its successor has read. Expiry alone does not fence: while
	// nobody has taken the lease, its owner's appends are still the only
	// ones and go through.
	//
	// Append itself ignores leases. Writers that add one event under the
	// sequence check, such as a recorded approval, need no lease: if a
	// driver appended first, they fail with ErrSeqConflict and nothing is
	// lost.
	//
	// Fencing is a method of its own, rather than an owner carried in
	// Append's context, so that it shows in the type: a wrapper that
	// embeds a store and overrides Append (to count or mark appends) must
	// override AppendLeased as well, or the embedded one is called.
	AppendLeased(ctx context.Context, lease Lease, events []EventRecord, summary RunSummary) error
}

// Errors of Leaser. A *LeaseHeldError matches ErrLeaseHeld, and also
// ErrLeaseLost when it reports a lease taken from its owner.
var (
	ErrLeaseHeld = errors.New("store: the run is being driven by another owner")
	ErrLeaseLost = errors.New("store: the driver's lease on the run was lost")
)

// LeaseHeldError says that another owner holds a run's lease: who, and
// until when, so that the person or program refused knows whom to wait
// for and for how long at most.
type LeaseHeldError struct {
	RunID string
	// Owner holds the lease until Expires (the store's clock), unless it
	// renews it.
	Owner   string
	Expires time.Time
	// Lost is the owner the lease was taken from, when RenewLease or
	// AppendLeased found it held by another; empty when AcquireLease was
	// refused.
	Lost string
}

func (e *LeaseHeldError) Error() string {
	until := e.Expires.UTC().Format(time.RFC3339Nano)
	if e.Lost != "" {
		return fmt.Sprintf("store: run %s is no longer driven by %s: %s took its lease over (held until %s)", e.RunID, e.Lost, e.Owner, until)
	}
	return fmt.Sprintf("store: run %s is being driven by %s (its lease is held until %s)", e.RunID, e.Owner, until)
}

// Is reports ErrLeaseHeld always, and ErrLeaseLost for a lease taken from
// its owner.
func (e *LeaseHeldError) Is(target error) bool {
	return target == ErrLeaseHeld || (target == ErrLeaseLost && e.Lost != "")
}

// LeaseLost is the error a Leaser returns when owner's lease on runID is
// held by holder until expires, or (holder "") by nobody: it matches
// ErrLeaseLost, and ErrLeaseHeld when another holds it. Every store words
// the loss alike through it.
func LeaseLost(runID, owner, holder string, expires time.Time) error {
	if holder == "" {
		return fmt.Errorf("%w: run %s has no lease held by %s (it was released)", ErrLeaseLost, runID, owner)
	}
	return &LeaseHeldError{RunID: runID, Owner: holder, Expires: expires, Lost: owner}
}

// CheckLeaseArgs is the argument check every Leaser makes: a run, an owner
// and a positive time to live.
func CheckLeaseArgs(runID, owner string, ttl time.Duration) error {
	switch {
	case runID == "":
		return errors.New("store: a lease needs a run ID")
	case owner == "":
		return errors.New("store: a lease needs an owner")
	case ttl <= 0:
		return fmt.Errorf("store: a lease's time to live is %v; want a positive duration", ttl)
	}
	return nil
}
