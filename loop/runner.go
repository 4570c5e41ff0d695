package loop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/internal/sized"
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
	// Tools are the tools the model may call. If all of them honor their
	// context (Registry.AllHonorContext), runs are driven on the goroutine
	// that calls Run; see Runner.Run.
	Tools *tool.Registry
	// Policy decides each call; nil allows every registered tool.
	Policy   policy.Policy
	Identity policy.Identity
	Budgets  Budgets
	// Executor runs tool calls; nil means executor.New(nil).
	Executor *executor.Executor
	// Planner plans each batch; nil means executor.RulePlanner with the
	// executor's MaxParallel.
	Planner executor.Planner
	// ModelRetries is how many times a retryable model failure is tried
	// again (default 2; negative for never). ModelRetryBackoff is the first
	// wait, doubled each time (default 500ms).
	ModelRetries      int
	ModelRetryBackoff time.Duration
	// RequestID, when set, derives write idempotency keys from the
	// business request rather than the run: a retried request (a new run
	// with the same RequestID) finds its writes already done. Tools with
	// their own key (tool.Spec.IdempotencyKey) keep it.
	RequestID string
	// SessionID and PromptVersion are recorded in the log.
	SessionID     string
	PromptVersion string
	// Observer sees every event as the run appends it: the hook for run
	// logs and tracing. Nil costs nothing.
	Observer Observer
	// Store, when set, makes runs durable: each run's events are appended
	// to it before the run acts on the world (a model request, a tool
	// stage) and when it stops, and Resume continues a run from it.
	Store store.EventLog
	// Now is the driver's clock; nil means time.Now.
	Now func() time.Time
	// NewRunID makes run IDs; nil means 16 random hex digits.
	NewRunID func() string
}

