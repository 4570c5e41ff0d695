package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// Compensation (docs/DESIGN.md §7.1): a write may declare how it is undone
// (tool.Compensation), and calls may be declared all-or-nothing, by a
// named group on their tools (tool.Spec.AtomicGroup) or batch by batch
// (Config.AtomicBatches). When a call of a group fails for good, or the
// run stops without a final answer, after some of the group's writes
// succeeded, the run's policy (Config.Compensation) decides: compensate
// them, latest first, or leave them and report them. The decider asks for
// a Compensate effect; the driver performs each compensation
// (PerformCompensation, through the executor and the ledger) and records
// a Compensated event; the run then goes on, or stops as it was stopping.

// CompensationPolicy says what a run does with the succeeded writes of an
// all-or-nothing group that failed.
type CompensationPolicy string

// Compensation policies.
const (
	// LeaveWrites leaves the writes as they are and reports them in
	// Result.Writes (the default).
	LeaveWrites CompensationPolicy = "leave"
	// CompensateWrites undoes them with their tools' compensations,
	// latest first.
	CompensateWrites CompensationPolicy = "compensate"
)

// CompensationSpec is a run's compensation settings as its started event
// records them, so that a resumed or replayed run decides alike.
type CompensationSpec struct {
	Policy CompensationPolicy `json:"policy"`
	// AtomicBatches makes the calls of each model turn an all-or-nothing
	// group (a call whose tool names a group stays in that group).
	AtomicBatches bool `json:"atomic_batches,omitempty"`
}

// NewCompensationSpec checks a policy and returns the spec a run records,
// or nil when the run leaves writes and has no batch groups (as every run
// did before compensation existed).
func NewCompensationSpec(p CompensationPolicy, atomicBatches bool) (*CompensationSpec, error) {
	switch p {
	case "", LeaveWrites:
		if !atomicBatches {
			return nil, nil
		}
		p = LeaveWrites
	case CompensateWrites:
	default:
		return nil, fmt.Errorf("unknown compensation policy %q (want %q or %q)", p, LeaveWrites, CompensateWrites)
	}
	return &CompensationSpec{Policy: p, AtomicBatches: atomicBatches}, nil
}

// WriteState is what became of one write of the run.
type WriteState string

// Write states.
const (
	// WriteDone: the write happened and stays.
	WriteDone WriteState = "done"
	// WriteFailed: the write's tool reported a failure; nothing was written.
	WriteFailed WriteState = "failed"
	// WriteNotRun: the write was asked for but not run (refused, denied,
	// skipped because the run stopped).
	WriteNotRun WriteState = "not_run"
	// WriteUnknown: the write may or may not have happened, and nothing
	// settled it.
	WriteUnknown WriteState = "unknown"
	// WriteUndone: the write happened and its compensation undid it.
	WriteUndone WriteState = "undone"
	// WriteLeft: the write (or a write whose outcome is unknown) should
	// have been undone and was not: its compensation failed, it has none,
	// or its outcome could not be settled. A person must look at it.
	WriteLeft WriteState = "left"
)

// WriteRecord is one write the run asked for, and what became of it.
type WriteRecord struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Step is the turn that asked for it.
	Step int `json:"step"`
	// Key is its idempotency key.
	Key string `json:"key,omitempty"`
	// Group is its all-or-nothing group, "" for none; a batch's group is
	// named "turn-N".
	Group string     `json:"group,omitempty"`
	State WriteState `json:"state"`
	// Open is set while the write may still be compensated: it took
	// effect (or may have) in a group that has not yet ended.
	Open bool `json:"open,omitempty"`
	// Undo names its compensating tool, "" when it has none.
	Undo string `json:"undo,omitempty"`
	// Note says why it was undone or left.
	Note string `json:"note,omitempty"`
	// Arguments and Result are the call's, kept while it is Open and
	// can be undone, for the compensation's arguments.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// WritesOutcome sums up what the run's writes ended as.
type WritesOutcome string

// Writes outcomes.
const (
	// WritesAllDone: every write the run asked for happened and stays.
	WritesAllDone WritesOutcome = "all_done"
	// WritesPartial: some writes stay and others did not happen, or are
	// left for a person (WritesReport says which).
	WritesPartial WritesOutcome = "partial"
	// WritesUndone: writes happened and were all undone; none stays.
	WritesUndone WritesOutcome = "undone"
	// WritesNone: no write the run asked for took effect, and none had to
	// be undone.
	WritesNone WritesOutcome = "none"
)

