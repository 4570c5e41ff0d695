package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
)

// RunInput is a run's configuration, recorded in the workflow's history.
// What is not serializable or belongs to the deployment (model client,
// tools, policy, executor) is on the worker: see Config.
type RunInput struct {
	// RunID names the run in its log and derives the default idempotency
	// keys of its writes (RunID + "/" + call ID). Default: the workflow
	// ID, which, unlike Temporal's run ID, survives a reset, so a write
	// re-executed after a reset is replayed from the ledger.
	RunID string `json:"run_id,omitempty"`
	// SessionID and PromptVersion are recorded in the log.
	SessionID     string `json:"session_id,omitempty"`
	PromptVersion string `json:"prompt_version,omitempty"`
	// Model is the model name sent with every request.
	Model string `json:"model,omitempty"`
	// RequestID, when set, derives write idempotency keys from the
	// business request rather than the run (see loop.Config.RequestID).
	RequestID string `json:"request_id,omitempty"`
	// Identity is who the run acts for; the policy decides on it.
	Identity policy.Identity `json:"identity"`
	// Budgets bound the run, with loop's defaults for zero fields.
	// Budgets.Prices is not carried (it is not encoded): set Price.
	Budgets loop.Budgets `json:"budgets"`
	// Price prices the run's usage; required when Budgets.MaxCost is set.
	Price *loop.Price `json:"price,omitempty"`
	// Messages opens the conversation.
	Messages []llm.Message `json:"messages"`
	// Context, when set, keeps each model request inside the model's
	// window by clearing old tool results, as loop.Config.Context does
	// in process; the Started event records it, defaults filled in.
	Context *loop.ContextPolicy `json:"context,omitempty"`

	// ModelTimeout bounds how long one model request attempt may go
	// without an answer: the whole of a request, and a stream's quiet
	// time (before its first delta and between two, Config.Stream), as
	// loop.Config.ModelTimeout does in process; the model activity
	// applies it and fails a retryable timeout. Default 5 minutes; the
	// run's remaining time bounds the attempt too.
	ModelTimeout time.Duration `json:"model_timeout,omitempty"`
	// ModelRetries is how many times a retryable model failure is tried
	// again (default 2; negative for never). ModelRetryBackoff is the
	// first wait, doubled each time, at most 30s (default 500ms).
	ModelRetries      int           `json:"model_retries,omitempty"`
	ModelRetryBackoff time.Duration `json:"model_retry_backoff,omitempty"`
	// LocalModel ran each model request as a local activity when that was
	// not the default; it still does for a run whose history predates the
	// default (see ModelAsActivity), and is otherwise redundant.
	//
	// A model request as a local activity is the same RequestModel code
	// with the same timeout and retry policy: the worker that runs the
	// workflow task calls the model and records the response in a marker,
	// with no dispatch through the server's queues. The trade-offs: the
	// request holds the workflow task, and so do the local activities
	// after it (LocalReadBound), and only when the task ends are the
	// markers so far in the history and do signals, updates, queries and
	// a cancellation reach the workflow (a canceled run stops at its next
	// effect after that, with its calls canceled or, for a write, waited
	// for): the workflow ends a task that local activities have held for a
	// second before its next model turn, and the SDK renews one held by a
	// long request about every 8 seconds (3 events); before the workflow
	// closes, it ends a task that holds markers with the SaveLog activity,
	// so a cancellation that comes meanwhile cannot make the server refuse
	// the close and drop the task's turns (a run that got to its end
	// before the cancellation reached it keeps its status, final_answer
	// say, and the workflow ends canceled with it); there are no
	// heartbeats, so a worker lost mid-request
	// is noticed when the workflow task times out (10 s), and the next
	// workflow task, on any worker, makes again the requests and reads the
	// lost one had not recorded; retries wait in the worker (or, past the
	// workflow task timeout, on a workflow timer). The SDK moves the
	// workflow's clock (workflow.Now) by each local activity's time and
	// records it in the marker, so the events after one are stamped, and
	// the deadline checked, as after an activity.
	LocalModel bool `json:"local_model,omitempty"`
	// ModelAsActivity runs each model request as an activity of its own,
	// as every request was before local ones became the default: it costs
	// a round trip through the server's queues and 6 more history events
	// a turn, and buys heartbeats (a lost worker noticed at
	// ModelHeartbeat, a streamed turn's progress in the heartbeat
	// details), a request that holds no workflow task, and a cancellation
	// that reaches the request with the next heartbeat. Set it for long or
	// expensive requests. It may not be set with LocalModel.
	ModelAsActivity bool `json:"model_as_activity,omitempty"`
	// LocalReadBound is the longest a read may take (its worst case in the
	// executor, retries included, plus Config.ActivitySlack) for a stage
	// whose calls are all reads to run as local activities of the worker
	// running the workflow task, with no dispatch through the server:
	// with model requests as local activities, a one-call turn of reads is
	// then three history events. A stage with a write, or with a read that
	// may take longer, runs as activities (heartbeats, failover at
	// ToolHeartbeat). A worker lost during a local read is noticed when
	// its workflow task times out (10 s by default), and the next workflow
	// task, on any worker, runs the read again. Default 2 minutes, which a
	// read with the executor's default timeout and retries (30 s, 2
	// retries: 105 s) fits; negative runs every call as an activity.
	LocalReadBound time.Duration `json:"local_read_bound,omitempty"`
	// ToolActivityAttempts is how many times a tool call's activity is
	// tried when its worker fails it (a crash, a lost connection); the
	// tool's own retryable errors are retried inside the executor.
	// Default 3.
	ToolActivityAttempts int `json:"tool_activity_attempts,omitempty"`
	// ToolHeartbeat is how long a tool activity may go without a
	// heartbeat before Temporal counts its worker as gone and tries the
	// call again elsewhere (a write is replayed from the ledger); the
	// activity beats every third of it. Default 10s.
	ToolHeartbeat time.Duration `json:"tool_heartbeat,omitempty"`
	// ModelHeartbeat is the same for a model activity, whose heartbeats
	// also carry a streamed turn's progress (Config.Stream,
	// StreamProgress). Default 15s.
	ModelHeartbeat time.Duration `json:"model_heartbeat,omitempty"`
	// ConfirmationTimeout is how long a run paused for confirmation waits
	// for its answers; when it passes, the workflow completes with status
	// confirmation_required. Zero waits for ever.
	ConfirmationTimeout time.Duration `json:"confirmation_timeout,omitempty"`
	// ContinueAsNewAfter continues the workflow as new once its history
	// holds this many events, at the next model turn; zero leaves it to
	// the server's suggestion (Temporal suggests it well before its
	// limits). Tests set it low.
	ContinueAsNewAfter int `json:"continue_as_new_after,omitempty"`
	// HistoryLimit is the number of history events at which a run that
	// could not continue as new stops itself (deadline_exceeded, with a
	// detail naming the limit) rather than be terminated by the server at
	// 51,200. Default 40,000; tests set it low.
	HistoryLimit int `json:"history_limit,omitempty"`

	// OutputSchema, OutputName, OutputStrict and OutputRetries hold the
	// final answer to a JSON Schema, as loop.Config's fields of the same
	// names do: the schema is recorded in the started event, each model
	// request asks for it, the decider validates each answer and sends
	// one that does not match back with what was wrong, and the run stops
	// with invalid_output when the corrections are spent. RunOutput.Output
	// holds the matching answer.
	OutputSchema  json.RawMessage `json:"output_schema,omitempty"`
	OutputName    string          `json:"output_name,omitempty"`
	OutputStrict  bool            `json:"output_strict,omitempty"`
	OutputRetries int             `json:"output_retries,omitempty"`

	// Compensation and AtomicBatches say what the run does with the
	// writes of an all-or-nothing group that failed, as loop.Config's
	// fields of the same names do; the compensations run as activities
	// (CompensateActivity), after a cancellation too.
	Compensation  loop.CompensationPolicy `json:"compensation,omitempty"`
	AtomicBatches bool                    `json:"atomic_batches,omitempty"`

	// Continued is set by the workflow itself when it continues as new:
	// the log so far by reference and the decider's state, which the new
	// workflow run starts from. Callers leave it nil.
	Continued *Continuation `json:"continued,omitempty"`
}