// Runner is the in-process driver: it performs the decider's effects with
// goroutines, context deadlines and timeouts. It is immutable and safe for
// concurrent runs.
type Runner struct {
	// lastLogLen is how many events the previous run logged;
	// lastMessages and lastCallIDs how many messages it added and how many
	// call IDs it saw.
	lastLogLen, lastMessages, lastCallIDs atomic.Int32

	cfg     Config
	budgets Budgets
	price   *Price
	// ownPlanner is set when cfg.Planner is the default RulePlanner,
	// which keeps nothing of its input; ownClock when cfg.Now is the
	// default time.Now.
	ownPlanner, ownClock bool
	// onCaller is set when every tool declares that it returns soon after
	// its context is done: runs are then driven on Run's own goroutine.
	onCaller bool

	// drives holds the drives of runs that ended with nothing but Run
	// holding them, for later runs: a drive and its scratch space are
	// about 1.7 KB, most of what a run allocates besides its result, and
	// on a small heap the collector's cost follows the bytes.
	drives sync.Pool
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
	r := &Runner{cfg: cfg, budgets: b, onCaller: cfg.Tools.AllHonorContext()}
	if p, ok := b.Prices[cfg.ModelName]; ok {
		r.price = &p
	} else if b.MaxCost > 0 {
		return nil, fmt.Errorf("loop: MaxCost is set but Budgets.Prices has no price for model %q", cfg.ModelName)
	}
	if r.cfg.Executor == nil {
		r.cfg.Executor = executor.New(nil)
	}
	if r.cfg.Planner == nil {
		r.cfg.Planner = executor.RulePlanner(r.cfg.Executor.Options().MaxParallel)
		r.ownPlanner = true
	}
	switch {
	case r.cfg.ModelRetries == 0:
		r.cfg.ModelRetries = 2
	case r.cfg.ModelRetries < 0:
		r.cfg.ModelRetries = 0
	}
	if r.cfg.ModelRetryBackoff <= 0 {
		r.cfg.ModelRetryBackoff = 500 * time.Millisecond
	}
	if r.cfg.Now == nil {
		r.cfg.Now = time.Now
		r.ownClock = true
	}
	if r.cfg.NewRunID == nil {
		r.cfg.NewRunID = randomID
	}
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
// the status is final_answer; the Result is returned in every case but a
// configuration error.
//
// The run is driven on a goroutine of its own, which also executes tool
// handlers one at a time. If a handler overruns its timeout while ignoring
// its context, the run carries on from another goroutine and Run returns on
// time; the stuck handler's goroutine ends whenever the handler does. When
// every tool declares that it honors its context (tool.Spec.HonorsContext),
// the run is driven on the caller's goroutine instead, which is faster;
// a handler that breaks that promise holds Run until it returns.
func (r *Runner) Run(ctx context.Context, msgs []llm.Message) (*Result, error) {
	d := r.newDrive(nil)
	// The run's start record, its result, which holds the record in its
	// log anyway, its context's ID part (which a handler may keep, so it
	// is not the drive's to reuse) and room for its compact log's header
	// come in one allocation; result fills in the second and the last.
	x := new(struct {
		start StartInfo
		res   Result
		id    runContext
	})
	x.id.id = r.cfg.NewRunID()
	d.idCtx, d.out.res = &x.id, &x.res
	return d.run(ctx, func() Effect {
		x.start = StartInfo{
			RunID: x.id.id, SessionID: r.cfg.SessionID, Model: r.cfg.ModelName, PromptVersion: r.cfg.PromptVersion,
			ToolsVersion: r.cfg.Tools.Version(), Identity: r.cfg.Identity, Budgets: r.budgets, Price: r.price,
			Messages: msgs,
			sizes:    sizeHint{messages: int(r.lastMessages.Load()), callIDs: int(r.lastCallIDs.Load())},
		}
		return d.emit(Event{Kind: Started, Start: &x.start})
	}, r.budgets.Deadline)
}

// Resume continues a run from its log in Config.Store: the events are
// replayed through the decider, which rebuilds the state exactly, and the
// run goes on from the effect the last event called for. A stage whose
// outcome was not recorded is executed again: reads simply run again, and
// writes go through the idempotency ledger, so a write that finished is
// replayed and one left in flight is reconciled, never repeated. Resuming
// a run that has ended returns its result unchanged.
func (r *Runner) Resume(ctx context.Context, runID string) (*Result, error) {
	if r.cfg.Store == nil {
		return nil, errors.New("loop: Resume needs Config.Store")
	}
	events, err := LoadEvents(ctx, r.cfg.Store, runID)
	if err != nil {
		return nil, err
	}
	return r.continueFrom(ctx, events, len(events))
}

// Continue goes on with a run from its result, after the given answers to
// its pending confirmations, without a store: the in-memory counterpart of
// Decide then Resume. The answers are appended to the run's log.
func (r *Runner) Continue(ctx context.Context, res *Result, answers ...Confirmation) (*Result, error) {
	events := append([]Event(nil), res.Events...)
	var s State
	for i := range events {
		Next(&s, &events[i])
	}
	for _, a := range answers {
		if err := CheckAnswer(&s, a); err != nil {
			return nil, err
		}
		ev := Event{Seq: len(events) + 1, At: r.cfg.Now(), Kind: ConfirmationDecided, Confirmation: &a}
		events = append(events, ev)
		Next(&s, &events[len(events)-1])
	}
	return r.continueFrom(ctx, events, len(res.Events))
}

// continueFrom replays events and drives the run on; events from
// flushed on are not yet in the store.
func (r *Runner) continueFrom(ctx context.Context, events []Event, flushed int) (*Result, error) {
	if len(events) == 0 || events[0].Kind != Started {
		return nil, errors.New("loop: a run's log must begin with its started event")
	}
	d := r.newDrive(events)
	d.flushed = flushed
	d.idCtx = new(runContext)
	if events[0].Start != nil {
		d.idCtx.id = events[0].Start.RunID
	}
	var eff Effect
	for i := range d.log {
		eff = Next(&d.state, &d.log[i])
	}
	if eff.Kind == None && d.flushed == len(d.log) {
		res := d.result()
		return res, res.Err()
	}
	remaining := time.Duration(0)
	if !d.state.Deadline.IsZero() {
		remaining = max(d.state.Deadline.Sub(r.cfg.Now()), time.Nanosecond)
	}
	return d.run(ctx, func() Effect {
		if ro, ok := r.cfg.Observer.(ResumeObserver); ok {
			ro.ObserveResume(d.ctx, d.log)
		}
		return d.emit(Event{Kind: Resumed})
	}, remaining)
}

// newDrive returns a drive for a run with log, reusing one whose run is
// over if there is one. A nil log is a new run's: it gets the room for its
// log that a reused drive has, if the last run's result did not take it.
func (r *Runner) newDrive(log []Event) *drive {
	d, _ := r.drives.Get().(*drive)
	if log == nil {
		if d != nil && d.logFree {
			clear(d.log)
			log = d.log[:0]
		} else {
			// Size the log like the runner's previous run: runs of one
			// agent tend to be alike, and growing the log by doubling
			// costs more than the guess.
			log = make([]Event, 0, max(16, int(r.lastLogLen.Load())))
		}
	}
	if d == nil {
		return &drive{r: r, log: log}
	}
	sc, ids := d.sc, d.state.callIDs.list
	*d = drive{r: r, log: log, sc: sc}
	if sc != nil {
		*sc = scratch{takeover: sc.takeover} // bound to d, which stays
	}
	// The last run's call ID list, emptied, is room for this run's (see
	// start).
	clear(ids)
	d.state.callIDs.list = ids[:0]
	return d
}

// run drives a run from the effect first returns, on a goroutine of its own
// unless every tool honors its context.
func (d *drive) run(ctx context.Context, first func() Effect, deadline time.Duration) (*Result, error) {
	// The run's ID rides in the drive rather than in a context.WithValue
	// (two allocations), and below the deadline, so that the Err the run
	// checks at every step is the deadline context's own.
	d.idCtx.Context = ctx
	ctx = d.idCtx
	if deadline > 0 {
		var cancel context.CancelFunc
		// The real deadline comes from the real clock: Config.Now only
		// stamps events, and a test clock must not end runs early or never.
		ctx, cancel = context.WithTimeout(ctx, deadline)
		defer cancel()
	}
	d.ctx = ctx
	w := d.r.cfg.Executor.NewWatchdog(ctx)
	d.watch = w
	defer w.Close()
	first()
	d.done.Add(1)
	if d.r.onCaller {
		// No handler will hold this goroutine much past its timeout, so the
		// run needs no goroutine of its own: handing it over and back costs
		// a wake-up of an idle processor, a quarter of a short run on a
		// small machine. If a handler is late all the same, the watchdog
		// hands the run on as usual and loop returns when the handler does.
		d.loop()
	} else {
		// A handler that ignores its context may never return: the run is
		// driven on a goroutine of its own, which the watchdog can leave
		// behind, so that Run returns on time whatever the handlers do.
		go func() {
			growStack()
			d.loop()
		}()
	}
	d.done.Wait()
	out := d.out
	if d.sc == nil || !d.sc.lent {
		// The driver goroutine touches d no more once it delivered, and
		// no handler can still be running: nothing else holds d (its
		// context is not in it, and the result holds none of it).
		w.Close()
		d.r.drives.Put(d)
	}
	if out.err != nil {
		return nil, out.err
	}
	return out.res, out.res.Err()
}

// growStack grows the calling goroutine's stack to 16 KiB at once. A
// goroutine starts with 2 KiB and a run's driver needs 8 to 16 (a tool
// handler decoding JSON is deep): grown on demand, the stack would be
// copied two or three times per run, each copy unwinding every frame on
// it, which cost about a tenth of a short run. Called first thing, while
// the stack holds a frame or two, the one copy costs next to nothing.
//
//go:noinline
func growStack() {
	// The frame holds pad whether or not the branch runs, so the stack
	// grows on entry; the branch never runs, so pad is never zeroed.
	if stackSink {
		var pad [10 << 10]byte
		keepStack(&pad)
	}
}

// stackSink is never set: growStack cannot tell, and keeps its frame.
var stackSink bool

//go:noinline
func keepStack(*[10 << 10]byte) {}

// delivery is what a run's driver hands back to Run.
type delivery struct {
	res *Result
	err error
}

// loop performs effects until the run is over, then delivers the result.
// It returns early, delivering nothing, when a stuck tool handler made the
// watchdog hand the run to another goroutine.
func (d *drive) loop() {
	ctx := d.ctx
	// eff is the effect the last event called for, as Next keeps it: the
	// loop reads it there rather than having it copied out (80 bytes)
	// at every step.
	eff := &d.state.next
	for eff.Kind != None {
		if eff.Kind == ExecuteStage || (eff.Kind == RequestModel && d.flushed == 0) {
			// What the run learned so far is on disk before a tool acts on
			// the world: one commit per step. (The run is recorded before
			// its first model request too, so that it can be listed.) A
			// crash between a stage and the next commit runs that stage
			// again on resume: reads repeat harmlessly and writes go
			// through the idempotency ledger.
			if err := d.flush(); err != nil {
				d.deliver(delivery{err: err})
				return
			}
		}
		if eff.Kind != Stop {
			if f := contextFailure(ctx); f != nil {
				d.emit(Event{Kind: Interrupted, Failure: f})
				continue
			}
		}
		switch eff.Kind {
		case RequestModel:
			d.commit(d.requestModel(ctx))
		case ValidateCalls:
			d.commit(d.validate())
		case AuthorizeCalls:
			d.commit(d.authorize(ctx, eff.Calls))
		case PlanBatch:
			d.commit(d.plan(eff.Calls))
		case ExecuteStage:
			ev, ok := d.execute(ctx, eff.Stage, eff.Calls)
			if !ok {
				return
			}
			d.commit(ev)
		case Stop:
			// The decider said stop on the event before: the run stops at
			// that moment.
			ev := d.add(Stopped)
			ev.Status, ev.Detail = eff.Status, eff.Detail
			d.sameMoment(ev)
			d.commit(ev)
		default:
			d.emit(Event{Kind: Interrupted, Failure: &Failure{Kind: FailModel, Message: "driver error: unknown effect " + string(eff.Kind)}})
		}
	}
	if err := d.flush(); err != nil {
		d.deliver(delivery{err: err})
		return
	}
	d.r.lastLogLen.Store(int32(min(len(d.log), 1024)))
	if st := d.log[0].Start; st != nil {
		d.r.lastMessages.Store(int32(min(max(len(d.state.Messages)-len(st.Messages), 0), 1024)))
	}
	d.r.lastCallIDs.Store(int32(len(d.state.callIDs.list)))
	d.deliver(delivery{res: d.result()})
}

// deliver hands Run its outcome; it happens once per run.
func (d *drive) deliver(out delivery) {
	d.out = out
	d.done.Done()
}

// result returns the run's result, in the room Run made for it if any.
func (d *drive) result() *Result {
	s := &d.state
	res := d.out.res
	if res == nil {
		res = new(Result)
	}
	*res = Result{
		RunID: s.RunID, Status: s.Status, Detail: s.Detail, Steps: s.Steps, ToolCalls: s.ToolCalls,
		Usage: s.Usage, Cost: s.Cost, Messages: s.History(), Pending: s.Pending,
		Duration: d.log[len(d.log)-1].At.Sub(d.log[0].At),
	}
	res.Events = d.log
	return res
}

// drive holds one run's mutable driver state.
type drive struct {
	r     *Runner
	ctx   context.Context
	watch *executor.Watchdog
	// done is released, and out set, once the run is over; before, out.res
	// may hold the room Run made for the result.
	done sync.WaitGroup
	out  delivery
	// idCtx is the run's context as far as its ID, which it carries.
	idCtx *runContext
	// flushed counts the events already in Config.Store.
	flushed int
	state   State
	log     []Event
	// logFree is set when the run's result did not take log, which a
	// later run of the drive may then reuse; logRoom is room Run made for
	// the header of a compact log.
	logFree bool

	// sc is made at the run's first batch.
	sc *scratch
	// req is every model request of the run in turn: a model must not
	// keep it (it must not keep req.Messages).
	req llm.Request
}

// scratch is a run's working space for its batches. Nothing in it reaches
// the run's result.
type scratch struct {
	// For the batch validate saw last (toolsFor): tools holds its calls'
	// tools as validate looked them up (nil for an unknown name), so that
	// later steps need not again; decisions and plan are room for what
	// authorize and plan record about it, nil once taken.
	toolsFor  *Batch
	tools     []*tool.Tool
	decisions []policy.Decision
	plan      *executor.Plan
	toolBuf   [4]*tool.Tool

	// takeover is d.continueAfter, bound once per run rather than once per
	// stage; stage is the stage being executed, for it.
	takeover func([]executor.Outcome)
	stage    int

	// planCalls is the planner's input when the planner is the runner's
	// own, which keeps none of it.
	planCalls [4]executor.PlanCall
	// calls holds a stage's calls while no handler of an earlier stage
	// may still read its call: lent is set once one may, and later stages
	// then have calls of their own.
	calls [4]executor.Call
	lent  bool
}

// scratch returns the run's scratch space, made on first use.
func (d *drive) scratch() *scratch {
	if d.sc == nil {
		d.sc = &scratch{takeover: d.continueAfter}
	}
	return d.sc
}

// toolOf returns the tool that call i of batch b names.
func (d *drive) toolOf(b *Batch, i int) *tool.Tool {
	if sc := d.sc; sc != nil && sc.toolsFor == b && i < len(sc.tools) {
		if t := sc.tools[i]; t != nil {
			return t
		}
	}
	t, _ := d.r.cfg.Tools.Lookup(b.Calls[i].Name)
	return t
}

// emit appends ev to the log, as add and commit do.
func (d *drive) emit(ev Event) Effect {
	p := d.add(ev.Kind)
	ev.Seq = p.Seq
	*p = ev
	d.commit(p)
	return d.state.next
}

// add appends the run's next event, zero but for its number and kind, for
// the caller to fill in and then commit. Built in place, an event (over
// 200 bytes) is not copied on its way into the log. It relies on the log's
// spare capacity being zero, as make and append leave it: the log only
// grows, and every event added is committed before the next is added.
func (d *drive) add(kind EventKind) *Event {
	n := len(d.log)
	if n == cap(d.log) {
		d.log = slices.Grow(d.log, 1)
	}
	d.log = d.log[:n+1]
	ev := &d.log[n]
	ev.Seq, ev.Kind = n+1, kind
	return ev
}

// commit stamps the event add returned, unless sameMoment did, shows it
// to the observer and hands it to the decider, which keeps the effect it
// calls for in d.state.next.
func (d *drive) commit(ev *Event) {
	if ev.At.IsZero() {
		ev.At = d.now()
	}
	if d.r.cfg.Observer != nil {
		d.r.cfg.Observer.Observe(d.ctx, ev)
	}
	Next(&d.state, ev)
}

func contextFailure(ctx context.Context) *Failure {
	err := ctx.Err()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return &Failure{Kind: FailDeadline, Message: err.Error()}
	}
	return &Failure{Kind: FailCanceled, Message: err.Error()}
}

