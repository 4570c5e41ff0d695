package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// stageResult is how a RunStageInline call ended: returned with ok, or
// handed over to takeover (and then RunStageInline returned ok=false).
type stageResult struct {
	outs     []executor.Outcome
	ok       bool
	takeover bool
}

// runStage runs RunStageInline on its own goroutine, as the loop's driver
// does, under a watchdog of its own, and reports the first of: the stage
// returning ok=true, or takeover receiving the outcomes. wait waits for
// RunStageInline itself to return (after the test has released any stuck
// handler) and reports its ok value.
func runStage(ex *executor.Executor, ctx context.Context, calls []executor.Call) (first <-chan stageResult, wait func() bool) {
	ch := make(chan stageResult, 2)
	returned := make(chan bool, 1)
	var takeovers atomic.Int32
	go func() {
		w := executor.NewWatchdog(ctx)
		defer w.Close()
		outs, ok := ex.RunStageInline(ctx, calls, w, time.Time{}, func(outs []executor.Outcome) {
			if takeovers.Add(1) > 1 {
				panic("takeover called twice")
			}
			ch <- stageResult{outs: outs, takeover: true}
		})
		if ok {
			ch <- stageResult{outs: outs, ok: true}
		} else if outs != nil {
			panic("RunStageInline returned outcomes with ok=false")
		}
		returned <- ok
	}()
	var once sync.Once
	var ok bool
	return ch, func() bool {
		once.Do(func() { ok = <-returned })
		return ok
	}
}

func awaitStage(t *testing.T, ch <-chan stageResult, d time.Duration) stageResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("RunStageInline neither returned nor handed over within %v", d)
		panic("unreachable")
	}
}

// goid returns the calling goroutine's ID.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	return strings.Fields(string(b))[1] // "goroutine 42 [running]:"
}

func stageCalls(tl *tool.Tool, n int) []executor.Call {
	calls := make([]executor.Call, n)
	for i := range calls {
		calls[i] = call(fmt.Sprint("c", i), tl, i)
	}
	return calls
}

func checkOK(t *testing.T, calls []executor.Call, outs []executor.Outcome) {
	t.Helper()
	if len(outs) != len(calls) {
		t.Fatalf("%d outcomes for %d calls", len(outs), len(calls))
	}
	for i, o := range outs {
		if o.Result.Status != llm.StatusOK || o.Result.CallID != calls[i].Call.ID || string(o.Result.Content) != fmt.Sprint(i) {
			t.Errorf("outcome %d = %+v", i, o)
		}
	}
}

// An empty stage returns at once with no outcomes.
func TestRunStageInlineEmpty(t *testing.T) {
	res, wait := runStage(executor.New(nil), context.Background(), nil)
	r := awaitStage(t, res, margin)
	if !r.ok || !wait() || len(r.outs) != 0 {
		t.Errorf("empty stage: %+v", r)
	}
}

func TestRunStageInlineSingleCall(t *testing.T) {
	tl := mkTool(t, tool.Spec[args]{}, func(_ context.Context, in args) (any, error) { return in.N, nil })
	calls := stageCalls(tl, 1)
	first, wait := runStage(executor.New(nil), context.Background(), calls)
	r := awaitStage(t, first, margin)
	if !r.ok || !wait() {
		t.Fatalf("result = %+v", r)
	}
	checkOK(t, calls, r.outs)
}

// Outcomes come back in call order whatever order the calls finish in.
func TestRunStageInlineCallOrder(t *testing.T) {
	const n = 6
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 5 {
		gates := make([]chan struct{}, n)
		for i := range gates {
			gates[i] = make(chan struct{})
		}
		started := make(chan int, n)
		finished := make(chan int, n)
		tl := mkTool(t, tool.Spec[args]{Timeout: time.Minute}, func(ctx context.Context, in args) (any, error) {
			started <- in.N
			select {
			case <-gates[in.N]:
			case <-time.After(margin):
				return nil, errors.New("never released")
			}
			finished <- in.N
			return in.N, nil
		})
		calls := stageCalls(tl, n)
		ex := executor.New(&executor.Options{MaxParallel: n, SpillAfter: time.Millisecond})
		first, wait := runStage(ex, context.Background(), calls)
		for range n {
			select {
			case <-started:
			case <-time.After(margin):
				t.Fatal("not every call of the stage started")
			}
		}
		order := rng.Perm(n)
		for _, i := range order {
			close(gates[i])
			if got := <-finished; got != i {
				t.Fatalf("released %d, %d finished", i, got)
			}
		}
		r := awaitStage(t, first, margin)
		if !r.ok || !wait() {
			t.Fatalf("round %d: result = %+v", round, r)
		}
		checkOK(t, calls, r.outs)
		if t.Failed() {
			t.Fatalf("round %d: completion order %v", round, order)
		}
	}
}