// Continuation is what a run carries into the workflow run that continues
// it as new: its log, by reference, and the decider's state, whose
// encoding leaves the conversation out (see loop.State), so that what a
// continuation adds to the history does not grow with the run's results:
// the new workflow run reads none of the log back.
type Continuation struct {
	// Log is the digest of the log's last segment in the blob store.
	Log string `json:"log"`
	// Events is how many events the log holds.
	Events int `json:"events"`
	// Times counts the continuations so far, this one included.
	Times int `json:"times"`
	// State is the decider's state after the log's last event, without
	// the conversation (loop.State's encoding). A continuation made by a
	// version of this package that carried no state (nil) is rebuilt from
	// the log, read back page by page.
	State *loop.State `json:"state,omitempty"`
}

// RunOutput is how a run ended, small whatever the run's length: status,
// detail, counters, pending calls and the final answer, with the run's
// log by reference. ReadResult turns it into the loop.Result the
// in-process runner returns (history, events), from the blob store the
// workers share.
type RunOutput struct {
	RunID     string         `json:"run_id"`
	SessionID string         `json:"session_id,omitempty"`
	Status    loop.Status    `json:"status"`
	Detail    string         `json:"detail"`
	Steps     int            `json:"steps"`
	ToolCalls int            `json:"tool_calls"`
	Usage     llm.Usage      `json:"usage"`
	Cost      float64        `json:"cost,omitempty"`
	Duration  time.Duration  `json:"duration"`
	Pending   []loop.Pending `json:"pending,omitempty"`
	// Answer is the final answer's text (status final_answer).
	Answer string `json:"answer,omitempty"`
	// Output is the final answer as JSON, for a run with an output schema
	// (loop.Result.Output); loop.Decode reads it from ReadResult's result.
	Output json.RawMessage `json:"output,omitempty"`
	// Events is how many events the log holds; Log names its last
	// segment in the blob store (see ReadLog).
	Events int    `json:"events"`
	Log    string `json:"log,omitempty"`
	// ContinuedAsNew counts the times the workflow continued as new.
	ContinuedAsNew int `json:"continued_as_new,omitempty"`
	// Writes says what the run's writes ended as (loop.Result.Writes).
	Writes *loop.WritesReport `json:"writes,omitempty"`
}

// Err is nil for a final answer and a *loop.StopError otherwise, as
// loop.Result's.
func (o *RunOutput) Err() error {
	if o.Status == loop.FinalAnswer {
		return nil
	}
	return &loop.StopError{Status: o.Status, Detail: o.Detail}
}

// RunStatus is StatusQuery's answer, and ConfirmUpdate's result.
type RunStatus struct {
	RunID string `json:"run_id"`
	// Status is loop.RunningStatus until the run stops or pauses.
	Status    string         `json:"status"`
	Detail    string         `json:"detail,omitempty"`
	Steps     int            `json:"steps"`
	ToolCalls int            `json:"tool_calls"`
	Usage     llm.Usage      `json:"usage"`
	Cost      float64        `json:"cost,omitempty"`
	Pending   []loop.Pending `json:"pending,omitempty"`
	// Events is how many events the log holds.
	Events int `json:"events"`
	// ContinuedAsNew counts the times the workflow continued as new.
	ContinuedAsNew int `json:"continued_as_new,omitempty"`
	// Log is the digest of the last segment of the log stored so far (the
	// events up to the last model request, or up to the last
	// continuation), for ReadLog: after a continuation the events query
	// holds only the events of the current workflow run.
	Log string `json:"log,omitempty"`
}

// EventsPage is the events query's optional argument: which part of the
// log to return. The zero value asks for every event the workflow holds.
type EventsPage struct {
	// Offset skips the log's first Offset events (the first event
	// returned has sequence number Offset+1). After a continuation as
	// new, the workflow holds only the events since: a page that begins
	// before them begins at the first one held instead (each event's Seq
	// says where it is), and the earlier ones are read from the blob
	// store with ReadLog(RunStatus.Log).
	Offset int `json:"offset,omitempty"`
	// Limit caps the number of events returned; zero for no cap.
	Limit int `json:"limit,omitempty"`
}

// Defaults of RunInput; those of the model turn are loop's, the same in
// process and on Temporal.
const (
	DefaultModelTimeout         = loop.DefaultModelTimeout
	DefaultModelRetries         = loop.DefaultModelRetries
	DefaultModelRetryBackoff    = loop.DefaultModelRetryBackoff
	DefaultToolActivityAttempts = 3
	DefaultToolHeartbeat        = 10 * time.Second
	DefaultModelHeartbeat       = 15 * time.Second
	DefaultLocalReadBound       = 2 * time.Minute
)

// leanTurns names the change that made model requests and short stages of
// reads local activities by default (workflow.GetVersion): a run whose
// history began before it goes on with activities. Its second version
// ends a workflow task that holds local activities' markers before the
// workflow closes (commitBeforeClose); a run recorded with the first
// closes as it did.
const (
	leanTurns                = "toolloop.lean-turns"
	leanTurnsVersion         = workflow.Version(1)
	commitBeforeCloseVersion = workflow.Version(2)
)

// localTimeout bounds the local activities (validation, authorization by
// an in-memory policy, planning, storing the log's last events).
const localTimeout = 30 * time.Second

