package executor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// watchLog records a stage's watch events and checks the watcher's
// contract as they come: never two calls of watch at once, and for each
// call one start, then one finish with the outcome RunStageWatched
// returns (checked by check).
type watchLog struct {
	t      *testing.T
	in     atomic.Int32
	mu     sync.Mutex
	events []executor.CallEvent
}

func (l *watchLog) watch(ev executor.CallEvent) {
	if l.in.Add(1) != 1 {
		l.t.Error("watch called by two goroutines at once")
	}
	defer l.in.Add(-1)
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
}

func (l *watchLog) check(out []executor.Outcome) {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	starts, finishes := make([]int, len(out)), make([]int, len(out))
	for _, ev := range l.events {
		if ev.Outcome == nil {
			starts[ev.Index]++
			continue
		}
		if starts[ev.Index] != 1 {
			l.t.Errorf("call %d finished after %d starts, want 1", ev.Index, starts[ev.Index])
		}
		if ev.Outcome != &out[ev.Index] {
			l.t.Errorf("call %d's finish does not carry its returned outcome", ev.Index)
		}
		finishes[ev.Index]++
	}
	for i := range out {
		if starts[i] != 1 || finishes[i] != 1 {
			l.t.Errorf("call %d: %d starts and %d finishes, want one of each", i, starts[i], finishes[i])
		}
	}
}

// A stage of quick calls whose handlers need a goroutine of their own
// runs them all on one: the caller hands the stage to a worker once,
// rather than each call to a goroutine of its own. Found by issue 28's
// profile, where handing each call to a goroutine and back was a third
// of a run's executor time.
func TestBatchRunsOnOneWorker(t *testing.T) {
	var mu sync.Mutex
	ran := map[string]bool{}
	tl := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) {
		mu.Lock()
		ran[goroutineID(t)] = true
		mu.Unlock()
		return "ok", nil
	})
	calls := []executor.Call{call("c1", tl, 1), call("c2", tl, 2), call("c3", tl, 3), call("c4", tl, 4)}
	ex := executor.New(&executor.Options{SpillAfter: time.Hour})
	l := &watchLog{t: t}
	out := ex.RunStageWatched(context.Background(), calls, l.watch)
	for i, o := range out {
		if o.Result.Status != llm.StatusOK || o.Attempts != 1 || o.Started.IsZero() {
			t.Errorf("outcome %d = %+v", i, o)
		}
	}
	l.check(out)
	if caller := goroutineID(t); len(ran) != 1 || ran[caller] {
		t.Errorf("handlers ran on goroutines %v (the caller is %s), want one worker", ran, caller)
	}
}

// A handler that ignores its context and overruns its timeout holds
// neither the stage nor the calls queued behind it: the caller gives up on
// it at its deadline and another worker takes the queued calls, whether
// or not helpers have joined by then.
func TestBatchGivesUpOnOverrunningHandler(t *testing.T) {
	for _, spill := range []time.Duration{time.Hour, 100 * time.Microsecond} {
		t.Run(fmt.Sprint("spill=", spill), func(t *testing.T) {
			b := newBlocker(t)
			const timeout = 50 * time.Millisecond
			stuck := mkTool(t, tool.Spec[args]{Name: "stuck", Timeout: timeout, OnTimeout: tool.TimeoutReport}, b.handle)
			quick := mkTool(t, tool.Spec[args]{Name: "quick"}, func(_ context.Context, in args) (any, error) { return in.N, nil })
			calls := []executor.Call{call("c0", stuck, 0), call("c1", quick, 1), call("c2", quick, 2)}
			ex := executor.New(&executor.Options{SpillAfter: spill})
			l := &watchLog{t: t}
			start := time.Now()
			out := within(t, timeout+margin, func() []executor.Outcome {
				return ex.RunStageWatched(context.Background(), calls, l.watch)
			})
			if took := time.Since(start); took < timeout {
				t.Errorf("stage returned after %v, before the stuck call's timeout", took)
			}
			if o := out[0]; !o.TimedOut || o.Result.ErrorKind != llm.KindTimeout || o.Attempts != 1 || o.StopRun {
				t.Errorf("stuck call's outcome = %+v, want a reported timeout", o)
			}
			for i := 1; i < 3; i++ {
				if o := out[i]; o.Result.Status != llm.StatusOK || string(o.Result.Content) != fmt.Sprint(i) {
					t.Errorf("outcome %d = %+v", i, o)
				}
			}
			l.check(out)
			b.release() // the stuck handler returns now; its worker drops the answer
		})
	}
}

// The answer of a handler given up on, which comes while a later call of
// the batch runs, is dropped: it is not taken for that call, and does not
// end the batch early.
func TestBatchDropsLateAnswer(t *testing.T) {
	gate, returned := make(chan struct{}), make(chan struct{})
	slow := mkTool(t, tool.Spec[args]{Name: "slow", Timeout: 30 * time.Millisecond, OnTimeout: tool.TimeoutReport},
		func(context.Context, args) (any, error) {
			defer close(returned)
			<-gate // ignores its context
			return "late", nil
		})
	next := mkTool(t, tool.Spec[args]{Name: "next"}, func(context.Context, args) (any, error) {
		close(gate) // the first call's handler answers now, late
		<-returned
		time.Sleep(20 * time.Millisecond) // for its answer to be sent, if it were
		return "second", nil
	})
	ex := executor.New(&executor.Options{SpillAfter: time.Hour})
	out := ex.RunStage(context.Background(), []executor.Call{call("c1", slow, 1), call("c2", next, 2)})
	if out[0].Result.ErrorKind != llm.KindTimeout {
		t.Errorf("first outcome = %+v, want a timeout", out[0])
	}
	if got := string(out[1].Result.Content); got != `"second"` {
		t.Errorf("second call's result = %s, want \"second\" (its own)", got)
	}
}

