package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// Options configure an Executor. The zero value is usable; see the field
// comments for defaults.
type Options struct {
	// DefaultTimeout bounds a call whose tool sets no timeout. Default 30s.
	DefaultTimeout time.Duration
	// MaxRetries is how many times a rate-limited or unavailable call is
	// tried again. Default 2; negative means never.
	MaxRetries int
	// RetryBackoff is the first wait between attempts; it doubles each time
	// and is raised to a rate limiter's Retry-After. Default 100ms.
	RetryBackoff time.Duration
	// MaxRetryWait caps a single wait. Default 5s.
	MaxRetryWait time.Duration
	// MaxParallel caps how many calls of one stage run at once. Default 4.
	MaxParallel int
	// SpillAfter is how long RunStage runs a stage's batch on one worker
	// goroutine, or works through the rest of the stage on the calling
	// goroutine alone, before more goroutines join in. Default 100µs.
	SpillAfter time.Duration
	// Ledger is the idempotency ledger for write calls. Default an
	// in-memory ledger owned by the executor.
	Ledger store.Ledger
	// LedgerRetention is how long finished keys are kept; older ones are
	// pruned as the executor goes. Default 7 days; negative keeps them
	// forever.
	LedgerRetention time.Duration
	// LedgerTimeout bounds each ledger call, whether or not the ledger
	// honours its context: a frozen store then makes a write fail (or its
	// outcome unknown) instead of holding the run. The record of a
	// write's outcome, made after the run's context may have ended, is
	// also bounded by that context's deadline plus store.DeadlineGrace.
	// Default store.DefaultCallTimeout.
	LedgerTimeout time.Duration
	// MaxResultBytes caps the size of a result the model is shown, for
	// tools that set no cap of their own (tool.Definition.MaxResultBytes):
	// a longer result is cut to its head, in a JSON object that says how
	// long it was, and the outcome records how much was cut. A model gains
	// little from a result this long and pays for every byte on every
	// later turn. Default 64 KiB; negative means no cap.
	MaxResultBytes int
	// Now is the clock that stamps outcomes (Outcome.Started, Duration).
	// Default time.Now. Timeouts and the ledger always use the real clock.
	Now func() time.Time
}

// Executor runs tool calls. It is safe for concurrent use.
type Executor struct {
	opts      Options
	realClock bool // opts.Now is time.Now: one reading serves both clocks
	ledger    store.Ledger
	lastPrune atomic.Int64 // unix nanoseconds of the last ledger prune

	// running counts, per idempotency key, write handlers of this process
	// that have not returned yet, including ones given up on after a
	// timeout: while one runs, its write may still land, so no other
	// attempt may take the key over.
	mu      sync.Mutex
	running map[string]int
}

func (e *Executor) begin(key string) {
	e.mu.Lock()
	if e.running == nil {
		e.running = map[string]int{}
	}
	e.running[key]++
	e.mu.Unlock()
}

func (e *Executor) end(key string) {
	e.mu.Lock()
	if e.running[key]--; e.running[key] <= 0 {
		delete(e.running, key)
	}
	e.mu.Unlock()
}

// stillRunning reports whether a handler of this process is still working
// on the write with this key.
func (e *Executor) stillRunning(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running[key] > 0
}

// Running reports whether a write handler of this executor is still
// running under the idempotency key: one that ran past its timeout and was
// left behind, whose write may yet land. Compensation asks it before it
// trusts a status look-up that found nothing.
func (e *Executor) Running(key string) bool { return e.stillRunning(key) }

// New returns an executor; opts may be nil.
func New(opts *Options) *Executor {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = 30 * time.Second
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 2
	} else if o.MaxRetries < 0 {
		o.MaxRetries = 0
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 100 * time.Millisecond
	}
	if o.MaxRetryWait <= 0 {
		o.MaxRetryWait = 5 * time.Second
	}
	if o.MaxParallel <= 0 {
		o.MaxParallel = 4
	}
	if o.SpillAfter <= 0 {
		o.SpillAfter = 100 * time.Microsecond
	}
	if o.Ledger == nil {
		o.Ledger = store.NewMemory()
	}
	switch {
	case o.LedgerRetention == 0:
		o.LedgerRetention = 7 * 24 * time.Hour
	case o.LedgerRetention < 0:
		o.LedgerRetention = 0
	}
	realClock := o.Now == nil
	if realClock {
		o.Now = time.Now
	}
	if o.MaxResultBytes == 0 {
		o.MaxResultBytes = 64 << 10
	}
	if o.LedgerTimeout <= 0 {
		o.LedgerTimeout = store.DefaultCallTimeout
	}
	return &Executor{opts: o, realClock: realClock, ledger: store.BoundLedger(o.Ledger, o.LedgerTimeout)}
}

// Options returns the executor's effective options, defaults filled in.
func (e *Executor) Options() Options { return e.opts }

