package loop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// Config configures a Runner. Model and Tools are required.
type Config struct {
	Model llm.Model
	// ModelName is sent with every request and prices the run.
	ModelName string
	// Tools are the tools the model may call.
	Tools *tool.Registry
	// Policy decides each call; nil allows every registered tool.
	Policy   policy.Policy
	Identity policy.Identity
	Budgets  Budgets
	// Executor runs tool calls; nil means an executor with default
	// options on the runner's clock (Now).
	Executor *executor.Executor
	// Planner plans each batch; nil means executor.RulePlanner with the
	// executor's MaxParallel.
	Planner executor.Planner
	// ModelRetries is how many times a retryable model failure is tried
	// again (default DefaultModelRetries; negative for never).
	// ModelRetryBackoff is the first wait, doubled each time (default
	// DefaultModelRetryBackoff).
	ModelRetries      int
	ModelRetryBackoff time.Duration
	// ModelTimeout bounds one model request: one that has not answered by
	// then is abandoned (its context ends) and counts as a retryable
	// failure (llm.KindTimeout), so that a hung request cannot spend the
	// whole run's deadline. A streamed request is bounded by the time it
	// goes quiet instead: the wait for its first delta with something to
	// show, and for each one after (a usage report alone is not heard), so
	// that a long turn that keeps coming is never cut off while a stalled
	// connection is (the run's deadline bounds the whole); a turn already
	// complete when its connection stalls is kept (see ModelTurn).
	// Default DefaultModelTimeout; negative for none.
	ModelTimeout time.Duration
	// Stream makes the run ask a model that can stream (an
	// llm.StreamingModel) for each turn as a stream, which Watch then
	// shows delta by delta; otherwise each turn is asked for whole
	// (Model.Generate). It is opt-in because a stream is another request
	// on the wire, which not every OpenAI-compatible server or proxy in
	// front of a provider supports. Streaming changes when the run sees a
	// turn, not what it records: the log holds the assembled turn either way, never its
	// deltas, and a stream is retried only while it has shown nothing (a
	// stream that breaks after its first delta ends the run with
	// model_error, what it received kept in the model_failed event; one
	// whose pieces contradict each other, with protocol_error). Whether a
	// run streams depends on this and on the model alone, never on
	// whether anyone watches.
	Stream bool
	// Watch, when set, is told what the run does as it goes: the model's
	// deltas as they stream, each call validated, authorized, started and
	// finished, each plan, each step's end with its usage, and the stop
	// (see Update). It is for showing progress; Observer is for records.
	//
	// Watch is a plain callback rather than a channel or an iterator
	// (iter.Seq2) because the run already has a goroutine that drives it
	// in order: the callback runs there, so an update costs a function
	// call, there is no goroutine to leak or buffer to size, a slow
	// watcher slows the run (backpressure) rather than losing updates, and
	// cancellation is the run's context, as everywhere. An iterator would
	// need the run to move to a goroutine of its own the moment it must
	// tell of tool calls that run on the executor's goroutines, and a
	// loop body that breaks would have to mean "cancel the run", which is
	// the context's job; and one callback covers Run, Resume and Continue
	// alike. Updates come in order and never two at once; all come on
	// the goroutine that drives the run except a stage's call started and
	// finished, which come from the goroutine that runs the call (still
	// one at a time). Watch sees what the run appends as it appends it,
	// before a Store has it; a run's updates never change its log.
	Watch func(ctx context.Context, u Update)
	// RequestID, when set, derives write idempotency keys from the
	// business request rather than the run: a retried request (a new run
	// with the same RequestID) finds its writes already done. Tools with
	// their own key (tool.Spec.IdempotencyKey) keep it.
	RequestID string
	// SessionID and PromptVersion are recorded in the log.
	SessionID     string
	PromptVersion string
	// Context, when set, manages the history so that each model request
	// stays inside the model's window: old tool results are cleared
	// (docs/DESIGN.md §5). A zero Window is the model's window when
	// KnownWindow knows ModelName. Nil leaves the history whole, and a
	// provider's "prompt too long" stops the run with model_error.
	Context *ContextPolicy
	// Observer sees every event of the run once it is committed: as it is
	// appended when the run has no Store, and once the Store has accepted
	// it otherwise, so that a run log written by an observer never holds
	// an event the store lost or refused (a crash, a lost race). It is the
	// hook for run logs and tracing, and changes nothing in the run or its
	// log.
	Observer Observer
	// Store, when set, makes runs durable: each run's events are appended
	// to it before the run acts on the world (a model request, a tool
	// stage) and when it stops, and Resume continues a run from it.
	//
	// A Store that also implements store.Leaser gets one driver per run:
	// Run, Resume and Continue take the run's lease before they read or
	// write its log, renew it while they drive, and release it when they
	// return. A run whose lease another driver holds is refused with a
	// *store.LeaseHeldError naming the holder, and nothing is written. A
	// Store without leases (a wrapper that embeds only store.EventLog, say)
	// still works: then the sequence check of Append is the only guard,
	// and two drivers may both act before one of them fails.
	Store store.EventLog
	// LeaseOwner names this driver in run leases, so that a refused
	// driver learns who holds the run; empty means host:pid. Every drive
	// adds a random suffix, so that two drives never share a lease, not
	// even in one process, and on Linux a mark of this process (its ID,
	// start time and machine), by which a driver on the same machine
	// takes over at once the lease of a process that has exited.
	LeaseOwner string
	// LeaseTTL is how long a run's lease lasts unless renewed (every third
	// of it, on the real clock): the longest a crashed driver's run waits
	// before another may take it over. Default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// StoreTimeout bounds each call to Store, whether or not the store
	// honours its context; the calls that record how a run ended are
	// also bounded by the run's deadline plus store.DeadlineGrace. A
	// frozen store thus interrupts the run (*InterruptedError) instead of
	// holding it. Default store.DefaultCallTimeout.
	StoreTimeout time.Duration
	// Now is the clock that stamps the run's events; nil means time.Now.
	// The run's deadline and tool timeouts always run on the real clock.
	Now func() time.Time
	// NewRunID makes run IDs; nil means 16 random hex digits.
	NewRunID func() string
	// OutputSchema, when set, is a JSON Schema (a JSON object, draft
	// 2020-12 unless it says otherwise) that the final answer must match:
	// the answer is then JSON, in Result.Output (Decode reads it into a
	// struct). Each model request asks for it through the provider's
	// structured output where there is one (llm.Request.Output), named
	// OutputName (default DefaultOutputName), strict if OutputStrict; and
	// every answer is validated whatever the provider promised. An answer
	// that does not match goes back to the model with what was wrong, up
	// to OutputRetries times (default DefaultOutputRetries; negative for
	// never), each correction a model turn like any other; then the run
	// stops with invalid_output. The schema is recorded in the started
	// event, so a resumed or replayed run holds answers to it.
	OutputSchema  json.RawMessage
	OutputName    string
	OutputStrict  bool
	OutputRetries int
	// Compensation is what the run does with the succeeded writes of an
	// all-or-nothing group (tool.Spec.AtomicGroup, AtomicBatches) when a
	// call of the group fails for good, or the run stops without a final
	// answer: LeaveWrites (the default) keeps them and reports them in
	// Result.Writes; CompensateWrites undoes them with their tools'
	// compensations (tool.Spec.Compensation), latest first, each a write
	// through the executor and the ledger. A compensation that fails stops
	// the run with compensation_failed. Both are recorded in the started
	// event (docs/DESIGN.md §7.1).
	Compensation CompensationPolicy
	// AtomicBatches makes the calls of each model turn an all-or-nothing
	// group; a call whose tool names a group of its own stays in that.
	AtomicBatches bool
}

