package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/trace"
)

// Export writes a run's log to w as JSON Lines, one event a line, in the
// form trace.ReadLog reads: self-contained (the started event holds the
// configuration and the first messages), whole when red is nil, and
// otherwise each event redacted by red (trace.RedactEvent): secrets
// masked, and with red's defaults arguments and results summarized, which
// leaves a log to read and share but not to replay, resume or import.
func Export(w io.Writer, events []loop.Event, red *trace.Redactor) error {
	if len(events) == 0 || events[0].Kind != loop.Started || events[0].Start == nil {
		return errors.New("replay: a run's log must begin with its started event")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range events {
		ev := &events[i]
		if red != nil {
			r := trace.RedactEvent(red, ev)
			ev = &r
		}
		if err := enc.Encode(ev); err != nil {
			return fmt.Errorf("replay: encoding event %d: %w", events[i].Seq, err)
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// ErrRunExists is returned by Import for a run the store already has.
var ErrRunExists = errors.New("the store already has a run with this ID")

// Import appends a run's log, read from an export, to st as a new run,
// with its summary, in one Append: all of it or nothing. It refuses a log
// that does not begin with its started event or has a hole, a log whose
// arguments the trace summarized (a run resumed from it would call tools
// with summaries), one with an event kind this version does not know
// (its summary would be wrong), and a run st already has (ErrRunExists). Any store
// works through store.EventLog: SQLite, PostgreSQL, memory.
func Import(ctx context.Context, st store.EventLog, events []loop.Event) error {
	if err := checkImport(events); err != nil {
		return err
	}
	runID := events[0].Start.RunID
	if err := loop.CheckRunID(runID); err != nil {
		return fmt.Errorf("replay: import: %w", err)
	}
	if _, err := st.Events(ctx, runID); err == nil {
		return fmt.Errorf("replay: import: run %s: %w", runID, ErrRunExists)
	} else if !errors.Is(err, store.ErrUnknownRun) {
		return err
	}
	recs := make([]store.EventRecord, len(events))
	for i := range events {
		ev := &events[i]
		data, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("replay: import: encoding event %d: %w", ev.Seq, err)
		}
		recs[i] = store.EventRecord{Seq: ev.Seq, Kind: string(ev.Kind), At: ev.At, Data: data}
	}
	err := st.Append(ctx, runID, recs, loop.Summary(events))
	if errors.Is(err, store.ErrSeqConflict) {
		// Another writer made the run between the check and the append.
		return fmt.Errorf("replay: import: run %s: %w", runID, ErrRunExists)
	}
	return err
}

// checkImport is Check: a log with a hole or summarized arguments is no
// run to keep, and one with an event kind this version does not know
// would be summarized wrongly (its status, its counters).
func checkImport(events []loop.Event) error {
	if err := Check(events); err != nil {
		return fmt.Errorf("replay: import: %w", err)
	}
	return nil
}
