package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolloop/toolloop/store"
)

// InterruptedError says a durable run could not record its progress and
// stopped being driven. Nothing was lost that the store had accepted: the
// run resumes from there with Resume.
type InterruptedError struct {
	RunID string
	Err   error
}

// Error says what happened and what to do, by cause: only a failing store
// is something to wait out.
func (e *InterruptedError) Error() string {
	hint := "resume it once the store is back"
	var enc *eventEncodingError
	switch {
	case errors.Is(e.Err, store.ErrLeaseLost):
		return fmt.Sprintf("toolloop: run %s stopped being driven here: %v (nothing more was recorded by this driver; the run goes on where its lease is held, or with Resume once it is free)", e.RunID, e.Err)
	case errors.As(e.Err, &enc):
		hint = "nothing after the event before it was recorded; this is a bug in toolloop, please report it"
	case errors.Is(e.Err, store.ErrSeqConflict):
		hint = "another process wrote to this run at the same time; make sure only one drives it, then resume it"
	}
	return fmt.Sprintf("toolloop: run %s interrupted: %v (%s)", e.RunID, e.Err, hint)
}

// Unwrap returns the cause: the store's error, or why an event could not
// be encoded.
func (e *InterruptedError) Unwrap() error { return e.Err }

// eventEncodingError is an event that could not be encoded for the store.
type eventEncodingError struct {
	seq int
	err error
}

func (e *eventEncodingError) Error() string {
	return fmt.Sprintf("encoding event %d: %v", e.seq, e.err)
}

func (e *eventEncodingError) Unwrap() error { return e.err }

// flush appends the events not yet in the store, with the run's summary,
// in one call (one transaction, one fsync on SQLite).
func (d *drive) flush() error {
	st := d.r.cfg.Store
	if st == nil || d.flushed == len(d.log) {
		return nil
	}
	recs := make([]store.EventRecord, 0, len(d.log)-d.flushed)
	for i := d.flushed; i < len(d.log); i++ {
		ev := &d.log[i]
		data, err := json.Marshal(ev)
		if err != nil {
			return &InterruptedError{RunID: d.state.RunID, Err: &eventEncodingError{seq: ev.Seq, err: err}}
		}
		recs = append(recs, store.EventRecord{Seq: ev.Seq, Kind: string(ev.Kind), At: ev.At, Data: data})
	}
	// A canceled run still records how it ended, but by its deadline
	// plus a grace: a frozen store interrupts the run then (each call is
	// bounded by Config.StoreTimeout as well).
	ctx := store.Detach(d.ctx)
	if until, ok := store.CallDeadline(ctx); ok {
		if h, ok := d.ctx.Value(leaseHoldKey{}).(*leaseHold); ok {
			h.releaseBy(until)
		}
	}
	var err error
	if d.lease != nil {
		// The store has leases (holdLease found a store.Leaser).
		err = st.(store.Leaser).AppendLeased(ctx, *d.lease, recs, summarize(&d.state, d.log))
	} else {
		err = st.Append(ctx, d.state.RunID, recs, summarize(&d.state, d.log))
	}
	if err != nil {
		return &InterruptedError{RunID: d.state.RunID, Err: err}
	}
	d.flushed = len(d.log)
	d.observe()
	return nil
}

// RunningStatus is the summary status of a run that has not stopped.
const RunningStatus = "running"

// Summary is the store's summary of the run whose log is events (which
// must begin with its started event), as a driver records it beside the
// log: for a log brought into a store from elsewhere (an import).
func Summary(events []Event) store.RunSummary { return summarize(Replay(events), events) }

func summarize(s *State, log []Event) store.RunSummary {
	sum := store.RunSummary{
		RunID: s.RunID, SessionID: s.SessionID, Status: ListStatus(s, log), Detail: s.Detail, Steps: s.Steps,
		ToolCalls: s.ToolCalls, InputTokens: s.Usage.InputTokens, OutputTokens: s.Usage.OutputTokens,
		StartedAt: s.StartedAt, UpdatedAt: log[len(log)-1].At,
	}
	if listed := Listed(s, log); len(listed) > 0 {
		sum.Pending, _ = json.Marshal(listed) // plain strings and bytes: cannot fail
	}
	return sum
}

// LoadEvents reads and decodes a run's log from a store.
func LoadEvents(ctx context.Context, st store.EventLog, runID string) ([]Event, error) {
	recs, err := st.Events(ctx, runID)
	if errors.Is(err, store.ErrUnknownRun) {
		return nil, fmt.Errorf("loop: no run %q in the store: %w", runID, store.ErrUnknownRun)
	}
	if err != nil {
		return nil, err
	}
	events := make([]Event, len(recs))
	for i, rec := range recs {
		// A log with a hole cannot be replayed, and appending to it would
		// fail on the store's sequence check for ever: say what is missing.
		if want := i + 1; rec.Seq != want {
			if rec.Seq > want {
				return nil, fmt.Errorf("loop: run %s: the store has no event %d (after event %d comes %d); the log cannot be replayed", runID, want, i, rec.Seq)
			}
			return nil, fmt.Errorf("loop: run %s: the store has event %d again, or out of order, after event %d", runID, rec.Seq, i)
		}
		if err := json.Unmarshal(rec.Data, &events[i]); err != nil {
			return nil, fmt.Errorf("loop: run %s, event %d: %w", runID, rec.Seq, err)
		}
		if events[i].Seq != rec.Seq {
			return nil, fmt.Errorf("loop: run %s: event %d is stored as %d", runID, events[i].Seq, rec.Seq)
		}
	}
	return events, nil
}

// Replay rebuilds a run's state from its events.
func Replay(events []Event) *State {
	var s State
	for i := range events {
		Next(&s, &events[i])
	}
	return &s
}

// Decide records a human's answer to a call that paused a durable run for
// confirmation: who decided, when, and why go into the run's log. The run
// goes on with Resume once every pending call is answered. Answering a call
// that is not pending, or answering it twice, is an error and records
// nothing: the error is CheckAnswer's *AnswerError. A call someone else
// answered first is refused with ErrAlreadyAnswered, whether their answer
// came long before or a moment before this one. Answers to
// other calls of the run recorded at the same time do not make Decide
// fail: it reads the log again and records its answer after theirs.
func Decide(ctx context.Context, st store.EventLog, runID string, answer Confirmation, at time.Time) error {
	for range decideAttempts {
		events, err := LoadEvents(ctx, st, runID)
		if err != nil {
			return err
		}
		s := Replay(events)
		if err := checkLoggedAnswer(s, events, answer); err != nil {
			return err
		}
		ev := Event{Seq: len(events) + 1, At: at, Kind: ConfirmationDecided, Confirmation: &answer}
		events = append(events, ev)
		Next(s, &events[len(events)-1])
		data, err := json.Marshal(&ev)
		if err != nil {
			return err
		}
		err = st.Append(ctx, runID, []store.EventRecord{{Seq: ev.Seq, Kind: string(ev.Kind), At: at, Data: data}}, summarize(s, events))
		if !errors.Is(err, store.ErrSeqConflict) {
			return err
		}
		// Another process appended first: read what it recorded and
		// check the answer again.
	}
	return fmt.Errorf("loop: run %s kept changing while the answer was being recorded (%d attempts); try again", runID, decideAttempts)
}

// decideAttempts bounds how often Decide reads the log again after another
// writer appended first: a run has as many answers to record as it has
// pending calls, so a few rounds settle any race among the people
// answering them.
const decideAttempts = 8
