package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolloop/toolloop/store"
)

// Watchdog lets a driver run tool handlers on its own goroutine, which is
// several times cheaper than a goroutine per call, without letting a
// handler that ignores its context hold the run: when a call overruns its
// timeout, or the run's context ends (noticed at most registerAfter late),
// the watchdog gives the run to a new goroutine (see RunInline) and the
// stuck one is abandoned.
//
// A Watchdog serves one run, one call at a time. Close it when the run ends.
type Watchdog struct {
	// alarm holds the timer, and is what the timer and the run's context
	// call back; nil once the watchdog is closed. It goes back to pool,
	// if any, on Close.
	alarm  *alarm
	pool   *sync.Pool
	parent context.Context
	// base is the time the watchdog was made (see Now).
	base time.Time

	mu sync.Mutex
	// stopParent undoes the registration with the run's context; nil
	// until the watchdog registers (see registerAfter).
	stopParent func() bool
	// soon is set while the timer is due within registerAfter of when it
	// was set: until the watchdog registers, a watched call needs that.
	soon bool
	// cur is the call being watched; its cc is nil when there is none.
	cur watchedCall
	// spill is a parallel stage whose other calls join in at spillAt
	// unless the stage is over by then (see RunStageInline): one timer
	// per run serves every stage and call, rather than one per stage.
	spill   *stageRun
	spillAt time.Time
	// armedFor is when the timer will fire; zero when it will not.
	armedFor time.Time
}

// alarm is a watchdog's timer and callback. Every run needs one, so an
// executor pools them rather than making one per run, timer included. A callback
// that arrives after its watchdog closed (the timer or the context fired
// just before) reaches the alarm's next watchdog, or none: a fire that
// finds nothing due only sets the timer again, so it does no harm.
type alarm struct {
	w atomic.Pointer[Watchdog]
	// timer is made when first needed: a run without tool calls never
	// sets it, and making it stopped would cost a trip through the
	// runtime's timer heap. A pooled alarm's timer is stopped.
	timer *time.Timer
	ring  func() // a.fire, bound once
}

func (a *alarm) fire() {
	if w := a.w.Load(); w != nil {
		w.fire()
	}
}

// registerAfter is how long a watchdog watches without a callback from
// the run's context: until its timer first fires while it watches a call
// or a stage, which is at most registerAfter after the call or stage
// began. Most runs are over sooner and never pay for the registration
// (an allocation or three in the context package, and a lock on the
// context's way in and out). Until then, a handler that ignores its
// context holds a run whose context ended up to registerAfter longer; a
// handler that watches its context's Done sees the end at once, as its
// context registers on its own.
const registerAfter = time.Millisecond

// NewWatchdog returns a watchdog for a run whose context is ctx. Drivers
// that start many runs use Executor.NewWatchdog, which reuses timers.
func NewWatchdog(ctx context.Context) *Watchdog {
	return newWatchdog(ctx, nil)
}

// NewWatchdog returns a watchdog for a run whose context is ctx, with a
// timer from the executor's pool: every run needs one, so they are reused
// rather than made per run.
func (e *Executor) NewWatchdog(ctx context.Context) *Watchdog {
	return newWatchdog(ctx, &e.alarms)
}

func newWatchdog(ctx context.Context, pool *sync.Pool) *Watchdog {
	w := &Watchdog{parent: ctx, pool: pool, base: time.Now()}
	var a *alarm
	if pool != nil {
		a, _ = pool.Get().(*alarm)
	}
	if a == nil {
		a = new(alarm)
		a.ring = a.fire
	}
	w.alarm = a
	// Published last: a stray callback may reach w as soon as it is.
	a.w.Store(w)
	return w
}

// Now reads the run's clock: the wall time the watchdog was made at,
// advanced by the monotonic clock since. It reads one clock where time.Now
// reads two, which counts on virtual machines whose clock reads are slow
// (a run reads it a few times per call); and a run's times never step
// back or jump with the wall clock, as they only grow from base.
func (w *Watchdog) Now() time.Time {
	return w.base.Add(time.Since(w.base))
}

