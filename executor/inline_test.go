package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// inlineResult is how a RunInline call ended: returned with ok, or taken
// over by the watchdog (and then RunInline returned ok=false).
type inlineResult struct {
	outcome  executor.Outcome
	ok       bool
	takeover bool
}

// runInline runs RunInline on its own goroutine, as the loop's driver does,
// and reports the first of: RunInline returning ok=true, or the watchdog's
// takeover. wait waits for RunInline itself to return (after the test has
// released a stuck handler) and reports its ok value.
func runInline(ex *executor.Executor, ctx context.Context, c executor.Call, w *executor.Watchdog) (first <-chan inlineResult, wait func() bool) {
	ch := make(chan inlineResult, 2)
	var takeovers atomic.Int32
	returned := make(chan bool, 1)
	go func() {
		o, ok := ex.RunInline(ctx, c, w, func(o executor.Outcome) {
			if takeovers.Add(1) > 1 {
				panic("takeover called twice")
			}
			ch <- inlineResult{outcome: o, takeover: true}
		})
		if ok {
			ch <- inlineResult{outcome: o, ok: true}
		}
		returned <- ok
	}()
	return ch, func() bool { return <-returned }
}

func await(t *testing.T, ch <-chan inlineResult, d time.Duration) inlineResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("RunInline neither returned nor handed over within %v", d)
		panic("unreachable")
	}
}

func TestRunInlineOK(t *testing.T) {
	ctx := context.Background()
	w := executor.NewWatchdog(ctx)
	defer w.Close()
	tl := mkTool(t, tool.Spec[args]{Name: "double"}, func(_ context.Context, in args) (any, error) { return in.N * 2, nil })
	ex := executor.New(nil)
	for i := range 3 { // one watchdog serves one call after another
		o, ok := ex.RunInline(ctx, call(fmt.Sprint("c", i), tl, i), w, func(executor.Outcome) { t.Error("takeover on a quick call") })
		if !ok || o.Result.Status != llm.StatusOK || string(o.Result.Content) != fmt.Sprint(i*2) || o.Attempts != 1 {
			t.Errorf("call %d: ok=%v outcome=%+v", i, ok, o)
		}
		if o.Result.CallID != fmt.Sprint("c", i) || o.Result.Name != "double" {
			t.Errorf("call %d result = %+v", i, o.Result)
		}
	}
}

func TestRunInlineFailuresAndRetries(t *testing.T) {
	ctx := context.Background()
	w := executor.NewWatchdog(ctx)
	defer w.Close()
	ex := executor.New(&executor.Options{MaxRetries: 2, RetryBackoff: time.Millisecond})
	noTakeover := func(executor.Outcome) { t.Error("unexpected takeover") }

	var calls atomic.Int32
	flaky := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) {
		if calls.Add(1) == 1 {
			return nil, tool.Unavailable(nil)
		}
		return "ok", nil
	})
	o, ok := ex.RunInline(ctx, call("c1", flaky, 0), w, noTakeover)
	if !ok || o.Result.Status != llm.StatusOK || o.Attempts != 2 {
		t.Errorf("transient failure: ok=%v %+v", ok, o)
	}

	calls.Store(0)
	limited := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) {
		calls.Add(1)
		return nil, tool.RateLimited(0, nil)
	})
	o, ok = ex.RunInline(ctx, call("c2", limited, 0), w, noTakeover)
	if !ok || o.Result.ErrorKind != tool.KindRateLimited || o.Attempts != 3 || calls.Load() != 3 {
		t.Errorf("rate limited: ok=%v %+v, calls %d", ok, o, calls.Load())
	}

	calls.Store(0)
	missing := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) {
		calls.Add(1)
		return nil, tool.NotFound("nope")
	})
	o, ok = ex.RunInline(ctx, call("c3", missing, 0), w, noTakeover)
	if !ok || o.Result.ErrorKind != tool.KindNotFound || o.Attempts != 1 || calls.Load() != 1 || o.StopRun {
		t.Errorf("not found: ok=%v %+v", ok, o)
	}

	crash := mkTool(t, tool.Spec[args]{Name: "crash"}, func(context.Context, args) (any, error) { panic("boom") })
	o, ok = ex.RunInline(ctx, call("c4", crash, 0), w, noTakeover)
	if !ok || o.Result.ErrorKind != tool.KindInternal || !strings.Contains(o.Err, "panicked") || o.StopRun {
		t.Errorf("panic: ok=%v %+v", ok, o)
	}
}