// maxModelRetryWait caps one wait between model attempts, whatever a
// provider's Retry-After asks; the run's deadline bounds the total.
const maxModelRetryWait = 30 * time.Second

func (d *drive) requestModel(ctx context.Context) *Event {
	s := &d.state
	d.req = llm.Request{Model: d.r.cfg.ModelName, Messages: s.Messages, Tools: d.r.cfg.Tools.Definitions(), Step: s.Steps + 1}
	req := &d.req
	// On the runner's own clock, with nothing in between that takes time
	// (sameMoment), the request starts when the event before was stamped,
	// and its response is stamped when it ends: one clock reading a turn.
	start, quick := time.Time{}, d.quickClock()
	if quick {
		start = d.log[len(d.log)-1].At
	} else {
		start = time.Now()
	}
	wait := d.r.cfg.ModelRetryBackoff
	for attempt := 1; ; attempt++ {
		resp, err := d.r.cfg.Model.Generate(ctx, req)
		if err == nil && resp == nil {
			err = errors.New("the model client returned neither a response nor an error")
		}
		if err == nil {
			ev := d.add(ModelResponded)
			if quick {
				ev.At = d.watch.Now()
				ev.Latency = ev.At.Sub(start)
			} else {
				ev.Latency = time.Since(start)
			}
			ev.Response, ev.Attempts = resp, attempt
			return ev
		}
		if f := contextFailure(ctx); f != nil {
			return d.modelFailed(f, start, attempt)
		}
		if llm.IsRetryable(err) && attempt <= d.r.cfg.ModelRetries {
			w := wait
			var me *llm.Error
			if errors.As(err, &me) && me.RetryAfter > w {
				w = me.RetryAfter
			}
			wait *= 2
			t := time.NewTimer(min(w, maxModelRetryWait))
			select {
			case <-ctx.Done():
				t.Stop()
				return d.modelFailed(contextFailure(ctx), start, attempt)
			case <-t.C:
			}
			continue
		}
		return d.modelFailed(&Failure{Kind: FailModel, Message: fmt.Sprintf("model request failed after %d attempt(s): %v", attempt, err)},
			start, attempt)
	}
}

