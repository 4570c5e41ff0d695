package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// Names under which RegisterWorkflow and Activities.Register register the
// workflow and its activities, and the names of the workflow's handlers.
const (
	// WorkflowName is RunLoop's workflow type.
	WorkflowName = "toolloop.RunLoop"

	// ToolsVersionActivity (local) reports the worker's tool-set version
	// for the Started event.
	ToolsVersionActivity = "toolloop.ToolsVersion"
	// ModelActivity requests one model turn.
	ModelActivity = "toolloop.RequestModel"
	// ValidateActivity (local) validates a batch against the registry.
	// RunLoop calls PrepareActivity instead; it stays registered for the
	// histories of earlier versions.
	ValidateActivity = "toolloop.ValidateCalls"
	// PrepareActivity (local) validates a batch, asks an in-memory policy
	// about its valid calls and plans them, in one local activity.
	PrepareActivity = "toolloop.PrepareBatch"
	// AuthorizeActivity asks the policy about the valid calls of a batch
	// when Config.RemotePolicy says the policy does I/O.
	AuthorizeActivity = "toolloop.AuthorizeCalls"
	// PlanActivity (local) plans a batch.
	PlanActivity = "toolloop.PlanBatch"
	// ToolActivity executes one tool call through the executor.
	ToolActivity = "toolloop.ExecuteCall"
	// SaveLogActivity (local) stores the run's latest events in the blob
	// store.
	SaveLogActivity = "toolloop.SaveLog"
	// LoadLogActivity reads a page of a run's log from the blob store,
	// for the run that continues it as new.
	LoadLogActivity = "toolloop.LoadLog"

	// ConfirmUpdate is the update that answers a pending call (argument
	// loop.Confirmation, result RunStatus). Its validator rejects an answer
	// to a call that is not pending, so nothing is recorded for it.
	ConfirmUpdate = "confirm"
	// ConfirmSignal answers a pending call like ConfirmUpdate, for clients
	// that cannot wait for an update; an invalid answer is logged and
	// dropped.
	ConfirmSignal = "confirm"
	// StatusQuery returns the run's RunStatus.
	StatusQuery = "status"
	// EventsQuery returns the run's event log so far ([]loop.Event).
	EventsQuery = "events"
)

// Failure types: the type names of the application errors the activities
// return, as Temporal's retry policies and UI see them. They are strings,
// not error values (Go keeps ErrX names for those); the strings themselves
// are recorded in workflow histories and do not change.
const (
	// FailureTypeModel is a failed model request; it is non-retryable unless
	// llm.IsRetryable says otherwise.
	FailureTypeModel = "ToolloopModelError"
	// FailureTypeUnknownTool is a call to a tool this worker does not have
	// (workers with different registries); never retried.
	FailureTypeUnknownTool = "ToolloopUnknownTool"
	// FailureTypeWriteInProgress is a write whose idempotency key an earlier
	// attempt still holds in flight; retried once that attempt must be
	// over, when the ledger can settle it.
	FailureTypeWriteInProgress = "ToolloopWriteInProgress"
	// FailureTypePayloadTooLarge is a model response too large for a
	// Temporal payload; never retried.
	FailureTypePayloadTooLarge = "ToolloopPayloadTooLarge"
	// FailureTypeStore is a failure of the blob store.
	FailureTypeStore = "ToolloopStoreError"
	// FailureTypeProtocol is a model reply that broke its provider's protocol
	// (llm.KindProtocolError: a stream whose pieces contradict each other);
	// never retried, and the run stops with protocol_error.
	FailureTypeProtocol = "ToolloopProtocolError"
	// FailureTypeContextLength is a request the provider refused as too long
	// for the model's window (llm.KindContextLengthExceeded); never
	// retried: a run with context management clears and asks again.
	FailureTypeContextLength = "ToolloopContextLength"
)

// MaxResponseBytes is the largest model response (JSON) a model activity
// returns: Temporal refuses a payload past 2 MB, and the response travels
// again in the log's next segment, so a larger one stops the run with
// model_error rather than have the server fail the workflow.
const MaxResponseBytes = 1 << 20