// WritesReport is what Result.Writes says about a run's writes.
type WritesReport struct {
	Outcome WritesOutcome `json:"outcome"`
	// Writes lists every write the run asked for, in order.
	Writes []WriteRecord `json:"writes"`
}

// Summary says in one line what the writes ended as, naming what was
// done, undone, not done and left for a person, for stop lines, e.g.
// "undone: undone refund_order c1; not done issue_voucher c2 (failed)".
func (r *WritesReport) Summary() string {
	if r == nil {
		return "no writes"
	}
	var done, undone, notDone, left []string
	for _, w := range r.Writes {
		name := w.Tool + " " + w.CallID
		switch w.State {
		case WriteDone:
			done = append(done, name)
		case WriteUndone:
			undone = append(undone, name)
		case WriteLeft, WriteUnknown:
			left = append(left, name+" ("+string(w.State)+")")
		default:
			notDone = append(notDone, name+" ("+string(w.State)+")")
		}
	}
	var parts []string
	for _, p := range []struct {
		label string
		names []string
	}{{"done", done}, {"undone", undone}, {"not done", notDone}, {"left for a person", left}} {
		if len(p.names) > 0 {
			parts = append(parts, p.label+" "+strings.Join(p.names, ", "))
		}
	}
	return strings.ReplaceAll(string(r.Outcome), "_", " ") + ": " + strings.Join(parts, "; ")
}

// WritesReport sums up what the run's writes ended as so far
// (Result.Writes); nil for a run that asked for no write.
func (s *State) WritesReport() *WritesReport {
	if len(s.Writes) == 0 {
		return nil
	}
	r := &WritesReport{Writes: make([]WriteRecord, len(s.Writes))}
	var done, undone, other int
	for i, w := range s.Writes {
		w.Arguments, w.Result = nil, nil
		r.Writes[i] = w
		switch w.State {
		case WriteDone:
			done++
		case WriteUndone:
			undone++
		case WriteLeft, WriteUnknown:
			other++
		}
	}
	switch {
	case done == len(s.Writes):
		r.Outcome = WritesAllDone
	case done == 0 && other == 0 && undone > 0:
		r.Outcome = WritesUndone
	case done == 0 && other == 0:
		r.Outcome = WritesNone
	default:
		r.Outcome = WritesPartial
	}
	return r
}

// CompensationCall is one compensation a Compensate effect asks for: the
// original write, and the tool that undoes it.
type CompensationCall struct {
	// CallID, Tool and Key are the original write's call ID, tool and
	// idempotency key.
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	Key    string `json:"key,omitempty"`
	// Undo names the compensating tool; "" for a write that declares
	// none, which the driver reports left.
	Undo string `json:"undo"`
	// Arguments and Result are the original call's.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	// Unknown says that the original's outcome is unknown: its status
	// look-up must settle it first, and without that it is not undone.
	Unknown bool `json:"unknown,omitempty"`
}

// CompensationState is how one compensation ended.
type CompensationState string

// Compensation states.
const (
	// UndoSucceeded: the compensating call succeeded.
	UndoSucceeded CompensationState = "undone"
	// UndoFailed: its arguments could not be made, or the
	// compensating call failed.
	UndoFailed CompensationState = "failed"
	// UndoNotNeeded: the original's outcome was unknown, and its status
	// look-up, asked again once its timeout had passed, found it never
	// happened: there is nothing to undo.
	UndoNotNeeded CompensationState = "not_needed"
	// UndoLeft: not attempted (the original's outcome could not
	// be settled, or an earlier compensation failed).
	UndoLeft CompensationState = "left"
)

// CompensationOutcome is what one compensation did: the payload of a
// Compensated event, one per CompensationCall of the effect, in its order.
type CompensationOutcome struct {
	// CallID is the original write's call ID.
	CallID string            `json:"call_id"`
	State  CompensationState `json:"state"`
	// Call is the compensating call (ID "undo_" + CallID), when its
	// arguments could be made.
	Call *llm.ToolCall `json:"call,omitempty"`
	// Outcome is the compensating call's, when it ran (or the ledger
	// answered for it).
	Outcome *executor.Outcome `json:"outcome,omitempty"`
	// Reason says why it failed or was left.
	Reason string `json:"reason,omitempty"`
}