// Calls slower than SpillAfter run side by side: N calls that each wait
// for all N to have started only finish if they all run at once.
func TestRunStageInlineSlowCallsRunConcurrently(t *testing.T) {
	for _, spill := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprint("spill", spill), func(t *testing.T) {
			const n = 4
			var arrived atomic.Int32
			all := make(chan struct{})
			tl := mkTool(t, tool.Spec[args]{Timeout: time.Minute}, func(ctx context.Context, in args) (any, error) {
				if arrived.Add(1) == n {
					close(all)
				}
				select {
				case <-all:
					return in.N, nil
				case <-time.After(margin):
					return nil, fmt.Errorf("only %d of %d calls started", arrived.Load(), n)
				}
			})
			calls := stageCalls(tl, n)
			ex := executor.New(&executor.Options{MaxParallel: n, SpillAfter: spill})
			first, wait := runStage(ex, context.Background(), calls)
			r := awaitStage(t, first, 2*margin)
			if !r.ok || !wait() {
				t.Fatalf("result = %+v", r)
			}
			checkOK(t, calls, r.outs)
		})
	}
}

func TestRunStageInlineMaxParallel(t *testing.T) {
	for _, tc := range []struct{ maxParallel, want, calls int }{
		{3, 3, 9},
		{2, 2, 5},
		{1, 1, 4},
		{8, 3, 3}, // fewer calls than the cap
	} {
		t.Run(fmt.Sprintf("max%d/calls%d", tc.maxParallel, tc.calls), func(t *testing.T) {
			c := &concurrency{started: make(chan struct{}, tc.calls), gate: make(chan struct{})}
			tl := mkTool(t, tool.Spec[args]{Timeout: time.Minute}, c.handle)
			calls := stageCalls(tl, tc.calls)
			ex := executor.New(&executor.Options{MaxParallel: tc.maxParallel, SpillAfter: time.Millisecond})
			first, wait := runStage(ex, context.Background(), calls)
			for range tc.want {
				select {
				case <-c.started: // the cap is reached...
				case <-time.After(margin):
					close(c.gate)
					t.Fatalf("fewer than %d calls started", tc.want)
				}
			}
			// ...and a buggy executor gets a moment to exceed it.
			time.Sleep(30 * time.Millisecond)
			close(c.gate)
			r := awaitStage(t, first, margin)
			if !r.ok || !wait() {
				t.Fatalf("result = %+v", r)
			}
			if got := int(c.max.Load()); got != tc.want {
				t.Errorf("max concurrent calls = %d, want %d", got, tc.want)
			}
			for i, o := range r.outs {
				if o.Result.Status != llm.StatusOK || o.Result.CallID != calls[i].Call.ID {
					t.Errorf("outcome %d = %+v", i, o.Result)
				}
			}
		})
	}
}

// Quick calls run one after another on the calling goroutine: no
// goroutine is started for them.
func TestRunStageInlineQuickCallsStayInline(t *testing.T) {
	var mu sync.Mutex
	var gids []string
	var order []int
	tl := mkTool(t, tool.Spec[args]{}, func(_ context.Context, in args) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		gids = append(gids, goid())
		order = append(order, in.N)
		return in.N, nil
	})
	calls := stageCalls(tl, 8)
	ex := executor.New(&executor.Options{MaxParallel: 4, SpillAfter: time.Hour})
	w := executor.NewWatchdog(context.Background())
	defer w.Close()
	me := goid()
	outs, ok := ex.RunStageInline(context.Background(), calls, w, time.Time{}, func([]executor.Outcome) { t.Error("takeover") })
	if !ok {
		t.Fatal("ok=false")
	}
	checkOK(t, calls, outs)
	for i, g := range gids {
		if g != me {
			t.Errorf("call %d ran on goroutine %s, not the caller's %s", i, g, me)
		}
	}
	for i, n := range order {
		if n != i {
			t.Fatalf("execution order %v, want model order", order)
		}
	}
}