// Config configures the worker side of the loop. Model and Tools are
// required.
type Config struct {
	// Model answers ModelActivity.
	Model llm.Model
	// Blobs is the store that holds runs' logs and large tool results,
	// which the workflow's history names by digest. Every worker of a
	// task queue, and every reader of a run's output (ReadResult), must
	// reach the same one: a shared SQLite file on one machine, a server
	// (Postgres) across machines; store.NewMemory() for one process.
	// Required.
	Blobs store.Blobs
	// Tools is the registry; every worker of a task queue must have the
	// same one (its Version is recorded in each run's Started event).
	Tools *tool.Registry
	// Policy decides each call; nil allows every registered tool. It is
	// asked inside the local activity that validates and plans a batch
	// (PrepareActivity), which runs on the worker that runs the workflow
	// task, within its timeout (10s by default), as a marker in the
	// history: right for a policy that decides in memory (rules over
	// the identity, the tool and the arguments). It may be asked about
	// the calls of a batch that the decider then stops at validation (a
	// spin, a write asked for again); such answers are not recorded.
	Policy policy.Policy
	// RemotePolicy says that Policy does I/O (a policy service, a
	// database): it is then asked in an activity of its own
	// (AuthorizeActivity: a minute's timeout, three attempts, any worker
	// of the task queue), only about the calls the decider asks about, at
	// the price of a round trip through the server (three history events
	// and a workflow task more per tool turn).
	RemotePolicy bool
	// Stream makes the model activity ask a model that can stream (an
	// llm.StreamingModel) for each turn as a stream, as loop.Config.Stream
	// does in process. The workflow still sees the assembled turn (the
	// deltas stay on the worker), so its history and log are the same
	// either way. While the stream runs, the activity's heartbeats carry
	// its progress (StreamProgress), which is how a watcher follows a
	// turn: the pending activity's last heartbeat details, as `temporal
	// workflow describe` and Client.DescribeWorkflowExecution show them.
	// A stream that fails before its first delta is retried like a
	// request; one that breaks after it is not retried (the run stops
	// with model_error), since a retry would produce another turn.
	Stream bool
	// Executor runs tool calls; nil means executor.New(nil). Its ledger
	// must be shared by every worker of the task queue (an in-memory
	// ledger only protects retries that land on the same process).
	Executor *executor.Executor
	// Planner plans each batch; nil means executor.RulePlanner with the
	// executor's MaxParallel.
	Planner executor.Planner
	// ActivitySlack is added to a tool call's worst-case time in the
	// executor (timeouts, retries, status look-up) to make its activity's
	// StartToClose timeout, so that Temporal only times out an activity
	// whose worker is gone. Default 5s.
	ActivitySlack time.Duration
}

// Activities is the worker side of RunLoop: the model client, tools,
// policy and executor, behind the activities the workflow calls. It is
// immutable and safe for concurrent use.
type Activities struct {
	cfg   Config
	cache *logCache
}

// NewActivities checks cfg and fills in defaults.
func NewActivities(cfg Config) (*Activities, error) {
	if cfg.Model == nil {
		return nil, errors.New("temporal: Config.Model is required")
	}
	if cfg.Tools == nil {
		return nil, errors.New("temporal: Config.Tools is required (an empty tool.Registry is fine)")
	}
	if cfg.Blobs == nil {
		return nil, errors.New("temporal: Config.Blobs is required: the blob store every worker of the task queue reaches " +
			"(the runs' logs and large tool results live there; store.NewMemory() for a single process)")
	}
	if cfg.Executor == nil {
		cfg.Executor = executor.New(nil)
	}
	if cfg.Planner == nil {
		cfg.Planner = executor.RulePlanner(cfg.Executor.Options().MaxParallel)
	}
	if cfg.ActivitySlack <= 0 {
		cfg.ActivitySlack = 5 * time.Second
	}
	return &Activities{cfg: cfg, cache: newLogCache()}, nil
}

// RegisterWorkflow registers RunLoop under WorkflowName, on a worker or a
// worker.WorkflowReplayer.
func RegisterWorkflow(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(RunLoop, workflow.RegisterOptions{Name: WorkflowName})
}

