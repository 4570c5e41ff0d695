package loop

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/tool"
)

// EffectKind names what the driver must do next.
type EffectKind string

// Effects. Validation, authorization and planning are effects of their own
// (docs/DESIGN.md §2) because each may do I/O (a policy service) or must be
// recorded (the plan), and a pure decider can do neither; a pause for
// confirmation is a Stop, not an effect of its own.
const (
	RequestModel   EffectKind = "request_model"
	ValidateCalls  EffectKind = "validate_calls"
	AuthorizeCalls EffectKind = "authorize_calls"
	PlanBatch      EffectKind = "plan_batch"
	ExecuteStage   EffectKind = "execute_stage"
	// EditContext clears old tool results from the history before the
	// next model request (Effect.Edit says which); the driver only
	// records it, as a context_edited event.
	EditContext EffectKind = "edit_context"
	// Summarize asks the model for a summary of the earlier turns
	// (Effect.Summary says which); the driver records the answer as a
	// context_summarized event.
	Summarize EffectKind = "summarize"
	// Compensate undoes writes of an all-or-nothing group that failed
	// (Effect.Compensations says which, latest first; compensate.go); the
	// driver records what each did as a compensated event.
	Compensate EffectKind = "compensate"
	Stop       EffectKind = "stop"
	// None follows the Stopped event: the run is over.
	None EffectKind = "none"
)

// Effect is the decider's instruction to the driver.
type Effect struct {
	Kind EffectKind
	// Calls holds indexes into the current batch (AuthorizeCalls,
	// PlanBatch, ExecuteStage).
	Calls []int
	// Stage is the stage to execute (ExecuteStage).
	Stage int
	// Status and Detail say why the run stops (Stop).
	Status Status
	Detail string
	// Edit is the context edit to record (EditContext).
	Edit *ContextEdit `json:",omitempty"`
	// Summary is the compaction to ask for (Summarize).
	Summary *SummaryRequest `json:",omitempty"`
	// Compensations are the compensations to perform, in order
	// (Compensate); Detail then says why.
	Compensations []CompensationCall `json:",omitempty"`
}

// Pending is a call waiting for a human's confirmation.
type Pending struct {
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Reason    string          `json:"reason"`
	Decision  policy.Decision `json:"decision"`
	// Confirmation is the human's answer, once there is one.
	Confirmation *Confirmation `json:"confirmation,omitempty"`
}

// Batch is the tool calls of one model turn while they are being handled.
type Batch struct {
	Step      int
	Calls     []llm.ToolCall
	Checks    []CallCheck
	Decisions []policy.Decision
	Plan      executor.Plan
	NextStage int
	// Results is indexed like Calls; nil means "no result yet". An
	// executed call's result is its outcome's, in the StageFinished
	// event, not a copy.
	Results []*llm.ToolResult
	// Allowed lists the calls the policy allowed outright; Approved marks
	// (by index) calls a human approved after the run paused for them.
	Allowed  []int
	Approved []bool
	// Unknown lists (by index) the writes whose outcome is unknown.
	Unknown []int `json:",omitempty"`
	// Taint holds, by index, the taint facts of each call the policy is
	// asked about (taint.go); kept out of the plain JSON.
	Taint []*policy.Taint `json:"-"`
}