// A handler that ignores its context in a parallel stage times out; the
// other calls keep their results and the stage returns without waiting for
// the stuck handler.
func TestRunStageInlineStuckCallTimesOut(t *testing.T) {
	b := newBlocker(t)
	stuck := mkTool(t, tool.Spec[args]{Name: "stuck", Timeout: 50 * time.Millisecond, OnTimeout: tool.TimeoutReport}, b.handle)
	// The first call holds the driver until the stuck call has started,
	// so that a helper goroutine is the one that gets stuck.
	first := mkTool(t, tool.Spec[args]{Timeout: time.Minute}, func(_ context.Context, in args) (any, error) {
		select {
		case <-b.started:
			return in.N, nil
		case <-time.After(margin):
			return nil, errors.New("the stuck call never started")
		}
	})
	quick := mkTool(t, tool.Spec[args]{}, func(_ context.Context, in args) (any, error) { return in.N, nil })
	calls := []executor.Call{call("c0", first, 0), call("c1", stuck, 1), call("c2", quick, 2), call("c3", quick, 3)}
	ex := executor.New(&executor.Options{MaxParallel: 3, SpillAfter: 20 * time.Millisecond})
	res, wait := runStage(ex, context.Background(), calls)
	r := awaitStage(t, res, 50*time.Millisecond+margin)
	if r.takeover {
		// Only if the driver lost the race for call 0 on a loaded machine.
		t.Log("the driver itself ran the stuck call and handed the stage over")
	}
	for i, o := range r.outs {
		if o.Result.CallID != calls[i].Call.ID {
			t.Errorf("outcome %d is for %s", i, o.Result.CallID)
		}
		if i == 1 {
			if !o.TimedOut || o.Result.ErrorKind != tool.KindTimeout || o.StopRun || o.Result.Status != llm.StatusError {
				t.Errorf("stuck call outcome = %+v", o)
			}
			continue
		}
		if o.Result.Status != llm.StatusOK || string(o.Result.Content) != fmt.Sprint(i) {
			t.Errorf("outcome %d = %+v", i, o)
		}
	}
	b.release()
	if got := wait(); got != r.ok {
		t.Errorf("RunStageInline returned ok=%v, first result ok=%v", got, r.ok)
	}
}

// When the caller's own call is abandoned, the stage carries on from
// another goroutine: takeover receives every outcome, and RunStageInline
// returns ok=false only once the stuck handler is released.
func TestRunStageInlineDriverAbandoned(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spill  time.Duration
		nStuck int // leading calls that get stuck
	}{
		{"no helpers", time.Hour, 1},
		{"helpers", time.Millisecond, 1},
		{"two stuck in a row", time.Hour, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBlocker(t)
			stuck := mkTool(t, tool.Spec[args]{Name: "stuck", Timeout: 50 * time.Millisecond, OnTimeout: tool.TimeoutStop}, b.handle)
			quick := mkTool(t, tool.Spec[args]{}, func(_ context.Context, in args) (any, error) { return in.N, nil })
			var calls []executor.Call
			for i := range 4 {
				tl := quick
				if i < tc.nStuck {
					tl = stuck
				}
				calls = append(calls, call(fmt.Sprint("c", i), tl, i))
			}
			ex := executor.New(&executor.Options{MaxParallel: 3, SpillAfter: tc.spill})
			res, wait := runStage(ex, context.Background(), calls)
			r := awaitStage(t, res, time.Duration(tc.nStuck)*50*time.Millisecond+margin)
			if !r.takeover {
				t.Fatalf("result = %+v, want a takeover", r)
			}
			for i, o := range r.outs {
				if o.Result.CallID != calls[i].Call.ID {
					t.Errorf("outcome %d is for %s", i, o.Result.CallID)
				}
				if i < tc.nStuck {
					if !o.TimedOut || !o.StopRun || o.Result.ErrorKind != tool.KindTimeout {
						t.Errorf("stuck call %d outcome = %+v", i, o)
					}
				} else if o.Result.Status != llm.StatusOK || string(o.Result.Content) != fmt.Sprint(i) {
					t.Errorf("outcome %d = %+v", i, o)
				}
			}
			returned := make(chan bool, 1)
			go func() { returned <- wait() }()
			select {
			case ok := <-returned:
				t.Fatalf("RunStageInline returned (ok=%v) while its handler was still stuck", ok)
			case <-time.After(20 * time.Millisecond):
			}
			b.release()
			select {
			case ok := <-returned:
				if ok {
					t.Error("RunStageInline reported ok=true after a takeover")
				}
			case <-time.After(margin):
				t.Fatal("RunStageInline did not return after the handler was released")
			}
		})
	}
}