// Register registers the activities under their names (ModelActivity,
// ...) on a worker.
func (a *Activities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.ToolsVersion, activity.RegisterOptions{Name: ToolsVersionActivity})
	r.RegisterActivityWithOptions(a.RequestModel, activity.RegisterOptions{Name: ModelActivity})
	r.RegisterActivityWithOptions(a.ValidateCalls, activity.RegisterOptions{Name: ValidateActivity})
	r.RegisterActivityWithOptions(a.PrepareBatch, activity.RegisterOptions{Name: PrepareActivity})
	r.RegisterActivityWithOptions(a.AuthorizeCalls, activity.RegisterOptions{Name: AuthorizeActivity})
	r.RegisterActivityWithOptions(a.PlanBatch, activity.RegisterOptions{Name: PlanActivity})
	r.RegisterActivityWithOptions(a.ExecuteCall, activity.RegisterOptions{Name: ToolActivity})
	r.RegisterActivityWithOptions(a.SaveLog, activity.RegisterOptions{Name: SaveLogActivity})
	r.RegisterActivityWithOptions(a.LoadLog, activity.RegisterOptions{Name: LoadLogActivity})
	r.RegisterActivityWithOptions(a.CountTokens, activity.RegisterOptions{Name: CountActivity})

	r.RegisterActivityWithOptions(a.Compensate, activity.RegisterOptions{Name: CompensateActivity})
}

// ToolsVersion returns the registry's version (tool.Registry.Version).
func (a *Activities) ToolsVersion(context.Context) (string, error) {
	return a.cfg.Tools.Version(), nil
}

// ModelInput is ModelActivity's input: the run's log by reference (the
// digest of its last stored segment) and the events since, which the
// activity stores as the log's next segment. The activity rebuilds the
// conversation from the log, as the workflow's decider has it, resolves
// the tool results stored by reference and adds the tool definitions
// from its registry: nothing of the conversation is copied into the
// workflow's history each turn.
type ModelInput struct {
	Model string `json:"model,omitempty"`
	Step  int    `json:"step"`
	// Log is the digest of the log's last stored segment; "" for none.
	Log string `json:"log,omitempty"`
	// New are the events after Log's, up to the request.
	New []loop.Event `json:"new,omitempty"`
	// RetryBackoff is the retry policy's first interval, for waits that a
	// provider's Retry-After raises.
	RetryBackoff time.Duration `json:"retry_backoff,omitempty"`
	// Timeout is RunInput.ModelTimeout, which the activity applies itself,
	// as the in-process runner does: to the whole of a request, and to a
	// stream's quiet time (before its first delta and between two), so
	// that a long streamed turn that keeps coming is not cut off. Zero
	// leaves the attempt bounded by the activity's own timeouts only.
	Timeout time.Duration `json:"timeout,omitempty"`
	// RunID names the run, for the prompt-cache key every turn of it
	// carries (loop.CacheKey). Inputs recorded before it had none: their
	// requests carry no key, as then.
	RunID string `json:"run_id,omitempty"`
	// Output is the run's output schema (llm.Request.Output), from its
	// started event; nil for none.
	Output *llm.OutputFormat `json:"output,omitempty"`
	// Summary, when set, makes the request a compaction's summary request
	// (loop.SummaryMessages over the conversation), not a turn.
	Summary *loop.SummaryRequest `json:"summary,omitempty"`
}

// ModelOutput is ModelActivity's result.
type ModelOutput struct {
	Response *llm.Response `json:"response"`
	// Attempt is the activity attempt that got the response (1 for the
	// first).
	Attempt int `json:"attempt"`
	// Log is the digest of the log's segment that ends with the input's
	// New events.
	Log string `json:"log,omitempty"`
	// Took is how long the activity ran, for the latency of a request
	// made as a local activity (RunInput.LocalModel), during which the
	// workflow's clock does not move.
	Took time.Duration `json:"took,omitempty"`
}

// partialTurn is what a stream that broke part-way had sent, as a failed
// model activity's second detail: the whole of it when it fits in
// MaxResponseBytes, else only its usage and ID (the text would not fit a
// payload; the tokens were paid for all the same).
func partialTurn(resp *llm.Response) *llm.Response {
	if b, err := json.Marshal(resp); err == nil && len(b) <= MaxResponseBytes {
		return resp
	}
	return &llm.Response{ID: resp.ID, Model: resp.Model, Usage: resp.Usage}
}