// RunLoop is the loop as a workflow. The decider (loop.Next) runs as
// workflow code; model requests and tool calls run as activities; a
// batch's validation, policy decisions and plan as one local activity
// (policy decisions as an activity of their own with Config.RemotePolicy);
// every event is
// stamped with workflow.Now. It returns the run's RunOutput for every
// status, with a nil error: the status says how the run ended (RunOutput's
// Err turns it into an error). The error is non-nil when the input is
// invalid, when the workflow is canceled (a *temporal.CanceledError whose
// details hold the RunOutput), and when a local activity fails for good
// (a worker without the run's tools): the run stopped being driven, like
// an in-process run whose store failed.
func RunLoop(ctx workflow.Context, in RunInput) (RunOutput, error) {
	d, err := newDriver(ctx, in)
	if err != nil {
		return RunOutput{}, sdktemporal.NewNonRetryableApplicationError(err.Error(), "ToolloopInvalidInput", nil)
	}
	if err := d.handlers(ctx); err != nil {
		return RunOutput{}, err
	}
	return d.run(ctx)
}

// driver is one workflow run's state: the decider's state and the log.
type driver struct {
	in      RunInput
	budgets loop.Budgets
	state   loop.State
	// log holds the events of this workflow run: the log's events after
	// its first base, which an earlier workflow run stored before it
	// continued as new.
	log  []loop.Event
	base int
	// bounds is, per call of the current batch, its activity's
	// StartToClose timeout (from validation).
	bounds []time.Duration
	// prepared is the current batch's preparation (PrepareBatch), whose
	// decisions and plan are recorded when the decider asks for them.
	prepared *PrepareOutput
	// saved is how many events of log the blob store holds, and head the
	// digest of their last segment.
	saved int
	head  string
	// continued counts the continuations as new so far; turns the model
	// turns of this workflow run; stateBytes the size of the decider's
	// state when it was too large to carry into a new workflow run.
	continued  int
	turns      int
	stateBytes int
	// lean is set for a run that began with local model requests and
	// local reads by default (leanTurns); commitClose for one that began
	// with its second version (commitBeforeClose).
	lean, commitClose bool
	// markers counts the local activities of the workflow task whose
	// history had length events when it began, and taskBegan is
	// workflow.Now when the first of them was counted (historyLength).
	markers, length int
	taskBegan       time.Time
	// closing is set once a paused run stopped waiting (its confirmation
	// timeout passed, or the workflow was canceled): an answer that comes
	// while the workflow stores its log and ends is refused, not recorded
	// after the output was made.
	closing bool
}

// checkAnswer is loop.CheckAnswer, refusing every answer once the
// workflow is closing (loop.ErrNotPaused), in a form that keeps the
// reason across the wire (RefuseAnswer).
func (d *driver) checkAnswer(a loop.Confirmation) error {
	if d.closing {
		return RefuseAnswer(&loop.AnswerError{Err: loop.ErrNotPaused, RunID: d.state.RunID, CallID: a.CallID, Status: string(d.state.Status),
			Detail: "its confirmation timeout passed or it was canceled, and its workflow is closing"})
	}
	return RefuseAnswer(loop.CheckAnswer(&d.state, a))
}

func newDriver(ctx workflow.Context, in RunInput) (*driver, error) {
	b, err := in.Budgets.Normalized()
	if err != nil {
		return nil, fmt.Errorf("temporal: %w", err)
	}
	// Prices do not travel in a workflow's input (they are not encoded);
	// RunInput.Price does.
	b.Prices = nil
	if b.MaxCost > 0 && in.Price == nil {
		return nil, fmt.Errorf("temporal: MaxCost is set but RunInput.Price is not (model %q)", in.Model)
	}
	if in.Context != nil {
		// Pure, so every replay of the workflow resolves the same policy.
		p, err := loop.ResolveContextPolicy(*in.Context, in.Model)
		if err != nil {
			return nil, fmt.Errorf("temporal: %w", err)
		}
		in.Context = &p
	}
	if in.RunID == "" {
		in.RunID = workflow.GetInfo(ctx).WorkflowExecution.ID
	}
	if in.Continued == nil {
		// As loop.Runner.Run does: a user message with nothing to say
		// gives a provider nothing to answer.
		if err := llm.CheckUserMessages(in.Messages); err != nil {
			return nil, fmt.Errorf("temporal: %w", err)
		}
	}
	if _, err := in.outputSpec(); err != nil {
		return nil, err
	}
	if _, err := loop.NewCompensationSpec(in.Compensation, in.AtomicBatches); err != nil {
		return nil, fmt.Errorf("temporal: %w", err)
	}
	if in.ModelTimeout <= 0 {
		in.ModelTimeout = DefaultModelTimeout
	}
	switch {
	case in.ModelRetries == 0:
		in.ModelRetries = DefaultModelRetries
	case in.ModelRetries < 0:
		in.ModelRetries = 0
	}
	if in.ModelRetryBackoff <= 0 {
		in.ModelRetryBackoff = DefaultModelRetryBackoff
	}
	if in.LocalModel && in.ModelAsActivity {
		return nil, errors.New("temporal: RunInput sets both LocalModel and ModelAsActivity; set ModelAsActivity alone for activities, neither for local activities")
	}
	if in.LocalReadBound == 0 {
		in.LocalReadBound = DefaultLocalReadBound
	}
	if in.ToolActivityAttempts <= 0 {
		in.ToolActivityAttempts = DefaultToolActivityAttempts
	}
	if in.ToolHeartbeat <= 0 {
		in.ToolHeartbeat = DefaultToolHeartbeat
	}
	if in.ModelHeartbeat <= 0 {
		in.ModelHeartbeat = DefaultModelHeartbeat
	}
	if in.HistoryLimit < 0 || in.HistoryLimit > historyEventsGuard {
		return nil, fmt.Errorf("temporal: HistoryLimit is %d; want 0 (default %d) or up to %d events", in.HistoryLimit, historyEventsGuard, historyEventsGuard)
	}
	if in.HistoryLimit == 0 {
		in.HistoryLimit = historyEventsGuard
	}
	if in.ContinueAsNewAfter < 0 {
		return nil, fmt.Errorf("temporal: ContinueAsNewAfter is %d; want 0 (the server decides) or a number of history events", in.ContinueAsNewAfter)
	}
	d := &driver{in: in, budgets: b, log: make([]loop.Event, 0, 16)}
	if c := in.Continued; c != nil {
		if c.Log == "" || c.Events <= 0 {
			return nil, fmt.Errorf("temporal: a continuation without a log (%+v)", *c)
		}
		d.head, d.continued = c.Log, c.Times
		if c.State != nil {
			d.state, d.base = *c.State, c.Events
		}
	}
	return d, nil
}

// handlers registers the queries, the update and the signal.
func (d *driver) handlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, StatusQuery, func() (RunStatus, error) {
		return d.status(), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, EventsQuery, func(p EventsPage) ([]loop.Event, error) {
		return d.page(p)
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, ConfirmUpdate,
		func(ctx workflow.Context, a loop.Confirmation) (RunStatus, error) {
			// Checked again: another answer may have been recorded since
			// this one was validated.
			if err := d.checkAnswer(a); err != nil {
				return RunStatus{}, err
			}
			d.decide(ctx, a)
			return d.status(), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, a loop.Confirmation) error {
			return d.checkAnswer(a)
		}},
	); err != nil {
		return err
	}
	signals := workflow.GetSignalChannel(ctx, ConfirmSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var a loop.Confirmation
			if !signals.Receive(ctx, &a) {
				return
			}
			if err := d.checkAnswer(a); err != nil {
				workflow.GetLogger(ctx).Warn("toolloop: confirmation signal dropped", "call_id", a.CallID, "error", err.Error())
				continue
			}
			d.decide(ctx, a)
		}
	})
	return nil
}

