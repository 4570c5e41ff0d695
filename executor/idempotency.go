package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/store"
)

// guardedWrite wraps the execution of one write call with the ledger: it
// replays a finished write, refuses a key reused with other arguments,
// reconciles a write left in flight, and records the outcome of the one
// it executes.
func (e *Executor) guardedWrite(ctx context.Context, c Call, first *prepared, w *waiter) Outcome {
	start := e.opts.Now()
	if err := ctx.Err(); err != nil {
		// The run has ended: the write is skipped, and the ledger left
		// alone (a claim here would leave a key in flight for a write that
		// never started, or fail on a store that honours the context).
		o := e.ended(&c, 0, start, err)
		o.IdempotencyKey = c.IdempotencyKey
		return o
	}
	// The ledger is shared between processes, so its times are the real
	// clock's, whatever clock stamps the outcomes.
	w.hold() // the ledger may be slow
	rec := store.Record{Key: c.IdempotencyKey, ArgsHash: c.ArgsHash, RunID: c.RunID, CallID: c.Call.ID,
		Tool: c.Call.Name, CreatedAt: time.Now()}
	old, claimed, err := e.ledger.Claim(ctx, rec)
	if err != nil {
		// Without the ledger the write cannot be made safe; it does not run.
		return e.refused(c, start, llm.KindUnavailable, "the idempotency ledger is unavailable: "+err.Error())
	}
	e.maybePrune(ctx, rec.CreatedAt)
	if !claimed {
		return e.existing(ctx, c, old, start)
	}
	return e.finishClaimed(ctx, c, rec, e.run(ctx, c, first, w))
}

// release deletes claim's record if it is still that claim. A ledger that
// cannot compare (no store.ClaimReleaser) releases by key alone.
func (e *Executor) release(ctx context.Context, claim store.Record) error {
	var err error
	if cr, ok := e.ledger.(store.ClaimReleaser); ok {
		err = cr.ReleaseClaim(ctx, claim)
	} else {
		err = e.ledger.Release(ctx, claim.Key)
	}
	if errors.Is(err, store.ErrNotInFlight) {
		return nil // someone else settled or took over the key: not ours to touch
	}
	return err
}

// finishClaimed records what became of a write this executor claimed,
// also once ctx has ended, but by its deadline plus store.DeadlineGrace:
// a frozen ledger leaves the key in flight rather than hold the run.
func (e *Executor) finishClaimed(ctx context.Context, c Call, claim store.Record, o Outcome) Outcome {
	o.IdempotencyKey = c.IdempotencyKey
	ctx = store.Detach(ctx)
	switch {
	case o.Result.Status == llm.StatusOK:
		if err := e.finish(ctx, c.IdempotencyKey, o.Result); err != nil {
			o.Err = joinErr(o.Err, "recording the write's result: "+err.Error())
		}
		return o
	case o.Attempts == 0:
		// The run ended before the handler started: nothing was written,
		// so the key is released below.
	case o.TimedOut || o.StopRun || o.Result.ErrorKind == llm.KindOutcomeUnknown:
		// Timed out, cut short, or its answer lost: the write may or may
		// not have happened.
		return e.reconcile(ctx, c, o)
	}
	// The handler reported a failure: nothing was written, so a later
	// attempt with this key may run.
	if err := e.release(ctx, claim); err != nil {
		o.Err = joinErr(o.Err, "releasing the idempotency key: "+err.Error())
	}
	return o
}