// storeError is a failure of the blob store, which Temporal retries.
func storeError(err error) error {
	return sdktemporal.NewApplicationError(err.Error(), FailureTypeStore)
}

// RequestModel asks the model for one turn. A failure is an application
// error of type FailureTypeModel, non-retryable unless llm.IsRetryable says
// the provider may answer later; it carries the attempt number as its
// detail, and a provider's Retry-After as the next retry's delay. A
// response larger than MaxResponseBytes is an FailureTypePayloadTooLarge.
func (a *Activities) RequestModel(ctx context.Context, in ModelInput) (ModelOutput, error) {
	began := time.Now()
	// Storing the turn and reading a long log back (a worker that has not
	// seen the run, a slow store) may take longer than the heartbeat
	// timeout: the activity beats meanwhile, as it does during the request.
	stop := beating(ctx)
	head, msgs, err := a.conversation(ctx, in)
	stop()
	if err != nil {
		return ModelOutput{}, storeError(err)
	}
	req := a.turnRequest(in, msgs)
	if in.Summary != nil {
		req = llm.Request{Model: in.Summary.Model, Messages: loop.SummaryMessages(msgs, in.Summary), Step: in.Step}
	}
	attempt := int(activity.GetInfo(ctx).Attempt)
	resp, err := turnBeating(ctx, a.cfg.Model, &req, loop.TurnOptions{Stream: a.cfg.Stream && in.Summary == nil, Timeout: in.Timeout})
	if err != nil {
		details := []any{attempt}
		partial := resp != nil
		if partial {
			// What a broken stream showed, and the usage it reported,
			// travel with the failure: the workflow keeps them in its
			// model_failed event and charges the usage, as in process.
			details = append(details, partialTurn(resp))
		}
		var me *llm.Error
		if errors.As(err, &me) && me.Kind == llm.KindProtocolError {
			return ModelOutput{}, sdktemporal.NewApplicationErrorWithOptions(err.Error(), FailureTypeProtocol,
				sdktemporal.ApplicationErrorOptions{NonRetryable: true, Details: details})
		}
		if errors.As(err, &me) && me.Kind == llm.KindContextLengthExceeded {
			return ModelOutput{}, sdktemporal.NewApplicationErrorWithOptions(err.Error(), FailureTypeContextLength,
				sdktemporal.ApplicationErrorOptions{NonRetryable: true, Details: details})
		}
		// A stream that broke after it began is not retried: a retry
		// would produce another turn.
		opts := sdktemporal.ApplicationErrorOptions{NonRetryable: partial || !llm.IsRetryable(err), Details: details}
		if errors.As(err, &me) && me.RetryAfter > 0 && !opts.NonRetryable {
			wait := in.RetryBackoff
			for i := 1; i < attempt && wait < loop.MaxModelRetryWait; i++ {
				wait *= 2
			}
			opts.NextRetryDelay = loop.ModelRetryWait(err, wait)
		}
		return ModelOutput{}, sdktemporal.NewApplicationErrorWithOptions(err.Error(), FailureTypeModel, opts)
	}
	if b, err := json.Marshal(resp); err != nil || len(b) > MaxResponseBytes {
		why := fmt.Sprintf("the model's response is %d bytes, more than the %d a Temporal payload may safely carry", len(b), MaxResponseBytes)
		if err != nil {
			why = "the model's response cannot be encoded: " + err.Error()
		}
		return ModelOutput{}, sdktemporal.NewApplicationErrorWithOptions(why, FailureTypePayloadTooLarge,
			sdktemporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{attempt}})
	}
	// Whatever the arguments of its calls, the response travels as it is:
	// llm.ToolCall encodes them byte for byte (valid JSON or not), so the
	// workflow's log records what the model sent.
	return ModelOutput{Response: resp, Attempt: attempt, Log: head, Took: time.Since(began)}, nil
}

// SaveLogInput is SaveLogActivity's input.
type SaveLogInput struct {
	Log string       `json:"log,omitempty"`
	New []loop.Event `json:"new,omitempty"`
}