// State is everything the decider knows about a run. It is rebuilt exactly
// by replaying the run's events, which is what makes a log a checkpoint.
// Its JSON encoding (MarshalJSON, through a pointer) is the decider's
// whole memory but the conversation: what a driver carries instead of the
// log (see memory.go).
type State struct {
	RunID     string
	SessionID string
	Model     string
	StartedAt time.Time
	// Deadline is when the run's time is spent; zero for none.
	Deadline  time.Time
	Budgets   Budgets
	Price     *Price
	Messages  []llm.Message
	Steps     int
	ToolCalls int
	Usage     llm.Usage
	Cost      float64
	Batch     *Batch
	Pending   []Pending
	// Answered keeps the pending calls humans have answered, with the
	// answers, once the run has moved on.
	Answered []Pending
	// PausedAt is when the run paused for confirmation; the wait for a
	// human does not count against the run's deadline.
	PausedAt time.Time

	Status Status
	Detail string
	// Stopping is set once the decider has said Stop; Done once the
	// Stopped event is in the log.
	Stopping bool
	Done     bool

	// next is the effect the last event called for.
	next Effect

	// callIDs holds every call ID of the run, sorted, to refuse one used
	// twice: a run's calls are bounded by its budgets, and a sorted slice
	// costs a fraction of a set's memory (bisected, as State's JSON keeps it).
	callIDs []string
	// writeKeys counts the times each write key was requested, and
	// writeCalls the times each write was requested by call key (tool and
	// canonical arguments); failed holds the keys of calls that failed for
	// good. All are made on first use.
	writeKeys  map[string]int
	writeCalls map[uint64]int
	failed     map[uint64]llm.ErrorKind
	// lastChecks and lastCalls are the previous turn's checks and calls
	// (the log and the history keep them anyway), for spin detection.
	lastChecks []CallCheck
	lastCalls  []llm.ToolCall
	// seen holds a hash of every tool result the model has seen
	// (resultHash), sorted, as State's JSON keeps it; stale counts the
	// turns in a row, up to the last, whose every result was already in
	// it.
	seen  []uint64
	stale int

	// Output is the schema the final answer must match (nil: any text),
	// and OutputRejected counts the answers that did not (output.go).
	// They are left out of the plain JSON of a State (the decider's
	// transcripts) when empty, as for every run without a schema.
	Output         *OutputSpec `json:",omitempty"`
	OutputRejected int         `json:",omitempty"`
	// ctx is context management's memory; nil when the run has none.
	ctx *contextMemory

	// Compensation is the run's compensation settings (nil: leave writes,
	// no batch groups), and Writes every write the run asked for, with
	// what became of it (compensate.go).
	Compensation *CompensationSpec `json:",omitempty"`
	Writes       []WriteRecord     `json:",omitempty"`
	// taint is the taint memory (taint.go); nil before Started.
	taint *taintMemory
}

