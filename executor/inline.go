package executor

import (
	"context"

	"errors"
	"fmt"
	"github.com/toolloop/toolloop/store"
	"sync"
	"sync/atomic"
	"time"
)

// Watchdog lets a driver run tool handlers on its own goroutine, which is
// several times cheaper than a goroutine per call, without letting a
// handler that ignores its context hold the run: when a call overruns its
// timeout, or the run's context ends, the watchdog gives the run to a new
// goroutine (see RunInline) and the stuck one is abandoned.
//
// A Watchdog serves one run, one call at a time. Close it when the run ends.
type Watchdog struct {
	// timer is made when first needed: a run without tool calls never
	// sets it, and making it stopped would cost a trip through the
	// runtime's timer heap.
	timer      *time.Timer
	fireFunc   func()
	stopParent func() bool
	parent     context.Context

	mu  sync.Mutex
	cur *callContext
	// spill is a parallel stage whose other calls join in at spillAt
	// unless the stage is over by then (see RunStageInline): one timer
	// per run serves every stage and call, rather than one per stage.
	spill   *stageRun
	spillAt time.Time
	// armedFor is when the timer will fire; zero when it will not.
	armedFor time.Time
}

// NewWatchdog returns a watchdog for a run whose context is ctx.
func NewWatchdog(ctx context.Context) *Watchdog {
	w := &Watchdog{parent: ctx}
	w.fireFunc = w.fire
	w.stopParent = context.AfterFunc(ctx, w.fireFunc)
	return w
}

// Close releases the watchdog's timer and context registration.
func (w *Watchdog) Close() {
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.armedFor = time.Time{}
	w.spill = nil
	w.mu.Unlock()
	w.stopParent()
}

// wakeBy makes sure the timer fires no later than at; w.mu is held.
// Resetting a timer to an earlier time can cost a system call (the
// runtime wakes its poller), and calls usually come one after another with
// the same timeout, so the timer is moved only when it would fire too
// late: one that fires early, for an earlier call or stage, finds nothing
// due yet and sets itself again.
func (w *Watchdog) wakeBy(at time.Time, d time.Duration) {
	if d <= 0 || w.armedFor.IsZero() || w.armedFor.After(at) {
		if w.timer == nil {
			w.timer = time.AfterFunc(max(d, 0), w.fireFunc)
		} else {
			w.timer.Reset(max(d, 0))
		}
		w.armedFor = at
	}
}

// arm watches c until its deadline, d from now.
func (w *Watchdog) arm(c *callContext, d time.Duration) {
	if w.parent.Err() != nil {
		// The run ended just before this call was armed, so the one-shot
		// context callback found no call to expire: expire this one now.
		d = 0
	}
	w.mu.Lock()
	w.cur = c
	w.wakeBy(c.deadline, d)
	w.mu.Unlock()
}

// disarm ends c's watch. The timer is left running (see wakeBy); if the
// watchdog already gave up on c, another call may be watched by now.
func (w *Watchdog) disarm(c *callContext) {
	w.mu.Lock()
	if w.cur == c {
		w.cur = nil
	}
	w.mu.Unlock()
}

// watchSpill has s spill over at at (after d), unless unwatchSpill comes
// first.
func (w *Watchdog) watchSpill(s *stageRun, at time.Time, d time.Duration) {
	w.mu.Lock()
	w.spill, w.spillAt = s, at
	w.wakeBy(at, d)
	w.mu.Unlock()
}

func (w *Watchdog) unwatchSpill(s *stageRun) {
	w.mu.Lock()
	if w.spill == s {
		w.spill = nil
	}
	w.mu.Unlock()
}

// fire runs on the timer's or the context's own goroutine.
func (w *Watchdog) fire() {
	w.mu.Lock()
	w.armedFor = time.Time{}
	now := time.Now()
	// The timer may have been set for an earlier call or stage: what is
	// not due yet is watched again.
	spill := w.spill
	if spill != nil {
		if now.Before(w.spillAt) {
			spill = nil
			w.wakeBy(w.spillAt, w.spillAt.Sub(now))
		} else {
			w.spill = nil
		}
	}
	c := w.cur
	if c != nil {
		if w.parent.Err() == nil && now.Before(c.deadline) {
			w.wakeBy(c.deadline, c.deadline.Sub(now))
			c = nil
		} else {
			w.cur = nil
		}
	}
	w.mu.Unlock()
	// Spill first: expiring the driver's call may hand it the rest of the
	// run, on this goroutine.
	if spill != nil {
		spill.spillOver()
	}
	if c != nil {
		c.expire()
	}
}

// Call states: the handler is running, it returned in time, or the
// watchdog gave up on it. Exactly one of the handler and the watchdog wins
// the change away from running.
const (
	callRunning int32 = iota
	callReturned
	callAbandoned
)

// callContext is the context a handler receives. Its Done channel is made
// only if the handler asks for it, since most quick tools never do.
type callContext struct {
	context.Context // the run's context: values and cancellation

	deadline time.Time
	state    atomic.Int32

	mu         sync.Mutex
	done       chan struct{}
	err        error
	stopParent func() bool

	// What the watchdog needs to report an abandoned call.
	exec     *Executor
	call     *Call
	timeout  time.Duration
	attempt  int
	start    time.Time
	takeover abandoner
}