// Runner is the in-process driver: it performs the decider's effects on
// the goroutine that calls Run, with context deadlines and timeouts. It is
// immutable and safe for concurrent runs.
type Runner struct {
	cfg     Config
	budgets Budgets
	price   *Price
	output  *OutputSpec
	context *ContextPolicy
	comp    *CompensationSpec
	// logSize and historySize are how long recent runs' logs and
	// histories grew: a new run makes room for as many events and
	// messages at its start.
	logSize, historySize sizeHint
}

// NewRunner checks cfg and fills in defaults.
func NewRunner(cfg Config) (*Runner, error) {
	if cfg.Model == nil {
		return nil, errors.New("loop: Config.Model is required")
	}
	if cfg.Tools == nil {
		return nil, errors.New("loop: Config.Tools is required (an empty tool.Registry is fine)")
	}
	b, err := cfg.Budgets.Normalized()
	if err != nil {
		return nil, fmt.Errorf("loop: %w", err)
	}
	r := &Runner{cfg: cfg, budgets: b}
	if len(cfg.OutputSchema) > 0 {
		if r.output, err = NewOutputSpec(cfg.OutputSchema, cfg.OutputName, cfg.OutputStrict, cfg.OutputRetries); err != nil {
			return nil, fmt.Errorf("loop: Config.OutputSchema: %w", err)
		}
	}
	if r.comp, err = NewCompensationSpec(cfg.Compensation, cfg.AtomicBatches); err != nil {
		return nil, fmt.Errorf("loop: Config.Compensation: %w", err)
	}
	if p, ok := b.Prices[cfg.ModelName]; ok {
		r.price = &p
	} else if b.MaxCost > 0 {
		return nil, fmt.Errorf("loop: MaxCost is set but Budgets.Prices has no price for model %q", cfg.ModelName)
	}
	if cfg.Context != nil {
		p, err := ResolveContextPolicy(*cfg.Context, cfg.ModelName)
		if err != nil {
			return nil, fmt.Errorf("loop: %w", err)
		}
		r.context = &p
	}
	if r.cfg.Now == nil {
		r.cfg.Now = time.Now
	}
	if r.cfg.Executor == nil {
		r.cfg.Executor = executor.New(&executor.Options{Now: r.cfg.Now})
	}
	if r.cfg.Planner == nil {
		r.cfg.Planner = executor.RulePlanner(r.cfg.Executor.Options().MaxParallel)
	}
	switch {
	case r.cfg.ModelRetries == 0:
		r.cfg.ModelRetries = DefaultModelRetries
	case r.cfg.ModelRetries < 0:
		r.cfg.ModelRetries = 0
	}
	if r.cfg.ModelRetryBackoff <= 0 {
		r.cfg.ModelRetryBackoff = DefaultModelRetryBackoff
	}
	if r.cfg.ModelTimeout == 0 {
		r.cfg.ModelTimeout = DefaultModelTimeout
	}
	if r.cfg.NewRunID == nil {
		r.cfg.NewRunID = randomID
	}
	switch {
	case r.cfg.LeaseTTL == 0:
		r.cfg.LeaseTTL = DefaultLeaseTTL
	case r.cfg.LeaseTTL < 0:
		return nil, fmt.Errorf("loop: LeaseTTL is %v; want a positive duration (or zero for the default, %v)", r.cfg.LeaseTTL, DefaultLeaseTTL)
	}
	if r.cfg.LeaseOwner == "" {
		r.cfg.LeaseOwner = defaultLeaseOwner()
	}
	if r.cfg.StoreTimeout <= 0 {
		r.cfg.StoreTimeout = store.DefaultCallTimeout
	}
	r.cfg.Store = store.BoundEventLog(r.cfg.Store, r.cfg.StoreTimeout)
	return r, nil
}