// decide records a checked answer.
func (d *driver) decide(ctx workflow.Context, a loop.Confirmation) {
	d.emit(ctx, loop.Event{Kind: loop.ConfirmationDecided, Confirmation: &a})
}

func (d *driver) status() RunStatus {
	s := &d.state
	st := loop.RunningStatus
	if s.Done {
		st = string(s.Status)
	}
	return RunStatus{RunID: s.RunID, Status: st, Detail: s.Detail, Steps: s.Steps, ToolCalls: s.ToolCalls,
		Usage: s.Usage, Cost: s.Cost, Pending: s.Pending, Events: d.events(), ContinuedAsNew: d.continued, Log: d.head}
}

// events is how many events the log holds.
func (d *driver) events() int { return d.base + len(d.log) }

// page answers the events query.
func (d *driver) page(p EventsPage) ([]loop.Event, error) {
	if p.Offset < 0 || p.Limit < 0 {
		return nil, fmt.Errorf("temporal: events page with offset %d and limit %d; want neither negative", p.Offset, p.Limit)
	}
	evs := d.log[min(max(p.Offset-d.base, 0), len(d.log)):]
	if p.Limit > 0 && len(evs) > p.Limit {
		evs = evs[:p.Limit]
	}
	return evs, nil
}

// emit stamps ev, appends it to the log and feeds it to the decider.
func (d *driver) emit(ctx workflow.Context, ev loop.Event) loop.Effect {
	ev.Seq = d.events() + 1
	ev.At = workflow.Now(ctx)
	return d.append(ev)
}

// marked counts a local activity of the current workflow task: its marker
// reaches the history when the workflow task completes (historyLength).
func (d *driver) marked(ctx workflow.Context) {
	d.historyLength(ctx)
	d.markers++
}

// historyLength is the history's length once the current workflow task
// completes: the server's count when the task began, and, in a run that
// began after the change (leanTurns), a marker per local activity of the
// task. A workflow task of local turns may hold many markers, which the
// server's count leaves out until it completes; a run that began before
// the change counts as it did, so that its continuations replay.
func (d *driver) historyLength(ctx workflow.Context) int {
	n := workflow.GetInfo(ctx).GetCurrentHistoryLength()
	if n != d.length {
		d.length, d.markers, d.taskBegan = n, 0, workflow.Now(ctx)
	}
	if !d.lean {
		return n
	}
	return n + d.markers
}

// append appends ev, stamped, to the log and feeds it to the decider.
func (d *driver) append(ev loop.Event) loop.Effect {
	d.log = append(d.log, ev)
	return loop.Next(&d.state, &d.log[len(d.log)-1])
}

// run performs the decider's effects until the run stops.
func (d *driver) run(ctx workflow.Context) (RunOutput, error) {
	// Before any command, so that a history recorded before the change
	// replays with the commands it has.
	v := workflow.GetVersion(ctx, leanTurns, workflow.DefaultVersion, commitBeforeCloseVersion)
	d.lean, d.commitClose = v >= leanTurnsVersion, v >= commitBeforeCloseVersion
	var eff loop.Effect
	if c := d.in.Continued; c != nil && c.State != nil {
		eff = d.state.Due()
	} else if c != nil {
		var err error
		if eff, err = d.reload(ctx); err != nil {
			if ctx.Err() != nil {
				return RunOutput{}, sdktemporal.NewCanceledError()
			}
			return RunOutput{}, fmt.Errorf("toolloop: run %s: reading its log to continue: %w", d.in.RunID, err)
		}
	} else {
		var version string
		lctx := ctx
		if d.lean && ctx.Err() != nil {
			// Canceled before its first workflow task completed (a close
			// the server refused, its local turns dropped with it): the
			// run still records its start and stops canceled, with its
			// output in the cancellation's details.
			lctx, _ = workflow.NewDisconnectedContext(ctx)
		}
		d.marked(ctx)
		if err := workflow.ExecuteLocalActivity(d.localCtx(lctx), ToolsVersionActivity).Get(lctx, &version); err != nil {
			if ctx.Err() != nil {
				return RunOutput{}, sdktemporal.NewCanceledError()
			}
			return RunOutput{}, fmt.Errorf("toolloop: reading the worker's tools: %w", err)
		}
		in := d.in
		output, _ := in.outputSpec()                                           // checked by newDriver
		comp, _ := loop.NewCompensationSpec(in.Compensation, in.AtomicBatches) // checked by newDriver
		eff = d.emit(ctx, loop.Event{Kind: loop.Started, Start: &loop.StartInfo{
			RunID: in.RunID, SessionID: in.SessionID, Model: in.Model, PromptVersion: in.PromptVersion,
			ToolsVersion: version, Identity: in.Identity, Budgets: d.budgets, Price: in.Price, Context: in.Context,
			Messages: in.Messages, Output: output, Compensation: comp,
		}})
	}
	w := &workflowDriver{d: d, ctx: ctx}
	if err := loop.Drive(w, eff); err != nil {
		return RunOutput{}, err
	}
	if d.closing {
		return d.finishPaused(ctx, w.awaitErr)
	}
	return d.finish(ctx)
}

// workflowDriver is the workflow's loop.Driver: it performs each effect
// with activities (local ones where the history need not name them), and
// keeps Temporal's own hooks: continuing as new and the history's limits
// before a model turn, the prepared batch, and the wait for
// confirmations.
type workflowDriver struct {
	d   *driver
	ctx workflow.Context
	// awaitErr is why the wait for confirmations ended, if it failed.
	awaitErr error
}

var _ loop.Driver = (*workflowDriver)(nil)

// Append stamps ev with workflow.Now and appends it.
func (w *workflowDriver) Append(ev loop.Event) loop.Effect { return w.d.emit(w.ctx, ev) }

// Commit, before a model turn, ends a workflow task that local
// activities have held for long (yield), then continues the workflow as
// new when it is due: the ContinueAsNewError it returns ends this
// workflow run.
func (w *workflowDriver) Commit(eff loop.Effect) error {
	if eff.Kind == loop.RequestModel {
		w.d.yield(w.ctx)
		return w.d.continueAsNew(w.ctx)
	}
	return nil
}

// holdLimit is how long local activities may hold one workflow task
// before the next model turn waits for a new one.
const holdLimit = time.Second