// Call is one authorized call to execute. Its JSON form leaves the tool
// out: a driver that sends calls to another process (a Temporal activity)
// sends them as JSON, and the receiver looks the tool up by name.
type Call struct {
	Call llm.ToolCall `json:"call"`
	Tool *tool.Tool   `json:"-"`
	// Timeout overrides the tool's timeout when positive.
	Timeout time.Duration `json:"timeout,omitempty"`
	// IdempotencyKey, for a write, names the write in the ledger; a write
	// without one runs unguarded. ArgsHash identifies its arguments, and
	// RunID is recorded with the key.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	ArgsHash       string `json:"args_hash,omitempty"`
	RunID          string `json:"run_id,omitempty"`
}

// guarded reports whether the call goes through the idempotency ledger.
func (c *Call) guarded() bool { return c.IdempotencyKey != "" && c.Tool.Effect() == tool.Write }

// Outcome is what happened to one call.
type Outcome struct {
	Result   llm.ToolResult `json:"result"`
	Attempts int            `json:"attempts"`
	// Started is when the executor began the call; Duration is how long
	// it took, retries included.
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
	// Err is the full error for logs; the model sees Result only.
	Err string `json:"err,omitempty"`
	// IdempotencyKey is the write's key in the ledger, if it has one.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// TimedOut is set when the last attempt ran past its timeout.
	TimedOut bool `json:"timed_out,omitempty"`
	// StopRun is set when the run must stop because of this call: the tool
	// timed out and its setting says stop, or the run's context ended.
	StopRun bool `json:"stop_run,omitempty"`
	// Replayed is set when the result came from the ledger: the write had
	// already been done, and was not executed again.
	Replayed bool `json:"replayed,omitempty"`
	// Reconciled is set when the tool's status look-up settled a write
	// whose outcome was unknown.
	Reconciled bool `json:"reconciled,omitempty"`
	// OutcomeUnknown is set when a write may or may not have happened and
	// nothing could settle it; the run must stop.
	OutcomeUnknown bool `json:"outcome_unknown,omitempty"`
	// CutBytes is how many bytes of the tool's result were left out of
	// Result.Content because the result passed its cap (see
	// Options.MaxResultBytes); zero when nothing was cut.
	CutBytes int `json:"cut_bytes,omitempty"`
}

// RunStage executes the calls of one stage, at most MaxParallel at once,
// and returns their outcomes in the order of calls, whatever order they
// finished in.
//
// The calling goroutine binds every call (tool.Tool.Bind) and then runs
// the stage in two parts. First the batch: the calls whose handlers need
// a goroutine other than the caller's anyway (the tool does not declare
// HonorsContext, the call is not a write guarded by the ledger, and it
// could be bound). One worker goroutine runs their handlers one after
// another, and the caller waits for the answers on one channel, with one
// timer set to the earliest time it must act, settling each answer as it
// comes; if the batch is still running SpillAfter later, more workers
// join, up to MaxParallel. A stage of quick calls thus costs one
// goroutine and about one park of the caller, however many calls it has,
// and slow calls still run side by side. A call past its deadline is given
// up on as in Run: its worker stays with the handler, and another takes
// the calls still queued.
//
// Then the rest, in stage order: the calls left out of the batch, and
// those of the batch whose first attempt failed in a way that is tried
// again (their retries, pauses included). The caller works through them
// itself; if it is still at it SpillAfter later, up to MaxParallel-1
// helper goroutines join in on the calls not yet started. A handler that
// runs on the caller then costs no helper for a quick stage. The caller
// notices the spill time while it is held (a handler that runs on it, a
// retry's pause, the ledger) by a timer set as it is first held.
func (e *Executor) RunStage(ctx context.Context, calls []Call) []Outcome {
	return e.RunStageWatched(ctx, calls, nil)
}

// CallEvent tells a stage's watcher that one of its calls started or
// finished.
type CallEvent struct {
	// Index is the call's index in the stage's calls.
	Index int
	// Outcome is nil when the call starts, and its outcome once it has
	// finished. It is the outcome RunStageWatched returns: read it, do
	// not change it.
	Outcome *Outcome
}