// SaveLog stores the events after the log's last segment as its next
// segment and returns the new segment's digest.
func (a *Activities) SaveLog(ctx context.Context, in SaveLogInput) (string, error) {
	head, err := appendLog(ctx, a.cfg.Blobs, a.cache, in.Log, in.New)
	if err != nil {
		return "", storeError(err)
	}
	return head, nil
}

// LoadLogInput is LoadLogActivity's input.
type LoadLogInput struct {
	Log  string `json:"log"`
	From int    `json:"from"`
}

// LoadLogOutput is a page of a log: its events from the input's From,
// as many as fit in logPageBytes (at least one).
type LoadLogOutput struct {
	Events []loop.Event `json:"events"`
	// More says the log goes on after these.
	More bool `json:"more,omitempty"`
}

// logPageBytes bounds one page of LoadLog, well under Temporal's 2 MB.
const logPageBytes = 512 << 10

// LoadLog reads a page of a run's log, as stored (tool results by
// reference).
func (a *Activities) LoadLog(ctx context.Context, in LoadLogInput) (LoadLogOutput, error) {
	evs, err := readLog(ctx, a.cfg.Blobs, a.cache, in.Log)
	if err != nil {
		return LoadLogOutput{}, storeError(err)
	}
	if in.From < 0 || in.From > len(evs) {
		return LoadLogOutput{}, sdktemporal.NewNonRetryableApplicationError(
			fmt.Sprintf("a page from event %d of a log of %d", in.From, len(evs)), "ToolloopBadInput", nil)
	}
	var out LoadLogOutput
	size := 0
	for i := in.From; i < len(evs); i++ {
		b, err := json.Marshal(&evs[i])
		if err != nil {
			return LoadLogOutput{}, sdktemporal.NewNonRetryableApplicationError(err.Error(), "ToolloopBadInput", nil)
		}
		if size+len(b) > logPageBytes && len(out.Events) > 0 {
			out.More = true
			break
		}
		size += len(b)
		out.Events = append(out.Events, evs[i])
	}
	return out, nil
}

// conversation stores the turn's new events as the log's next segment
// and returns its head and the conversation the log holds, every tool
// result resolved.
func (a *Activities) conversation(ctx context.Context, in ModelInput) (head string, msgs []llm.Message, err error) {
	if head, err = appendLog(ctx, a.cfg.Blobs, a.cache, in.Log, in.New); err != nil {
		return "", nil, err
	}
	events, err := readLog(ctx, a.cfg.Blobs, a.cache, head)
	if err != nil {
		return "", nil, err
	}
	msgs, err = resolveMessages(ctx, a.cfg.Blobs, a.cache, loop.Replay(events).History())
	return head, msgs, err
}

// beating heartbeats the activity every third of its heartbeat timeout
// until stop is called, for work that has no progress of its own to
// report; an activity without heartbeats (a local one) is left alone.
func beating(ctx context.Context) (stop func()) {
	every := activity.GetInfo(ctx).HeartbeatTimeout / 3
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// StreamProgress is what a streaming model activity's heartbeats carry
// (Config.Stream): how far the turn has come. A watcher reads it from the
// pending activity's heartbeat details.
type StreamProgress struct {
	// Deltas counts the deltas received so far.
	Deltas int `json:"deltas"`
	// TextBytes is the length of the answer text so far.
	TextBytes int `json:"text_bytes"`
	// ReasoningBytes is the length of the visible reasoning so far.
	ReasoningBytes int `json:"reasoning_bytes,omitempty"`
	// Calls counts the tool calls started so far.
	Calls int `json:"calls,omitempty"`
}

// add counts d.
func (p *StreamProgress) add(d llm.Delta) {
	p.Deltas++
	switch d.Kind {
	case llm.DeltaText:
		p.TextBytes += len(d.Text)
	case llm.DeltaReasoning:
		p.ReasoningBytes += len(d.Text)
	case llm.DeltaToolCallStart:
		p.Calls++
	}
}

// streamEndGrace is how long a streaming model activity whose context
// ended waits for the adapter to close the stream and hand back the turn
// so far.
const streamEndGrace = time.Second

// turnBeating makes one attempt at the turn (loop.ModelTurn) while the
// activity heartbeats, when its options ask for heartbeats: every third
// of the heartbeat timeout, so that a quiet model is not mistaken for a
// lost worker, with a streamed turn's progress (StreamProgress). A beat
// is also how a worker learns that the workflow was canceled, which ends
// ctx and so the request.
func turnBeating(ctx context.Context, m llm.Model, req *llm.Request, o loop.TurnOptions) (*llm.Response, error) {
	every := activity.GetInfo(ctx).HeartbeatTimeout / 3
	if every <= 0 {
		return loop.ModelTurn(ctx, m, req, o)
	}
	_, streams := m.(llm.StreamingModel)
	streams = streams && o.Stream
	var mu sync.Mutex
	var prog StreamProgress
	o.OnDelta = func(d llm.Delta) {
		mu.Lock()
		prog.add(d)
		mu.Unlock()
	}
	type answer struct {
		resp *llm.Response
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := loop.ModelTurn(ctx, m, req, o)
		done <- answer{resp, err}
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case a := <-done:
			return a.resp, a.err
		case <-ctx.Done():
			// An adapter that honours ctx ends the stream at once, and
			// the turn returns what it had: wait a moment for that. A
			// client that does not is left to finish alone (done is
			// buffered); its answer would come too late anyway.
			wait := time.Duration(0)
			if streams {
				wait = streamEndGrace
			}
			grace := time.NewTimer(wait)
			defer grace.Stop()
			select {
			case a := <-done:
				return a.resp, a.err
			case <-grace.C:
				return nil, ctx.Err()
			}
		case <-tick.C:
			if !streams {
				activity.RecordHeartbeat(ctx)
				continue
			}
			mu.Lock()
			p := prog
			mu.Unlock()
			activity.RecordHeartbeat(ctx, p)
		}
	}
}