// existing handles a key that already has a record.
func (e *Executor) existing(ctx context.Context, c Call, old store.Record, start time.Time) Outcome {
	if old.ArgsHash != c.ArgsHash {
		return e.refused(c, start, llm.KindIdempotencyConflict, fmt.Sprintf(
			"idempotency key %q was first used by call %s with other arguments; this call was not executed", old.Key, old.CallID))
	}
	if old.State == store.Done {
		if o, undone := e.undone(ctx, c, old, start); undone {
			return o
		}
		return e.replayed(c, old, start)
	}
	// In flight: another attempt started this write and never recorded
	// how it ended (a crash, a timeout). Ask the tool before deciding.
	if !c.Tool.CanReconcile() {
		return e.unknown(c, start, fmt.Sprintf(
			"an earlier write with idempotency key %q never finished and %s has no status look-up", old.Key, c.Call.Name))
	}
	content, applied, err := e.lookup(c)
	switch {
	case err != nil:
		return e.unknown(c, start, "the status look-up failed: "+err.Error())
	case applied:
		res := llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Status: llm.StatusOK, Content: content}
		// ErrNotInFlight: the attempt that claimed the key recorded its
		// outcome meanwhile; the look-up's answer stands.
		if err := e.finish(ctx, c.IdempotencyKey, res); err != nil && !errors.Is(err, store.ErrNotInFlight) {
			return e.refused(c, start, llm.KindUnavailable, "recording the reconciled write: "+err.Error())
		}
		return Outcome{Result: res, Started: start, Duration: e.opts.Now().Sub(start), IdempotencyKey: c.IdempotencyKey, Reconciled: true}
	}
	// Not written (yet). If the earlier attempt may still be running, its
	// write could land after our look-up: wait it out rather than race it.
	if e.stillRunning(c.IdempotencyKey) {
		return e.refused(c, start, llm.KindWriteInProgress, fmt.Sprintf(
			"the write with idempotency key %q timed out but its handler is still running; it may yet land", old.Key))
	}
	// Another process's attempt: if it may still be running, its write
	// could land after our look-up.
	if age := time.Since(old.UpdatedAt); age < e.Timeout(&c) {
		return e.refused(c, start, llm.KindWriteInProgress, fmt.Sprintf(
			"a write with idempotency key %q started %v ago and may still be running", old.Key, age.Round(time.Millisecond)))
	}
	// The earlier attempt is over and wrote nothing: take the key over.
	// Release exactly the stale claim: if another attempt took the key
	// over meanwhile, its claim stays, and claiming again below finds it.
	if err := e.release(ctx, old); err != nil {
		return e.refused(c, start, llm.KindUnavailable, "releasing the stale idempotency key: "+err.Error())
	}
	return e.guardedWrite(ctx, c, nil, nil)
}

// UndoKey is the idempotency key of the compensation of the write with
// key: the compensation is itself a write, done once under it however
// often a resumed run asks for it, and its record tells any later call of
// key that the write was undone.
func UndoKey(key string) string { return undoPrefix + key }

const undoPrefix = "undo:"

// undone refuses a call whose key is done but whose write was undone
// since, or is being undone: the ledger keeps the original's key done, and
// replaying its result would tell the model, in whichever run asks, that a
// write holds which no longer does. The call does not run either: its key
// names a write that already happened once. A compensation's own key is
// never undone, and a ledger that cannot say fails closed.
func (e *Executor) undone(ctx context.Context, c Call, old store.Record, start time.Time) (Outcome, bool) {
	if strings.HasPrefix(old.Key, undoPrefix) {
		return Outcome{}, false
	}
	undo, found, err := e.ledger.Lookup(ctx, UndoKey(old.Key))
	switch {
	case err != nil:
		return e.refused(c, start, llm.KindUnavailable, fmt.Sprintf(
			"the idempotency ledger could not say whether the write with key %q was undone: %v", old.Key, err)), true
	case !found:
		return Outcome{}, false
	case undo.State == store.Done:
		return e.refused(c, start, llm.KindIdempotencyConflict, fmt.Sprintf(
			"the write with idempotency key %q (run %s, call %s) was undone by its compensation (run %s, call %s); "+
				"its result is not replayed, and it is not done again under the same key", old.Key, old.RunID, old.CallID, undo.RunID, undo.CallID)), true
	default:
		return e.refused(c, start, llm.KindWriteInProgress, fmt.Sprintf(
			"the write with idempotency key %q (run %s, call %s) is being undone by its compensation (run %s, call %s); "+
				"whether it still holds is not known yet", old.Key, old.RunID, old.CallID, undo.RunID, undo.CallID)), true
	}
}