// RunStageWatched is RunStage that also tells watch, if not nil, when each
// call starts (before its first attempt, or its look-up in the ledger)
// and when it finishes, with its outcome: the hook for showing tool
// activity while a stage runs, which the outcomes alone show only once
// the whole stage is over. watch is called from whichever goroutine runs
// the call, but never by two at once, so it needs no lock of its own; a
// call's start comes before its finish, and every call of the stage has
// both before RunStageWatched returns. The stage waits while watch runs,
// so it should be quick.
func (e *Executor) RunStageWatched(ctx context.Context, calls []Call, watch func(CallEvent)) []Outcome {
	out := make([]Outcome, len(calls))
	if len(calls) <= 1 || e.opts.MaxParallel == 1 {
		// One goroutine runs the calls in turn: no stage to share.
		var w waiter
		for i := range calls {
			if watch != nil {
				watch(CallEvent{Index: i})
			}
			out[i] = e.runCall(ctx, calls[i], nil, &w)
			if watch != nil {
				watch(CallEvent{Index: i, Outcome: &out[i]})
			}
		}
		w.stop()
		return out
	}
	s := &stage{e: e, ctx: ctx, calls: calls, watch: watch, out: out}
	s.first = make([]prepared, len(calls))
	for i := range calls {
		s.first[i].binding = e.bind(&calls[i])
	}
	var w waiter
	s.batch(&w)
	if s.left {
		s.spillAt = time.Now().Add(e.opts.SpillAfter)
		w.stage = s
		s.work(&w)
	}
	w.stop()
	if s.spillTimer != nil {
		s.spillTimer.Stop()
	}
	s.mu.Lock()
	s.over = true
	s.mu.Unlock()
	s.wg.Wait()
	return s.out
}

// stage is one RunStageWatched: everything its goroutines share, in one
// allocation.
type stage struct {
	e       *Executor
	ctx     context.Context
	calls   []Call
	watch   func(CallEvent)
	out     []Outcome
	first   []prepared       // made ahead by the caller, one per call
	answers chan batchAnswer // the batch's workers' answers
	// Under mu, with the batch's call states and what a worker sets as it
	// starts a call (prepared.ctx, the outcome's Started):
	unstarted int32 // calls of the batch no worker has started
	cursor    int32 // no call before it is queued

	wmu sync.Mutex // serializes watch
	// The rest's calls are claimed by index, so each runs exactly once
	// whichever goroutine gets to it first.
	next atomic.Int32
	// Helpers are added under mu, once (spilled), and only before over is
	// set, so that every Add comes before the Wait in RunStageWatched.
	mu      sync.Mutex
	over    bool
	spilled bool
	left    bool // the batch left calls to the rest (prepared.rest)
	wg      sync.WaitGroup

	// spillAt is when helpers join; spillTimer, made and read by the
	// caller alone, brings them in if the caller is held (waiter.hold).
	spillAt    time.Time
	spillTimer *time.Timer
}

// prepared is what a stage makes ahead for a call's first attempt, in one
// allocation for the whole stage: the binding, and the handler's context.
// A handler given up on may keep its context past the stage, and with it
// the stage's prepared calls (and, on a batch's worker, the whole stage):
// a few hundred bytes per call until it returns.
//
// It also holds where the call stands in the stage: its state in the
// batch (shared with the batch's workers, under stage.mu), rest for a
// call left to the rest of the stage, and resume for one whose first
// attempt, in the batch, is to be tried again. (While a call of the batch
// runs, its outcome's Started holds when it began.)
type prepared struct {
	binding
	ctx    callContext
	resume *tries
	state  uint8 // in the batch, under stage.mu
	rest   bool
	drop   bool // given up on in the batch, its watcher not yet told
}

// tries is how far a call's attempts have got: n is the attempt to make
// next, start when the call began, wait the next retry's backoff, and
// pause how long to wait before attempt n.
type tries struct {
	n           int
	start       time.Time
	wait, pause time.Duration
}

// batchAnswer is the answer of a batch's handler, with its call's index.
type batchAnswer struct {
	i int
	answer
}

// tell calls the watcher, if there is one, never two at once.
func (s *stage) tell(ev CallEvent) {
	if s.watch != nil {
		s.wmu.Lock()
		s.watch(ev)
		s.wmu.Unlock()
	}
}

// batched reports whether call i goes into the batch: its handler runs on
// a goroutine other than the caller's whatever happens, and its first
// attempt needs nothing of the caller but to wait.
func (s *stage) batched(i int) bool {
	c := &s.calls[i]
	return s.first[i].err == nil && !c.Tool.HonorsContext() && !c.guarded()
}

// The states of a call of the batch (prepared.state), under stage.mu.
const (
	notBatched uint8 = iota
	queued           // waiting for a worker
	running          // its handler runs on a worker
	answered         // its answer is on its way to the caller
	abandoned        // given up on by the caller, or left to the rest
	settled          // its answer was taken by the caller
)