// indexes returns the indexes 0 to n-1.
func indexes(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// Next is the decider: given the state and the next event it updates the
// state in place and returns the effect the driver must perform. It does no
// I/O and reads no clock (event times come from the driver), so the same
// events always lead to the same state and effects.
func Next(s *State, ev *Event) Effect {
	eff := trackTaint(s, ev, next)
	s.next = eff
	return eff
}

func next(s *State, ev *Event) Effect {
	if ev.Kind == Resumed {
		// Picking a run up again changes nothing: the effect due before
		// is still due.
		return s.next
	}
	if ev.Kind == ConfirmationDecided {
		return confirmationDecided(s, ev)
	}
	if s.Done {
		return Effect{Kind: None}
	}
	if ev.Kind == Compensated {
		return compensated(s, ev)
	}
	if s.next.Kind == Compensate && ev.Kind != Started {
		// A compensation under way is finished before anything else: a
		// driver sends no other event meanwhile.
		return s.next
	}
	if ev.Kind == Started {
		return start(s, ev)
	}
	if ev.Kind == Stopped {
		s.Done = true
		if s.Status == ConfirmationRequired {
			s.PausedAt = ev.At
		}
		return Effect{Kind: None}
	}
	if s.Stopping {
		return Effect{Kind: Stop, Status: s.Status, Detail: s.Detail}
	}
	if ev.Kind == ModelFailed && ev.Failure != nil && ev.Failure.Kind == FailContextLength && s.ctx != nil {
		if ev.Response != nil {
			charge(s, ev.Response)
		}
		return promptTooLong(s, ev)
	}
	if ev.Kind == ContextSummarized && ev.Failure != nil && ev.Failure.Kind == FailContextLength {
		if ev.Response != nil {
			charge(s, ev.Response)
		}
		return stop(s, ContextExhausted, "the summary request for a compaction was itself too long: "+ev.Failure.Message)
	}
	if ev.Kind == Interrupted || ev.Failure != nil {
		if st, detail, ok := failure(ev); ok {
			if ev.Kind == StageFinished {
				record(s, ev)
			}
			if (ev.Kind == ModelFailed || ev.Kind == ContextSummarized) && ev.Response != nil {
				// A stream that broke part-way was paid for as far as it
				// came: its usage counts, though the turn does not.
				charge(s, ev.Response)
			}
			return stop(s, st, detail)
		}
	}
	if !s.Deadline.IsZero() && !ev.At.Before(s.Deadline) {
		switch ev.Kind {
		case StageFinished:
			record(s, ev)
		case ModelResponded:
			// Count what the late answer cost; its calls will not run,
			// so it stays out of the history.
			account(s, ev.Response)
		case ContextSummarized:
			if ev.Response != nil {
				charge(s, ev.Response)
			}
		}
		return stop(s, DeadlineExceeded, fmt.Sprintf("the run's deadline of %v passed", s.Budgets.Deadline))
	}
	switch ev.Kind {
	case ModelResponded:
		return modelResponded(s, ev)
	case CallsValidated:
		return callsValidated(s, ev)
	case PolicyDecided:
		return policyDecided(s, ev)
	case StagePlanned:
		return stagePlanned(s, ev)
	case StageFinished:
		return stageFinished(s, ev)
	case ContextEdited:
		return contextEdited(s, ev)
	case ContextSummarized:
		return contextSummarized(s, ev)
	case TokensCounted:
		return tokensCounted(s, ev)
	}
	return stop(s, ProtocolError, fmt.Sprintf("driver error: unexpected event %q", ev.Kind))
}

func start(s *State, ev *Event) Effect {
	info := ev.Start
	*s = State{
		RunID: info.RunID, SessionID: info.SessionID, Model: info.Model, StartedAt: ev.At, Budgets: info.Budgets, Price: info.Price,
		Messages: slices.Clone(info.Messages), Output: info.Output,
		Compensation: info.Compensation,
	}
	if info.Budgets.Deadline > 0 {
		s.Deadline = ev.At.Add(info.Budgets.Deadline)
	}
	if info.Context != nil {
		s.ctx = &contextMemory{Policy: *info.Context, Lead: len(info.Messages)}
	}
	for i := range s.Messages {
		// Read through the state's copy: a loop variable whose address
		// is taken would be a heap copy of each message.
		m := &s.Messages[i]
		if s.ctx != nil {
			s.ctx.add(m)
		}
		for _, c := range m.ToolCalls {
			s.noteCallID(c.ID)
		}
		if m.Result != nil {
			s.see(m.Result)
		}
	}
	return Effect{Kind: RequestModel}
}

func failure(ev *Event) (Status, string, bool) {
	f := ev.Failure
	if f == nil {
		return "", "", false
	}
	switch f.Kind {
	case FailCanceled:
		return Canceled, "the caller canceled the run: " + f.Message, true
	case FailDeadline:
		return DeadlineExceeded, "the run's time ran out: " + f.Message, true
	case FailModel, FailContextLength:
		return ModelError, f.Message, true
	case FailProtocol:
		return ProtocolError, f.Message, true
	}
	return ProtocolError, "driver error: unknown failure kind " + string(f.Kind), true
}

func modelResponded(s *State, ev *Event) Effect {
	resp := ev.Response
	account(s, resp)
	msg := resp.Message
	msg.Role = llm.RoleAssistant
	if problem := protocolProblem(s, &msg); problem != "" {
		// The malformed message stays in the event log but never enters
		// the history, which must remain valid for every provider.
		if len(msg.Reasoning) > 0 && len(msg.ToolCalls) == 0 && strings.TrimSpace(msg.Text) == "" {
			// A reasoning model that thought and said nothing, most often
			// because it spent its output tokens thinking.
			problem = fmt.Sprintf("the model returned only reasoning (%d part(s)), neither text nor tool calls", len(msg.Reasoning))
			if resp.Truncated {
				problem += ": it reached its output token limit while thinking (raise the limit or lower the thinking budget)"
			}
		}
		return stop(s, ProtocolError, problem)
	}
	if c := s.ctx; c != nil {
		// The reported input is what the request now answered weighed:
		// the estimate learns from it before the reply joins the history.
		c.calibrate(resp.Usage.Clamped())
		c.Retried, c.Compacted = false, false
	}
	// The message is read from here on through its place in the history,
	// so that its copy above stays on the stack. A reply with calls is
	// followed by their results and, unless a budget stops the run, by
	// the model's next reply: room for all of them is made at once, so
	// that a final answer rarely grows (and copies) the whole history.
	n := len(msg.ToolCalls)
	room := 1
	if n > 0 {
		room += n + 1
	}
	s.Messages = append(slices.Grow(s.Messages, room), msg)
	added := &s.Messages[len(s.Messages)-1]
	if s.ctx != nil {
		s.ctx.add(added)
	}
	if n == 0 {
		if eff, ok := checkOutput(s, added, resp.Truncated); !ok {
			return eff
		}
		detail := fmt.Sprintf("the model answered after %d turn(s)", s.Steps)
		if resp.Truncated {
			detail += "; " + TruncatedDetail
		}
		return stop(s, FinalAnswer, detail)
	}
	for _, c := range added.ToolCalls {
		s.noteCallID(c.ID)
	}
	s.Batch = newBatch(s.Steps, added.ToolCalls)
	b := &s.Budgets
	switch {
	case s.Steps >= b.MaxSteps:
		return stop(s, MaxStepsExceeded, fmt.Sprintf(
			"turn %d of %d asked for %d more tool call(s); no turn is left to read their results", s.Steps, b.MaxSteps, n))
	case b.MaxTokens > 0 && s.Usage.Total() > b.MaxTokens:
		return stop(s, CostBudgetExceeded, fmt.Sprintf("%d tokens used, budget %d", s.Usage.Total(), b.MaxTokens))
	case b.MaxCost > 0 && s.Cost > b.MaxCost:
		return stop(s, CostBudgetExceeded, fmt.Sprintf("cost $%.6f, budget $%.6f", s.Cost, b.MaxCost))
	case b.MaxToolCalls > 0 && s.ToolCalls+n > b.MaxToolCalls:
		return stop(s, ToolBudgetExceeded, fmt.Sprintf(
			"%d tool call(s) made, %d more requested, budget %d", s.ToolCalls, n, b.MaxToolCalls))
	}
	s.ToolCalls += n
	return Effect{Kind: ValidateCalls}
}

// account counts a model turn and what it cost. The provider's usage is
// clamped first (llm.Usage.Clamped): the log keeps what it reported, and
// a replay clamps it the same way.
func account(s *State, resp *llm.Response) {
	s.Steps++
	charge(s, resp)
}

// charge adds a response's usage, clamped, and its cost to the run's.
func charge(s *State, resp *llm.Response) {
	u := resp.Usage.Clamped()
	s.Usage = s.Usage.Add(u)
	if s.Price != nil {
		s.Cost += s.Price.Cost(u)
	}
}

// maxCallField is the longest tool call ID or tool name a model may send.
// Providers' IDs are a few dozen bytes and their tool names at most 64 or
// 128; anything far past that is garbage, which messages, stop details and
// the results sent back to the model must not repeat.
const maxCallField = 256

// protocolProblem names the first way msg breaks the tool-calling
// protocol, or returns "".
func protocolProblem(s *State, msg *llm.Message) string {
	if len(msg.ToolCalls) == 0 && strings.TrimSpace(msg.Text) == "" {
		return "the model returned neither text nor tool calls"
	}
	calls := msg.ToolCalls
	for i := range calls {
		c := &calls[i]
		// Checked first: every message below quotes the name or the ID.
		if len(c.ID) > maxCallField || len(c.Name) > maxCallField {
			return fmt.Sprintf("tool call %d has an ID of %d bytes and a tool name of %d bytes; more than %d is not a name or an ID",
				i+1, len(c.ID), len(c.Name), maxCallField)
		}
		if c.ID == "" {
			return fmt.Sprintf("tool call %d (%s) has no ID", i+1, c.Name)
		}
		if c.Name == "" {
			return fmt.Sprintf("tool call %s has no tool name", c.ID)
		}
		if _, used := slices.BinarySearch(s.callIDs, c.ID); used {
			return fmt.Sprintf("tool call ID %s was already used earlier in the run", c.ID)
		}
		for j := range calls[:i] {
			if calls[j].ID == c.ID {
				return fmt.Sprintf("tool call ID %s appears twice in one response", c.ID)
			}
		}
	}
	return ""
}

func callsValidated(s *State, ev *Event) Effect {
	b := s.Batch
	if b == nil || len(ev.Checks) != len(b.Calls) {
		return stop(s, ProtocolError, "driver error: validation does not match the batch")
	}
	b.Checks = ev.Checks
	checks := ev.Checks
	for i := range checks {
		if !checks[i].Known {
			call := b.Calls[i]
			b.Results[i] = errorResult(call, llm.StatusError, llm.KindToolNotAllowed, "no tool named "+call.Name+" is registered")
			return stop(s, ToolNotAllowed, fmt.Sprintf("call %s names tool %q, which is not registered", call.ID, call.Name))
		}
	}
	for i := range checks {
		c := &checks[i]
		if s.failed != nil {
			if kind, ok := s.failed[c.Key]; ok {
				call := &b.Calls[i]
				return stop(s, SpinDetected, fmt.Sprintf(
					"call %s retries %s with the same arguments after it failed with %s", call.ID, call.Name, kind))
			}
		}
		for j := range s.lastChecks {
			last := &s.lastChecks[j]
			if last.Key != c.Key {
				continue
			}
			if c.WriteKey != "" && c.WriteKey == last.WriteKey {
				// The same write under the same idempotency key is
				// replayed from the ledger, not executed again; the
				// counts below bound it instead. A write whose key is
				// new (the default key is per call) would run again, so
				// it is a repeat like a read's.
				continue
			}
			call := &b.Calls[i]
			return stop(s, SpinDetected, fmt.Sprintf(
				"call %s repeats %s with the same arguments as call %s of the previous turn", call.ID, call.Name, s.lastCalls[j].ID))
		}
	}
	writes := false
	for i := range checks {
		// A write asked for again is answered from the ledger once; a
		// third request of the same write is a model going round in
		// circles, whether it names the write by its idempotency key or,
		// for writes keyed per call, by the same tool and arguments.
		if c := &checks[i]; c.WriteKey != "" && c.Problem == "" {
			writes = true
			if s.writeKeys[c.WriteKey] >= 2 {
				return stop(s, SpinDetected, fmt.Sprintf(
					"call %s asks for write %q a third time in this run", b.Calls[i].ID, c.WriteKey))
			}
			if s.writeCalls[c.Key] >= 2 {
				call := &b.Calls[i]
				return stop(s, SpinDetected, fmt.Sprintf(
					"call %s asks a third time in this run for write %s with the same arguments", call.ID, call.Name))
			}
		}
	}
	if writes {
		if s.writeKeys == nil {
			s.writeKeys, s.writeCalls = map[string]int{}, map[uint64]int{}
		}
		for i := range checks {
			if c := &checks[i]; c.WriteKey != "" && c.Problem == "" {
				s.writeKeys[c.WriteKey]++
				s.writeCalls[c.Key]++
			}
		}
	}
	if s.stale >= staleTurns {
		// The model learned nothing from its last turns and asks for
		// more: it is going round in circles. Text instead of calls would
		// have ended the run with what it has.
		call := &b.Calls[0]
		return stop(s, SpinDetected, fmt.Sprintf(
			"call %s asks for more after %d turns in a row that added no new information (every result of turns %d to %d repeated one the model had already seen)",
			call.ID, s.stale, s.Steps-s.stale, s.Steps-1))
	}
	s.lastChecks, s.lastCalls = checks, b.Calls
	invalid := 0
	for i := range checks {
		c := &checks[i]
		if c.Problem != "" {
			invalid++
			s.fail(c.Key, llm.KindInvalidArguments)
			b.Results[i] = errorResult(b.Calls[i], llm.StatusError, llm.KindInvalidArguments, c.Problem)
		} else if why := undoneKey(s, c.WriteKey); why != "" {
			invalid++
			b.Results[i] = errorResult(b.Calls[i], llm.StatusError, llm.KindIdempotencyConflict, why)
		}
	}
	switch invalid {
	case len(checks):
		return finishBatch(s)
	case 0:
		return Effect{Kind: AuthorizeCalls, Calls: indexes(len(checks))}
	}
	valid := make([]int, 0, len(checks)-invalid)
	for i := range checks {
		if b.Results[i] == nil {
			valid = append(valid, i)
		}
	}
	return Effect{Kind: AuthorizeCalls, Calls: valid}
}

func policyDecided(s *State, ev *Event) Effect {
	b := s.Batch
	if b == nil || len(ev.Decisions) != len(b.Calls) {
		return stop(s, ProtocolError, "driver error: policy decisions do not match the batch")
	}
	b.Decisions = ev.Decisions
	// The most severe verdict decides: an out-of-bounds tool, then a denial,
	// then a confirmation.
	decisions := ev.Decisions
	allAllowed := true
	for i := range decisions {
		allAllowed = allAllowed && decisions[i].Verdict == policy.Allow
	}
	for _, want := range []policy.Verdict{policy.NotAllowed, policy.Deny} {
		if allAllowed {
			break
		}
		for i := range decisions {
			d := &decisions[i]
			if d.Verdict != want {
				continue
			}
			call := b.Calls[i]
			if want == policy.NotAllowed {
				b.Results[i] = errorResult(call, llm.StatusError, llm.KindToolNotAllowed, d.Reason)
				return stop(s, ToolNotAllowed, fmt.Sprintf("call %s: %s", call.ID, d.Reason))
			}
			b.Results[i] = errorResult(call, llm.StatusError, llm.KindPermissionDenied, d.Reason)
			return stop(s, PermissionDenied, fmt.Sprintf("call %s: %s", call.ID, d.Reason))
		}
	}
	allowed := indexes(len(decisions))
	if !allAllowed {
		allowed = make([]int, 0, len(ev.Decisions))
		for i, d := range ev.Decisions {
			switch d.Verdict {
			case policy.Confirm:
				call := b.Calls[i]
				s.Pending = append(s.Pending, Pending{
					CallID: call.ID, Tool: call.Name, Arguments: call.Arguments, Reason: d.Reason, Decision: d,
				})
				b.Results[i] = errorResult(call, llm.StatusSkipped, llm.KindAwaitingConfirmation, d.Reason)
			case policy.Allow:
				allowed = append(allowed, i)
			case "":
				// not asked: the call's arguments were invalid
			default:
				return stop(s, ProtocolError, fmt.Sprintf("driver error: unknown verdict %q", d.Verdict))
			}
		}
	}
	b.Allowed = allowed
	if len(s.Pending) > 0 {
		// A pause, not an end: the batch stays open so that the approved
		// calls can run when the run resumes.
		p := s.Pending[0]
		s.Status, s.Stopping = ConfirmationRequired, true
		s.Detail = fmt.Sprintf("call %s (%s) awaits confirmation: %s", p.CallID, p.Tool, p.Reason)
		return Effect{Kind: Stop, Status: s.Status, Detail: s.Detail}
	}
	return Effect{Kind: PlanBatch, Calls: allowed}
}

func stagePlanned(s *State, ev *Event) Effect {
	b := s.Batch
	if b == nil || ev.Plan == nil {
		return stop(s, ProtocolError, "driver error: a plan without a batch")
	}
	b.Plan = *ev.Plan
	b.NextStage = 0
	return nextStage(s)
}

func nextStage(s *State) Effect {
	b := s.Batch
	for b.NextStage < len(b.Plan.Stages) && len(b.Plan.Stages[b.NextStage]) == 0 {
		b.NextStage++
	}
	if b.NextStage >= len(b.Plan.Stages) {
		return finishBatch(s)
	}
	return Effect{Kind: ExecuteStage, Stage: b.NextStage, Calls: b.Plan.Stages[b.NextStage]}
}

// record copies a stage's outcomes into the batch.
func record(s *State, ev *Event) {
	b := s.Batch
	if b == nil || ev.Stage >= len(b.Plan.Stages) {
		return
	}
	idx := b.Plan.Stages[ev.Stage]
	for j := range ev.Outcomes {
		if j >= len(idx) {
			break
		}
		i, o := idx[j], &ev.Outcomes[j]
		b.Results[i] = &o.Result
		if o.OutcomeUnknown && !slices.Contains(b.Unknown, i) {
			b.Unknown = append(b.Unknown, i)
		}
		if o.Result.Status == llm.StatusError && tool.Deterministic(o.Result.ErrorKind) && i < len(b.Checks) {
			s.fail(b.Checks[i].Key, o.Result.ErrorKind)
		}
	}
}

func stageFinished(s *State, ev *Event) Effect {
	b := s.Batch
	if b == nil || ev.Stage != b.NextStage || ev.Stage >= len(b.Plan.Stages) ||
		len(ev.Outcomes) != len(b.Plan.Stages[ev.Stage]) {
		return stop(s, ProtocolError, "driver error: stage outcomes do not match the plan")
	}
	record(s, ev)
	for i := range ev.Outcomes {
		if o := &ev.Outcomes[i]; o.OutcomeUnknown {
			r := o.Result
			return stop(s, ToolOutcomeUnknown, fmt.Sprintf(
				"call %s (%s): the write with idempotency key %q may or may not have happened, and no status look-up settled it",
				r.CallID, r.Name, o.IdempotencyKey))
		}
	}
	for i := range ev.Outcomes {
		if o := &ev.Outcomes[i]; o.TimedOut && o.StopRun {
			r := o.Result
			return stop(s, ToolTimeout, fmt.Sprintf("call %s (%s) ran past its timeout", r.CallID, r.Name))
		}
	}
	b.NextStage++
	return nextStage(s)
}

// finishBatch appends the batch's results, in the model's call order, and
// asks the model again unless a budget is already spent.
func finishBatch(s *State) Effect {
	noteNews(s)
	step := 0
	if s.Batch != nil {
		step = s.Batch.Step
	}
	failed := registerBatch(s)
	appendResults(s)
	closeBatchGroups(s, step, failed)
	if eff, ok := settle(s, failed, false); ok {
		return eff
	}
	return afterBatch(s)
}

// afterBatch asks the model again, once a batch's results (and any
// compensation it led to) are in the history, unless a budget is spent.
func afterBatch(s *State) Effect {
	b := s.Budgets
	switch {
	case b.MaxTokens > 0 && s.Usage.Total() >= b.MaxTokens:
		return stop(s, CostBudgetExceeded, fmt.Sprintf("%d tokens used, budget %d: no room for another turn", s.Usage.Total(), b.MaxTokens))
	case b.MaxCost > 0 && s.Cost >= b.MaxCost:
		return stop(s, CostBudgetExceeded, fmt.Sprintf("cost $%.6f, budget $%.6f: no room for another turn", s.Cost, b.MaxCost))
	}
	return beforeRequest(s)
}

func appendResults(s *State) {
	b := s.Batch
	if b == nil {
		return
	}
	for i, r := range b.Results {
		if r == nil {
			r = errorResult(b.Calls[i], llm.StatusSkipped, llm.KindRunStopped,
				"not run: the run stopped with "+string(s.Status)+" before this call")
		}
		// The message points at the result the batch holds, which for an
		// executed call is its outcome's in the log: no copy.
		s.Messages = append(s.Messages, llm.Message{Role: llm.RoleTool, Result: r})
		if s.ctx != nil {
			s.ctx.add(&s.Messages[len(s.Messages)-1])
		}
	}
	s.Batch = nil
}

// noteCallID adds id to the run's call IDs, keeping them sorted.
func (s *State) noteCallID(id string) {
	if i, found := slices.BinarySearch(s.callIDs, id); !found {
		s.callIDs = slices.Insert(s.callIDs, i, id)
	}
}

// staleTurns is how many turns in a row may add no new information (see
// noteNews) before a further request for tool calls is a spin.
const staleTurns = 2

// noteNews counts the finished batch as stale when each of its results is
// one the model has already seen, word for word, from the same tool with
// the same status (the call and its arguments may differ: the same answer
// to another question tells the model nothing new either), and else
// resets the count. It then adds the batch's results to those seen.
func noteNews(s *State) {
	b := s.Batch
	if b == nil || len(b.Results) == 0 {
		return
	}
	stale := true
	hashes := make([]uint64, len(b.Results))
	for i, r := range b.Results {
		if r == nil {
			stale = false
			continue
		}
		hashes[i] = resultHash(r)
		if _, ok := slices.BinarySearch(s.seen, hashes[i]); !ok {
			stale = false
		}
	}
	if stale {
		s.stale++
	} else {
		s.stale = 0
	}
	for i, r := range b.Results {
		if r != nil {
			s.seeHash(hashes[i])
		}
	}
}

// see adds r to the results the model has seen.
func (s *State) see(r *llm.ToolResult) { s.seeHash(resultHash(r)) }

func (s *State) seeHash(h uint64) {
	if i, found := slices.BinarySearch(s.seen, h); !found {
		s.seen = slices.Insert(s.seen, i, h)
	}
}

// resultHash identifies a result by what the model reads of it besides
// the call ID: the tool, the status, the error kind and the content.
func resultHash(r *llm.ToolResult) uint64 {
	h := fnv.New64a()
	for _, part := range [][]byte{[]byte(r.Name), []byte(r.Status), []byte(r.ErrorKind), r.Content} {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return h.Sum64()
}

// fail records that the call with this key failed for good.
func (s *State) fail(key uint64, kind llm.ErrorKind) {
	if s.failed == nil {
		s.failed = map[uint64]llm.ErrorKind{}
	}
	s.failed[key] = kind
}

// newBatch opens the batch of a turn's calls.
func newBatch(step int, calls []llm.ToolCall) *Batch {
	return &Batch{Step: step, Calls: calls, Results: make([]*llm.ToolResult, len(calls))}
}

func stop(s *State, st Status, detail string) Effect {
	s.Status, s.Detail, s.Stopping = st, detail, true
	registerBatch(s)
	appendResults(s)
	if eff, ok := settle(s, nil, true); ok {
		return eff
	}
	return Effect{Kind: Stop, Status: st, Detail: detail}
}

func errorResult(c llm.ToolCall, status llm.ResultStatus, kind llm.ErrorKind, msg string) *llm.ToolResult {
	return &llm.ToolResult{CallID: c.ID, Name: c.Name, Status: status, ErrorKind: kind, Content: llm.ErrorContent(kind, msg)}
}

// confirmationDecided records a human's answer to a pending call. When the
// last pending call of the paused batch is answered, the run resumes: denied
// calls get a result saying so (the model can react to it), and the approved
// ones are planned with the calls the policy allowed outright.
func confirmationDecided(s *State, ev *Event) Effect {
	c := ev.Confirmation
	if s.Status != ConfirmationRequired || s.Batch == nil || c == nil {
		return idle(s)
	}
	undecided := 0
	for i := range s.Pending {
		p := &s.Pending[i]
		if p.CallID == c.CallID && p.Confirmation == nil {
			cc := *c
			p.Confirmation = &cc
		}
		if p.Confirmation == nil {
			undecided++
		}
	}
	if undecided > 0 {
		return idle(s)
	}
	b := s.Batch
	b.Approved = make([]bool, len(b.Calls))
	for _, p := range s.Pending {
		for i, call := range b.Calls {
			if call.ID != p.CallID {
				continue
			}
			if p.Confirmation.Approved {
				b.Approved[i] = true
				b.Results[i] = nil
			} else {
				b.Results[i] = errorResult(call, llm.StatusError, llm.KindPermissionDenied, denial(p.Confirmation))
			}
		}
	}
	if !s.PausedAt.IsZero() && !s.Deadline.IsZero() && ev.At.After(s.PausedAt) {
		s.Deadline = s.Deadline.Add(ev.At.Sub(s.PausedAt))
	}
	s.Answered = append(s.Answered, s.Pending...)
	s.Pending, s.PausedAt = nil, time.Time{}
	s.Status, s.Detail, s.Stopping, s.Done = "", "", false, false
	calls := append([]int(nil), b.Allowed...)
	for i, ok := range b.Approved {
		if ok {
			calls = append(calls, i)
		}
	}
	slices.Sort(calls)
	if len(calls) == 0 {
		return finishBatch(s)
	}
	return Effect{Kind: PlanBatch, Calls: calls}
}

// idle is the effect of an event that changes nothing to do: nothing for
// a run that is over, else the effect that was due before it (an answer
// arriving while the run is busy must not make a driver think it ended).
func idle(s *State) Effect {
	if s.Done {
		return Effect{Kind: None}
	}
	if s.Stopping && s.next.Kind != Compensate {
		return Effect{Kind: Stop, Status: s.Status, Detail: s.Detail}
	}
	return s.next
}

func denial(c *Confirmation) string {
	msg := "a person (" + c.By + ") denied this call"
	if c.Note != "" {
		msg += ": " + c.Note
	}
	return msg
}

// History returns the conversation as it stands, valid for any provider:
// while a batch is open (a run paused for confirmation) its calls without a
// result get a skipped placeholder. It never changes the state.
func (s *State) History() []llm.Message {
	b := s.Batch
	if b == nil {
		return s.Messages
	}
	h := make([]llm.Message, len(s.Messages), len(s.Messages)+len(b.Calls))
	copy(h, s.Messages)
	for i, r := range b.Results {
		if r == nil {
			r = errorResult(b.Calls[i], llm.StatusSkipped, llm.KindAwaitingConfirmation,
				"not run yet: the run is paused until pending confirmations are answered")
		}
		h = append(h, llm.Message{Role: llm.RoleTool, Result: r})
	}
	return h
}