// Run runs the loop once from msgs with a Runner built from cfg.
func Run(ctx context.Context, cfg Config, msgs []llm.Message) (*Result, error) {
	r, err := NewRunner(cfg)
	if err != nil {
		return nil, err
	}
	return r.Run(ctx, msgs)
}

// Result is how a run ended and what it did.
type Result struct {
	RunID     string        `json:"run_id"`
	Status    Status        `json:"status"`
	Detail    string        `json:"detail"`
	Steps     int           `json:"steps"`
	ToolCalls int           `json:"tool_calls"`
	Usage     llm.Usage     `json:"usage"`
	Cost      float64       `json:"cost"`
	Duration  time.Duration `json:"duration"`
	// Messages is the full history, valid for any provider: every call
	// has exactly one result.
	Messages []llm.Message `json:"messages"`
	// Pending lists calls awaiting confirmation (status
	// confirmation_required).
	Pending []Pending `json:"pending,omitempty"`
	// Events is the run's log, in order. Events are immutable once
	// appended: the result shares them with observers and stores.
	Events []Event `json:"events"`
	// Output is the final answer as JSON, for a run with an output schema
	// that ended with final_answer: the answer's text without surrounding
	// white space or code fences (OutputJSON), which matched the schema.
	// Decode reads it into a Go value.
	Output json.RawMessage `json:"output,omitempty"`
	// Writes says what the run's writes ended as: all done, partial
	// (naming what was done and what was not, and what is left for a
	// person), undone, or none; nil for a run that asked for no write.
	Writes *WritesReport `json:"writes,omitempty"`
}