// A handler that ignores its context is abandoned at its timeout: the
// watchdog hands the run on with a timeout outcome, and RunInline, when
// the handler finally returns, reports ok=false.
func TestRunInlineTimeoutHandsOver(t *testing.T) {
	for _, action := range []tool.TimeoutAction{tool.TimeoutStop, tool.TimeoutReport} {
		t.Run(string(action), func(t *testing.T) {
			ctx := context.Background()
			w := executor.NewWatchdog(ctx)
			defer w.Close()
			b := newBlocker(t)
			tl := mkTool(t, tool.Spec[args]{Timeout: 50 * time.Millisecond, OnTimeout: action}, b.handle)
			first, wait := runInline(executor.New(nil), ctx, call("c", tl, 0), w)
			r := await(t, first, 50*time.Millisecond+margin)
			if !r.takeover {
				t.Fatalf("RunInline returned %+v instead of handing over", r)
			}
			o := r.outcome
			if !o.TimedOut || o.StopRun != (action == tool.TimeoutStop) || o.Result.ErrorKind != tool.KindTimeout ||
				o.Result.Status != llm.StatusError || o.Result.CallID != "c" || o.Attempts != 1 {
				t.Errorf("takeover outcome = %+v", o)
			}
			b.release()
			if wait() {
				t.Error("RunInline reported ok=true after the watchdog took over")
			}
		})
	}
}

// The per-call Timeout override applies inline too.
func TestRunInlineCallTimeout(t *testing.T) {
	ctx := context.Background()
	w := executor.NewWatchdog(ctx)
	defer w.Close()
	b := newBlocker(t)
	tl := mkTool(t, tool.Spec[args]{Timeout: time.Hour}, b.handle)
	c := call("c", tl, 0)
	c.Timeout = 50 * time.Millisecond
	first, wait := runInline(executor.New(nil), ctx, c, w)
	r := await(t, first, 50*time.Millisecond+margin)
	if !r.takeover || !r.outcome.TimedOut {
		t.Errorf("result = %+v", r)
	}
	b.release()
	wait()
}

func TestRunInlineCanceledBefore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w := executor.NewWatchdog(ctx)
	defer w.Close()
	cancel()
	var calls atomic.Int32
	tl := mkTool(t, tool.Spec[args]{Effect: tool.Write}, func(context.Context, args) (any, error) { calls.Add(1); return "x", nil })
	o, ok := executor.New(nil).RunInline(ctx, call("c", tl, 0), w, func(executor.Outcome) { t.Error("takeover") })
	if !ok || o.Result.Status != llm.StatusSkipped || o.Result.ErrorKind != llm.ErrCanceled || !o.StopRun || o.Attempts != 0 {
		t.Errorf("ok=%v outcome=%+v", ok, o)
	}
	if calls.Load() != 0 {
		t.Error("handler ran under a canceled context")
	}
}

// Canceling the run abandons a handler that ignores its context.
func TestRunInlineCanceledWhileStuck(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := executor.NewWatchdog(ctx)
	defer w.Close()
	b := newBlocker(t)
	tl := mkTool(t, tool.Spec[args]{Timeout: time.Hour}, b.handle)
	first, wait := runInline(executor.New(nil), ctx, call("c", tl, 0), w)
	<-b.started
	cancel()
	r := await(t, first, margin)
	if !r.takeover {
		t.Fatalf("result = %+v, want a takeover", r)
	}
	if o := r.outcome; o.Result.Status != llm.StatusSkipped || o.Result.ErrorKind != llm.ErrCanceled || !o.StopRun || o.TimedOut {
		t.Errorf("outcome = %+v", o)
	}
	b.release()
	if wait() {
		t.Error("RunInline reported ok=true after a takeover")
	}
}

// However a handler that honours its context ends (it returns first, or
// the watchdog does), the outcome is classified the same way as by Run:
// a tool timeout is TimedOut (and stops the run when the tool says so), and
// a canceled run gives a skipped result that stops the run. Repeated,
// because which side wins is up to the scheduler.
func TestRunInlineWellBehavedHandlerClassification(t *testing.T) {
	spin := func(ctx context.Context, _ args) (any, error) {
		for ctx.Err() == nil {
			runtime.Gosched()
		}
		return nil, ctx.Err()
	}
	block := func(ctx context.Context, _ args) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	wrap := func(ctx context.Context, _ args) (any, error) {
		<-ctx.Done()
		return nil, tool.Unavailable(ctx.Err())
	}
	for name, h := range map[string]handler{"spin": spin, "block": block, "wrap": wrap} {
		t.Run("timeout/"+name, func(t *testing.T) {
			ex := executor.New(&executor.Options{RetryBackoff: time.Millisecond})
			for i := range 30 {
				ctx := context.Background()
				w := executor.NewWatchdog(ctx)
				tl := mkTool(t, tool.Spec[args]{Timeout: time.Millisecond}, h)
				first, wait := runInline(ex, ctx, call("c", tl, 0), w)
				r := await(t, first, margin)
				wait()
				w.Close()
				o := r.outcome
				if !o.TimedOut || !o.StopRun || o.Result.ErrorKind != tool.KindTimeout || o.Result.Status != llm.StatusError {
					t.Fatalf("run %d (takeover=%v): outcome = %+v", i, r.takeover, o)
				}
				if o.Attempts != 1 {
					t.Fatalf("run %d: attempts = %d; a timeout is not retried", i, o.Attempts)
				}
			}
		})
		t.Run("cancel/"+name, func(t *testing.T) {
			ex := executor.New(nil)
			for i := range 30 {
				ctx, cancel := context.WithCancel(context.Background())
				w := executor.NewWatchdog(ctx)
				started := make(chan struct{})
				tl := mkTool(t, tool.Spec[args]{Timeout: time.Hour}, func(ctx context.Context, in args) (any, error) {
					close(started)
					return h(ctx, in)
				})
				first, wait := runInline(ex, ctx, call("c", tl, 0), w)
				<-started
				cancel()
				r := await(t, first, margin)
				wait()
				w.Close()
				o := r.outcome
				if o.Result.Status != llm.StatusSkipped || o.Result.ErrorKind != llm.ErrCanceled || !o.StopRun || o.TimedOut {
					t.Fatalf("run %d (takeover=%v): outcome = %+v", i, r.takeover, o)
				}
			}
		})
	}
}

