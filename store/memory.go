package store

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Memory is an in-memory Ledger, for tests and single-process runs that
// need no durability.
type Memory struct {
	mu   sync.Mutex
	recs map[string]Record
}

// NewMemory returns an empty in-memory ledger.
func NewMemory() *Memory { return &Memory{recs: map[string]Record{}} }

// Claim implements Ledger.
func (m *Memory) Claim(_ context.Context, rec Record) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.recs[rec.Key]; ok {
		return clone(old), false, nil
	}
	rec.State = InFlight
	rec.Result = nil
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = rec.CreatedAt
	}
	m.recs[rec.Key] = rec
	return Record{}, true, nil
}

// Finish implements Ledger.
func (m *Memory) Finish(_ context.Context, key string, result json.RawMessage, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[key]
	if !ok || rec.State != InFlight {
		return ErrNotInFlight
	}
	rec.State, rec.Result, rec.UpdatedAt = Done, append(json.RawMessage(nil), result...), at
	m.recs[key] = rec
	return nil
}

// Release implements Ledger.
func (m *Memory) Release(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[key]
	if !ok || rec.State != InFlight {
		return ErrNotInFlight
	}
	delete(m.recs, key)
	return nil
}

// Lookup implements Ledger.
func (m *Memory) Lookup(_ context.Context, key string) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[key]
	return clone(rec), ok, nil
}

// Prune implements Ledger.
func (m *Memory) Prune(_ context.Context, cutoff time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, rec := range m.recs {
		if rec.State == Done && rec.UpdatedAt.Before(cutoff) {
			delete(m.recs, k)
			n++
		}
	}
	return n, nil
}

func clone(r Record) Record {
	r.Result = append(json.RawMessage(nil), r.Result...)
	if len(r.Result) == 0 {
		r.Result = nil
	}
	return r
}