// yield ends the workflow task when local activities have held it for
// holdLimit or more: it stores the log's latest events with the SaveLog
// activity (not a local one), which the workflow waits for, so that the
// markers so far reach the history, and a cancellation, signal or update
// waiting for the workflow task reaches the run before its next model
// turn. A run of quick local turns would otherwise keep one workflow task
// until the SDK renews it (about every 8 s). An activity costs two
// dispatches through the server's queues (about 100 ms on the dev
// server); a timer would do too, but the dev server fires even a
// millisecond's timer about a second later. The hold is measured from
// workflow.Now when the task's first local activity was counted
// (historyLength) to workflow.Now at the model turn: the SDK moves
// workflow.Now by each local activity's time and records it in the
// marker, so both replay as they ran, and so does the activity.
func (d *driver) yield(ctx workflow.Context) {
	if !d.lean || ctx.Err() != nil {
		return
	}
	if d.historyLength(ctx); workflow.Now(ctx).Sub(d.taskBegan) < holdLimit {
		return
	}
	o := workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &sdktemporal.RetryPolicy{MaximumAttempts: 3},
	}
	d.bound(ctx, &o)
	if err := d.saveByActivity(ctx, o); err != nil {
		// The next model request stores them; the workflow task ended
		// all the same.
		workflow.GetLogger(ctx).Warn("toolloop: storing the log's latest events failed", "error", err.Error())
	}
}

// saveByActivity stores the log's latest events with the SaveLog
// activity, which ends the current workflow task: the workflow waits for
// it, so the task completes with its markers and the activity's command.
func (d *driver) saveByActivity(ctx workflow.Context, o workflow.ActivityOptions) error {
	in := SaveLogInput{Log: d.head, New: d.log[d.saved:]}
	var head string
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, o), SaveLogActivity, in).Get(ctx, &head); err != nil {
		return err
	}
	d.head, d.saved = head, d.saved+len(in.New)
	return nil
}

// commitBeforeClose ends the current workflow task, when local
// activities' markers are in it, before the workflow closes (completes,
// is canceled, continues as new). The server refuses to close a workflow
// whose task saw an event come in meanwhile (a cancellation, a signal):
// it fails the task (UNHANDLED_COMMAND), and the task's markers go with
// the refused close, so the model requests and reads it recorded, paid
// for, would be missing from the log of the run the next workflow task
// replays. A task that completes with the SaveLog activity's command
// instead is accepted whatever came in, and its markers are in the
// history before the close. The activity runs on a disconnected context,
// so that a cancellation arriving meanwhile waits for it rather than
// canceling it; it stores the log's latest events, so the close needs no
// local activity of its own. It costs a round trip through the server's
// queues and six history events, once per workflow run, and nothing in a
// task that holds no markers (a run that paused, or whose last task was
// only its close). A run recorded before the change closes as it did.
func (d *driver) commitBeforeClose(ctx workflow.Context) {
	if !d.commitClose || d.saved == len(d.log) {
		return
	}
	if d.historyLength(ctx); d.markers == 0 {
		return
	}
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	o := workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &sdktemporal.RetryPolicy{MaximumAttempts: 3},
	}
	if err := d.saveByActivity(ctx, o); err != nil {
		// The close stores them with a local activity; the markers are
		// in the history all the same, since the task ended.
		workflow.GetLogger(ctx).Warn("toolloop: storing the log's latest events before closing failed", "error", err.Error())
	}
}

// Interruption is, before a model turn, a history near Temporal's limits
// (historyFull); then a canceled workflow or a spent deadline.
func (w *workflowDriver) Interruption(eff loop.Effect) *loop.Failure {
	if eff.Kind == loop.RequestModel {
		if f := w.d.historyFull(w.ctx); f != nil {
			return f
		}
	}
	return w.d.interruption(w.ctx)
}

// Idle waits for the answers to a paused run; a run that is over, or
// whose wait ended without them, ends the drive (closing the workflow to
// answers in the second case).
func (w *workflowDriver) Idle() (loop.Event, bool, error) {
	if !w.d.paused() {
		return loop.Event{}, false, nil
	}
	resumed, err := w.d.await(w.ctx)
	if err != nil || !resumed {
		w.d.closing, w.awaitErr = true, err
		return loop.Event{}, false, nil
	}
	return loop.Event{Kind: loop.Resumed}, true, nil
}

// RequestModel runs the model activity.
func (w *workflowDriver) RequestModel() loop.Event { return w.d.requestModel(w.ctx, nil) }

// Summarize asks the model activity for a compaction's summary.
func (w *workflowDriver) Summarize(r *loop.SummaryRequest) loop.Event {
	return loop.SummaryEvent(w.d.requestModel(w.ctx, r), r)
}

// ValidateCalls prepares the batch (PrepareActivity).
func (w *workflowDriver) ValidateCalls() (loop.Event, error) {
	ev, err := w.d.validate(w.ctx)
	return ev, w.stopped(err)
}

// AuthorizeCalls records the prepared decisions when the decider asks for
// the calls the preparation asked the policy about; else (a remote
// policy) it runs the policy's activity.
func (w *workflowDriver) AuthorizeCalls(idx []int) (loop.Event, error) {
	if p := w.d.prepared; p != nil && p.Decisions != nil && slices.Equal(p.Authorized, idx) {
		return loop.Event{Kind: loop.PolicyDecided, Decisions: p.Decisions}, nil
	}
	return w.d.authorize(w.ctx, idx), nil
}

// PlanBatch records the prepared plan when the decider asks for the calls
// it plans; else it runs the planning local activity.
func (w *workflowDriver) PlanBatch(idx []int) (loop.Event, error) {
	if p := w.d.prepared; p != nil && p.Plan != nil && slices.Equal(p.Planned, idx) {
		return loop.Event{Kind: loop.StagePlanned, Plan: p.Plan}, nil
	}
	ev, err := w.d.plan(w.ctx, idx)
	return ev, w.stopped(err)
}

// ExecuteStage runs an activity per call of the stage.
func (w *workflowDriver) ExecuteStage(stage int, idx []int) loop.Event {
	return w.d.execute(w.ctx, stage, idx)
}

// stopped wraps the error of a local activity that failed for good: the
// run stopped being driven.
func (w *workflowDriver) stopped(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("toolloop: run %s stopped being driven: %w", w.d.state.RunID, err)
}

// paused reports whether the run waits for confirmations.
func (d *driver) paused() bool {
	return d.state.Done && d.state.Status == loop.ConfirmationRequired && len(d.state.Pending) > 0
}

// await waits until every pending call is answered (the decider then
// clears Done), the confirmation timeout passes, or the workflow is
// canceled.
func (d *driver) await(ctx workflow.Context) (bool, error) {
	answered := func() bool { return !d.state.Done }
	if d.in.ConfirmationTimeout > 0 {
		return workflow.AwaitWithTimeout(ctx, d.in.ConfirmationTimeout, answered)
	}
	err := workflow.Await(ctx, answered)
	return err == nil, err
}