func (c *callContext) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *callContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		} else {
			c.stopParent = context.AfterFunc(c.Context, func() { c.cancel(c.Context.Err()) })
		}
	}
	return c.done
}

func (c *callContext) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.Context.Err()
}

func (c *callContext) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	if c.stopParent != nil {
		c.stopParent()
	}
}

func (c *callContext) String() string {
	return fmt.Sprintf("toolloop call context (deadline %v)", c.deadline)
}

// expire ends the call's context and, if the handler has not returned yet,
// abandons it and hands the run on.
func (c *callContext) expire() {
	parentErr := c.Context.Err()
	if parentErr != nil {
		c.cancel(parentErr)
	} else {
		c.cancel(context.DeadlineExceeded)
	}
	if !c.state.CompareAndSwap(callRunning, callAbandoned) {
		return
	}
	var o Outcome
	if parentErr != nil {
		o = c.exec.ended(c.call, c.attempt, c.start, parentErr)
	} else {
		o = c.exec.timedOut(c.call, c.attempt, c.start, c.timeout, context.DeadlineExceeded)
	}
	c.takeover.abandoned(o)
}

// RunInline executes one call on the calling goroutine, with the same
// retries and classification as Run. If the watchdog gives up on the
// handler (it overran its timeout, or the run's context ended), takeover is
// called on another goroutine with that outcome and becomes the run's
// owner; when the handler finally returns, RunInline reports ok=false and
// its caller must return at once without touching the run's state.
func (e *Executor) RunInline(ctx context.Context, c Call, w *Watchdog, takeover func(Outcome)) (o Outcome, ok bool) {
	return e.runCallInline(ctx, &c, w, takeoverFunc(takeover), nil, time.Time{})
}

// abandoner takes over a run from a call the watchdog gave up on, with
// that call's outcome.
type abandoner interface{ abandoned(Outcome) }

// takeoverFunc makes a function an abandoner (without allocating, unlike
// a method value).
type takeoverFunc func(Outcome)

func (f takeoverFunc) abandoned(o Outcome) { f(o) }

// runCallInline is RunInline for a call that stays put until it is over;
// cc, if not nil, is a zero callContext for the first attempt, and now, if
// not zero, a clock reading taken just before (the caller's, to save
// another).
func (e *Executor) runCallInline(ctx context.Context, c *Call, w *Watchdog, takeover abandoner, cc *callContext, now time.Time) (Outcome, bool) {
	if c.guarded() {
		return e.guardedInline(ctx, c, w, takeover)
	}
	return e.runInline(ctx, c, w, takeover, cc, now)
}

// guardedInline runs a guarded write inline. An abandoned write's outcome
// is unknown until the ledger and the tool's status look-up have had their
// say.
func (e *Executor) guardedInline(ctx context.Context, c *Call, w *Watchdog, takeover abandoner) (Outcome, bool) {
	return e.guardedWrite(ctx, *c, func(claim store.Record) (Outcome, bool) {
		settle := takeoverFunc(func(o Outcome) { takeover.abandoned(e.finishClaimed(*c, claim, o)) })
		return e.runInline(ctx, c, w, settle, nil, time.Time{})
	})
}

func (e *Executor) runInline(ctx context.Context, c *Call, w *Watchdog, takeover abandoner, cc *callContext, now time.Time) (o Outcome, ok bool) {
	timeout := e.timeout(*c)
	start := now
	if start.IsZero() {
		start = time.Now()
	}
	wait := e.opts.RetryBackoff
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return e.ended(c, attempt-1, start, err), true // attempts made, as in Run
		}
		deadline := start.Add(timeout)
		if attempt > 1 {
			deadline = time.Now().Add(timeout)
		}
		if cc == nil || attempt > 1 {
			cc = new(callContext)
		}
		cc.Context, cc.deadline = ctx, deadline
		cc.exec, cc.call, cc.timeout, cc.attempt, cc.start, cc.takeover = e, c, timeout, attempt, start, takeover
		w.arm(cc, timeout)
		if c.guarded() {
			e.begin(c.IdempotencyKey)
		}
		content, err := invoke(cc, c)
		if c.guarded() {
			e.end(c.IdempotencyKey)
		}
		w.disarm(cc)
		if !cc.state.CompareAndSwap(callRunning, callReturned) {
			return Outcome{}, false
		}
		expired := cc.Err()         // DeadlineExceeded if the watchdog fired first
		cc.cancel(context.Canceled) // the call is over; so is its context
		// The handler returned before the watchdog could give up on it;
		// classify its error exactly as Run does.
		switch {
		case err == nil:
			return e.succeeded(c, attempt, start, content), true
		case ctx.Err() != nil:
			return e.ended(c, attempt, start, ctx.Err()), true
		case errors.Is(err, context.DeadlineExceeded) &&
			(errors.Is(expired, context.DeadlineExceeded) || !time.Now().Before(cc.deadline)):
			return e.timedOut(c, attempt, start, timeout, err), true
		}
		if d, retry := e.retryWait(err, attempt, &wait); retry {
			sleep(ctx, d)
			continue
		}
		return e.failed(c, attempt, start, err), true
	}
}

// invoke calls the handler, turning a panic into an error.
func invoke(ctx context.Context, c *Call) (content []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %q panicked: %v", c.Call.Name, p)
		}
	}()
	return c.Tool.Invoke(ctx, c.Call.Arguments)
}
