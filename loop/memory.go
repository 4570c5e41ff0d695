package loop

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
)

// The decider's memory is State, whole: its JSON encoding (MarshalJSON)
// is what a driver carries when it must start again from a compact state
// rather than from the whole log (a Temporal workflow continuing as new).
// It holds everything but the conversation (Messages), whose results may
// be large, so that its size grows only with the run's call IDs and
// result hashes (tens of bytes a call). A state decoded from it decides
// exactly as one replayed from the events (TestStateRoundTrip); History,
// which reads the conversation, must come from the log.

// stateJSON is State's encoding. Its sets and counters are sorted lists,
// so that the same state always encodes to the same bytes.
type stateJSON struct {
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
	Next      Effect    `json:"next"`

	CallIDs    []string       `json:"call_ids,omitempty"`
	WriteKeys  []keyCount     `json:"write_keys,omitempty"`
	WriteCalls []hashCount    `json:"write_calls,omitempty"`
	Failed     []hashKind     `json:"failed,omitempty"`
	LastChecks []CallCheck    `json:"last_checks,omitempty"`
	LastCalls  []llm.ToolCall `json:"last_calls,omitempty"`
	Seen       []uint64       `json:"seen,omitempty"`
	Stale      int            `json:"stale,omitempty"`

	Output         *OutputSpec     `json:"output,omitempty"`
	OutputRejected int             `json:"output_rejected,omitempty"`
	Context        *contextMemory  `json:"context,omitempty"`
	Taint          *taintMemory    `json:"taint,omitempty"`
	BatchTaint     []*policy.Taint `json:"batch_taint,omitempty"`

	Compensation *CompensationSpec `json:"compensation,omitempty"`
	Writes       []WriteRecord     `json:"writes,omitempty"`
}

type keyCount struct {
	Key string `json:"k"`
	N   int    `json:"n"`
}

type hashCount struct {
	Key uint64 `json:"k"`
	N   int    `json:"n"`
}

type hashKind struct {
	Key  uint64        `json:"k"`
	Kind llm.ErrorKind `json:"e"`
}

// MarshalJSON encodes the decider's memory: the whole state but its
// conversation (Messages).
func (s *State) MarshalJSON() ([]byte, error) {
	j := stateJSON{
		RunID: s.RunID, SessionID: s.SessionID, Model: s.Model, StartedAt: s.StartedAt, Deadline: s.Deadline,
		Budgets: s.Budgets, Price: s.Price, Steps: s.Steps, ToolCalls: s.ToolCalls, Usage: s.Usage, Cost: s.Cost,
		Batch: s.Batch, Pending: s.Pending, Answered: s.Answered, PausedAt: s.PausedAt, Status: s.Status,
		Detail: s.Detail, Stopping: s.Stopping, Done: s.Done, Next: s.next,
		CallIDs: slices.Clone(s.callIDs), LastChecks: s.lastChecks, LastCalls: s.lastCalls,
		Seen: slices.Clone(s.seen), Stale: s.stale, Output: s.Output, OutputRejected: s.OutputRejected, Context: s.ctx,
		Compensation: s.Compensation, Writes: s.Writes,
		Taint: s.taint,
	}
	if s.Batch != nil {
		j.BatchTaint = s.Batch.Taint
	}
	for k, n := range s.writeKeys {
		j.WriteKeys = append(j.WriteKeys, keyCount{k, n})
	}
	slices.SortFunc(j.WriteKeys, func(a, b keyCount) int { return cmp.Compare(a.Key, b.Key) })
	for k, n := range s.writeCalls {
		j.WriteCalls = append(j.WriteCalls, hashCount{k, n})
	}
	slices.SortFunc(j.WriteCalls, func(a, b hashCount) int { return cmp.Compare(a.Key, b.Key) })
	for k, e := range s.failed {
		j.Failed = append(j.Failed, hashKind{k, e})
	}
	slices.SortFunc(j.Failed, func(a, b hashKind) int { return cmp.Compare(a.Key, b.Key) })
	return json.Marshal(&j)
}

// UnmarshalJSON decodes a state encoded by MarshalJSON, with no Messages.
func (s *State) UnmarshalJSON(b []byte) error {
	var j stateJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = State{
		RunID: j.RunID, SessionID: j.SessionID, Model: j.Model, StartedAt: j.StartedAt, Deadline: j.Deadline,
		Budgets: j.Budgets, Price: j.Price, Steps: j.Steps, ToolCalls: j.ToolCalls, Usage: j.Usage, Cost: j.Cost,
		Batch: j.Batch, Pending: j.Pending, Answered: j.Answered, PausedAt: j.PausedAt, Status: j.Status,
		Detail: j.Detail, Stopping: j.Stopping, Done: j.Done, next: j.Next,
		lastChecks: j.LastChecks, lastCalls: j.LastCalls, stale: j.Stale, Output: j.Output, OutputRejected: j.OutputRejected, ctx: j.Context,
		Compensation: j.Compensation, Writes: j.Writes,
		taint: j.Taint,
	}
	if s.Batch != nil {
		s.Batch.Taint = j.BatchTaint
	}
	// Sorted and without repeats whatever the JSON held, since the
	// decider bisects them.
	slices.Sort(j.CallIDs)
	s.callIDs = slices.Compact(j.CallIDs)
	if len(j.WriteKeys) > 0 || len(j.WriteCalls) > 0 {
		s.writeKeys, s.writeCalls = make(map[string]int, len(j.WriteKeys)), make(map[uint64]int, len(j.WriteCalls))
	}
	for _, kc := range j.WriteKeys {
		s.writeKeys[kc.Key] = kc.N
	}
	for _, hc := range j.WriteCalls {
		s.writeCalls[hc.Key] = hc.N
	}
	for _, hk := range j.Failed {
		s.fail(hk.Key, hk.Kind)
	}
	slices.Sort(j.Seen)
	s.seen = slices.Compact(j.Seen)
	return nil
}

// Due returns the effect the last event called for: where a driver that
// starts from a decoded state goes on.
func (s *State) Due() Effect { return s.next }

// ForBatch returns a copy of s without the parts that grow with the
// run's length, its call IDs, the hashes of the results seen and the
// context memory's sizes, which deciding on the open batch (its
// validation and the policy's decisions) does not read: what a driver sends to have a batch prepared elsewhere,
// the same size each turn but for the taint memory, which deciding on
// the batch reads (taint.go). It shares the rest with s, and has no
// Messages.
func (s *State) ForBatch() *State {
	c := *s
	c.Messages, c.callIDs, c.seen, c.ctx = nil, nil, nil, nil
	return &c
}
