package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// EventRecord is one event of a run's log as a store keeps it: the loop
// encodes its events as JSON, so stores need not know their shape.
type EventRecord struct {
	Seq  int             `json:"seq"`
	Kind string          `json:"kind"`
	At   time.Time       `json:"at"`
	Data json.RawMessage `json:"data"`
}

// RunSummary is what a store keeps about a run beside its events, for
// listing runs without replaying them.
type RunSummary struct {
	RunID        string    `json:"run_id"`
	SessionID    string    `json:"session_id,omitempty"`
	Status       string    `json:"status"`
	Detail       string    `json:"detail,omitempty"`
	Steps        int       `json:"steps"`
	ToolCalls    int       `json:"tool_calls"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	StartedAt    time.Time `json:"started_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	// Pending is the JSON list of calls awaiting confirmation, if any.
	Pending json.RawMessage `json:"pending,omitempty"`
}

// EventLog keeps each run's append-only event log: the run's checkpoint,
// trace and audit record in one.
type EventLog interface {
	// Append adds events to a run's log, creating the run on its first
	// events, and sets its summary, atomically: all of it or none. The
	// events' Seq must continue the log exactly (the first event is 1);
	// otherwise nothing is written and ErrSeqConflict is returned, so two
	// processes driving one run cannot both succeed.
	Append(ctx context.Context, runID string, events []EventRecord, summary RunSummary) error
	// Events returns a run's log in order; ErrUnknownRun if it has none.
	Events(ctx context.Context, runID string) ([]EventRecord, error)
	// Runs lists run summaries, newest first; status "" lists all.
	Runs(ctx context.Context, status string) ([]RunSummary, error)
}

// Errors of EventLog.
var (
	ErrSeqConflict = errors.New("store: event sequence conflict (another writer appended to this run)")
	ErrUnknownRun  = errors.New("store: unknown run")
)