// batch runs the stage's batch (see RunStage) and marks the calls it did
// not finish for the rest. Workers run the handlers, one after another;
// the caller waits for their answers on one channel, buffered for all of
// them, with w's timer set to the earliest time it must act: a running
// call's deadline, the soonest a queued call's could be, or the spill.
//
// A worker whose call is given up on stays with its handler, drops its
// answer when the handler returns, and does no more; the caller starts
// another in its place if calls are still queued. So at most MaxParallel
// handlers run for the stage, not counting those given up on.
func (s *stage) batch(w *waiter) {
	e, ctx := s.e, s.ctx
	n := 0
	for i := range s.calls {
		if s.batched(i) && ctx.Err() == nil {
			s.first[i].state = queued
			n++
		} else {
			s.leave(i) // runCall also reports a call the ended run skipped
		}
	}
	if n == 0 {
		return
	}
	s.unstarted = int32(n)
	s.answers = make(chan batchAnswer, n)
	worker := s.worker // one func value for all workers
	live := 1          // workers not held by a call given up on
	// floor is a time when every call still queued had not started: the
	// batch's start, then the caller's last wake on its timer.
	floor := time.Now()
	go worker()
	spillAt, spilled := floor.Add(e.opts.SpillAfter), false
	for pending := n; pending > 0; {
		s.mu.Lock()
		var due time.Time
		for i := range s.first {
			var d time.Time
			switch p := &s.first[i]; p.state {
			case running:
				d = p.ctx.deadline
			case queued:
				// A worker may start it while the caller waits: its deadline
				// is no sooner than this. (The timer may thus fire before any
				// deadline, when a worker is slower than a queued call's
				// timeout; the floor then moves up.)
				d = floor.Add(e.Timeout(&s.calls[i]))
			default:
				continue
			}
			if due.IsZero() || d.Before(due) {
				due = d
			}
		}
		if !spilled && s.unstarted > 0 && (due.IsZero() || spillAt.Before(due)) {
			due = spillAt
		}
		s.mu.Unlock()
		var timer <-chan time.Time // none while every pending call has answered
		if !due.IsZero() {
			timer = w.until(due)
		}
		select {
		case a := <-s.answers:
			// Only a call's worker sends its answer, and only if the call
			// was not given up on.
			s.mu.Lock()
			s.first[a.i].state = settled
			s.mu.Unlock()
			pending--
			s.settleBatched(a.i, a.answer)
		case <-ctx.Done():
			// As attempt: the calls that started end with the run, the
			// others are left to runCall, which reports them skipped.
			s.mu.Lock()
			for i := range s.first {
				switch p := &s.first[i]; p.state {
				case running, answered:
					p.state, p.drop = abandoned, true
					s.out[i] = e.ended(&s.calls[i], 1, s.out[i].Started, ctx.Err())
				case queued:
					p.state = abandoned
					s.leave(i)
				}
			}
			s.unstarted = 0
			s.mu.Unlock()
			s.dropped()
			return
		case <-timer:
			w.armed = false
			s.mu.Lock()
			now := time.Now()
			floor = now
			gone := 0
			for i := range s.first {
				p := &s.first[i]
				if p.state != running || now.Before(p.ctx.deadline) {
					continue
				}
				// Given up on, as attempt does: the handler finishes alone.
				p.state, p.drop = abandoned, true
				gone++
				c, start := &s.calls[i], s.out[i].Started
				if err := ctx.Err(); err != nil {
					s.out[i] = e.ended(c, 1, start, err)
				} else {
					s.out[i] = e.timedOut(c, 1, start, e.Timeout(c), context.DeadlineExceeded)
				}
			}
			live -= gone
			pending -= gone
			more := 0
			if s.unstarted > 0 {
				want := live + gone // replace the workers held
				if !spilled && !now.Before(spillAt) {
					spilled, want = true, e.opts.MaxParallel
				}
				more = min(want, e.opts.MaxParallel, live+int(s.unstarted)) - live
			}
			s.mu.Unlock()
			s.dropped()
			for range more {
				live++
				go worker()
			}
		}
	}
}

// dropped ends the contexts of the calls the caller gave up on and tells
// the watcher of their outcomes, made under mu.
func (s *stage) dropped() {
	for i := range s.first {
		if p := &s.first[i]; p.drop {
			p.drop = false
			p.ctx.end()
			s.tell(CallEvent{Index: i, Outcome: &s.out[i]})
		}
	}
}

// worker is a batch's worker: it runs queued calls' handlers one after
// another until none is left, the run has ended, or the caller gives up
// on the call it runs.
func (s *stage) worker() {
	e := s.e
	for {
		// A call's start is told before its claim is seen by the caller,
		// which tells of its finish: the watcher's lock is taken first.
		if s.watch != nil {
			s.wmu.Lock()
		}
		s.mu.Lock()
		i := -1
		if s.ctx.Err() == nil {
			for ; int(s.cursor) < len(s.first); s.cursor++ {
				if s.first[s.cursor].state == queued {
					i = int(s.cursor)
					s.cursor++
					break
				}
			}
		}
		if i < 0 {
			s.mu.Unlock()
			if s.watch != nil {
				s.wmu.Unlock()
			}
			return
		}
		p, c := &s.first[i], &s.calls[i]
		p.state = running
		s.unstarted--
		now := time.Now()
		if s.out[i].Started = now; !e.realClock {
			s.out[i].Started = e.opts.Now()
		}
		p.ctx.init(s.ctx, now.Add(e.Timeout(c)))
		s.mu.Unlock()
		if s.watch != nil {
			s.watch(CallEvent{Index: i})
			s.wmu.Unlock()
		}
		out, err := e.invoke(&p.ctx, handling{name: c.Call.Name}, p.call)
		s.mu.Lock()
		gone := p.state != running
		if !gone {
			p.state = answered
		}
		s.mu.Unlock()
		if gone {
			return // the caller has moved on, and started another worker if needed
		}
		s.answers <- batchAnswer{i, answer{out, err}}
	}
}

