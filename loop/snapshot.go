package loop

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/toolloop/toolloop/llm"
)

// Snapshot is what the decider knows about a run except the conversation:
// counters, budgets used, the open batch and pending calls, the spin
// detection's window and the keys it refuses twice. A driver that must
// start again from a compact state rather than from the whole log (a
// Temporal workflow continuing as new) carries a Snapshot and the log by
// reference: its size grows only with the run's call IDs and result
// hashes (tens of bytes a call), not with what the calls returned.
//
// A state restored from a snapshot decides exactly as one replayed from
// the events, but its Messages are empty: the decider only appends to
// them, and History, which reads them, must come from the log.
type Snapshot struct {
	RunID     string    `json:"run_id,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
	Model     string    `json:"model,omitempty"`
	StartedAt time.Time `json:"started_at"`
	Deadline  time.Time `json:"deadline"`
	Budgets   Budgets   `json:"budgets"`
	Price     *Price    `json:"price,omitempty"`
	Steps     int       `json:"steps,omitempty"`
	ToolCalls int       `json:"tool_calls,omitempty"`
	Usage     llm.Usage `json:"usage"`
	Cost      float64   `json:"cost,omitempty"`
	Batch     *Batch    `json:"batch,omitempty"`
	Pending   []Pending `json:"pending,omitempty"`
	Answered  []Pending `json:"answered,omitempty"`
	PausedAt  time.Time `json:"paused_at"`
	Status    Status    `json:"status,omitempty"`
	Detail    string    `json:"detail,omitempty"`
	Stopping  bool      `json:"stopping,omitempty"`
	Done      bool      `json:"done,omitempty"`
	// Next is the effect the last event called for.
	Next Effect `json:"next"`

	// CallIDs, sorted, are every call ID of the run.
	CallIDs []string `json:"call_ids,omitempty"`
	// WriteKeys and WriteCalls count the requests of each write, by
	// idempotency key and by call key; Failed holds the call keys that
	// failed for good.
	WriteKeys  []KeyCount  `json:"write_keys,omitempty"`
	WriteCalls []HashCount `json:"write_calls,omitempty"`
	Failed     []HashKind  `json:"failed,omitempty"`
	// LastChecks and LastCalls are the previous turn's, Seen (sorted)
	// the hashes of every result the model has seen, Stale the turns in
	// a row that brought nothing new.
	LastChecks []CallCheck    `json:"last_checks,omitempty"`
	LastCalls  []llm.ToolCall `json:"last_calls,omitempty"`
	Seen       []uint64       `json:"seen,omitempty"`
	Stale      int            `json:"stale,omitempty"`
}

// KeyCount is one write key and how many times it was requested.
type KeyCount struct {
	Key string `json:"k"`
	N   int    `json:"n"`
}

// HashCount is one call key and how many times it was requested.
type HashCount struct {
	Key uint64 `json:"k"`
	N   int    `json:"n"`
}

// HashKind is one call key and how it failed.
type HashKind struct {
	Key  uint64        `json:"k"`
	Kind llm.ErrorKind `json:"e"`
}

// Snapshot returns the state's snapshot. It shares nothing mutable with
// the state's maps; slices of the open batch are shared, as the state
// shares them with the events.
func (s *State) Snapshot() Snapshot {
	sn := Snapshot{
		RunID: s.RunID, SessionID: s.SessionID, Model: s.Model, StartedAt: s.StartedAt, Deadline: s.Deadline,
		Budgets: s.Budgets, Price: s.Price, Steps: s.Steps, ToolCalls: s.ToolCalls, Usage: s.Usage, Cost: s.Cost,
		Batch: s.Batch, Pending: s.Pending, Answered: s.Answered, PausedAt: s.PausedAt, Status: s.Status,
		Detail: s.Detail, Stopping: s.Stopping, Done: s.Done, Next: s.next,
		CallIDs: slices.Sorted(maps.Keys(s.callIDs)), LastChecks: s.lastChecks, LastCalls: s.lastCalls,
		Seen: slices.Sorted(maps.Keys(s.seen)), Stale: s.stale,
	}
	for k, n := range s.writeKeys {
		sn.WriteKeys = append(sn.WriteKeys, KeyCount{k, n})
	}
	slices.SortFunc(sn.WriteKeys, func(a, b KeyCount) int { return cmp.Compare(a.Key, b.Key) })
	for k, n := range s.writeCalls {
		sn.WriteCalls = append(sn.WriteCalls, HashCount{k, n})
	}
	slices.SortFunc(sn.WriteCalls, func(a, b HashCount) int { return cmp.Compare(a.Key, b.Key) })
	for k, e := range s.failed {
		sn.Failed = append(sn.Failed, HashKind{k, e})
	}
	slices.SortFunc(sn.Failed, func(a, b HashKind) int { return cmp.Compare(a.Key, b.Key) })
	return sn
}

// Restore rebuilds a state from its snapshot, with no Messages (see
// Snapshot). The state shares the snapshot's slices.
func Restore(sn Snapshot) *State {
	s := &State{
		RunID: sn.RunID, SessionID: sn.SessionID, Model: sn.Model, StartedAt: sn.StartedAt, Deadline: sn.Deadline,
		Budgets: sn.Budgets, Price: sn.Price, Steps: sn.Steps, ToolCalls: sn.ToolCalls, Usage: sn.Usage, Cost: sn.Cost,
		Batch: sn.Batch, Pending: sn.Pending, Answered: sn.Answered, PausedAt: sn.PausedAt, Status: sn.Status,
		Detail: sn.Detail, Stopping: sn.Stopping, Done: sn.Done, next: sn.Next,
		lastChecks: sn.LastChecks, lastCalls: sn.LastCalls, stale: sn.Stale,
	}
	// A state past its first event has callIDs (Started makes it, the
	// decider writes into it); the other maps are made on first use.
	if sn.Next.Kind != "" || len(sn.CallIDs) > 0 {
		s.callIDs = make(map[string]struct{}, len(sn.CallIDs))
	}
	for _, id := range sn.CallIDs {
		s.callIDs[id] = struct{}{}
	}
	if len(sn.WriteKeys) > 0 || len(sn.WriteCalls) > 0 {
		s.writeKeys, s.writeCalls = make(map[string]int, len(sn.WriteKeys)), make(map[uint64]int, len(sn.WriteCalls))
	}
	for _, kc := range sn.WriteKeys {
		s.writeKeys[kc.Key] = kc.N
	}
	for _, hc := range sn.WriteCalls {
		s.writeCalls[hc.Key] = hc.N
	}
	for _, hk := range sn.Failed {
		s.fail(hk.Key, hk.Kind)
	}
	for _, h := range sn.Seen {
		s.seeHash(h)
	}
	return s
}
