package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"
)

// sortRuns orders summaries newest first, then by run ID for a stable list.
func sortRuns(runs []RunSummary) {
	sort.Slice(runs, func(i, j int) bool {
		if !runs[i].StartedAt.Equal(runs[j].StartedAt) {
			return runs[i].StartedAt.After(runs[j].StartedAt)
		}
		return runs[i].RunID < runs[j].RunID
	})
}

// Memory is an in-memory Ledger, EventLog and Leaser, for tests and
// single-process runs that need no durability.
type Memory struct {
	now     func() time.Time
	mu      sync.Mutex
	recs    map[string]Record
	events  map[string][]EventRecord
	summary map[string]RunSummary
	leases  map[string]Lease
	blobs   map[string][]byte
}

var (
	_ Ledger        = (*Memory)(nil)
	_ ClaimReleaser = (*Memory)(nil)
	_ EventLog      = (*Memory)(nil)
	_ Leaser        = (*Memory)(nil)
	_ Blobs         = (*Memory)(nil)
)

// NewMemory returns an empty in-memory store; its leases expire on the
// real clock.
func NewMemory() *Memory { return NewMemoryClock(time.Now) }

// NewMemoryClock returns an empty in-memory store whose leases expire on
// the clock now, so that a test can move time past a lease's expiry
// instead of sleeping through it.
func NewMemoryClock(now func() time.Time) *Memory {
	return &Memory{now: now, recs: map[string]Record{}, events: map[string][]EventRecord{},
		summary: map[string]RunSummary{}, leases: map[string]Lease{}, blobs: map[string][]byte{}}
}

// PutBlob implements Blobs.
func (m *Memory) PutBlob(_ context.Context, data []byte) (string, error) {
	d := BlobDigest(data)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.blobs[d]; !ok {
		m.blobs[d] = bytes.Clone(data)
	}
	return d, nil
}

// Blob implements Blobs.
func (m *Memory) Blob(_ context.Context, digest string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.blobs[digest]
	if !ok {
		return nil, fmt.Errorf("%w %s", ErrUnknownBlob, digest)
	}
	return bytes.Clone(data), nil
}

// Append implements EventLog.
func (m *Memory) Append(_ context.Context, runID string, events []EventRecord, summary RunSummary) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.appendLocked(runID, events, summary)
}

// AppendLeased implements Leaser.
func (m *Memory) AppendLeased(_ context.Context, lease Lease, events []EventRecord, summary RunSummary) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.leases[lease.RunID]; !ok || l.Owner != lease.Owner {
		return LeaseLost(lease.RunID, lease.Owner, l.Owner, l.Expires)
	}
	return m.appendLocked(lease.RunID, events, summary)
}

// AcquireLease implements Leaser.
func (m *Memory) AcquireLease(_ context.Context, runID, owner string, ttl time.Duration) (Lease, error) {
	if err := CheckLeaseArgs(runID, owner, ttl); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if l, ok := m.leases[runID]; ok && l.Owner != owner && now.Before(l.Expires) {
		return Lease{}, &LeaseHeldError{RunID: runID, Owner: l.Owner, Expires: l.Expires}
	}
	l := Lease{RunID: runID, Owner: owner, Expires: now.Add(ttl)}
	m.leases[runID] = l
	return l, nil
}

// RenewLease implements Leaser.
func (m *Memory) RenewLease(_ context.Context, runID, owner string, ttl time.Duration) (Lease, error) {
	if err := CheckLeaseArgs(runID, owner, ttl); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[runID]
	if !ok || l.Owner != owner {
		return Lease{}, LeaseLost(runID, owner, l.Owner, l.Expires)
	}
	l.Expires = m.now().Add(ttl)
	m.leases[runID] = l
	return l, nil
}

// ReleaseLease implements Leaser.
func (m *Memory) ReleaseLease(_ context.Context, runID, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.leases[runID]; ok && l.Owner == owner {
		delete(m.leases, runID)
	}
	return nil
}

// appendLocked appends under m.mu.
func (m *Memory) appendLocked(runID string, events []EventRecord, summary RunSummary) error {
	log := m.events[runID]
	for i, ev := range events {
		if ev.Seq != len(log)+i+1 {
			return ErrSeqConflict
		}
	}
	for _, ev := range events {
		ev.Data = append(json.RawMessage(nil), ev.Data...)
		log = append(log, ev)
	}
	m.events[runID] = log
	summary.RunID = runID
	summary.Pending = append(json.RawMessage(nil), summary.Pending...)
	m.summary[runID] = summary
	return nil
}

// Events implements EventLog.
func (m *Memory) Events(_ context.Context, runID string) ([]EventRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	log, ok := m.events[runID]
	if !ok {
		return nil, ErrUnknownRun
	}
	return append([]EventRecord(nil), log...), nil
}

// Runs implements EventLog.
func (m *Memory) Runs(_ context.Context, status string) ([]RunSummary, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []RunSummary
	for _, s := range m.summary {
		if status == "" || s.Status == status {
			out = append(out, s)
		}
	}
	sortRuns(out)
	return out, nil
}

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

// ReleaseClaim implements ClaimReleaser.
func (m *Memory) ReleaseClaim(_ context.Context, claim Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[claim.Key]
	if !ok || rec.State != InFlight || rec.RunID != claim.RunID || rec.CallID != claim.CallID ||
		rec.CreatedAt.UnixNano() != claim.CreatedAt.UnixNano() {
		return ErrNotInFlight
	}
	delete(m.recs, claim.Key)
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