// The context a handler gets carries the run's values, reports the nearer
// of the call's and the run's deadlines, and ends when the call ends, so a
// handler that keeps it (or a goroutine it started) is released.
func TestRunInlineHandlerContext(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "v"), time.Hour)
	defer cancel()
	w := executor.NewWatchdog(parent)
	defer w.Close()

	var kept context.Context
	var sawValue any
	var sawDeadline time.Duration
	var sawErr error
	tl := mkTool(t, tool.Spec[args]{Timeout: 10 * time.Minute}, func(ctx context.Context, _ args) (any, error) {
		kept = ctx
		sawValue = ctx.Value(key{})
		d, ok := ctx.Deadline()
		if !ok {
			return nil, errors.New("no deadline")
		}
		sawDeadline = time.Until(d)
		sawErr = ctx.Err()
		return "ok", nil
	})
	o, ok := executor.New(nil).RunInline(parent, call("c", tl, 0), w, func(executor.Outcome) { t.Error("takeover") })
	if !ok || o.Result.Status != llm.StatusOK {
		t.Fatalf("ok=%v outcome=%+v", ok, o)
	}
	if sawValue != "v" || sawErr != nil {
		t.Errorf("value = %v, err = %v", sawValue, sawErr)
	}
	if sawDeadline > 10*time.Minute || sawDeadline < 9*time.Minute {
		t.Errorf("deadline in %v, want about the 10m call timeout", sawDeadline)
	}
	select {
	case <-kept.Done():
	case <-time.After(margin):
		t.Fatal("the handler's context is still live after the call returned")
	}
	if kept.Err() == nil {
		t.Error("Err() is nil after the call returned")
	}

	// The run's nearer deadline wins.
	short, cancel2 := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel2()
	w2 := executor.NewWatchdog(short)
	defer w2.Close()
	if _, ok := executor.New(nil).RunInline(short, call("c", tl, 0), w2, func(executor.Outcome) {}); !ok {
		t.Fatal("takeover")
	}
	if sawDeadline > 5*time.Minute || sawDeadline < 4*time.Minute {
		t.Errorf("deadline in %v, want about the run's 5m", sawDeadline)
	}
}

// A handler that derives its own context from the one it got is canceled
// with it when the watchdog gives up.
func TestRunInlineDerivedContextCanceled(t *testing.T) {
	ctx := context.Background()
	w := executor.NewWatchdog(ctx)
	defer w.Close()
	derivedDone := make(chan error, 1)
	tl := mkTool(t, tool.Spec[args]{Timeout: 50 * time.Millisecond}, func(ctx context.Context, _ args) (any, error) {
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		<-child.Done()
		derivedDone <- child.Err()
		return nil, child.Err()
	})
	first, wait := runInline(executor.New(nil), ctx, call("c", tl, 0), w)
	r := await(t, first, 50*time.Millisecond+margin)
	wait()
	if !r.outcome.TimedOut {
		t.Errorf("outcome = %+v", r.outcome)
	}
	if err := <-derivedDone; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("derived context ended with %v, want DeadlineExceeded", err)
	}
}

// A watchdog armed for many short calls in a row never fires on a later,
// longer call because of an earlier call's timer.
func TestWatchdogSequentialCalls(t *testing.T) {
	ctx := context.Background()
	w := executor.NewWatchdog(ctx)
	defer w.Close()
	ex := executor.New(nil)
	quick := mkTool(t, tool.Spec[args]{Timeout: time.Millisecond}, func(context.Context, args) (any, error) { return 1, nil })
	gate := make(chan struct{})
	slow := mkTool(t, tool.Spec[args]{Timeout: time.Hour}, func(context.Context, args) (any, error) { <-gate; return 2, nil })
	for round := range 5 {
		// Quick calls with 1ms timeouts leave timers behind. On a loaded
		// machine one may really overrun and be taken over; that is
		// correct, so only the slow call is checked.
		for i := range 20 {
			ex.RunInline(ctx, call("q", quick, i), w, func(executor.Outcome) {})
		}
		first, wait := runInline(ex, ctx, call("s", slow, 0), w)
		time.Sleep(10 * time.Millisecond) // past every earlier call's timeout
		gate <- struct{}{}
		r := await(t, first, margin)
		if r.takeover || r.outcome.Result.Status != llm.StatusOK {
			t.Fatalf("round %d: slow call = %+v", round, r)
		}
		if !wait() {
			t.Fatalf("round %d: RunInline reported ok=false for the slow call", round)
		}
	}
}