// Close releases the watchdog's timer and context registration. Closing
// it again does nothing.
func (w *Watchdog) Close() {
	w.mu.Lock()
	a := w.alarm
	w.alarm = nil
	if a != nil && a.timer != nil {
		a.timer.Stop()
	}
	w.armedFor = time.Time{}
	w.spill, w.cur = nil, watchedCall{}
	stopParent := w.stopParent
	w.mu.Unlock()
	if a == nil {
		return
	}
	if stopParent != nil {
		stopParent()
	}
	a.w.Store(nil)
	if w.pool != nil {
		w.pool.Put(a)
	}
}

// wakeBy makes sure the timer fires no later than at; w.mu is held.
// Resetting a timer to an earlier time can cost a system call (the
// runtime wakes its poller), and calls usually come one after another with
// the same timeout, so the timer is moved only when it would fire too
// late: one that fires early, for an earlier call or stage, finds nothing
// due yet and sets itself again.
func (w *Watchdog) wakeBy(at time.Time, d time.Duration) {
	if w.alarm == nil {
		return // closed: nothing is watched any more
	}
	if d <= 0 || w.armedFor.IsZero() || w.armedFor.After(at) {
		if a := w.alarm; a.timer == nil {
			a.timer = time.AfterFunc(max(d, 0), a.ring)
		} else {
			a.timer.Reset(max(d, 0))
		}
		w.armedFor, w.soon = at, d <= registerAfter
	}
}

// watchedCall is a call a watchdog watches: its context, and what the
// watchdog needs to report the call if it gives up on it. It lives in the
// watchdog, which watches one call at a time, rather than in the context,
// which every call needs anew.
type watchedCall struct {
	cc       *callContext
	call     *Call
	attempt  int
	start    time.Time
	timeout  time.Duration
	takeover abandoner
}

// arm watches c until its deadline, d from now.
func (w *Watchdog) arm(c watchedCall, d time.Duration) {
	if w.parent.Err() != nil {
		// The run ended just before this call was armed, so the one-shot
		// context callback found no call to expire: expire this one now.
		d = 0
	}
	w.mu.Lock()
	w.cur = c
	w.wakeBy(c.cc.deadline, d)
	if w.stopParent == nil && !w.soon {
		// Not registered yet: the timer must fire within registerAfter.
		w.wakeBy(c.cc.deadline.Add(registerAfter-d), registerAfter)
	}
	w.mu.Unlock()
}