// output is the run's small output, once its log is stored: if storing it
// fails for good, the workflow fails (the run stopped being driven).
func (d *driver) output(ctx workflow.Context) (RunOutput, error) {
	if err := d.saveLog(ctx); err != nil {
		return RunOutput{}, fmt.Errorf("toolloop: run %s: storing its log: %w", d.state.RunID, err)
	}
	s := &d.state
	out := RunOutput{RunID: s.RunID, SessionID: s.SessionID, Status: s.Status, Detail: s.Detail, Steps: s.Steps, ToolCalls: s.ToolCalls,
		Usage: s.Usage, Cost: s.Cost, Pending: s.Pending, Events: d.events(), Log: d.head, ContinuedAsNew: d.continued,
		Writes: s.WritesReport()}
	if len(d.log) > 0 {
		out.Duration = d.log[len(d.log)-1].At.Sub(s.StartedAt)
	}
	if s.Status == loop.FinalAnswer && len(s.Messages) > 0 {
		out.Answer = s.Messages[len(s.Messages)-1].Text
		if s.Output != nil {
			out.Output = loop.OutputJSON(out.Answer)
		}
	}
	return out, nil
}

// saveLog stores the events the blob store does not hold yet (those
// since the last model request), on a canceled workflow too. It is a
// local activity: a marker in the history, no round trip through the
// server's queues.
func (d *driver) saveLog(ctx workflow.Context) error {
	if d.saved == len(d.log) {
		return nil
	}
	if ctx.Err() != nil {
		ctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	o := workflow.LocalActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &sdktemporal.RetryPolicy{MaximumAttempts: 10, MaximumInterval: 10 * time.Second},
	}
	in := SaveLogInput{Log: d.head, New: d.log[d.saved:]}
	var head string
	d.marked(ctx)
	if err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, o), SaveLogActivity, in).Get(ctx, &head); err != nil {
		return err
	}
	d.head, d.saved = head, d.saved+len(in.New)
	return nil
}

func (d *driver) finish(ctx workflow.Context) (RunOutput, error) {
	d.commitBeforeClose(ctx)
	out, err := d.output(ctx)
	if err != nil {
		return out, err
	}
	if ctx.Err() != nil {
		return out, sdktemporal.NewCanceledError(out)
	}
	return out, nil
}

// finishPaused ends the workflow of a run still paused: its confirmation
// timeout passed (the output says confirmation_required), or the workflow
// was canceled.
func (d *driver) finishPaused(ctx workflow.Context, werr error) (RunOutput, error) {
	d.commitBeforeClose(ctx)
	out, err := d.output(ctx)
	if err != nil {
		return out, err
	}
	if werr != nil || ctx.Err() != nil {
		return out, sdktemporal.NewCanceledError(out)
	}
	return out, nil
}

// interruption is the failure that stops the run before its next effect:
// the workflow was canceled, or the run's time is spent.
func (d *driver) interruption(ctx workflow.Context) *loop.Failure {
	if ctx.Err() != nil {
		return loop.ContextFailure(context.Canceled)
	}
	if left, ok := remaining(d.state.Deadline, workflow.Now(ctx)); ok && left <= 0 {
		return loop.ContextFailure(context.DeadlineExceeded)
	}
	return nil
}

// bound caps an activity's timeouts with the run's remaining time. It
// reports whether the deadline is what limits the activity: then its
// timing out means the run's time is spent, whatever workflow.Now says
// (the workflow's clock moves with its tasks, not with the activity).
func (d *driver) bound(ctx workflow.Context, o *workflow.ActivityOptions) (byDeadline bool) {
	left, ok := remaining(d.state.Deadline, workflow.Now(ctx))
	if !ok {
		return false
	}
	left = max(left, time.Millisecond)
	o.ScheduleToCloseTimeout = left
	if o.StartToCloseTimeout >= left {
		o.StartToCloseTimeout = left
		return true
	}
	return false
}

// maxModelInputNew is the most JSON a model activity's input carries of
// the turn's events; a larger turn is stored before the request.
const maxModelInputNew = 512 << 10

// modelActivityBound is a model activity's StartToClose timeout when the
// run has no deadline: Temporal needs one, and RunInput.ModelTimeout is
// not it, since a streamed turn may last longer than it may be quiet.
const modelActivityBound = 24 * time.Hour

// cutByDeadline reports whether an activity failed because the run's
// deadline bounded it.
func (d *driver) cutByDeadline(ctx workflow.Context, err error, byDeadline bool) bool {
	if left, ok := remaining(d.state.Deadline, workflow.Now(ctx)); ok && left <= 0 {
		return true
	}
	if !byDeadline {
		return false
	}
	// A heartbeat timeout is a lost worker, whatever the deadline.
	var te *sdktemporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() != enumspb.TIMEOUT_TYPE_HEARTBEAT
}

func (d *driver) localCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: localTimeout,
		RetryPolicy:         &sdktemporal.RetryPolicy{MaximumAttempts: 3},
	})
}

// requestModel has the model activity make a turn, or with summary the
// summary request of a compaction, and returns the event of its answer.
func (d *driver) requestModel(ctx workflow.Context, summary *loop.SummaryRequest) loop.Event {
	s := &d.state
	start := workflow.Now(ctx)
	o := workflow.ActivityOptions{
		// The activity applies ModelTimeout itself (ModelInput.Timeout),
		// to a stream's quiet time rather than its length; Temporal's
		// bound is the run's remaining time (see bound), or a day when the
		// run has no deadline. A lost worker is noticed by its heartbeats.
		StartToCloseTimeout: modelActivityBound,
		RetryPolicy: &sdktemporal.RetryPolicy{
			InitialInterval:    d.in.ModelRetryBackoff,
			BackoffCoefficient: 2,
			MaximumInterval:    loop.MaxModelRetryWait,
			MaximumAttempts:    int32(d.in.ModelRetries + 1),
		},
		// A response that arrives as the workflow is canceled is kept (its
		// tokens were paid for; in-process the run records it too, then
		// stops before its calls): the workflow waits for the activity to
		// end, which the heartbeats make prompt, since they carry the
		// cancellation to the request's context.
		WaitForCancellation: true,
		HeartbeatTimeout:    d.in.ModelHeartbeat,
	}
	byDeadline := d.bound(ctx, &o)
	o.RetryPolicy.NonRetryableErrorTypes = []string{FailureTypePayloadTooLarge}
	if b, err := json.Marshal(d.log[d.saved:]); err == nil && len(b) > maxModelInputNew {
		// A turn's events travel in the model activity's input, which the
		// history keeps and Temporal bounds (2 MB): a large turn (a long
		// reply and many results) is stored first, by a local activity
		// whose input the history does not keep, and the input carries
		// none of it. If that fails the input carries it as before.
		if err := d.saveLog(ctx); err != nil {
			workflow.GetLogger(ctx).Warn("toolloop: storing a large turn before the model request failed", "error", err.Error())
		}
	}
	in := ModelInput{
		Model: d.in.Model, Step: s.Steps + 1, Log: d.head, New: d.log[d.saved:],
		RetryBackoff: d.in.ModelRetryBackoff, Timeout: d.in.ModelTimeout, RunID: s.RunID, Output: s.Output.Format(), Summary: summary,
	}
	var out ModelOutput
	var err error
	local := d.localModel()
	if local {
		lo := workflow.LocalActivityOptions{
			ScheduleToCloseTimeout: o.ScheduleToCloseTimeout,
			StartToCloseTimeout:    o.StartToCloseTimeout,
			RetryPolicy:            o.RetryPolicy,
		}
		d.marked(ctx)
		err = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, lo), ModelActivity, in).Get(ctx, &out)
	} else {
		err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, o), ModelActivity, in).Get(ctx, &out)
	}
	latency := workflow.Now(ctx).Sub(start)
	if local {
		// The activity's own measure, should the workflow's clock have
		// moved less.
		latency = max(latency, out.Took)
	}
	d.turns++
	if err == nil && (out.Response == nil || out.Log == "") {
		err = errors.New("the model activity returned no response, or no log")
	}
	if err == nil {
		d.head, d.saved = out.Log, len(d.log)
		return loop.Event{Kind: loop.ModelResponded, Response: out.Response, Latency: latency, Attempts: out.Attempt}
	}
	attempts := attemptsOf(err, int(o.RetryPolicy.MaximumAttempts))
	if f := d.interruption(ctx); f != nil {
		return loop.Event{Kind: loop.ModelFailed, Failure: f, Latency: latency, Attempts: attempts}
	}
	if d.cutByDeadline(ctx, err, byDeadline) {
		return loop.Event{Kind: loop.ModelFailed, Failure: loop.ContextFailure(context.DeadlineExceeded), Latency: latency, Attempts: attempts}
	}
	partial := partialOf(err)
	return loop.Event{Kind: loop.ModelFailed, Latency: latency, Attempts: attempts, Response: partial,
		Failure: loop.ModelFailure(attempts, modelError(err), partial != nil)}
}