// The run's context ending while the batch waits ends the calls that
// started, as Run does (skipped, one attempt), and skips those that did
// not (no attempt, no handler started), even though the handlers ignore
// their context.
func TestBatchCanceled(t *testing.T) {
	b := newBlocker(t)
	tl := mkTool(t, tool.Spec[args]{Timeout: time.Hour}, b.handle)
	calls := make([]executor.Call, 4)
	for i := range calls {
		calls[i] = call(fmt.Sprint("c", i), tl, i)
	}
	ex := executor.New(&executor.Options{MaxParallel: 2, SpillAfter: time.Microsecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &watchLog{t: t}
	done := make(chan []executor.Outcome, 1)
	go func() { done <- ex.RunStageWatched(ctx, calls, l.watch) }()
	started := map[int]bool{<-b.started: true, <-b.started: true}
	cancel()
	var out []executor.Outcome
	select {
	case out = <-done:
	case <-time.After(margin):
		t.Fatal("the stage did not return after cancel")
	}
	for i, o := range out {
		want := 0
		if started[i] {
			want = 1
		}
		if o.Result.Status != llm.StatusSkipped || o.Result.ErrorKind != llm.KindCanceled || !o.StopRun || o.Attempts != want {
			t.Errorf("outcome %d = %+v, want skipped after %d attempts", i, o, want)
		}
	}
	l.check(out)
	b.release()
	if n := len(b.started); n != 0 {
		t.Errorf("%d more handlers started after the run ended", n)
	}
}

// A call of the batch whose first attempt fails in a way that is retried
// is tried again after the batch, counting both attempts from its first
// start, and is watched as one call.
func TestBatchRetry(t *testing.T) {
	var tries atomic.Int32
	flaky := mkTool(t, tool.Spec[args]{Name: "flaky"}, func(context.Context, args) (any, error) {
		if tries.Add(1) == 1 {
			return nil, tool.Unavailable(errors.New("503"))
		}
		return "ok", nil
	})
	quick := mkTool(t, tool.Spec[args]{Name: "quick"}, func(context.Context, args) (any, error) { return "ok", nil })
	const backoff = 20 * time.Millisecond
	ex := executor.New(&executor.Options{RetryBackoff: backoff})
	calls := []executor.Call{call("c0", quick, 0), call("c1", flaky, 1), call("c2", quick, 2)}
	l := &watchLog{t: t}
	out := ex.RunStageWatched(context.Background(), calls, l.watch)
	for i, o := range out {
		want := 1
		if i == 1 {
			want = 2
		}
		if o.Result.Status != llm.StatusOK || o.Attempts != want {
			t.Errorf("outcome %d = %+v, want ok after %d attempts", i, o, want)
		}
	}
	if d := out[1].Duration; d < backoff {
		t.Errorf("retried call's duration = %v, want at least the backoff %v", d, backoff)
	}
	l.check(out)
}

// A handler's panic in the batch fails its call alone; the worker goes on
// to the next calls.
func TestBatchPanic(t *testing.T) {
	crash := mkTool(t, tool.Spec[args]{Name: "crash"}, func(context.Context, args) (any, error) { panic("boom") })
	quick := mkTool(t, tool.Spec[args]{Name: "quick"}, func(context.Context, args) (any, error) { return "ok", nil })
	ex := executor.New(&executor.Options{SpillAfter: time.Hour})
	calls := []executor.Call{call("c0", quick, 0), call("c1", crash, 1), call("c2", quick, 2)}
	l := &watchLog{t: t}
	out := within(t, margin, func() []executor.Outcome { return ex.RunStageWatched(context.Background(), calls, l.watch) })
	if o := out[1]; o.Result.ErrorKind != llm.KindInternal || !strings.Contains(o.Err, "panicked") || o.Attempts != 1 {
		t.Errorf("crashing call's outcome = %+v", o)
	}
	for _, i := range []int{0, 2} {
		if out[i].Result.Status != llm.StatusOK {
			t.Errorf("outcome %d = %+v", i, out[i])
		}
	}
	l.check(out)
}

// A worker starts no handler once the run has ended, even before the
// caller has seen it end: here the first call's handler ends the run, and
// the second call, queued on the same worker, is skipped without running.
func TestBatchStartsNothingAfterRunEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ran atomic.Int32
	ender := mkTool(t, tool.Spec[args]{Name: "ender"}, func(context.Context, args) (any, error) {
		cancel()
		return "ok", nil
	})
	counted := mkTool(t, tool.Spec[args]{Name: "counted"}, func(context.Context, args) (any, error) {
		ran.Add(1)
		return "ok", nil
	})
	ex := executor.New(&executor.Options{SpillAfter: time.Hour})
	l := &watchLog{t: t}
	calls := []executor.Call{call("c0", ender, 0), call("c1", counted, 1)}
	out := within(t, margin, func() []executor.Outcome { return ex.RunStageWatched(ctx, calls, l.watch) })
	if n := ran.Load(); n != 0 {
		t.Errorf("a handler ran %d times after the run ended", n)
	}
	if o := out[1]; o.Result.Status != llm.StatusSkipped || o.Attempts != 0 || !o.StopRun {
		t.Errorf("second outcome = %+v, want skipped without an attempt", o)
	}
	l.check(out)
}