// runBeating runs a call while the activity heartbeats, when its options
// ask for heartbeats: the beats tell Temporal the worker is alive, and
// bring the workflow's cancellation to the call's context.
func runBeating(ctx context.Context, ex *executor.Executor, c executor.Call) executor.Outcome {
	every := activity.GetInfo(ctx).HeartbeatTimeout / 3
	if every <= 0 {
		return ex.Run(ctx, c)
	}
	done := make(chan executor.Outcome, 1)
	go func() { done <- ex.Run(ctx, c) }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case o := <-done:
			return o
		case <-tick.C:
			activity.RecordHeartbeat(ctx)
		}
	}
}

// ValidateInput is ValidateActivity's input.
type ValidateInput struct {
	RunID     string         `json:"run_id"`
	RequestID string         `json:"request_id,omitempty"`
	Calls     []llm.ToolCall `json:"calls"`
	// ToolTimeout is the run's override of every tool's timeout
	// (loop.Budgets.ToolTimeout).
	ToolTimeout time.Duration `json:"tool_timeout,omitempty"`
	// Limits bound each call's arguments (loop.Budgets.ArgumentLimits);
	// zero fields set no limit.
	Limits tool.Limits `json:"limits"`
}

// ValidateOutput is ValidateActivity's result.
type ValidateOutput struct {
	// Checks is the CallsValidated event's payload, one per call.
	Checks []loop.CallCheck `json:"checks"`
	// Bounds is, per call, the longest the executor can take on it
	// (timeouts, retries, status look-up) plus the activity slack: the
	// StartToClose timeout of its activity. Zero for unknown tools.
	Bounds []time.Duration `json:"bounds"`
}

// ValidateCalls validates each call of a batch with loop.CheckCalls, as
// the in-process runner does, and adds each call's activity bound.
func (a *Activities) ValidateCalls(_ context.Context, in ValidateInput) (ValidateOutput, error) {
	out := ValidateOutput{Checks: loop.CheckCalls(a.cfg.Tools, in.Calls, in.Limits, in.RunID, in.RequestID), Bounds: make([]time.Duration, len(in.Calls))}
	for i, c := range in.Calls {
		if t, ok := a.cfg.Tools.Lookup(c.Name); ok {
			out.Bounds[i] = a.bound(t, in.ToolTimeout)
		}
	}
	return out, nil
}

