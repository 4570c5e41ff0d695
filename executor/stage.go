package executor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/toolloop/toolloop/internal/sized"
)

// DefaultSpillAfter is how long a stage runs on the driver's goroutine
// alone before its remaining calls spill onto more goroutines.
const DefaultSpillAfter = 100 * time.Microsecond

// RunStageInline executes the calls of one stage, in parallel where it
// pays: the calling goroutine starts on them one after another, and if the
// stage is still running after SpillAfter, up to MaxParallel-1 more
// goroutines join in on the calls not yet started. Quick calls (a cache
// hit, a no-op) thus cost no goroutine at all, and slow ones still run side
// by side, at most MaxParallel at once.
//
// Outcomes come back in the order of calls. As with RunInline, a handler
// that ignores its context cannot hold the stage: if the watchdog gives up
// on a call the caller is running, the stage carries on from another
// goroutine, takeover receives the outcomes when the stage is done, and
// RunStageInline reports ok=false once the stuck handler returns.
//
// start, if not zero, is a reading of w's clock the caller took just
// before, which the stage takes as its start rather than read the clock
// again.
//
// calls must not change afterwards: a handler given up on may still be
// reading its call.
func (e *Executor) RunStageInline(ctx context.Context, calls []Call, w *Watchdog, start time.Time, takeover func([]Outcome)) ([]Outcome, bool) {
	switch len(calls) {
	case 0:
		return []Outcome{}, true
	case 1:
		one, outs := sized.New[singleRun, Outcome](1)
		one.takeover = takeover
		if _, ok := e.runCallInline(ctx, &calls[0], w, one, &one.cc, start, &outs[0]); !ok {
			return nil, false
		}
		return outs, true
	}
	s := e.newStageRun(len(calls))
	s.e, s.ctx, s.calls, s.watch, s.takeover = e, ctx, calls, w, takeover
	if e.opts.MaxParallel > 1 {
		if start.IsZero() {
			start = w.Now()
		}
		w.watchSpill(s, start.Add(e.opts.SpillAfter), e.opts.SpillAfter)
	}
	if !s.drive(start) {
		return nil, false
	}
	outs := s.outs
	if !s.spillTaken {
		// The spill timer never took the stage (only it starts helpers),
		// so only this goroutine ever held s: it can serve a later stage.
		*s = stageRun{}
		e.stages.Put(s)
	}
	return outs, true
}

// singleRun is a stage of one call: the context of its first attempt, and
// where its outcome goes if the watchdog gives up on it.
type singleRun struct {
	cc       callContext
	takeover func([]Outcome)
}

func (r *singleRun) abandoned(o Outcome) { r.takeover([]Outcome{o}) }

// stageRun is one stage in progress. Calls are claimed by index, so each
// runs exactly once whichever goroutine gets to it first.
type stageRun struct {
	e     *Executor
	ctx   context.Context
	calls []Call
	outs  []Outcome
	// ccs holds the contexts of every call's first attempt.
	ccs  []callContext
	next atomic.Int32 // next call index to claim
	// inline is the call the driver is running.
	inline int32
	// helping counts the calls helpers are claiming or running: the
	// driver's own calls need no count, as it delivers them itself. When
	// it drops to zero, helped gets a token for a driver waiting on it.
	// spillOver makes helped before it starts any helper; a stage that
	// never spills has none. (A WaitGroup would cost every stage a count
	// per call, and forbids counting up while the driver may be waiting.)
	helping atomic.Int32
	helped  chan struct{}

	// spillTaken is set when the watchdog took the stage to spill it
	// before the driver was done with it.
	spillTaken bool

	// The driver's side: its watchdog, and where the outcomes go if it is
	// replaced.
	watch    *Watchdog
	takeover func([]Outcome)
}

// newStageRun returns a stageRun for n calls, reusing one of an earlier
// stage if it can. The outcomes and the calls' contexts come in one
// allocation, sized to fit for the usual few calls; they outlive the
// stage (in the run's log, and in handlers that keep their context), the
// rest of the stageRun does not.
func (e *Executor) newStageRun(n int) *stageRun {
	s, _ := e.stages.Get().(*stageRun)
	if s == nil {
		s = new(stageRun)
	}
	_, s.outs, s.ccs = sized.New2[struct{}, Outcome, callContext](n)
	return s
}

func (s *stageRun) claim() (int, bool) {
	i := int(s.next.Add(1)) - 1
	return i, i < len(s.calls)
}

// drive runs calls on the driver's goroutine until none is left to claim,
// then waits for the helpers'. It reports false if the watchdog replaced it.
// now, if not zero, is a clock reading the first call may take as its
// start; a call's end, if it has one, is the next one's.
func (s *stageRun) drive(now time.Time) bool {
	for {
		i, ok := s.claim()
		if !ok {
			break
		}
		s.inline = int32(i)
		if now, ok = s.e.runCallInline(s.ctx, &s.calls[i], s.watch, s, &s.ccs[i], now, &s.outs[i]); !ok {
			return false
		}
	}
	s.spillTaken = !s.watch.unwatchSpill(s) && s.e.opts.MaxParallel > 1
	// A helper counts a call before claiming it, so every call claimed by
	// now is counted. Each delivers, by returning or by its watchdog
	// giving up on it, so this wait is bounded by the calls' timeouts. A
	// count above zero means a helper started, so helped exists; a token
	// left from an earlier drop to zero only makes the loop look again.
	for s.helping.Load() != 0 {
		<-s.helped
	}
	return true
}

// helperDone uncounts a helper's call, claimed or not.
func (s *stageRun) helperDone() {
	if s.helping.Add(-1) == 0 {
		select {
		case s.helped <- struct{}{}:
		default: // a token is there already
		}
	}
}

// abandoned runs on the watchdog's goroutine when the driver's own call
// overran: it records that call's outcome and becomes the driver.
func (s *stageRun) abandoned(o Outcome) {
	s.outs[s.inline] = o
	if s.drive(time.Time{}) {
		s.takeover(s.outs)
	}
}

// spillOver starts helpers for the calls nobody has claimed yet.
func (s *stageRun) spillOver() {
	left := len(s.calls) - int(s.next.Load())
	if k := min(left, s.e.opts.MaxParallel-1); k > 0 {
		s.helped = make(chan struct{}, 1)
		for range k {
			go s.help()
		}
	}
}

// help claims and runs calls under a watchdog of its own until none is
// left. If its watchdog gives up on a call, the outcome is delivered from
// there and this goroutine ends when the stuck handler does.
func (s *stageRun) help() {
	w := s.e.NewWatchdog(s.ctx)
	defer w.Close()
	for {
		s.helping.Add(1)
		i, ok := s.claim()
		if !ok {
			s.helperDone()
			return
		}
		delivered := takeoverFunc(func(o Outcome) {
			s.outs[i] = o
			s.helperDone()
		})
		if _, ok := s.e.runCallInline(s.ctx, &s.calls[i], w, delivered, &s.ccs[i], time.Time{}, &s.outs[i]); !ok {
			return
		}
		s.helperDone()
	}
}