func (d *drive) modelFailed(f *Failure, start time.Time, attempts int) *Event {
	ev := d.add(ModelFailed)
	ev.Failure, ev.Latency, ev.Attempts = f, time.Since(start), attempts
	return ev
}

func (d *drive) validate() *Event {
	calls := d.state.Batch.Calls
	// The batch's checks, decisions and plan all go into the run's log:
	// for a few calls they come in one allocation, sized to fit.
	plan, checks, decisions := sized.New2[executor.Plan, CallCheck, policy.Decision](len(calls))
	sc := d.scratch()
	sc.toolsFor, sc.tools, sc.decisions, sc.plan = d.state.Batch, sc.toolBuf[:0], decisions, plan
	for i := range calls {
		c := &calls[i]
		t, ok := d.r.cfg.Tools.Lookup(c.Name)
		sc.tools = append(sc.tools, t)
		if !ok {
			continue
		}
		fp, err := t.Validate(c.Arguments)
		checks[i] = CallCheck{Known: true, Key: tool.CallKey(c.Name, fp)}
		if t.Effect() == tool.Write && err == nil {
			checks[i].WriteKey = d.writeKey(t, c, checks[i].Key)
		}
		if err != nil {
			checks[i].Problem = err.Error()
			var te *tool.Error
			if errors.As(err, &te) && te.Msg != "" {
				checks[i].Problem = te.Msg
			}
		}
	}
	ev := d.add(CallsValidated)
	ev.Checks = checks
	return ev
}