// localModel reports whether the model requests are local activities: by
// default in a run that began after the change (leanTurns), else when
// the input asks for it.
func (d *driver) localModel() bool {
	return d.in.LocalModel || (d.lean && !d.in.ModelAsActivity)
}

// attemptsOf reads how many attempts a failed activity made: the attempt
// number its last error carries, else the maximum when Temporal says that
// is why it stopped, else 1.
func attemptsOf(err error, maxAttempts int) int {
	var app *sdktemporal.ApplicationError
	if errors.As(err, &app) && app.HasDetails() {
		var n int
		if app.Details(&n) == nil && n > 0 {
			return n
		}
	}
	var act *sdktemporal.ActivityError
	if errors.As(err, &act) && act.RetryState() == enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED {
		return maxAttempts
	}
	return 1
}

// partialOf is what a model activity's stream had sent before it broke
// (its failure's second detail), or nil: a failure from a worker that
// does not send it, or from before the stream began.
func partialOf(err error) *llm.Response {
	var app *sdktemporal.ApplicationError
	if !errors.As(err, &app) || !app.HasDetails() {
		return nil
	}
	var n int
	var resp *llm.Response
	if app.Details(&n, &resp) != nil {
		return nil
	}
	return resp
}

// modelError is the model activity's failure as the model client
// returned it, as far as the workflow can tell: its text, and whether it
// broke the provider's protocol.
func modelError(err error) error {
	msg := cause(err)
	if app := (*sdktemporal.ApplicationError)(nil); errors.As(err, &app) && app.Type() == FailureTypeProtocol {
		return &llm.Error{Kind: llm.KindProtocolError, Err: errors.New(strings.TrimPrefix(msg, string(llm.KindProtocolError)+": "))}
	}
	if app := (*sdktemporal.ApplicationError)(nil); errors.As(err, &app) && app.Type() == FailureTypeContextLength {
		return &llm.Error{Kind: llm.KindContextLengthExceeded, Err: errors.New(strings.TrimPrefix(msg, string(llm.KindContextLengthExceeded)+": "))}
	}
	return errors.New(msg)
}

// cause is the text of an activity's failure without Temporal's wrapping.
func cause(err error) string {
	var app *sdktemporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	var act *sdktemporal.ActivityError
	if errors.As(err, &act) && act.Unwrap() != nil {
		return act.Unwrap().Error()
	}
	return err.Error()
}

// validate prepares a batch in one local activity (PrepareBatch): its
// checks, and, ahead of the decider asking for them, the policy's
// decisions and the plan, which the loop records when the decider asks
// for exactly those calls (it does: the activity asked a copy of it). One local
// activity is one marker in the history and no round trip through the
// server's queues, where an activity for the policy was three events, a
// workflow task and two dispatches.
func (d *driver) validate(ctx workflow.Context) (loop.Event, error) {
	b := d.state.Batch
	// The copy's path (validation, then the policy's decisions) reads
	// neither the run's call IDs nor the results seen, the parts of the
	// state that grow with the run: leaving them out (ForBatch) keeps this
	// encoding the same size each turn. Were the copy ever to decide
	// otherwise, the workflow's decider would ask for other calls and the
	// prepared answers would go unused (see workflowDriver), not be
	// recorded.
	state, err := json.Marshal(d.state.ForBatch())
	if err != nil {
		return loop.Event{}, fmt.Errorf("encoding the decider's state: %w", err)
	}
	in := PrepareInput{
		ValidateInput: ValidateInput{RunID: d.state.RunID, RequestID: d.in.RequestID, Calls: b.Calls,
			ToolTimeout: d.budgets.ToolTimeout, Limits: d.budgets.ArgumentLimits()},
		Identity: d.in.Identity, State: state, At: workflow.Now(ctx),
	}
	var out PrepareOutput
	d.prepared = nil
	d.marked(ctx)
	if err := workflow.ExecuteLocalActivity(d.localCtx(ctx), PrepareActivity, in).Get(ctx, &out); err != nil {
		if f := d.interruption(ctx); f != nil {
			return loop.Event{Kind: loop.Interrupted, Failure: f}, nil
		}
		return loop.Event{}, fmt.Errorf("validating calls: %w", err)
	}
	d.bounds, d.prepared = out.Bounds, &out
	return loop.Event{Kind: loop.CallsValidated, Checks: out.Checks}, nil
}

func (d *driver) authorize(ctx workflow.Context, idx []int) loop.Event {
	b := d.state.Batch
	o := workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &sdktemporal.RetryPolicy{MaximumAttempts: 3},
	}
	d.bound(ctx, &o)
	in := AuthorizeInput{Identity: d.in.Identity, Calls: b.Calls, Indexes: idx, Taint: b.Taint}
	var decisions []policy.Decision
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, o), AuthorizeActivity, in).Get(ctx, &decisions)
	if err != nil {
		if f := d.interruption(ctx); f != nil {
			return loop.Event{Kind: loop.Interrupted, Failure: f}
		}
		// Fail closed, as in-process: a policy that cannot decide does not
		// allow.
		decisions = make([]policy.Decision, len(b.Calls))
		for _, i := range idx {
			decisions[i] = loop.PolicyFailure(cause(err))
		}
	}
	return loop.Event{Kind: loop.PolicyDecided, Decisions: decisions}
}