// settleBatched settles the answer of call i's first attempt, run in the
// batch, as run would: a failure that is tried again leaves the call to
// the rest of the stage, with its attempts so far.
func (s *stage) settleBatched(i int, a answer) {
	e, c, p := s.e, &s.calls[i], &s.first[i]
	content, late, err := e.settle(s.ctx, p.ctx.end(), c, a)
	t := tries{n: 1, start: s.out[i].Started, wait: e.opts.RetryBackoff}
	o, over := e.judge(s.ctx, c, &t, e.Timeout(c), content, late, err)
	if !over {
		t.n++
		resume := t // on the heap only for a retry
		p.resume = &resume
		s.leave(i)
		return
	}
	s.finish(i, o)
}

// leave leaves call i to the rest of the stage.
func (s *stage) leave(i int) {
	s.first[i].rest = true
	s.left = true
}

// finish records call i's outcome and tells the watcher.
func (s *stage) finish(i int, o Outcome) {
	s.out[i] = o
	s.tell(CallEvent{Index: i, Outcome: &s.out[i]})
}

// run runs call i, telling the watcher; a call whose first attempt was
// made in the batch has been told of already, and goes on from there.
func (s *stage) run(i int, first *prepared, w *waiter) {
	if first.resume == nil {
		s.tell(CallEvent{Index: i})
	}
	s.out[i] = s.e.runCall(s.ctx, s.calls[i], first, w)
	s.tell(CallEvent{Index: i, Outcome: &s.out[i]})
}

// work runs the rest's calls not yet claimed, in stage order, until there
// are none left.
func (s *stage) work(w *waiter) {
	for {
		i := int(s.next.Add(1)) - 1
		if i >= len(s.calls) {
			return
		}
		if s.first[i].rest {
			s.run(i, &s.first[i], w)
		}
	}
}

// help is a helper's work.
func (s *stage) help() {
	var w waiter
	s.work(&w)
	w.stop()
}

// spill brings in helpers for a stage still running after SpillAfter.
func (s *stage) spill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over || s.spilled {
		return
	}
	s.spilled = true
	help := s.help // one closure for all helpers
	for range min(s.e.opts.MaxParallel, len(s.calls)) - 1 {
		s.wg.Go(help)
	}
}

// waiter is what a goroutine that drives calls keeps from one call to the
// next for waiting on handlers that run on goroutines of their own: a
// timer, and the channel the last handler answered on, which nobody else
// holds once its answer has been received. A handler given up on may
// still answer later, so its channel is dropped.
//
// The timer is left running from one call to the next while it fires no
// later than the next wait needs: a goroutine that drives quick calls
// sets it once, and calls stop when done. It may thus fire for a call
// that has finished; a wait that hears it checks the time (wake).
type waiter struct {
	timer *time.Timer
	at    time.Time // when the timer fires, while armed
	armed bool
	done  chan answer
	// stage is set for a stage's caller in the stage's rest until the
	// stage's spill timer is set (hold).
	stage *stage
}

// hold is called before the caller does something that may hold it (a
// handler that runs on it, a retry's pause, the ledger): the stage's
// spill then gets a timer. w may be nil. Every call the batch leaves to
// the rest of a stage comes here before it waits on anything (a call
// whose handler runs on a goroutine of its own is there for a retry, or
// as a guarded write), so a stage whose calls all finish in the batch
// costs no spill timer, and one whose rest is quick costs one.
func (w *waiter) hold() {
	if w == nil || w.stage == nil {
		return
	}
	s := w.stage
	w.stage = nil
	s.spillTimer = time.AfterFunc(time.Until(s.spillAt), s.spill)
}

// channel returns a channel for the next handler's answer.
func (w *waiter) channel() chan answer {
	if w.done == nil {
		w.done = make(chan answer, 1) // buffered: an abandoned handler never blocks
	}
	return w.done
}

// start readies the timer for a wait on a handler due at due (now is the
// time) and returns its channel: the timer is set anew only if it is not
// running or would fire later than due. (Since Go 1.23 a timer that is
// reset or stopped delivers no stale value.)
func (w *waiter) start(now, due time.Time) <-chan time.Time {
	if w.armed && !due.Before(w.at) {
		return w.timer.C
	}
	d := due.Sub(now)
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	w.at, w.armed = due, true
	return w.timer.C
}