// CompensationKey is the idempotency key of the compensation of the write
// with key: the compensation of a write is done once, however often a
// resumed run asks for it.
func CompensationKey(key string) string { return executor.UndoKey(key) }

// compensationCallID is the call ID of the compensation of call id.
func compensationCallID(id string) string { return "undo_" + id }

// groupOf returns the all-or-nothing group of call i of batch b, or "".
func groupOf(s *State, b *Batch, i int) string {
	if i < len(b.Checks) && b.Checks[i].Group != "" {
		return b.Checks[i].Group
	}
	if c := s.Compensation; c != nil && c.AtomicBatches {
		return fmt.Sprintf("turn-%d", b.Step)
	}
	return ""
}

// registerBatch records the writes of the batch that is ending (its
// results all in) in s.Writes and returns the groups of the batch that
// failed, each with the reason.
func registerBatch(s *State) map[string]string {
	b := s.Batch
	if b == nil {
		return nil
	}
	var failed map[string]string
	for i := range b.Calls {
		r := b.Results[i]
		ok := r != nil && r.Status == llm.StatusOK
		// A write whose outcome is unknown, or that timed out or found an
		// earlier attempt still in flight (it may yet land), is settled by
		// its status look-up before anyone undoes it.
		unknown := slices.Contains(b.Unknown, i) || (i < len(b.Checks) && b.Checks[i].WriteKey != "" && r != nil &&
			r.Status == llm.StatusError && (r.ErrorKind == llm.KindTimeout || r.ErrorKind == llm.KindWriteInProgress))
		g := groupOf(s, b, i)
		if g != "" && !ok {
			if _, seen := failed[g]; !seen {
				if failed == nil {
					failed = map[string]string{}
				}
				why := "was not run"
				switch {
				case unknown:
					why = "may or may not have happened"
				case r != nil && r.Status == llm.StatusError:
					why = "failed with " + string(r.ErrorKind)
				}
				failed[g] = fmt.Sprintf("call %s (%s) %s", b.Calls[i].ID, b.Calls[i].Name, why)
			}
		}
		if i >= len(b.Checks) || b.Checks[i].WriteKey == "" || b.Checks[i].Problem != "" {
			continue
		}
		w := WriteRecord{CallID: b.Calls[i].ID, Tool: b.Calls[i].Name, Step: b.Step, Key: b.Checks[i].WriteKey, Group: g}
		switch {
		case unknown:
			w.State = WriteUnknown
		case ok:
			w.State = WriteDone
		case r != nil && r.Status == llm.StatusError && !refused(r.ErrorKind):
			w.State = WriteFailed
		default:
			w.State = WriteNotRun
		}
		if g != "" && (w.State == WriteDone || w.State == WriteUnknown) {
			w.Open, w.Undo = true, b.Checks[i].Undo
			if w.Undo != "" {
				w.Arguments = b.Calls[i].Arguments
				if r != nil && ok {
					w.Result = r.Content
				}
			}
		}
		s.Writes = append(s.Writes, w)
	}
	return failed
}

// refused reports whether a write that failed with kind never ran: the
// policy or a person denied it, or the ledger refused it.
func refused(kind llm.ErrorKind) bool {
	switch kind {
	case llm.KindPermissionDenied, llm.KindToolNotAllowed, llm.KindIdempotencyConflict:
		return true
	}
	return false
}

// closeBatchGroups closes the groups of a batch that ended without a
// failure: their writes stay. Named groups stay open until the run ends.
func closeBatchGroups(s *State, step int, failed map[string]string) {
	if c := s.Compensation; c == nil || !c.AtomicBatches {
		return
	}
	g := fmt.Sprintf("turn-%d", step)
	if _, bad := failed[g]; bad {
		return
	}
	for i := range s.Writes {
		if w := &s.Writes[i]; w.Open && w.Group == g {
			w.close()
		}
	}
}

func (w *WriteRecord) close() { w.Open, w.Arguments, w.Result = false, nil, nil }