func (e *Executor) unknown(c Call, start time.Time, msg string) Outcome {
	o := e.refused(c, start, llm.KindOutcomeUnknown, msg)
	o.Result.Status, o.OutcomeUnknown, o.StopRun = llm.StatusSkipped, true, true
	return o
}

// reconcile resolves a write this executor claimed whose outcome is
// unknown: the tool's status look-up decides, and without one the outcome
// stays unknown. ctx bounds the ledger calls (it is detached from the
// run's cancellation already).
func (e *Executor) reconcile(ctx context.Context, c Call, o Outcome) Outcome {
	if !c.Tool.CanReconcile() {
		o.OutcomeUnknown, o.StopRun = true, true
		return o
	}
	content, applied, err := e.lookup(c)
	switch {
	case err != nil:
		o.OutcomeUnknown, o.StopRun = true, true
		o.Err = joinErr(o.Err, "status look-up failed: "+err.Error())
	case applied:
		res := llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Status: llm.StatusOK, Content: content}
		// ErrNotInFlight: another attempt reconciled the key meanwhile.
		if err := e.finish(ctx, c.IdempotencyKey, res); err != nil && !errors.Is(err, store.ErrNotInFlight) {
			o.OutcomeUnknown, o.StopRun = true, true
			o.Err = joinErr(o.Err, "recording the reconciled write: "+err.Error())
			return o
		}
		// The write happened: the call succeeded, late.
		o.Err = "settled by the status look-up after: " + o.Err
		o.Result, o.TimedOut, o.StopRun, o.Reconciled = res, false, false, true
	default:
		// Not written yet. The handler may still be running (it ignored
		// its context), so the key stays in flight and the timeout stands:
		// a later attempt looks again once the record is older than the
		// tool's timeout.
		o.Err = joinErr(o.Err, "the status look-up found no write yet")
	}
	return o
}

// lookup runs the tool's status look-up under the tool's own timeout,
// detached from the run's context: a canceled run still needs to know.
func (e *Executor) lookup(c Call) (json.RawMessage, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), e.Timeout(&c))
	defer cancel()
	type answer struct {
		content json.RawMessage
		applied bool
		err     error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- answer{err: fmt.Errorf("status look-up panicked: %v", p)}
			}
		}()
		content, applied, err := c.Tool.Reconcile(ctx, c.Call.Arguments)
		done <- answer{content, applied, err}
	}()
	select {
	case a := <-done:
		return a.content, a.applied, a.err
	case <-ctx.Done():
		return nil, false, fmt.Errorf("status look-up did not answer within %v", e.Timeout(&c))
	}
}

func (e *Executor) finish(ctx context.Context, key string, res llm.ToolResult) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return e.ledger.Finish(ctx, key, b, time.Now())
}

func (e *Executor) replayed(c Call, old store.Record, start time.Time) Outcome {
	var res llm.ToolResult
	if err := json.Unmarshal(old.Result, &res); err != nil {
		return e.refused(c, start, llm.KindInternal, "the stored result of idempotency key "+old.Key+" is unreadable: "+err.Error())
	}
	// The stored result answered another call; this one gets it under
	// its own ID.
	res.CallID, res.Name = c.Call.ID, c.Call.Name
	return Outcome{Result: res, Started: start, Duration: e.opts.Now().Sub(start), IdempotencyKey: c.IdempotencyKey, Replayed: true}
}

func (e *Executor) refused(c Call, start time.Time, kind llm.ErrorKind, msg string) Outcome {
	o := e.outcome(&c, 0, start, llm.StatusError, kind, msg)
	o.IdempotencyKey, o.Err = c.IdempotencyKey, msg
	return o
}

// maybePrune deletes expired ledger records at most once per tenth of the
// retention period.
func (e *Executor) maybePrune(ctx context.Context, now time.Time) {
	if e.opts.LedgerRetention <= 0 {
		return
	}
	last := e.lastPrune.Load()
	if now.UnixNano()-last < int64(e.opts.LedgerRetention/10) || !e.lastPrune.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	_, _ = e.ledger.Prune(ctx, now.Add(-e.opts.LedgerRetention)) // best effort; the next prune retries
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