// writeKey derives a write's idempotency key: the tool's business key,
// else one from the request ID and the call's content, else run + call ID.
func (d *drive) writeKey(t *tool.Tool, c *llm.ToolCall, callKey uint64) string {
	if k := t.IdempotencyKey(c.Arguments); k != "" {
		return k
	}
	if id := d.r.cfg.RequestID; id != "" {
		b := make([]byte, 0, len(id)+len(c.Name)+18)
		b = append(append(append(append(b, id...), '/'), c.Name...), '/')
		return string(appendHex16(b, callKey))
	}
	return d.state.RunID + "/" + c.ID
}

func (d *drive) authorize(ctx context.Context, idx []int) *Event {
	b := d.state.Batch
	sc := d.scratch()
	decisions := sc.decisions
	if sc.toolsFor != b || len(decisions) != len(b.Calls) {
		// A batch validated before the run was resumed.
		decisions = make([]policy.Decision, len(b.Calls))
	}
	sc.decisions = nil
	for _, i := range idx {
		if d.r.cfg.Policy == nil {
			decisions[i] = policy.Decision{Verdict: policy.Allow, Rule: "none", Reason: "no policy configured"}
			continue
		}
		t := d.toolOf(b, i)
		dec, err := d.r.cfg.Policy.Decide(ctx, policy.Request{
			Identity: d.r.cfg.Identity, Call: b.Calls[i], Tool: t, Risk: t.Risk(),
		})
		if err != nil {
			if f := contextFailure(ctx); f != nil {
				ev := d.add(Interrupted)
				ev.Failure = f
				return ev
			}
			// Fail closed: a policy that cannot decide does not allow.
			dec = policy.Decision{Verdict: policy.Deny, Rule: "policy_error", Reason: "the policy engine failed: " + err.Error()}
		}
		decisions[i] = dec
	}
	ev := d.add(PolicyDecided)
	ev.Decisions = decisions
	if d.r.cfg.Policy == nil {
		d.sameMoment(ev)
	}
	return ev
}