// settle deals with the open writes of the failed groups, or with every
// open write when the run stops (stopping; a final answer closes them
// instead): by the run's policy it leaves them, reporting them, or asks for
// their compensation, latest first. It returns the Compensate effect, or
// false when there is nothing to perform.
func settle(s *State, failed map[string]string, stopping bool) (Effect, bool) {
	var due []int
	for i := range s.Writes {
		w := &s.Writes[i]
		if !w.Open {
			continue
		}
		if stopping && s.Status == FinalAnswer {
			w.close()
			continue
		}
		if _, bad := failed[w.Group]; bad || stopping {
			due = append(due, i)
		}
	}
	if len(due) == 0 {
		return Effect{}, false
	}
	// What failed is worded only here, for a run with writes to settle.
	var why string
	if stopping {
		why = fmt.Sprintf("the run stopped with %s", s.Status)
	} else {
		var groups []string
		for _, g := range slices.Sorted(maps.Keys(failed)) {
			groups = append(groups, fmt.Sprintf("group %s failed: %s", g, failed[g]))
		}
		why = strings.Join(groups, "; ")
	}
	compensate := s.Compensation != nil && s.Compensation.Policy == CompensateWrites
	var calls []CompensationCall
	for _, i := range slices.Backward(due) {
		w := &s.Writes[i]
		switch {
		case !compensate:
			w.Note = "kept by the run's policy (leave): " + why
			if w.State == WriteUnknown {
				w.State = WriteLeft
			}
			w.close()
		default:
			// A write without a compensation is in the effect too: the
			// driver reports it left (PerformCompensation does no I/O for
			// it), and the run stops with compensation_failed, since it
			// promised all or nothing.
			calls = append(calls, CompensationCall{CallID: w.CallID, Tool: w.Tool, Key: w.Key, Undo: w.Undo,
				Arguments: w.Arguments, Result: w.Result, Unknown: w.State == WriteUnknown})
		}
	}
	if len(calls) == 0 {
		return Effect{}, false
	}
	return Effect{Kind: Compensate, Compensations: calls, Detail: why}, true
}

// undoneKey says why a write under key may not run: a write of this run
// under the same key was undone, and the ledger, which keeps the key done,
// would only replay its result; "" when it may.
func undoneKey(s *State, key string) string {
	if key == "" {
		return ""
	}
	for _, w := range s.Writes {
		if w.Key == key && w.State == WriteUndone {
			return fmt.Sprintf("the write with idempotency key %q was undone earlier in this run (call %s, its all-or-nothing group failed); "+
				"it is not done again under the same key", key, w.CallID)
		}
	}
	return ""
}

// write returns the record of the write with call ID id, or nil.
func (s *State) write(id string) *WriteRecord {
	for i := range s.Writes {
		if s.Writes[i].CallID == id {
			return &s.Writes[i]
		}
	}
	return nil
}

// compensated records a Compensated event: each write undone, or left for
// a person. A compensation that did not succeed stops the run with
// compensation_failed, naming what is left; otherwise the run stops as it
// was stopping, or goes on after the batch, the model told what was
// undone.
func compensated(s *State, ev *Event) Effect {
	due := s.next
	if due.Kind != Compensate || len(ev.Compensations) != len(due.Compensations) {
		return giveUp(s, due, "driver error: the compensations do not match the effect")
	}
	for j := range ev.Compensations {
		if ev.Compensations[j].CallID != due.Compensations[j].CallID {
			return giveUp(s, due, "driver error: the compensations do not match the effect")
		}
	}
	var undone, left []string
	for j := range ev.Compensations {
		o, c := &ev.Compensations[j], &due.Compensations[j]
		w := s.write(c.CallID)
		if w == nil {
			continue
		}
		w.close()
		if o.State == UndoNotNeeded {
			w.State, w.Note = WriteNotRun, o.Reason
			continue
		}
		if o.State == UndoSucceeded {
			w.State, w.Note = WriteUndone, fmt.Sprintf("undone by %s (call %s): %s", c.Undo, compensationCallID(c.CallID), due.Detail)
			undone = append(undone, fmt.Sprintf("%s %s by %s", c.Tool, c.CallID, c.Undo))
			continue
		}
		if c.Undo == "" {
			w.State, w.Note = WriteLeft, fmt.Sprintf("%s: %s", o.State, o.Reason)
		} else {
			w.State, w.Note = WriteLeft, fmt.Sprintf("compensation by %s %s: %s", c.Undo, o.State, o.Reason)
		}
		left = append(left, fmt.Sprintf("%s %s (key %q): %s", c.Tool, c.CallID, c.Key, o.Reason))
	}
	if len(left) > 0 {
		detail := "left for a person: " + strings.Join(left, "; ")
		if len(undone) > 0 {
			detail += "; undone: " + strings.Join(undone, ", ")
		}
		if s.Stopping {
			detail += fmt.Sprintf(" (the run was stopping with %s: %s)", s.Status, s.Detail)
		}
		s.Stopping = false
		return stop(s, CompensationFailed, detail)
	}
	summary := "undone: " + strings.Join(undone, ", ")
	note := "[toolloop] " + due.Detail + ". So that nothing of it stays half done, its writes were " + summary + ". They no longer hold."
	if len(undone) == 0 {
		summary = "nothing to undo: the writes whose outcome was unknown never happened"
		note = "[toolloop] " + due.Detail + ". Its writes whose outcome was unknown turned out never to have happened; nothing was undone."
	}
	if s.Stopping {
		s.Detail += "; " + summary
		return Effect{Kind: Stop, Status: s.Status, Detail: s.Detail}
	}
	m := llm.UserMessage(note)
	if s.ctx != nil {
		s.ctx.add(&m)
	}
	s.Messages = append(s.Messages, m)
	return afterBatch(s)
}