// Canceling the run mid-stage ends every call that has not finished: the
// outcomes are skipped, canceled and stop the run, and calls not started
// yet never start.
func TestRunStageInlineCanceled(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxParallel int
		spill       time.Duration
		ignoreCtx   bool
		wantStarted int
	}{
		{"parallel, handlers honour the context", 3, time.Millisecond, false, 3},
		{"parallel, handlers ignore the context", 3, time.Millisecond, true, 3},
		{"one at a time, handler honours the context", 1, 0, false, 1},
		{"one at a time, handler ignores the context", 1, 0, true, 1},
		{"inline only", 4, time.Hour, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBlocker(t)
			var started atomic.Int32
			h := func(ctx context.Context, in args) (any, error) {
				started.Add(1)
				if tc.ignoreCtx {
					return b.handle(ctx, in)
				}
				b.started <- in.N
				<-ctx.Done()
				return nil, ctx.Err()
			}
			tl := mkTool(t, tool.Spec[args]{Timeout: time.Hour}, h)
			calls := stageCalls(tl, 3)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ex := executor.New(&executor.Options{MaxParallel: tc.maxParallel, SpillAfter: tc.spill})
			res, wait := runStage(ex, ctx, calls)
			for range tc.wantStarted {
				select {
				case <-b.started:
				case <-time.After(margin):
					t.Fatal("the stage's calls did not start")
				}
			}
			cancel()
			r := awaitStage(t, res, margin)
			for i, o := range r.outs {
				if o.Result.CallID != calls[i].Call.ID || o.Result.Status != llm.StatusSkipped ||
					o.Result.ErrorKind != llm.ErrCanceled || !o.StopRun || o.TimedOut {
					t.Errorf("outcome %d = %+v", i, o)
				}
			}
			b.release()
			wait()
			if got := int(started.Load()); got != tc.wantStarted {
				t.Errorf("%d handlers started, want %d", got, tc.wantStarted)
			}
			if tc.ignoreCtx && !r.takeover && tc.maxParallel == 1 {
				t.Error("a stuck driver call was not handed over")
			}
		})
	}
}

// A run canceled before the stage starts runs nothing.
func TestRunStageInlineCanceledBefore(t *testing.T) {
	var started atomic.Int32
	tl := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) { started.Add(1); return 1, nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := stageCalls(tl, 3)
	res, wait := runStage(executor.New(nil), ctx, calls)
	r := awaitStage(t, res, margin)
	wait()
	for i, o := range r.outs {
		if o.Result.Status != llm.StatusSkipped || !o.StopRun || o.Attempts != 0 {
			t.Errorf("outcome %d = %+v", i, o)
		}
	}
	if started.Load() != 0 {
		t.Errorf("%d handlers ran under a canceled context", started.Load())
	}
}

// sleepyTool returns a tool whose call n sleeps for sleeps[n], ignoring
// its context, then returns n; set the sleeps while holding mu.
func sleepyTool(t *testing.T, timeout time.Duration) (tl *tool.Tool, mu *sync.Mutex, sleeps map[int]time.Duration) {
	mu, sleeps = new(sync.Mutex), map[int]time.Duration{}
	tl = mkTool(t, tool.Spec[args]{Timeout: timeout, OnTimeout: tool.TimeoutReport}, func(_ context.Context, in args) (any, error) {
		mu.Lock()
		d := sleeps[in.N]
		mu.Unlock()
		time.Sleep(d) // ignores its context: a late one is abandoned
		return in.N, nil
	})
	return tl, mu, sleeps
}