// now reads the clock that stamps the run's events: Config.Now, or by
// default the watchdog's, which reads one clock where time.Now reads two.
func (d *drive) now() time.Time {
	if d.r.ownClock {
		return d.watch.Now()
	}
	return d.r.cfg.Now()
}

// sameMoment stamps ev, the event just added, with the time of the event
// before it, when nothing that takes time happened in between (no policy
// to ask, no observer to tell) and the clock is the runner's own: the log
// then reads the clock once for the two. A caller's clock is read for
// every event, as it may count on.
func (d *drive) sameMoment(ev *Event) {
	if d.r.ownClock && d.r.cfg.Observer == nil && len(d.log) >= 2 {
		ev.At = d.log[len(d.log)-2].At
	}
}

// quickClock reports whether the driver may take the time of the last
// event, or of a stage's last call, for the moment that follows it: on
// its own clock, with no observer to tell and no store to write between
// the two.
func (d *drive) quickClock() bool {
	return d.r.ownClock && d.r.cfg.Observer == nil && d.r.cfg.Store == nil && len(d.log) > 0
}

func (d *drive) plan(idx []int) *Event {
	b := d.state.Batch
	sc := d.scratch()
	var pcs []executor.PlanCall
	if d.r.ownPlanner && len(idx) <= len(sc.planCalls) {
		pcs = sc.planCalls[:len(idx)]
	} else {
		pcs = make([]executor.PlanCall, len(idx))
	}
	for j, i := range idx {
		t := d.toolOf(b, i)
		pcs[j] = executor.PlanCall{Call: b.Calls[i], Tool: t, NeedsConfirmation: i < len(b.Approved) && b.Approved[i]}
	}
	p := sc.plan
	if sc.toolsFor != b || p == nil {
		p = new(executor.Plan)
	}
	sc.plan = nil
	*p = executor.PlanPart(d.r.cfg.Planner, pcs, idx)
	ev := d.add(StagePlanned)
	ev.Plan = p
	return ev
}