// giveUp stops a run whose compensation cannot be recorded, leaving the
// writes it was for to a person.
func giveUp(s *State, due Effect, detail string) Effect {
	for _, c := range due.Compensations {
		if w := s.write(c.CallID); w != nil {
			w.State, w.Note = WriteLeft, detail
			w.close()
		}
	}
	s.Stopping = false
	return stop(s, ProtocolError, detail)
}

// Compensations performs the compensations of a Compensate effect in
// order, with perform (PerformCompensation, or an activity that calls it),
// and returns the Compensated event. After a compensating call that does
// not succeed, the rest are left, not attempted: they come later in the
// effect because their writes came earlier, and undoing them out of order
// could leave the books worse. Every driver records a compensation so.
func Compensations(calls []CompensationCall, perform func(c CompensationCall) CompensationOutcome) Event {
	outs := make([]CompensationOutcome, len(calls))
	failed := ""
	for i, c := range calls {
		if failed != "" {
			outs[i] = CompensationOutcome{CallID: c.CallID, State: UndoLeft,
				Reason: "not attempted: the compensation of call " + failed + " did not succeed first"}
			continue
		}
		outs[i] = perform(c)
		if outs[i].State != UndoSucceeded && outs[i].State != UndoNotNeeded && outs[i].Call != nil {
			// Only a compensation that was attempted holds the rest back:
			// a write that cannot be undone at all (none declared, its
			// outcome not settled) is left, and the earlier ones are
			// still undone.
			failed = c.CallID
		}
	}
	return Event{Kind: Compensated, Compensations: outs}
}

// compensationRetries bounds how often PerformCompensation tries a
// compensating call again that timed out or found an earlier attempt
// still in flight (write_in_progress: a driver that crashed), waiting the
// call's timeout each time; settleWaits bounds how many timeouts of the
// original it waits for a write whose outcome is unknown to end.
const (
	compensationRetries = 3
	settleWaits         = 10
)