// until is start for a wait that reads the clock only if the timer must
// be set anew.
func (w *waiter) until(due time.Time) <-chan time.Time {
	if w.armed && !due.Before(w.at) {
		return w.timer.C
	}
	return w.start(time.Now(), due)
}

// wake is called when the timer has fired during the wait on a handler
// due at due: it reports whether the handler is late; if not, the wait
// goes on, on the channel it returns.
func (w *waiter) wake(due time.Time) (late bool, c <-chan time.Time) {
	w.armed = false
	now := time.Now()
	if !now.Before(due) {
		return true, nil
	}
	return false, w.start(now, due)
}

// abandon drops the channel of a handler given up on, which may still
// answer.
func (w *waiter) abandon() { w.done = nil }

// stop stops the timer once the goroutine is done with calls.
func (w *waiter) stop() {
	if w.armed {
		w.timer.Stop()
		w.armed = false
	}
}

// Run executes one call: attempts with backoff while the failure is
// retryable, then a classified outcome. A write with an idempotency key
// goes through the ledger. Run returns by the call's timeout, or soon
// after ctx ends, even if the handler ignores its context (see attempt).
func (e *Executor) Run(ctx context.Context, c Call) Outcome {
	return e.runCall(ctx, c, nil, nil)
}

// runCall is Run with the first attempt's binding and context, if the
// caller prepared them,
// and the calling goroutine's waiter, if it keeps one (nil: a fresh one).
func (e *Executor) runCall(ctx context.Context, c Call, first *prepared, w *waiter) Outcome {
	if c.guarded() {
		return e.guardedWrite(ctx, c, first, w)
	}
	return e.run(ctx, c, first, w)
}

// binding is an attempt's call of the handler, bound to its arguments, or
// why it could not be bound.
type binding struct {
	call tool.Bound
	err  error
}

// bind binds c's handler to its arguments (see tool.Tool.Bind), turning a
// panic into an error.
func (e *Executor) bind(c *Call) (b binding) {
	defer func() {
		if p := recover(); p != nil {
			b = binding{err: fmt.Errorf("tool %q panicked binding its arguments: %v", c.Call.Name, p)}
		}
	}()
	call, err := c.Tool.Bind(c.Call.Arguments)
	return binding{call, err}
}

func (e *Executor) run(ctx context.Context, c Call, first *prepared, w *waiter) Outcome {
	timeout := e.Timeout(&c)
	var t tries
	if first != nil && first.resume != nil {
		t = *first.resume // the batch made the first attempt
	} else {
		t = tries{n: 1, start: e.opts.Now(), wait: e.opts.RetryBackoff}
	}
	for ; ; t.n++ {
		if t.pause > 0 {
			w.hold()
			sleep(ctx, t.pause) // if the run ends meanwhile, the check below reports it
			t.pause = 0
		}
		if err := ctx.Err(); err != nil {
			// The run ended before this attempt: do not start the handler,
			// since the call is reported as skipped.
			return e.ended(&c, t.n-1, t.start, err)
		}
		// Each attempt decodes the arguments afresh, so that nothing a
		// handler did to its input reaches a retry.
		var b *binding
		var cctx *callContext // nil: attempt makes one
		if first == nil || t.n > 1 {
			nb := e.bind(&c)
			b = &nb
		} else {
			b, cctx = &first.binding, &first.ctx
		}
		var content json.RawMessage
		var err error
		var late bool
		if b.err != nil {
			err = b.err
		} else {
			content, late, err = e.attempt(ctx, &c, b.call, timeout, w, cctx)
		}
		if o, over := e.judge(ctx, &c, &t, timeout, content, late, err); over {
			return o
		}
	}
}

// judge makes the outcome of a call whose attempt t.n has returned, and
// reports whether the call is over; if it is not, the attempt is tried
// again after t.pause.
func (e *Executor) judge(ctx context.Context, c *Call, t *tries, timeout time.Duration, content json.RawMessage, late bool, err error) (Outcome, bool) {
	switch {
	case err == nil:
		return e.succeeded(c, t.n, t.start, content), true
	case ctx.Err() != nil:
		return e.ended(c, t.n, t.start, ctx.Err()), true
	case late:
		return e.timedOut(c, t.n, t.start, timeout, err), true
	}
	if d, retry := e.retryWait(err, t.n, &t.wait); retry {
		t.pause = d
		return Outcome{}, false
	}
	return e.failed(c, t.n, t.start, err), true
}

// Timeout is how long one attempt of c may take: c.Timeout, else its
// tool's, else Options.DefaultTimeout. The loop's compensations and the
// Temporal activities that wait out or bound a call go by it too.
func (e *Executor) Timeout(c *Call) time.Duration {
	switch {
	case c.Timeout > 0:
		return c.Timeout
	case c.Tool.Timeout() > 0:
		return c.Tool.Timeout()
	}
	return e.opts.DefaultTimeout
}