// PrepareInput is PrepareActivity's input: the batch to validate, the
// identity the policy decides on, and the decider's state with the batch
// open, so that the activity asks the policy and the planner about
// exactly the calls the decider will ask about.
type PrepareInput struct {
	ValidateInput
	Identity policy.Identity `json:"identity"`
	// State is the decider's state after the batch's ModelResponded
	// event (loop.State's encoding, a copy that shares nothing with the
	// workflow's); At is the time the workflow stamps the next events
	// with.
	State json.RawMessage `json:"state"`
	At    time.Time       `json:"at"`
}

// PrepareOutput is PrepareActivity's result: the validation's, and the
// policy's decisions and the plan the decider asks for next if it goes
// on, computed ahead by a copy of the decider.
type PrepareOutput struct {
	ValidateOutput
	// Authorized is the indexes of the calls the policy was asked about
	// (the decider's AuthorizeCalls effect); Decisions its decisions,
	// one per call of the batch (empty for those not asked); both nil
	// when the decider stops at validation, or with Config.RemotePolicy.
	Authorized []int             `json:"authorized,omitempty"`
	Decisions  []policy.Decision `json:"decisions,omitempty"`
	// Planned is the indexes of the calls Plan plans (the decider's
	// PlanBatch effect after the decisions); nil when it asks for none.
	Planned []int          `json:"planned,omitempty"`
	Plan    *executor.Plan `json:"plan,omitempty"`
}

// PrepareBatch validates a batch (ValidateCalls); then, unless the
// policy is remote, it feeds the checks to a copy of the decider and, if
// the decider asks for decisions, asks the policy (loop.Authorize,
// failing closed as AuthorizeCalls does), feeds them on and, if it asks
// for a plan, plans (as PlanBatch): the events the workflow records next,
// in one local activity. The workflow's own decider asks again; the
// workflow records these answers only if it asks for the same calls.
func (a *Activities) PrepareBatch(ctx context.Context, in PrepareInput) (PrepareOutput, error) {
	v, err := a.ValidateCalls(ctx, in.ValidateInput)
	if err != nil {
		return PrepareOutput{}, err
	}
	out := PrepareOutput{ValidateOutput: v}
	if a.cfg.RemotePolicy {
		return out, nil
	}
	s := new(loop.State)
	if err := json.Unmarshal(in.State, s); err != nil {
		return PrepareOutput{}, sdktemporal.NewNonRetryableApplicationError(err.Error(), "ToolloopBadInput", nil)
	}
	eff := loop.Next(s, &loop.Event{Kind: loop.CallsValidated, Checks: v.Checks, At: in.At})
	if eff.Kind != loop.AuthorizeCalls || s.Batch == nil {
		return out, nil
	}
	decisions, err := loop.AuthorizeTainted(ctx, a.cfg.Policy, in.Identity, a.cfg.Tools, in.Calls, eff.Calls, s.Batch.Taint)
	if err != nil {
		if ctx.Err() != nil {
			return PrepareOutput{}, ctx.Err() // tried again
		}
		// Fail closed, as in-process: a policy that cannot decide does
		// not allow.
		decisions = make([]policy.Decision, len(in.Calls))
		for _, i := range eff.Calls {
			decisions[i] = loop.PolicyFailure(err.Error())
		}
	}
	out.Authorized, out.Decisions = eff.Calls, decisions
	eff = loop.Next(s, &loop.Event{Kind: loop.PolicyDecided, Decisions: decisions, At: in.At})
	if eff.Kind != loop.PlanBatch {
		return out, nil
	}
	// A planning failure (a tool this worker lacks) is left to the
	// workflow's own PlanBatch, which reports it as it always did.
	if p, err := loop.PlanCalls(a.cfg.Planner, a.cfg.Tools, in.Calls, eff.Calls, s.Batch.Approved); err == nil {
		out.Planned, out.Plan = eff.Calls, &p
	}
	return out, nil
}

// callTimeout is the timeout the executor gives one attempt of a call.
func (a *Activities) callTimeout(t *tool.Tool, override time.Duration) time.Duration {
	return a.cfg.Executor.Timeout(&executor.Call{Tool: t, Timeout: override})
}

// bound is the longest executor.Run can take on a call of t, plus slack.
func (a *Activities) bound(t *tool.Tool, override time.Duration) time.Duration {
	o := a.cfg.Executor.Options()
	timeout := a.callTimeout(t, override)
	d := time.Duration(o.MaxRetries+1)*timeout + time.Duration(o.MaxRetries)*o.MaxRetryWait
	if t.Effect() == tool.Write {
		d += 2 * timeout // status look-ups of an unsettled write
	}
	return d + a.cfg.ActivitySlack
}