// PerformCompensation performs one compensation of a Compensate effect.
//
// An original whose outcome is unknown is settled first, with its tool's
// status look-up: found, it is undone; not found, the look-up is asked
// again once the original's timeout has passed and no handler of ex still
// runs under its key (when it can no longer land), and a write still not
// found never happened (not_needed). Without a look-up, when the look-up
// fails, or while the handler still runs after settleWaits timeouts, it is
// left: never undone on a guess.
//
// Then it makes the compensating call's arguments
// (tool.Compensation.Arguments) and runs the call through ex as a write
// under CompensationKey of the original's key, so that it is done once
// however often a resumed run asks; a call that timed out or found an
// earlier attempt in flight is tried again, at most compensationRetries
// times, after its timeout. A write with no compensation declared is left.
// timeout overrides the tools' timeouts when positive. ctx should not be
// the run's own when that ended: a canceled run still undoes its writes.
func PerformCompensation(ctx context.Context, ex *executor.Executor, tools *tool.Registry, runID string, timeout time.Duration, c CompensationCall) CompensationOutcome {
	out := CompensationOutcome{CallID: c.CallID}
	orig, ok := tools.Lookup(c.Tool)
	if !ok {
		out.State, out.Reason = UndoLeft, "tool "+c.Tool+" is not registered here"
		return out
	}
	result := c.Result
	if c.Unknown {
		content, state, why := settleUnknown(ctx, ex, orig, c, timeout)
		if state != "" {
			out.State, out.Reason = state, why
			return out
		}
		result = content
	}
	if c.Undo == "" || orig.Compensation() == nil {
		out.State, out.Reason = UndoLeft, "no compensation is declared for "+c.Tool
		return out
	}
	undo, ok := tools.Lookup(c.Undo)
	if !ok {
		out.State, out.Reason = UndoLeft, "the compensating tool "+c.Undo+" is not registered here"
		return out
	}
	args, err := orig.Compensation().Arguments(c.Arguments, result)
	if err != nil {
		out.State, out.Reason = UndoFailed, "making the arguments of "+c.Undo+": "+err.Error()
		return out
	}
	fp, err := undo.Validate(args)
	if err != nil {
		out.State, out.Reason = UndoFailed, "the arguments made for "+c.Undo+" do not conform: "+err.Error()
		return out
	}
	call := llm.ToolCall{ID: compensationCallID(c.CallID), Name: c.Undo, Arguments: args}
	out.Call = &call
	key := c.Key
	if key == "" {
		key = runID + "/" + c.CallID
	}
	ec := executor.Call{Call: call, Tool: undo, Timeout: timeout, IdempotencyKey: CompensationKey(key),
		ArgsHash: ArgsHash(tool.CallKey(c.Undo, fp)), RunID: runID}
	var o executor.Outcome
	for attempt := 0; ; attempt++ {
		o = ex.Run(ctx, ec)
		again := o.Result.ErrorKind == llm.KindWriteInProgress || (o.Result.ErrorKind == llm.KindTimeout && !o.OutcomeUnknown)
		if !again || attempt >= compensationRetries || sleep(ctx, callTimeout(ex, undo, timeout)) != nil {
			break
		}
	}
	out.Outcome = &o
	switch {
	case o.Result.Status == llm.StatusOK:
		out.State = UndoSucceeded
	case o.OutcomeUnknown:
		out.State, out.Reason = UndoLeft, "the compensation's own outcome is unknown: "+string(o.Result.Content)
	default:
		out.State, out.Reason = UndoFailed, fmt.Sprintf("%s failed (%s): %s", c.Undo, o.Result.ErrorKind, o.Result.Content)
	}
	return out
}

// settleUnknown settles an original whose outcome is unknown (see
// PerformCompensation): it returns the write's result when it happened,
// and otherwise the compensation's state (not_needed, or left) and why.
func settleUnknown(ctx context.Context, ex *executor.Executor, orig *tool.Tool, c CompensationCall, timeout time.Duration) (json.RawMessage, CompensationState, string) {
	if !orig.CanReconcile() {
		return nil, UndoLeft, "the write's outcome is unknown and " + c.Tool + " has no status look-up; it is not undone on a guess"
	}
	content, applied, err := orig.Reconcile(ctx, c.Arguments)
	if err == nil && !applied {
		// The attempt may still be running: once its timeout has passed
		// and no handler of this process runs under its key, it cannot
		// land any more (the executor's rule for a stale claim), and the
		// look-up's answer is final.
		wait := callTimeout(ex, orig, timeout)
		for range settleWaits {
			if sleep(ctx, wait) != nil || !ex.Running(c.Key) {
				break
			}
		}
		if ex.Running(c.Key) {
			return nil, UndoLeft, "the write's outcome is unknown and its handler is still running; it may yet land"
		}
		content, applied, err = orig.Reconcile(ctx, c.Arguments)
	}
	switch {
	case err != nil:
		return nil, UndoLeft, "the write's outcome is unknown and its status look-up failed: " + err.Error()
	case !applied:
		return nil, UndoNotNeeded, "the write's outcome was unknown; its status look-up, asked again once it could no longer land, finds it never happened"
	}
	return content, "", ""
}

// callTimeout is the timeout the executor gives a call of t under the
// run's override.
func callTimeout(ex *executor.Executor, t *tool.Tool, override time.Duration) time.Duration {
	return ex.Timeout(&executor.Call{Tool: t, Timeout: override})
}

// sleep waits d, or until ctx ends (its error then).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