// retryWait says whether a failed attempt is tried again and after how
// long: exponential backoff from *wait, raised to a Retry-After, capped.
func (e *Executor) retryWait(err error, attempt int, wait *time.Duration) (time.Duration, bool) {
	if !tool.Retryable(tool.KindOf(err)) || attempt > e.opts.MaxRetries {
		return 0, false
	}
	d := *wait
	var te *tool.Error
	if errors.As(err, &te) && te.RetryAfter > d {
		d = te.RetryAfter
	}
	*wait *= 2
	return min(d, e.opts.MaxRetryWait), true
}

// outcome is an Outcome for c with the given result status, error kind and
// message, timed from start on the executor's clock.
func (e *Executor) outcome(c *Call, attempts int, start time.Time, status llm.ResultStatus, kind llm.ErrorKind, msg string) Outcome {
	return Outcome{
		Result: llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Status: status, ErrorKind: kind,
			Content: llm.ErrorContent(kind, msg)},
		Attempts: attempts, Started: start, Duration: e.opts.Now().Sub(start),
	}
}

// tooDeep is the nesting past which a result is kept as a string.
var tooDeep = tool.Limits{MaxDepth: 1000}

// succeeded is the outcome of a call whose handler returned content.
func (e *Executor) succeeded(c *Call, attempts int, start time.Time, content json.RawMessage) Outcome {
	if len(content) == 0 {
		content = json.RawMessage("null")
	} else if !c.Tool.JSONResults() && !json.Valid(content) || tooDeep.Check(content) != nil {
		// A raw handler answered with something that is not JSON, or with
		// JSON nested deeper than a log event holding it could be read
		// back (encoding/json stops at 10,000 levels, counted from the
		// event's root): keep it, as a JSON string, so that the result can
		// be sent, stored and replayed.
		b, _ := json.Marshal(string(content)) // a string always encodes
		content = b
	}
	limit := c.Tool.MaxResultBytes()
	if limit == 0 {
		limit = e.opts.MaxResultBytes
	}
	var cut int
	if limit > 0 && len(content) > limit {
		content, cut = cutResult(content, limit)
	}
	return Outcome{
		Result:   llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Status: llm.StatusOK, Content: content},
		Attempts: attempts, Started: start, Duration: e.opts.Now().Sub(start), CutBytes: cut,
	}
}