// execute runs one stage on the driver's goroutine (spilling onto more for
// a slow parallel stage) under the watchdog; ok=false means the watchdog
// has handed the run to another goroutine, which continues from this
// stage's end.
func (d *drive) execute(ctx context.Context, stage int, idx []int) (ev *Event, ok bool) {
	b := d.state.Batch
	sc := d.scratch()
	var calls []executor.Call
	if len(idx) <= len(sc.calls) && !sc.lent {
		calls = sc.calls[:len(idx)]
	} else {
		calls = make([]executor.Call, len(idx))
	}
	for j, i := range idx {
		d.call(&calls[j], b, i, d.toolOf(b, i))
	}
	sc.stage = stage
	// On the runner's own clock, with nothing in between that takes time,
	// the stage starts when the event before (its plan, or the stage
	// before it) was stamped.
	var start time.Time
	if d.quickClock() {
		start = d.log[len(d.log)-1].At
	}
	outs, ok := d.r.cfg.Executor.RunStageInline(ctx, calls, d.watch, start, sc.takeover)
	if !ok {
		return nil, false
	}
	ev = d.stageFinished(stage, outs)
	if ev.Failure != nil || mayStillRun(calls, outs) {
		sc.lent = true
	}
	return ev, true
}

// appendHex16 appends k as 16 lowercase hex digits, as fmt's %016x does,
// without fmt's cost on every write call.
func appendHex16(b []byte, k uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[k>>uint(shift)&0xf])
	}
	return b
}

// mayStillRun reports whether a handler of a stage that is over may still
// be running, and reading its call (executor.RunStageInline). The watchdog
// gives up on a handler only when it overran its timeout or the run's
// context ended (executor.RunInline; the caller checks the context), and
// the call's outcome then says so, unless the ledger settled a keyed
// write's: rather than tell those apart, any keyed write counts.
func mayStillRun(calls []executor.Call, outs []executor.Outcome) bool {
	for i := range calls {
		if calls[i].IdempotencyKey != "" {
			return true
		}
	}
	for i := range outs {
		if outs[i].TimedOut || outs[i].StopRun {
			return true
		}
	}
	return false
}

// call sets c, in place (a Call is 120 bytes), to call i of batch b.
func (d *drive) call(c *executor.Call, b *Batch, i int, t *tool.Tool) {
	*c = executor.Call{Call: b.Calls[i], Tool: t, Timeout: d.r.budgets.ToolTimeout}
	if i < len(b.Checks) && b.Checks[i].WriteKey != "" {
		c.IdempotencyKey, c.RunID = b.Checks[i].WriteKey, d.state.RunID
		var buf [16]byte
		c.ArgsHash = string(appendHex16(buf[:0], b.Checks[i].Key))
	}
}

func (d *drive) stageFinished(stage int, outs []executor.Outcome) *Event {
	ev := d.add(StageFinished)
	ev.Stage, ev.Outcomes, ev.Failure = stage, outs, contextFailure(d.ctx)
	if d.quickClock() {
		// The stage finished when its last call did, as that call's end
		// was read. A call that did not run in this stage (no duration,
		// or an outcome the ledger replayed from before) leaves the
		// reading to commit.
		planned := d.log[len(d.log)-2].At
		for i := range outs {
			o := &outs[i]
			end := o.Started.Add(o.Duration)
			if o.Duration <= 0 || o.Replayed || end.Before(planned) {
				ev.At = time.Time{}
				break
			}
			if end.After(ev.At) {
				ev.At = end
			}
		}
	}
	return ev
}

// continueAfter continues the run after the watchdog gave up on a handler
// of the current stage. It runs on the watchdog's goroutine.
func (d *drive) continueAfter(outs []executor.Outcome) {
	// The handler given up on still has its call.
	d.sc.lent = true
	d.commit(d.stageFinished(d.sc.stage, outs))
	d.loop()
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}