// Over many stages of calls that take random, short times, some past a
// short timeout, the stage waits for every helper's call whoever delivers
// it (the helper, or the helper's watchdog giving up on it) and returns
// each outcome in its place, whether the driver or a helper ran it.
func TestRunStageInlineHelpersRandomTimes(t *testing.T) {
	const n, rounds, timeout = 7, 150, 3 * time.Millisecond
	rng := rand.New(rand.NewPCG(5, 6))
	tl, mu, sleeps := sleepyTool(t, timeout)
	for round := range rounds {
		calls := make([]executor.Call, n)
		mu.Lock()
		for i := range calls {
			id := round*n + i
			calls[i] = call(fmt.Sprint("c", id), tl, id)
			switch rng.IntN(8) {
			case 0:
				sleeps[id] = timeout + time.Millisecond
			case 1, 2, 3:
				sleeps[id] = time.Duration(rng.IntN(300)) * time.Microsecond
			default:
				sleeps[id] = 0
			}
		}
		mu.Unlock()
		ex := executor.New(&executor.Options{MaxParallel: 1 + rng.IntN(4), SpillAfter: time.Duration(1+rng.IntN(200)) * time.Microsecond})
		first, wait := runStage(ex, context.Background(), calls)
		r := awaitStage(t, first, margin)
		for i, o := range r.outs {
			id := round*n + i
			switch {
			case o.Result.CallID != calls[i].Call.ID:
				t.Fatalf("round %d: outcome %d is for %q", round, i, o.Result.CallID)
			case o.Result.Status == llm.StatusOK && string(o.Result.Content) != fmt.Sprint(id):
				t.Fatalf("round %d: outcome %d = %+v", round, i, o)
			case o.Result.Status != llm.StatusOK && !o.TimedOut:
				t.Fatalf("round %d: outcome %d = %+v", round, i, o)
			}
		}
		wait()
	}
}

// One executor serves stage after stage, as a runner's does, and reuses
// what a stage that is over no longer needs: stages that spill onto helpers
// and stages that do not, mixed at random, each get their own outcomes,
// which later stages leave alone.
func TestRunStageInlineStagesOfOneExecutor(t *testing.T) {
	// The timeout is far above any call's time: this test is about reuse,
	// and a loaded machine must not turn a call into a timed-out one.
	const rounds, timeout = 300, 10 * time.Second
	ex := executor.New(&executor.Options{MaxParallel: 3, SpillAfter: 50 * time.Microsecond})
	rng := rand.New(rand.NewPCG(7, 8))
	tl, mu, sleeps := sleepyTool(t, timeout)
	line := func(o executor.Outcome) string {
		return fmt.Sprintf("%s %s %s", o.Result.CallID, o.Result.Status, o.Result.Content)
	}
	type stage struct {
		outs []executor.Outcome
		want []string
	}
	var stages []stage
	id := 0
	for range rounds {
		calls := make([]executor.Call, 1+rng.IntN(5))
		mu.Lock()
		for i := range calls {
			calls[i] = call(fmt.Sprint("c", id), tl, id)
			if rng.IntN(3) == 0 {
				sleeps[id] = time.Duration(rng.IntN(200)) * time.Microsecond
			}
			id++
		}
		mu.Unlock()
		first, wait := runStage(ex, context.Background(), calls)
		r := awaitStage(t, first, margin)
		if !wait() {
			t.Fatal("a stage of quick calls was handed over")
		}
		if len(r.outs) != len(calls) {
			t.Fatalf("%d outcomes for %d calls", len(r.outs), len(calls))
		}
		var want []string
		for i, o := range r.outs {
			n := id - len(calls) + i
			if o.Result.Status != llm.StatusOK || o.Result.CallID != calls[i].Call.ID || string(o.Result.Content) != fmt.Sprint(n) {
				t.Fatalf("outcome %d = %+v, want call c%d's", i, o, n)
			}
			want = append(want, line(o))
		}
		stages = append(stages, stage{r.outs, want})
	}
	for n, s := range stages {
		for i, o := range s.outs {
			if got := line(o); got != s.want[i] {
				t.Fatalf("stage %d, outcome %d changed after later stages: %q, was %q", n, i, got, s.want[i])
			}
		}
	}
}