// Err is nil for a final answer and a *StopError otherwise, so that a
// budget stop never looks like success.
func (r *Result) Err() error {
	if r.Status == FinalAnswer {
		return nil
	}
	return &StopError{Status: r.Status, Detail: r.Detail}
}

// Answer returns the final answer's text, or "" when the run did not end
// with one.
func (r *Result) Answer() string {
	if r.Status != FinalAnswer || len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Text
}

// Run runs the loop from msgs until it stops. The error is nil exactly when
// the status is final_answer. The Result is returned in every case but
// three: a configuration error (or an empty user message in msgs, which
// llm.CheckUserMessages refuses); a run whose lease another driver holds
// (*store.LeaseHeldError, with a store that has leases); and a run that
// stopped being driven because its store failed or its lease was taken
// over (*InterruptedError).
//
// The run is driven on the calling goroutine. Tool calls run through the
// executor, whose timeouts hold whatever a handler does (see
// executor.Executor.Run), so Run returns by the run's deadline.
func (r *Runner) Run(ctx context.Context, msgs []llm.Message) (*Result, error) {
	if err := llm.CheckUserMessages(msgs); err != nil {
		return nil, fmt.Errorf("loop: %w", err)
	}
	start := &StartInfo{
		RunID: r.cfg.NewRunID(), SessionID: r.cfg.SessionID, Model: r.cfg.ModelName, PromptVersion: r.cfg.PromptVersion,
		ToolsVersion: r.cfg.Tools.Version(), Identity: r.cfg.Identity, Budgets: r.budgets, Price: r.price,
		Context: r.context, Messages: msgs, Output: r.output, Compensation: r.comp,
	}
	ctx, hold, err := r.holdLease(ctx, start.RunID)
	if err != nil {
		return nil, err
	}
	defer hold.release(ctx)
	d := &drive{r: r, log: make([]Event, 0, firstLogCap), lease: hold.held(),
		logRoom: r.logSize.get(0), historyRoom: r.historySize.get(0)}
	res, err := d.run(ctx, start.RunID, r.budgets.Deadline, Event{Kind: Started, Start: start})
	r.logSize.note(len(d.log))
	r.historySize.note(len(d.state.Messages))
	return res, err
}