// cutResult shortens content, a JSON result longer than limit bytes, to
// an object of at most limit bytes (when limit leaves room for the object
// at all) that says how long the result was and holds as much of its head
// as fits, as a string cut between two characters. It returns the object
// and how many bytes of content it leaves out.
func cutResult(content json.RawMessage, limit int) (json.RawMessage, int) {
	type cut struct {
		Truncated bool   `json:"truncated"`
		Bytes     int    `json:"bytes"`
		Note      string `json:"note"`
		Head      string `json:"head"`
	}
	v := cut{Truncated: true, Bytes: len(content),
		Note: fmt.Sprintf("the result was %d bytes, over the limit of %d; head is its start", len(content), limit)}
	encode := func(keep int) json.RawMessage {
		v.Head = string(content[:keep])
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v) // strings and ints always encode
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	align := func(n int) int { // never split a character
		for n > 0 && !utf8.RuneStart(content[n]) {
			n--
		}
		return n
	}
	// Escaping lengthens the head by an amount that depends on its bytes:
	// search for the longest head that fits. limit < len(content), so
	// every index below is in range.
	lo, hi := 0, limit // the answer is in [lo, hi]; lo always fits or is 0
	for lo < hi {
		mid := align(lo + (hi-lo+1)/2)
		if mid <= lo {
			// No character boundary in (lo, mid]: try the next one up.
			mid = lo + 1
			for mid < hi && !utf8.RuneStart(content[mid]) {
				mid++
			}
			if !utf8.RuneStart(content[mid]) {
				break
			}
		}
		if len(encode(mid)) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return encode(lo), len(content) - lo
}

// ended reports a call cut short because the run itself was canceled or
// ran out of time: not the tool's fault, and nothing the model can fix.
func (e *Executor) ended(c *Call, attempts int, start time.Time, err error) Outcome {
	o := e.outcome(c, attempts, start, llm.StatusSkipped, llm.KindCanceled, "the run ended before this call finished")
	o.StopRun, o.Err = true, err.Error()
	return o
}

func (e *Executor) timedOut(c *Call, attempts int, start time.Time, timeout time.Duration, err error) Outcome {
	o := e.outcome(c, attempts, start, llm.StatusError, llm.KindTimeout, fmt.Sprintf("the tool did not finish within %v", timeout))
	o.TimedOut, o.StopRun, o.Err = true, c.Tool.OnTimeout() == tool.TimeoutStop, err.Error()
	return o
}

func (e *Executor) failed(c *Call, attempts int, start time.Time, err error) Outcome {
	kind := tool.KindOf(err)
	o := e.outcome(c, attempts, start, llm.StatusError, kind, modelMessage(err, attempts))
	o.Err = err.Error()
	if kind == llm.KindOutcomeUnknown && c.Tool.Effect() == tool.Write && !c.guarded() {
		// A write without a ledger key has no look-up to settle it (a
		// guarded one goes to reconcile): it may have happened, and the
		// model must not be left to try it again.
		o.OutcomeUnknown, o.StopRun = true, true
	}
	return o
}

// modelMessage is what the model is told about a failure: the tool's own
// message for classified errors, the error text otherwise.
func modelMessage(err error, attempts int) string {
	msg := err.Error()
	var te *tool.Error
	if errors.As(err, &te) && te.Msg != "" {
		msg = te.Msg
	}
	if attempts > 1 {
		msg = fmt.Sprintf("%s (after %d attempts)", msg, attempts)
	}
	return msg
}

// answer is what a handler returned.
type answer struct {
	out any
	err error
}

// attempt runs the handler once under the call's timeout, and reports
// whether it was late: past its timeout (rather than the run's context
// ending, or the handler failing on its own).
//
// A tool that declares it honors its context (tool.Spec.HonorsContext)
// runs on the calling goroutine: its handler returns soon after its
// context ends, so it cannot hold the caller. Any other handler runs on a
// goroutine of its own, and the caller stops waiting at the timeout (on a
// timer of its own, whatever the handler does with its context) or when
// ctx ends, leaving a handler that ignores its context to finish alone
// (for a write, keeping the key marked running till then).
//
// The handler's context is a callContext, which makes a real context only
// if the handler asks for one: a quick handler that never looks at its
// context costs no context timer. cctx, if not nil, is an unused one to
// ready for this attempt (a stage prepares its calls' first).
func (e *Executor) attempt(ctx context.Context, c *Call, call tool.Bound, timeout time.Duration, w *waiter, cctx *callContext) (content json.RawMessage, late bool, err error) {
	now := time.Now()
	due := now.Add(timeout)
	if cctx == nil {
		cctx = newCallContext(ctx, due)
	} else {
		cctx.init(ctx, due)
	}
	h := handling{name: c.Call.Name}
	if c.guarded() {
		h.key = c.IdempotencyKey
		e.begin(h.key)
	}
	if c.Tool.HonorsContext() {
		w.hold()
		out, err := e.invoke(cctx, h, call)
		return e.settle(ctx, cctx.end(), c, answer{out, err})
	}
	if w == nil {
		w = new(waiter)
		defer w.stop()
	}
	done := w.channel()
	go func() { // h, not c: the call stays on the caller's stack
		out, err := e.invoke(cctx, h, call)
		done <- answer{out, err}
	}()
	timer := w.start(now, due)
	for {
		select {
		case a := <-done:
			return e.settle(ctx, cctx.end(), c, a)
		case <-ctx.Done():
			w.abandon()
			cctx.end()
			return nil, false, ctx.Err()
		case <-timer:
			var late bool
			if late, timer = w.wake(due); !late {
				continue // an earlier call's deadline
			}
			w.abandon()
			cctx.end()
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			return nil, true, context.DeadlineExceeded
		}
	}
}

// settle classifies what a handler returned, alike for both ways of
// running it: an attempt that returns after its deadline is late,
// whatever it returned, as attempt gives up on a goroutine at the deadline. (A write's late
// outcome goes to the ledger's reconciliation, which asks the tool's
// status look-up.) cerr is the handler's context's error when the
// handler's answer was taken (callContext.end). A result is encoded here,
// on the driving goroutine.
func (e *Executor) settle(ctx context.Context, cerr error, c *Call, a answer) (content json.RawMessage, late bool, err error) {
	if ctx.Err() == nil && errors.Is(cerr, context.DeadlineExceeded) {
		if a.err == nil {
			a.err = cerr
		}
		return nil, true, a.err
	}
	if a.err != nil {
		return nil, false, a.err
	}
	content, err = e.encode(c, a.out)
	return content, false, err
}

// handling is what invoke needs to know of a call: its tool's name, and
// for a guarded write its idempotency key.
type handling struct{ name, key string }

// invoke calls the handler, turning a panic into an error. For a write
// with a key it marks the key running until the handler returns (begin
// was called).
func (e *Executor) invoke(ctx context.Context, h handling, call tool.Bound) (out any, err error) {
	defer func() {
		if h.key != "" {
			e.end(h.key)
		}
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %q panicked: %v", h.name, p)
		}
	}()
	return call(ctx)
}

// encode encodes a handler's result on the goroutine that drives the call,
// turning a panic (a MarshalJSON method's) into an error.
func (e *Executor) encode(c *Call, out any) (content json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %q panicked encoding its result: %v", c.Call.Name, p)
		}
	}()
	return c.Tool.Encode(out)
}

// sleep waits d or until ctx ends; it reports whether the full wait passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
