package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// WriteState is where a write stands in the ledger.
type WriteState string

// Write states. A record is in flight from just before the write executes
// until its result is recorded; one still in flight after a crash or a
// timeout is a write whose outcome is unknown.
const (
	InFlight WriteState = "in_flight"
	Done     WriteState = "done"
)

// Record is one idempotency key's entry.
type Record struct {
	Key string `json:"key"`
	// ArgsHash identifies the arguments the key was first used with; the
	// same key with other arguments is refused.
	ArgsHash string     `json:"args_hash"`
	State    WriteState `json:"state"`
	// Result is the final tool result (JSON) once State is Done.
	Result json.RawMessage `json:"result,omitempty"`
	RunID  string          `json:"run_id,omitempty"`
	CallID string          `json:"call_id,omitempty"`
	Tool   string          `json:"tool,omitempty"`
	// CreatedAt is when the key was claimed; UpdatedAt when it last changed.
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Ledger is the idempotency ledger: key -> arguments hash, state, result.
// All methods are safe for concurrent use, also across processes for
// stores on disk.
type Ledger interface {
	// Claim records rec (with State InFlight) unless its key already has a
	// record; then it returns that record and claimed=false. Claiming is
	// atomic: of two concurrent claims of one key exactly one succeeds.
	Claim(ctx context.Context, rec Record) (existing Record, claimed bool, err error)
	// Finish marks an in-flight key done with its result. Finishing a key
	// that is not in flight returns ErrNotInFlight.
	Finish(ctx context.Context, key string, result json.RawMessage, at time.Time) error
	// Release deletes an in-flight record whose write is known not to have
	// happened (it failed before touching anything), so a later attempt may
	// run. Releasing a done record returns ErrNotInFlight.
	Release(ctx context.Context, key string) error
	// Lookup returns the key's record.
	Lookup(ctx context.Context, key string) (Record, bool, error)
	// Prune deletes done records last updated before cutoff and returns
	// how many it deleted. In-flight records are kept whatever their age:
	// they are unresolved writes.
	Prune(ctx context.Context, cutoff time.Time) (int, error)
}

// ErrNotInFlight is returned by Finish and Release for a key with no
// in-flight record.
var ErrNotInFlight = errors.New("store: idempotency key is not in flight")

// ClaimReleaser is an optional Ledger ability the executor uses when a
// ledger has it: releasing a key only while its record is still the claim
// given (same key, run, call and claim time, still in flight). With it, an
// attempt that takes over a stale key can never delete a newer claim that
// another attempt made meanwhile, which would let two writes run.
type ClaimReleaser interface {
	ReleaseClaim(ctx context.Context, claim Record) error
}