// disarm ends c's watch. The timer is left running (see wakeBy); if the
// watchdog already gave up on c, another call may be watched by now. The
// rest of cur stays until the next call overwrites it: clearing it would
// cost more writes on every call, for nothing the run does not hold anyway.
func (w *Watchdog) disarm(c *callContext) {
	w.mu.Lock()
	if w.cur.cc == c {
		w.cur.cc = nil
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

// unwatchSpill reports false if the spill was no longer watched: the
// timer took the stage first, and may be spilling it.
func (w *Watchdog) unwatchSpill(s *stageRun) bool {
	w.mu.Lock()
	mine := w.spill == s
	if mine {
		w.spill = nil
	}
	w.mu.Unlock()
	return mine
}

// fire runs on the timer's or the context's own goroutine.
func (w *Watchdog) fire() {
	w.mu.Lock()
	w.armedFor, w.soon = time.Time{}, false
	if w.stopParent == nil && w.alarm != nil && (w.cur.cc != nil || w.spill != nil) {
		// A call or stage has been watched long enough: register, so
		// that the end of the run's context is noticed at once from now
		// on. (If it has ended already, the callback comes at once too.)
		w.stopParent = context.AfterFunc(w.parent, w.alarm.ring)
	}
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
	if c.cc != nil {
		if w.parent.Err() == nil && now.Before(c.cc.deadline) {
			w.wakeBy(c.cc.deadline, c.cc.deadline.Sub(now))
			c.cc = nil
		} else {
			w.cur.cc = nil
		}
	}
	w.mu.Unlock()
	// Spill first: expiring the driver's call may hand it the rest of the
	// run, on this goroutine.
	if spill != nil {
		spill.spillOver()
	}
	if c.cc != nil {
		c.expire()
	}
}

// A callContext's state word holds the call's state, why its context
// ended, and whether Done was asked for: one word, so that the handler's
// return, the watchdog's expiry and a late Done agree without a lock, and
// the usual quick call pays two atomic operations for all of it.
const (
	// The call's state (stateMask): the handler is running, it returned in
	// time, or the watchdog gave up on it. Exactly one of the handler and
	// the watchdog wins the change away from running.
	callRunning   int32 = 0
	callReturned  int32 = 1
	callAbandoned int32 = 2
	stateMask     int32 = 3

	// Why the context ended (endMask), set once: the call is over, its
	// deadline passed, or the run's context ended (Err then gives the
	// run's error). Zero while it has not.
	endCanceled int32 = 1 << 2
	endDeadline int32 = 2 << 2
	endParent   int32 = 3 << 2
	endMask     int32 = 3 << 2

	// doneMade is set once Done has made the channel: from then on,
	// whoever ends the context closes it.
	doneMade int32 = 1 << 4
)

// callContext is the context a handler receives. It is kept small, since
// every call gets a new one (a handler may keep its context): what the
// watchdog needs to report the call is in the watchdog (see watchedCall),
// and the Done channel is made only if the handler asks for it, since most
// quick tools never do.
type callContext struct {
	context.Context // the run's context: values and cancellation

	deadline time.Time
	state    atomic.Int32 // see callRunning, endCanceled, doneMade
	done     atomic.Pointer[doneChan]
}

// doneChan is a callContext's Done channel and, while the context has not
// ended, its registration with the run's context.
type doneChan struct {
	ch         chan struct{}
	stopParent func() bool
}

func (c *callContext) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *callContext) Done() <-chan struct{} {
	if d := c.done.Load(); d != nil {
		return d.ch
	}
	d := &doneChan{ch: make(chan struct{})}
	if !c.done.CompareAndSwap(nil, d) {
		return c.done.Load().ch
	}
	if c.state.Load()&endMask == 0 {
		d.stopParent = context.AfterFunc(c.Context, func() { c.cancel(endParent) })
	}
	// Of this and cancel, the one that sees the other's bit closes the
	// channel: exactly one does.
	if c.state.Or(doneMade)&endMask != 0 {
		d.close()
	}
	return d.ch
}

func (d *doneChan) close() {
	close(d.ch)
	if d.stopParent != nil {
		d.stopParent()
	}
}

func (c *callContext) Err() error {
	switch c.state.Load() & endMask {
	case endCanceled:
		return context.Canceled
	case endDeadline:
		return context.DeadlineExceeded
	}
	// Not ended, or ended with the run's context, whose error stays put.
	return c.Context.Err()
}

// cancel ends the context for the reason why, unless it has ended already.
func (c *callContext) cancel(why int32) {
	for {
		old := c.state.Load()
		if old&endMask != 0 {
			return
		}
		if c.state.CompareAndSwap(old, old|why) {
			if old&doneMade != 0 {
				c.done.Load().close()
			}
			return
		}
	}
}

// returned records that the handler has returned and ends its context,
// unless the watchdog gave up on the call first (ok=false). why is how the
// context had ended before, if it had.
func (c *callContext) returned() (why int32, ok bool) {
	for {
		old := c.state.Load()
		if old&stateMask != callRunning {
			return 0, false
		}
		next := old | callReturned
		if old&endMask == 0 {
			next |= endCanceled // the call is over; so is its context
		}
		if c.state.CompareAndSwap(old, next) {
			if old&endMask == 0 && old&doneMade != 0 {
				c.done.Load().close()
			}
			return old & endMask, true
		}
	}
}

// abandon records that the watchdog gave up on the call, unless its
// handler returned first.
func (c *callContext) abandon() bool {
	for {
		old := c.state.Load()
		if old&stateMask != callRunning {
			return false
		}
		if c.state.CompareAndSwap(old, old|callAbandoned) {
			return true
		}
	}
}

func (c *callContext) String() string {
	return fmt.Sprintf("toolloop call context (deadline %v)", c.deadline)
}

// expire ends the call's context and, if the handler has not returned yet,
// abandons it and hands the run on.
func (w *watchedCall) expire() {
	parentErr := w.cc.Context.Err()
	if parentErr != nil {
		w.cc.cancel(endParent)
	} else {
		w.cc.cancel(endDeadline)
	}
	if !w.cc.abandon() {
		return
	}
	var o Outcome
	if parentErr != nil {
		o = ended(w.call, w.attempt, w.start, parentErr)
	} else {
		o = timedOut(w.call, w.attempt, w.start, w.timeout, context.DeadlineExceeded)
	}
	w.takeover.abandoned(o)
}

// RunInline executes one call on the calling goroutine, with the same
// retries and classification as Run. If the watchdog gives up on the
// handler (it overran its timeout, or the run's context ended), takeover is
// called on another goroutine with that outcome and becomes the run's
// owner; when the handler finally returns, RunInline reports ok=false and
// its caller must return at once without touching the run's state.
func (e *Executor) RunInline(ctx context.Context, c Call, w *Watchdog, takeover func(Outcome)) (o Outcome, ok bool) {
	_, ok = e.runCallInline(ctx, &c, w, takeoverFunc(takeover), nil, time.Time{}, &o)
	return o, ok
}

// abandoner takes over a run from a call the watchdog gave up on, with
// that call's outcome.
type abandoner interface{ abandoned(Outcome) }

// takeoverFunc makes a function an abandoner (without allocating, unlike
// a method value).
type takeoverFunc func(Outcome)

func (f takeoverFunc) abandoned(o Outcome) { f(o) }

// runCallInline is RunInline for a call that stays put until it is over,
// writing its outcome to *out unless the watchdog took over; cc, if not
// nil, is a zero callContext for the first attempt, and now, if not zero,
// a clock reading taken just before (the caller's, to save another). end,
// if not zero, is the clock reading at which the call succeeded, for the
// caller's next call to start from.
func (e *Executor) runCallInline(ctx context.Context, c *Call, w *Watchdog, takeover abandoner, cc *callContext, now time.Time, out *Outcome) (end time.Time, ok bool) {
	if c.guarded() {
		// The outcome may come from the ledger: no end to pass on.
		o, ok := e.guardedInline(ctx, c, w, takeover)
		if ok {
			*out = o
		}
		return time.Time{}, ok
	}
	return e.runInline(ctx, c, w, takeover, cc, now, out)
}

// guardedInline runs a guarded write inline. An abandoned write's outcome
// is unknown until the ledger and the tool's status look-up have had their
// say.
func (e *Executor) guardedInline(ctx context.Context, c *Call, w *Watchdog, takeover abandoner) (Outcome, bool) {
	return e.guardedWrite(ctx, *c, func(claim store.Record) (o Outcome, ok bool) {
		settle := takeoverFunc(func(o Outcome) { takeover.abandoned(e.finishClaimed(*c, claim, o)) })
		_, ok = e.runInline(ctx, c, w, settle, nil, time.Time{}, &o)
		return o, ok
	})
}

func (e *Executor) runInline(ctx context.Context, c *Call, w *Watchdog, takeover abandoner, cc *callContext, now time.Time, out *Outcome) (end time.Time, ok bool) {
	timeout := e.timeout(c)
	start := now
	if start.IsZero() {
		start = w.Now()
	}
	wait := e.opts.RetryBackoff
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			*out = ended(c, attempt-1, start, err) // attempts made, as in Run
			return time.Time{}, true
		}
		deadline := start.Add(timeout)
		if attempt > 1 {
			deadline = w.Now().Add(timeout)
		}
		if cc == nil || attempt > 1 {
			cc = new(callContext)
		}
		cc.Context, cc.deadline = ctx, deadline
		w.arm(watchedCall{cc: cc, call: c, attempt: attempt, start: start, timeout: timeout, takeover: takeover}, timeout)
		if c.guarded() {
			e.begin(c.IdempotencyKey)
		}
		content, err := invoke(cc, c)
		if c.guarded() {
			e.end(c.IdempotencyKey)
		}
		w.disarm(cc)
		why, ok := cc.returned()
		if !ok {
			return time.Time{}, false
		}
		// The handler returned before the watchdog could give up on it;
		// classify its error exactly as Run does.
		switch {
		case err == nil:
			end = w.Now()
			succeeded(out, c, attempt, start, end, content)
			return end, true
		case ctx.Err() != nil:
			*out = ended(c, attempt, start, ctx.Err())
			return time.Time{}, true
		case errors.Is(err, context.DeadlineExceeded) && (why == endDeadline || !time.Now().Before(cc.deadline)):
			*out = timedOut(c, attempt, start, timeout, err)
			return time.Time{}, true
		}
		if d, retry := e.retryWait(err, attempt, &wait); retry {
			sleep(ctx, d)
			continue
		}
		*out = failed(c, attempt, start, err)
		return time.Time{}, true
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