// Resume continues a run from its log in Config.Store: the events are
// replayed through the decider, which rebuilds the state exactly, and the
// run goes on from the effect the last event called for. A stage whose
// outcome was not recorded is executed again: reads simply run again, and
// writes go through the idempotency ledger, so a write that finished is
// replayed and one left in flight is reconciled, never repeated. Resuming
// a run that has ended returns its result unchanged.
//
// With a store that has leases, the log is read only once the run's lease
// is held. A run whose lease another driver holds is refused with a
// *store.LeaseHeldError (matching store.ErrLeaseHeld) naming the holder,
// unless its log shows it has ended: that result is returned unchanged.
func (r *Runner) Resume(ctx context.Context, runID string) (*Result, error) {
	if r.cfg.Store == nil {
		return nil, errors.New("loop: Resume needs Config.Store")
	}
	ctx, hold, err := r.holdLease(ctx, runID)
	if errors.Is(err, store.ErrLeaseHeld) {
		if res := r.ended(ctx, runID); res != nil {
			return res, res.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	defer hold.release(ctx)
	events, err := LoadEvents(ctx, r.cfg.Store, runID)
	if err != nil {
		return nil, err
	}
	return r.continueFrom(ctx, events, len(events), hold.held())
}

// ended returns the result of runID if its log in the store shows that it
// has ended (nothing is left to do until someone answers), or nil.
func (r *Runner) ended(ctx context.Context, runID string) *Result {
	events, err := LoadEvents(ctx, r.cfg.Store, runID)
	if err != nil || len(events) == 0 || events[0].Kind != Started {
		return nil
	}
	var s State
	var eff Effect
	for i := range events {
		eff = Next(&s, &events[i])
	}
	if eff.Kind != None {
		return nil
	}
	return s.Result(events)
}

// Continue goes on with a run from its result, after the given answers to
// its pending confirmations, without a store: the in-memory counterpart of
// Decide then Resume. The answers are appended to the run's log.
func (r *Runner) Continue(ctx context.Context, res *Result, answers ...Confirmation) (*Result, error) {
	events := slices.Clone(res.Events)
	s := Replay(events)
	for _, a := range answers {
		if err := checkLoggedAnswer(s, events, a); err != nil {
			return nil, err
		}
		events = append(events, Event{Seq: len(events) + 1, At: r.cfg.Now(), Kind: ConfirmationDecided, Confirmation: &a})
		Next(s, &events[len(events)-1])
	}
	ctx, hold, err := r.holdLease(ctx, res.RunID)
	if err != nil {
		return nil, err
	}
	defer hold.release(ctx)
	return r.continueFrom(ctx, events, len(res.Events), hold.held())
}

// continueFrom replays events and drives the run on; events from
// flushed on are not yet in the store. lease, when not nil, is the run's
// lease, which the drive's appends are fenced by.
func (r *Runner) continueFrom(ctx context.Context, events []Event, flushed int, lease *store.Lease) (*Result, error) {
	if len(events) == 0 || events[0].Kind != Started || events[0].Start == nil {
		return nil, errors.New("loop: a run's log must begin with its started event")
	}
	d := &drive{r: r, log: events, flushed: flushed, observed: flushed, lease: lease}
	var eff Effect
	for i := range d.log {
		eff = Next(&d.state, &d.log[i])
	}
	if b := d.state.Batch; b != nil {
		// A paused batch goes on: its step finishes in this drive.
		d.openStep = b.Step
	}
	if eff.Kind == None && d.flushed == len(d.log) {
		res := d.result()
		return res, res.Err()
	}
	remaining := time.Duration(0)
	if !d.state.Deadline.IsZero() {
		remaining = max(d.state.Deadline.Sub(r.cfg.Now()), time.Nanosecond)
	}
	return d.run(ctx, d.state.RunID, remaining, Event{Kind: Resumed})
}

// drive is one run's driver state.
type drive struct {
	r   *Runner
	ctx context.Context
	// flushed counts the events already in Config.Store.
	flushed int
	// observed counts the events Config.Observer has been shown.
	observed int
	// lease is the run's lease in Config.Store, when the store has leases:
	// appends are fenced by it.
	lease *store.Lease
	state State
	log   []Event
	// openStep is the step whose model turn was the last, until the
	// watcher has been told it finished (0: none), and stepUsage that
	// turn's usage.
	openStep  int
	stepUsage llm.Usage
	// cache is the run's CacheKey once a request has needed it.
	cache string
	// logRoom is the capacity the log grows to when its first one is
	// full, and historyRoom the capacity the history is given once the
	// started event has made it (Runner.logSize and historySize; 0: none).
	logRoom, historyRoom int
}

// firstLogCap is a new run's first log capacity: the started event and a
// turn of a few calls (a turn of three is 5 events), so that a run
// waiting for its first model turns holds 2 KB of log, not the room its
// whole log will need.
const firstLogCap = 8

// run appends first and performs effects until the run is over. A run
// with a deadline gets a context that ends with it, on the real clock:
// Config.Now only stamps events, and a test clock must not end runs early
// or never.
func (d *drive) run(ctx context.Context, runID string, deadline time.Duration, first Event) (*Result, error) {
	ctx = context.WithValue(ctx, runIDKey{}, runID)
	if deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, deadline)
		defer cancel()
	}
	d.ctx = ctx
	if ro, ok := d.r.cfg.Observer.(ResumeObserver); ok && first.Kind == Resumed {
		ro.ObserveResume(ctx, d.log[:d.observed])
	}
	if err := Drive(d, d.Append(first)); err != nil {
		return nil, err
	}
	if err := d.flush(); err != nil {
		return nil, err
	}
	res := d.result()
	return res, res.Err()
}

// The drive is the in-process Driver: it performs each effect on the
// goroutine that drives the run.
var _ Driver = (*drive)(nil)

// Commit stores what the run learned so far before a tool acts on the
// world: one commit per step. (The run is recorded before its first model
// request too, so that it can be listed.) A crash between a stage and the
// next commit runs that stage again on resume: reads repeat harmlessly
// and writes go through the idempotency ledger.
func (d *drive) Commit(eff Effect) error {
	if eff.Kind == ExecuteStage || eff.Kind == Compensate || (eff.Kind == RequestModel && d.flushed == 0) {
		return d.flush()
	}
	return nil
}

// Interruption is the run's context's end: canceled, or past its deadline.
func (d *drive) Interruption(Effect) *Failure { return contextFailure(d.ctx) }

// Idle ends the drive: a run paused for confirmation goes on in another
// one (Resume, Continue).
func (d *drive) Idle() (Event, bool, error) { return Event{}, false, nil }

