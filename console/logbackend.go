package console

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
)

// LogBackend is a Backend over an event log: the runs a store keeps,
// answered with loop.Decide. What carries a paused run on is the
// program's (it knows the run's model and tools): ResumeFunc, or none.
type LogBackend struct {
	// Log is the store the runs are in.
	Log store.EventLog
	// ResumeFunc carries a run on, e.g. a loop.Runner's Resume over Log;
	// nil means the console cannot, and says so (ErrNotHere).
	ResumeFunc func(ctx context.Context, runID string) (*loop.Result, error)
	// Now is the clock answers are recorded with; nil means time.Now.
	Now func() time.Time
}

// Runs implements Backend.
func (b *LogBackend) Runs(ctx context.Context, f Filter) ([]Run, error) {
	list, err := b.Log.Runs(ctx, f.Status)
	if err != nil {
		return nil, err
	}
	if f.Limit > 0 && len(list) > f.Limit {
		list = list[:f.Limit]
	}
	return SummaryRuns(list)
}

// SummaryRuns converts a store's run summaries, whose pending calls are
// JSON, into Runs.
func SummaryRuns(list []store.RunSummary) ([]Run, error) {
	out := make([]Run, len(list))
	for i, r := range list {
		out[i] = Run{RunID: r.RunID, Status: r.Status, Counted: true, Steps: r.Steps, ToolCalls: r.ToolCalls,
			Tokens: r.InputTokens + r.OutputTokens, StartedAt: r.StartedAt, SessionID: r.SessionID}
		if len(r.Pending) > 0 {
			if err := json.Unmarshal(r.Pending, &out[i].Pending); err != nil {
				return nil, fmt.Errorf("run %s: its pending calls: %w", r.RunID, err)
			}
		}
	}
	return out, nil
}

// RecordReader is a Backend that can also hand over a run's events as
// stored, each as its JSON, from a sequence number on. The console then
// decodes the events itself, with large payloads cut short for its pages
// (a page view's memory does not grow with them), and the live view
// decodes only what is new. LogBackend is one; without it the console
// reads Backend.Events.
type RecordReader interface {
	// Records returns the events of runID whose Seq is greater than
	// after, in order; a run the backend does not have is an error
	// wrapping store.ErrUnknownRun.
	Records(ctx context.Context, runID string, after int) ([]store.EventRecord, error)
}

// Events implements Backend.
func (b *LogBackend) Events(ctx context.Context, runID string) ([]loop.Event, error) {
	return loop.LoadEvents(ctx, b.Log, runID)
}

// Records implements RecordReader. store.EventLog reads a run's log
// whole, so the records before after are read and dropped: what is saved
// is decoding them.
func (b *LogBackend) Records(ctx context.Context, runID string, after int) ([]store.EventRecord, error) {
	recs, err := b.Log.Events(ctx, runID)
	if err != nil {
		return nil, err
	}
	i := 0
	for i < len(recs) && recs[i].Seq <= after {
		i++
	}
	return recs[i:], nil
}

// Decide implements Backend.
func (b *LogBackend) Decide(ctx context.Context, runID string, answer loop.Confirmation) error {
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	return loop.Decide(ctx, b.Log, runID, answer, now())
}

// Resume implements Backend.
func (b *LogBackend) Resume(ctx context.Context, runID string) (*loop.Result, error) {
	if b.ResumeFunc == nil {
		return nil, fmt.Errorf("%w: this console has no way to drive run %s; resume it from the program that started it", ErrNotHere, runID)
	}
	return b.ResumeFunc(ctx, runID)
}