// AuthorizeInput is AuthorizeActivity's input.
type AuthorizeInput struct {
	Identity policy.Identity `json:"identity"`
	// Calls is the whole batch; Indexes the valid calls to decide on.
	Calls   []llm.ToolCall `json:"calls"`
	Indexes []int          `json:"indexes"`
	// Taint is the batch's taint facts by call index (loop.Batch.Taint).
	Taint []*policy.Taint `json:"taint,omitempty"`
}

// AuthorizeCalls asks the policy about each indexed call with
// loop.Authorize, as the in-process runner does: one decision per call of
// the batch (empty for those not asked), failing closed.
func (a *Activities) AuthorizeCalls(ctx context.Context, in AuthorizeInput) ([]policy.Decision, error) {
	decisions, err := loop.AuthorizeTainted(ctx, a.cfg.Policy, in.Identity, a.cfg.Tools, in.Calls, in.Indexes, in.Taint)
	if err != nil {
		if ctx.Err() != nil {
			// The activity was canceled or timed out: let Temporal
			// report that rather than record a denial.
			return nil, ctx.Err()
		}
		return nil, sdktemporal.NewNonRetryableApplicationError(err.Error(), "ToolloopBadInput", nil)
	}
	return decisions, nil
}

// PlanInput is PlanActivity's input.
type PlanInput struct {
	// Calls is the whole batch; Indexes the calls to plan, ascending.
	Calls   []llm.ToolCall `json:"calls"`
	Indexes []int          `json:"indexes"`
	// Approved marks, by batch index, calls a human approved.
	Approved []bool `json:"approved,omitempty"`
}

// PlanBatch plans the indexed calls with loop.PlanCalls, as the
// in-process runner does: the configured planner, checked, with a serial
// plan as the fallback, and the stages numbered within the batch.
func (a *Activities) PlanBatch(_ context.Context, in PlanInput) (executor.Plan, error) {
	p, err := loop.PlanCalls(a.cfg.Planner, a.cfg.Tools, in.Calls, in.Indexes, in.Approved)
	if err != nil {
		return executor.Plan{}, sdktemporal.NewNonRetryableApplicationError(
			fmt.Sprintf("on this worker: %v", err), FailureTypeUnknownTool, nil)
	}
	return p, nil
}

// CallInput is ToolActivity's input: one call as loop.StageCalls builds
// it, in executor.Call's JSON form (the worker looks the tool up by name).
type CallInput = executor.Call

// ExecuteCall runs one call with the executor (its timeout, retries,
// classification, idempotency ledger) and returns the classified outcome;
// a tool's failure is an outcome, not an activity error. The activity
// fails only when this worker lacks the tool (never retried) or when an
// earlier attempt of the same write still holds its key in flight: then
// Temporal retries once that attempt's time is up, and the ledger settles
// it (replays the result, or asks the tool's status look-up).
func (a *Activities) ExecuteCall(ctx context.Context, in CallInput) (executor.Outcome, error) {
	t, ok := a.cfg.Tools.Lookup(in.Call.Name)
	if !ok {
		return executor.Outcome{}, sdktemporal.NewNonRetryableApplicationError(
			fmt.Sprintf("tool %q is not registered on this worker", in.Call.Name), FailureTypeUnknownTool, nil)
	}
	in.Tool = t
	o := runBeating(ctx, a.cfg.Executor, in)
	if o.Result.ErrorKind == llm.KindWriteInProgress && ctx.Err() == nil {
		return executor.Outcome{}, sdktemporal.NewApplicationErrorWithOptions(o.Err, FailureTypeWriteInProgress,
			sdktemporal.ApplicationErrorOptions{NextRetryDelay: a.callTimeout(t, in.Timeout)})
	}
	// A large result goes to the blob store; the history carries its
	// digest. A retry after a store failure replays a write from the
	// ledger, so nothing is done twice.
	if err := outcomeRefs(ctx, a.cfg.Blobs, &o); err != nil {
		return executor.Outcome{}, storeError(err)
	}
	return o, nil
}