// RequestModel asks the model for the next turn (requestModel).
func (d *drive) RequestModel() Event {
	return d.requestModel(d.ctx, d.nextRequest(), d.r.cfg.Stream)
}

// nextRequest is the request of the next model turn.
func (d *drive) nextRequest() *llm.Request {
	cfg := &d.r.cfg
	return &llm.Request{Model: cfg.ModelName, Messages: slices.Clip(d.state.Messages), Tools: cfg.Tools.Definitions(),
		Step: d.state.Steps + 1, CacheKey: d.cacheKey(), Output: d.state.Output.Format()}
}

// cacheKey is the run's CacheKey, digested once per drive rather than per
// request.
func (d *drive) cacheKey() string {
	if d.cache == "" {
		d.cache = CacheKey(d.state.RunID)
	}
	return d.cache
}

// CountTokens has the model count the next turn's request (CountRequest).
func (d *drive) CountTokens() Event { return CountRequest(d.ctx, d.r.cfg.Model, d.nextRequest()) }

// Summarize asks the model for the summary of a compaction, whole (a
// summary is not shown as it streams), with the retries of a turn.
func (d *drive) Summarize(r *SummaryRequest) Event {
	req := &llm.Request{Model: r.Model, Messages: SummaryMessages(d.state.Messages, r), Step: d.state.Steps + 1}
	return SummaryEvent(d.requestModel(d.ctx, req, false), r)
}

// Compensate performs the compensations (PerformCompensation) on a
// context detached from the run's, so that a canceled or late run still
// undoes its writes; each call is bounded by its own timeout.
func (d *drive) Compensate(calls []CompensationCall) Event {
	cfg := &d.r.cfg
	ctx := context.WithoutCancel(d.ctx)
	return Compensations(calls, func(c CompensationCall) CompensationOutcome {
		return PerformCompensation(ctx, cfg.Executor, cfg.Tools, d.state.RunID, d.state.Budgets.ToolTimeout, c)
	})
}

// ValidateCalls checks the batch's calls (CheckCalls).
func (d *drive) ValidateCalls() (Event, error) {
	s, cfg := &d.state, &d.r.cfg
	return Event{Kind: CallsValidated, Checks: CheckCalls(cfg.Tools, s.Batch.Calls, s.Budgets.ArgumentLimits(), s.RunID, cfg.RequestID)}, nil
}

// AuthorizeCalls asks the policy (Authorize).
func (d *drive) AuthorizeCalls(idx []int) (Event, error) {
	s, cfg := &d.state, &d.r.cfg
	decisions, err := AuthorizeTainted(d.ctx, cfg.Policy, cfg.Identity, cfg.Tools, s.Batch.Calls, idx, s.Batch.Taint)
	if err != nil {
		if f := contextFailure(d.ctx); f != nil {
			return Event{Kind: Interrupted, Failure: f}, nil
		}
		return driverError(err.Error()), nil
	}
	return Event{Kind: PolicyDecided, Decisions: decisions}, nil
}

// PlanBatch plans the calls (PlanCalls).
func (d *drive) PlanBatch(idx []int) (Event, error) {
	s, cfg := &d.state, &d.r.cfg
	p, err := PlanCalls(cfg.Planner, cfg.Tools, s.Batch.Calls, idx, s.Batch.Approved)
	if err != nil {
		return driverError(err.Error()), nil
	}
	return Event{Kind: StagePlanned, Plan: &p}, nil
}

// ExecuteStage runs the stage's calls through the executor (StageCalls).
func (d *drive) ExecuteStage(stage int, idx []int) Event {
	s, cfg := &d.state, &d.r.cfg
	outs := cfg.Executor.RunStageWatched(d.ctx, StageCalls(s, idx, cfg.Tools), d.stageWatch(d.ctx, stage, idx))
	return Event{Kind: StageFinished, Stage: stage, Outcomes: outs, Failure: contextFailure(d.ctx)}
}