func (d *driver) plan(ctx workflow.Context, idx []int) (loop.Event, error) {
	b := d.state.Batch
	in := PlanInput{Calls: b.Calls, Indexes: idx, Approved: b.Approved}
	var p executor.Plan
	d.marked(ctx)
	if err := workflow.ExecuteLocalActivity(d.localCtx(ctx), PlanActivity, in).Get(ctx, &p); err != nil {
		if f := d.interruption(ctx); f != nil {
			return loop.Event{Kind: loop.Interrupted, Failure: f}, nil
		}
		return loop.Event{}, fmt.Errorf("planning calls: %w", err)
	}
	return loop.Event{Kind: loop.StagePlanned, Plan: &p}, nil
}

// execute runs one stage: an activity per call, all started at once, the
// outcomes collected in the stage's order; a stage of short reads runs as
// local activities (localReads).
func (d *driver) execute(ctx workflow.Context, stage int, idx []int) loop.Event {
	calls := loop.StageCalls(&d.state, idx, nil)
	byDeadline := make([]bool, len(idx))
	futures := make([]workflow.Future, len(idx))
	local := d.localReads(idx, calls)
	for j, i := range idx {
		c := calls[j]
		if local {
			// A read: no write to wait for on cancellation, and no
			// heartbeats to send; a lost worker is the workflow task's
			// timeout, and the next workflow task runs the read again.
			o := workflow.ActivityOptions{StartToCloseTimeout: d.bounds[i]}
			byDeadline[j] = d.bound(ctx, &o)
			lo := workflow.LocalActivityOptions{
				ScheduleToCloseTimeout: o.ScheduleToCloseTimeout,
				StartToCloseTimeout:    o.StartToCloseTimeout,
				RetryPolicy: &sdktemporal.RetryPolicy{
					MaximumAttempts:        int32(d.in.ToolActivityAttempts),
					NonRetryableErrorTypes: []string{FailureTypeUnknownTool},
				},
			}
			d.marked(ctx)
			futures[j] = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, lo), ToolActivity, c)
			continue
		}
		o := workflow.ActivityOptions{
			StartToCloseTimeout: localTimeout,
			RetryPolicy: &sdktemporal.RetryPolicy{
				MaximumAttempts:        int32(d.in.ToolActivityAttempts),
				NonRetryableErrorTypes: []string{FailureTypeUnknownTool},
			},
			// A write's activity is waited for even when the workflow is
			// canceled, so that its outcome is known, not guessed.
			WaitForCancellation: c.IdempotencyKey != "",
			// A lost worker is noticed in seconds, not at StartToClose.
			HeartbeatTimeout: d.in.ToolHeartbeat,
		}
		if i < len(d.bounds) && d.bounds[i] > 0 {
			o.StartToCloseTimeout = d.bounds[i]
		}
		byDeadline[j] = d.bound(ctx, &o)
		futures[j] = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, o), ToolActivity, c)
	}
	outs := make([]executor.Outcome, len(idx))
	var cut bool
	for j, f := range futures {
		if err := f.Get(ctx, &outs[j]); err != nil {
			late := d.cutByDeadline(ctx, err, byDeadline[j])
			cut = cut || late
			outs[j] = d.failedCall(ctx, calls[j], err, late)
		}
	}
	ev := loop.Event{Kind: loop.StageFinished, Stage: stage, Outcomes: outs}
	if f := d.interruption(ctx); f != nil {
		ev.Failure = f
	} else if cut {
		ev.Failure = loop.ContextFailure(context.DeadlineExceeded)
	}
	return ev
}

// localReads reports whether a stage runs as local activities: in a run
// that began after the change (leanTurns), when every call of the stage
// is a read (no idempotency key) whose worst case, from validation, is
// known and at most RunInput.LocalReadBound. A write keeps its activity:
// its heartbeats, and the wait for its outcome on cancellation. A stage
// with one long read keeps activities for all, since the workflow task
// that schedules the others' activities would wait for the local one.
func (d *driver) localReads(idx []int, calls []CallInput) bool {
	if !d.lean || d.in.LocalReadBound <= 0 {
		return false
	}
	for j, i := range idx {
		if calls[j].IdempotencyKey != "" || i >= len(d.bounds) || d.bounds[i] <= 0 || d.bounds[i] > d.in.LocalReadBound {
			return false
		}
	}
	return true
}

// failedCall is the outcome of a call whose activity failed for good. A
// write the run's deadline cut off (late) may have happened: its outcome
// is unknown, as in process when no status look-up settles it. Otherwise,
// if the run was canceled or ran out of time, the call was cut short (as
// in process); a write whose activity failed otherwise has an unknown
// outcome too (its worker may have written before failing), and a read
// failed for a reason the model may hear about.
func (d *driver) failedCall(ctx workflow.Context, c CallInput, err error, late bool) executor.Outcome {
	r := llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name}
	o := executor.Outcome{Err: err.Error(), IdempotencyKey: c.IdempotencyKey, Started: workflow.Now(ctx)}
	switch {
	case late && c.IdempotencyKey != "":
		// The run's time ran out while the write's activity ran: its
		// worker may have written (the executor's reconciling, which
		// would tell, is cut off with it).
		r.Status, r.ErrorKind = llm.StatusSkipped, llm.KindOutcomeUnknown
		r.Content = llm.ErrorContent(r.ErrorKind, fmt.Sprintf(
			"the run's time ran out while the write with idempotency key %q ran; the write may or may not have happened",
			c.IdempotencyKey))
		o.OutcomeUnknown, o.StopRun = true, true
	case late || d.interruption(ctx) != nil || sdktemporal.IsCanceledError(err):
		r.Status, r.ErrorKind = llm.StatusSkipped, llm.KindCanceled
		r.Content = llm.ErrorContent(r.ErrorKind, "the run ended before this call finished")
		o.StopRun = true
		// As in process, where the executor's one attempt ends with the
		// run's context: the outcome says why the run ended, not how
		// Temporal reported the activity.
		why := error(context.Canceled)
		if f := d.interruption(ctx); late || (f != nil && f.Kind == loop.FailDeadline) {
			why = context.DeadlineExceeded
		}
		o.Attempts, o.Err = 1, loop.ContextFailure(why).Message
	case c.IdempotencyKey != "":
		r.Status, r.ErrorKind = llm.StatusSkipped, llm.KindOutcomeUnknown
		r.Content = llm.ErrorContent(r.ErrorKind, fmt.Sprintf(
			"the activity of the write with idempotency key %q failed (%s); the write may or may not have happened",
			c.IdempotencyKey, cause(err)))
		o.OutcomeUnknown, o.StopRun = true, true
	default:
		r.Status, r.ErrorKind = llm.StatusError, llm.KindUnavailable
		r.Content = llm.ErrorContent(r.ErrorKind, "the tool could not be run: "+cause(err))
	}
	o.Result = r
	return o
}