// Append appends ev to the log, numbered and stamped, and hands it to the
// decider; without a store it is committed at once and shown to the
// observer. Every event is stamped by Config.Now when it is appended (a
// model response when it arrived), the same with or without an observer
// or a store: neither reads the clock.
func (d *drive) Append(ev Event) Effect {
	ev.Seq = len(d.log) + 1
	if ev.At.IsZero() {
		ev.At = d.r.cfg.Now()
	}
	if len(d.log) == cap(d.log) && d.logRoom > len(d.log) {
		// The log grows once to what recent runs needed (rounded up to
		// what its allocation holds), rather than doubling its way there.
		d.log = slices.Grow(d.log, d.logRoom-len(d.log))
	}
	d.log = append(d.log, ev)
	if d.r.cfg.Store == nil {
		d.observe()
	}
	before := d.state.Batch
	eff := Next(&d.state, &d.log[len(d.log)-1])
	if ev.Kind == Started && d.historyRoom > cap(d.state.Messages) {
		// Room for the history a typical run grows to, made at once: the
		// decider would otherwise grow it, copying it, turn by turn. Only
		// the capacity changes, never what the history holds.
		d.state.Messages = slices.Grow(d.state.Messages, d.historyRoom-len(d.state.Messages))
	}
	d.watch(&d.log[len(d.log)-1], before, eff)
	return eff
}

// observe shows the observer the committed events it has not seen.
func (d *drive) observe() {
	committed := len(d.log)
	if d.r.cfg.Store != nil {
		committed = d.flushed
	}
	if obs := d.r.cfg.Observer; obs != nil {
		for i := d.observed; i < committed; i++ {
			obs.Observe(d.ctx, &d.log[i])
		}
	}
	d.observed = committed
}

// result returns the run's result.
func (d *drive) result() *Result { return d.state.Result(d.log) }

// Result returns the result of the run whose state s is and whose log is
// events (which s was replayed from): every driver reports a run the same
// way. The result shares events.
func (s *State) Result(events []Event) *Result {
	res := &Result{
		RunID: s.RunID, Status: s.Status, Detail: s.Detail, Steps: s.Steps, ToolCalls: s.ToolCalls,
		Usage: s.Usage, Cost: s.Cost, Messages: s.History(), Pending: s.Pending, Events: events,
	}
	if len(events) > 0 {
		res.Duration = events[len(events)-1].At.Sub(events[0].At)
	}
	res.Output = s.output()
	res.Writes = s.WritesReport()
	return res
}

func contextFailure(ctx context.Context) *Failure { return ContextFailure(ctx.Err()) }

// ContextFailure is the failure of a run interrupted because its context
// ended with err (nil: none): canceled, or past its deadline. Every
// driver words an interruption so, whatever its context is.
func ContextFailure(err error) *Failure {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return &Failure{Kind: FailDeadline, Message: err.Error()}
	}
	return &Failure{Kind: FailCanceled, Message: err.Error()}
}

// requestModel asks the model for the next turn (ModelTurn), retrying
// what the provider says may succeed later. The request is the turn's
// own: the model may keep it (see llm.Model). A model that streams is
// streamed when Config.Stream asks for it; a stream is retried like a
// request while it has shown nothing, and never after (see Config.Stream).
func (d *drive) requestModel(ctx context.Context, req *llm.Request, stream bool) Event {
	cfg := &d.r.cfg
	o := TurnOptions{Stream: stream, Timeout: cfg.ModelTimeout}
	if watch := cfg.Watch; watch != nil && stream {
		o.OnDelta = func(delta llm.Delta) { watch(ctx, Update{Kind: UpdateDelta, Step: req.Step, Delta: delta}) }
	}
	start := cfg.Now()
	wait := cfg.ModelRetryBackoff
	for attempt := 1; ; attempt++ {
		resp, err := ModelTurn(ctx, cfg.Model, req, o)
		if err == nil {
			end := cfg.Now()
			return Event{Kind: ModelResponded, At: end, Latency: end.Sub(start), Response: resp, Attempts: attempt}
		}
		f := contextFailure(ctx)
		if f == nil && resp == nil && llm.IsRetryable(err) && attempt <= cfg.ModelRetries {
			t := time.NewTimer(ModelRetryWait(err, wait))
			wait *= 2
			select {
			case <-ctx.Done():
				t.Stop()
				f = contextFailure(ctx)
			case <-t.C:
				continue
			}
		}
		if f == nil {
			// A stream that broke after it began keeps what it showed in
			// the log (resp): a retry would show something else.
			f = ModelFailure(attempt, err, resp != nil)
		}
		end := cfg.Now()
		return Event{Kind: ModelFailed, At: end, Latency: end.Sub(start), Attempts: attempt, Failure: f, Response: resp}
	}
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}
