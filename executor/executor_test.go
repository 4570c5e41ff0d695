package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// margin bounds how long a call may take past its timeout before a test
// calls it hung. Generous, so a loaded machine never fails the test.
const margin = 2 * time.Second

type args struct {
	N int `json:"n,omitempty"`
}

type handler func(ctx context.Context, in args) (any, error)

func mkTool(t *testing.T, spec tool.Spec[args], h handler) *tool.Tool {
	t.Helper()
	if spec.Name == "" {
		spec.Name = "t"
	}
	tl, err := tool.New(spec, func(ctx context.Context, in args) (any, error) { return h(ctx, in) })
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func call(id string, tl *tool.Tool, n int) executor.Call {
	return executor.Call{
		Call: llm.ToolCall{ID: id, Name: tl.Name(), Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))},
		Tool: tl,
	}
}

// blocker is a handler that ignores its context and waits until the test
// releases it; release also waits for every handler that has started to
// return, so no handler goroutine outlives the test.
type blocker struct {
	started chan int
	gate    chan struct{}
	once    sync.Once

	mu      sync.Mutex
	cond    *sync.Cond
	running int
}

func newBlocker(t *testing.T) *blocker {
	b := &blocker{started: make(chan int, 100), gate: make(chan struct{})}
	b.cond = sync.NewCond(&b.mu)
	t.Cleanup(b.release)
	return b
}

func (b *blocker) handle(_ context.Context, in args) (any, error) {
	b.mu.Lock()
	b.running++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.running--
		b.cond.Broadcast()
		b.mu.Unlock()
	}()
	b.started <- in.N
	<-b.gate
	return "released", nil
}

func (b *blocker) release() {
	b.once.Do(func() { close(b.gate) })
	b.mu.Lock()
	for b.running > 0 {
		b.cond.Wait()
	}
	b.mu.Unlock()
}

// within runs f in a goroutine and fails the test if it does not return
// within d.
func within[T any](t *testing.T, d time.Duration, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("did not return within %v", d)
		panic("unreachable")
	}
}

// errorContent decodes the {"error", "kind"} content of a failed result.
func errorContent(t *testing.T, r llm.ToolResult) (msg string, kind llm.ErrorKind) {
	t.Helper()
	var c struct {
		Error string        `json:"error"`
		Kind  llm.ErrorKind `json:"kind"`
	}
	if err := json.Unmarshal(r.Content, &c); err != nil {
		t.Fatalf("result content is not an error object: %s", r.Content)
	}
	if c.Kind != r.ErrorKind {
		t.Errorf("content kind %q != result kind %q", c.Kind, r.ErrorKind)
	}
	return c.Error, c.Kind
}

// core is the part of Options this file tests (the idempotency ledger's
// options are tested with the ledger).
type core struct {
	DefaultTimeout, RetryBackoff, MaxRetryWait time.Duration
	MaxRetries, MaxParallel                    int
}

func coreOf(o executor.Options) core {
	return core{o.DefaultTimeout, o.RetryBackoff, o.MaxRetryWait, o.MaxRetries, o.MaxParallel}
}

func TestDefaults(t *testing.T) {
	want := core{
		DefaultTimeout: 30 * time.Second, MaxRetries: 2, RetryBackoff: 100 * time.Millisecond,
		MaxRetryWait: 5 * time.Second, MaxParallel: 4,
	}
	if got := coreOf(executor.New(nil).Options()); got != want {
		t.Errorf("New(nil).Options() = %+v, want %+v", got, want)
	}
	if got := coreOf(executor.New(&executor.Options{}).Options()); got != want {
		t.Errorf("New(&Options{}).Options() = %+v, want %+v", got, want)
	}
	if got := executor.New(&executor.Options{MaxRetries: -1}).Options().MaxRetries; got != 0 {
		t.Errorf("MaxRetries -1 -> %d, want 0", got)
	}
	custom := executor.Options{DefaultTimeout: time.Second, MaxRetries: 5, RetryBackoff: time.Millisecond, MaxRetryWait: time.Minute, MaxParallel: 9}
	if got := coreOf(executor.New(&custom).Options()); got != coreOf(custom) {
		t.Errorf("custom options changed: %+v", got)
	}
}

func TestRunOK(t *testing.T) {
	tl := mkTool(t, tool.Spec[args]{Name: "double"}, func(_ context.Context, in args) (any, error) {
		return map[string]int{"n": in.N * 2}, nil
	})
	o := executor.New(nil).Run(context.Background(), call("c1", tl, 21))
	r := o.Result
	if r.CallID != "c1" || r.Name != "double" || r.Status != llm.StatusOK || r.ErrorKind != "" {
		t.Errorf("result = %+v", r)
	}
	if string(r.Content) != `{"n":42}` {
		t.Errorf("content = %s", r.Content)
	}
	if o.Attempts != 1 || o.TimedOut || o.StopRun || o.Err != "" || o.Duration < 0 {
		t.Errorf("outcome = %+v", o)
	}
}

func TestRunEmptyContentIsNull(t *testing.T) {
	tl, err := tool.NewRaw(tool.Definition{Name: "raw", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := executor.New(nil).Run(context.Background(), executor.Call{Call: llm.ToolCall{ID: "c", Name: "raw"}, Tool: tl})
	if o.Result.Status != llm.StatusOK || string(o.Result.Content) != "null" {
		t.Errorf("result = %+v (content %s), want ok with null content", o.Result, o.Result.Content)
	}
}

func TestRunStageEmpty(t *testing.T) {
	if out := executor.New(nil).RunStage(context.Background(), nil); len(out) != 0 {
		t.Errorf("RunStage(nil) = %v", out)
	}
}

// Outcomes come back in call order even when the calls finish in reverse.
// Channels force the completion order; nothing depends on timing.
func TestRunStageKeepsCallOrder(t *testing.T) {
	const n = 4
	gates := make([]chan struct{}, n)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	started := make(chan int, n)
	finished := make(chan int, n)
	var mu sync.Mutex
	var order []int
	tl := mkTool(t, tool.Spec[args]{Name: "gated"}, func(_ context.Context, in args) (any, error) {
		started <- in.N
		<-gates[in.N]
		mu.Lock()
		order = append(order, in.N)
		mu.Unlock()
		finished <- in.N
		return fmt.Sprintf("result %d", in.N), nil
	})
	calls := make([]executor.Call, n)
	for i := range calls {
		calls[i] = call(fmt.Sprintf("call_%d", i), tl, i)
	}
	ex := executor.New(&executor.Options{MaxParallel: n})
	done := make(chan []executor.Outcome, 1)
	go func() { done <- ex.RunStage(context.Background(), calls) }()

	for range n {
		<-started // all calls run at once
	}
	for i := n - 1; i >= 0; i-- {
		close(gates[i])
		if got := <-finished; got != i {
			t.Fatalf("call %d finished, want %d", got, i)
		}
	}
	out := <-done
	if fmt.Sprint(order) != "[3 2 1 0]" {
		t.Fatalf("completion order = %v, want [3 2 1 0]", order)
	}
	if len(out) != n {
		t.Fatalf("%d outcomes, want %d", len(out), n)
	}
	for i, o := range out {
		want := fmt.Sprintf("call_%d", i)
		if o.Result.CallID != want || string(o.Result.Content) != fmt.Sprintf(`"result %d"`, i) {
			t.Errorf("outcome %d = %s / %s, want %s / result %d", i, o.Result.CallID, o.Result.Content, want, i)
		}
	}
}

// One failing call does not lose the others' results.
func TestRunStagePartialSuccess(t *testing.T) {
	tl := mkTool(t, tool.Spec[args]{Name: "mixed"}, func(_ context.Context, in args) (any, error) {
		switch in.N {
		case 1:
			return nil, tool.NotFound("nothing for 1")
		case 2:
			panic("bad state")
		}
		return in.N, nil
	})
	calls := []executor.Call{call("a", tl, 0), call("b", tl, 1), call("c", tl, 2), call("d", tl, 3)}
	out := executor.New(nil).RunStage(context.Background(), calls)
	want := []struct {
		status llm.ResultStatus
		kind   llm.ErrorKind
	}{{llm.StatusOK, ""}, {llm.StatusError, llm.KindNotFound}, {llm.StatusError, llm.KindInternal}, {llm.StatusOK, ""}}
	for i, w := range want {
		r := out[i].Result
		if r.CallID != calls[i].Call.ID || r.Status != w.status || r.ErrorKind != w.kind {
			t.Errorf("outcome %d = %+v, want %s/%s", i, r, w.status, w.kind)
		}
		if out[i].StopRun {
			t.Errorf("outcome %d stops the run", i)
		}
	}
	if string(out[3].Result.Content) != "3" {
		t.Errorf("last result content = %s", out[3].Result.Content)
	}
}

func TestTimeoutToolIgnoresContext(t *testing.T) {
	for _, tc := range []struct {
		action   tool.TimeoutAction
		stopRun  bool
		stageLen int
	}{
		{tool.TimeoutStop, true, 1},
		{tool.TimeoutReport, false, 1},
		{tool.TimeoutStop, true, 3}, // in a parallel stage
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.action, tc.stageLen), func(t *testing.T) {
			b := newBlocker(t)
			hang := mkTool(t, tool.Spec[args]{Name: "hang", Timeout: 50 * time.Millisecond, OnTimeout: tc.action}, b.handle)
			quick := mkTool(t, tool.Spec[args]{Name: "quick"}, func(context.Context, args) (any, error) { return "ok", nil })
			calls := []executor.Call{call("c0", hang, 0)}
			for i := 1; i < tc.stageLen; i++ {
				calls = append(calls, call(fmt.Sprintf("c%d", i), quick, i))
			}
			start := time.Now()
			out := within(t, 50*time.Millisecond+margin, func() []executor.Outcome {
				return executor.New(nil).RunStage(context.Background(), calls)
			})
			if d := time.Since(start); d < 50*time.Millisecond {
				t.Errorf("returned after %v, before the 50ms timeout", d)
			}
			o := out[0]
			if !o.TimedOut || o.StopRun != tc.stopRun {
				t.Errorf("TimedOut, StopRun = %v, %v; want true, %v", o.TimedOut, o.StopRun, tc.stopRun)
			}
			if o.Result.Status != llm.StatusError || o.Result.ErrorKind != llm.KindTimeout || o.Result.CallID != "c0" {
				t.Errorf("result = %+v", o.Result)
			}
			if msg, _ := errorContent(t, o.Result); !strings.Contains(msg, "50ms") {
				t.Errorf("message %q does not state the timeout", msg)
			}
			if o.Attempts != 1 || o.Err == "" {
				t.Errorf("outcome = %+v", o)
			}
			for _, q := range out[1:] {
				if q.Result.Status != llm.StatusOK || q.StopRun {
					t.Errorf("quick call = %+v", q)
				}
			}
			b.release() // the abandoned handler can finish now
		})
	}
}

// A handler that honours its context ends at the timeout with the
// context's error, and is classified the same way.
func TestTimeoutToolHonoursContext(t *testing.T) {
	for name, h := range map[string]handler{
		"returns ctx.Err": func(ctx context.Context, _ args) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
		"wraps it as unavailable": func(ctx context.Context, _ args) (any, error) {
			<-ctx.Done()
			return nil, tool.Unavailable(ctx.Err())
		},
	} {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			tl := mkTool(t, tool.Spec[args]{Timeout: 50 * time.Millisecond}, func(ctx context.Context, in args) (any, error) {
				calls.Add(1)
				return h(ctx, in)
			})
			ex := executor.New(&executor.Options{RetryBackoff: time.Millisecond})
			o := within(t, 50*time.Millisecond+margin, func() executor.Outcome {
				return ex.Run(context.Background(), call("c", tl, 0))
			})
			if !o.TimedOut || !o.StopRun || o.Result.ErrorKind != llm.KindTimeout || o.Result.Status != llm.StatusError {
				t.Errorf("outcome = %+v", o)
			}
			// A timeout is not retried, even if the tool called it unavailable.
			if o.Attempts != 1 || calls.Load() != 1 {
				t.Errorf("attempts = %d, handler calls = %d; want 1, 1", o.Attempts, calls.Load())
			}
		})
	}
}

// Which timeout applies: the call's override, else the tool's, else the
// executor's default. The handler reads its deadline, so nothing here
// depends on timing.
func TestTimeoutPrecedence(t *testing.T) {
	deadlineIn := func(ctx context.Context, _ args) (any, error) {
		d, ok := ctx.Deadline()
		if !ok {
			return nil, errors.New("no deadline")
		}
		return time.Until(d).Seconds(), nil
	}
	tests := []struct {
		name           string
		defaultTimeout time.Duration
		toolTimeout    time.Duration
		callTimeout    time.Duration
		want           time.Duration
	}{
		{"executor default", 0, 0, 0, 30 * time.Second},
		{"configured default", time.Hour, 0, 0, time.Hour},
		{"tool timeout", time.Hour, 10 * time.Hour, 0, 10 * time.Hour},
		{"call override shorter", time.Hour, 10 * time.Hour, 2 * time.Hour, 2 * time.Hour},
		{"call override longer", time.Hour, 10 * time.Hour, 100 * time.Hour, 100 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := mkTool(t, tool.Spec[args]{Timeout: tt.toolTimeout}, deadlineIn)
			c := call("c", tl, 0)
			c.Timeout = tt.callTimeout
			o := executor.New(&executor.Options{DefaultTimeout: tt.defaultTimeout}).Run(context.Background(), c)
			if o.Result.Status != llm.StatusOK {
				t.Fatalf("outcome = %+v", o)
			}
			var secs float64
			if err := json.Unmarshal(o.Result.Content, &secs); err != nil {
				t.Fatal(err)
			}
			left := time.Duration(secs * float64(time.Second))
			if left > tt.want || left < tt.want-time.Minute {
				t.Errorf("handler saw %v until its deadline, want about %v", left, tt.want)
			}
		})
	}
}

// A per-call Timeout overrides a long tool timeout for a hanging tool.
func TestTimeoutCallOverride(t *testing.T) {
	b := newBlocker(t)
	tl := mkTool(t, tool.Spec[args]{Timeout: time.Hour}, b.handle)
	c := call("c", tl, 0)
	c.Timeout = 50 * time.Millisecond
	o := within(t, 50*time.Millisecond+margin, func() executor.Outcome {
		return executor.New(nil).Run(context.Background(), c)
	})
	if !o.TimedOut || !o.StopRun || o.Result.ErrorKind != llm.KindTimeout {
		t.Errorf("outcome = %+v", o)
	}
	if msg, _ := errorContent(t, o.Result); !strings.Contains(msg, "50ms") {
		t.Errorf("message %q does not state the call's timeout", msg)
	}
	b.release()
}

func TestTimeoutExecutorDefault(t *testing.T) {
	b := newBlocker(t)
	tl := mkTool(t, tool.Spec[args]{}, b.handle)
	o := within(t, 50*time.Millisecond+margin, func() executor.Outcome {
		return executor.New(&executor.Options{DefaultTimeout: 50 * time.Millisecond}).Run(context.Background(), call("c", tl, 0))
	})
	if !o.TimedOut || o.Result.ErrorKind != llm.KindTimeout {
		t.Errorf("outcome = %+v", o)
	}
	b.release()
}

func TestPanicRecovered(t *testing.T) {
	for name, p := range map[string]any{
		"string": "index out of range",
		"error":  errors.New("nil map"),
		"nil":    nil,
	} {
		t.Run(name, func(t *testing.T) {
			tl := mkTool(t, tool.Spec[args]{Name: "crash"}, func(context.Context, args) (any, error) { panic(p) })
			o := within(t, margin, func() executor.Outcome {
				return executor.New(nil).Run(context.Background(), call("c1", tl, 0))
			})
			r := o.Result
			if r.CallID != "c1" || r.Status != llm.StatusError || r.ErrorKind != llm.KindInternal {
				t.Errorf("result = %+v", r)
			}
			if msg, _ := errorContent(t, r); !strings.Contains(msg, "panicked") {
				t.Errorf("message %q does not say the tool panicked", msg)
			}
			if o.StopRun || o.TimedOut || o.Attempts != 1 || !strings.Contains(o.Err, "crash") {
				t.Errorf("outcome = %+v", o)
			}
		})
	}
}

func TestRetryTransientThenGiveUp(t *testing.T) {
	cause := errors.New("HTTP 429")
	for name, mkErr := range map[string]func() error{
		"rate limited": func() error { return tool.RateLimited(0, cause) },
		"unavailable":  func() error { return tool.Unavailable(cause) },
	} {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			tl := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) {
				calls.Add(1)
				return nil, mkErr()
			})
			ex := executor.New(&executor.Options{MaxRetries: 3, RetryBackoff: time.Millisecond})
			o := within(t, margin, func() executor.Outcome { return ex.Run(context.Background(), call("c", tl, 0)) })
			kind := tool.KindOf(mkErr())
			if o.Attempts != 4 || calls.Load() != 4 {
				t.Errorf("attempts = %d, handler calls = %d; want 4 (1 + MaxRetries)", o.Attempts, calls.Load())
			}
			if o.Result.Status != llm.StatusError || o.Result.ErrorKind != kind || o.StopRun || o.TimedOut {
				t.Errorf("outcome = %+v", o)
			}
			if msg, _ := errorContent(t, o.Result); !strings.Contains(msg, "after 4 attempts") {
				t.Errorf("message %q does not state the attempts", msg)
			}
			// The model sees the tool's message, not the underlying cause;
			// the log keeps the cause.
			if msg, _ := errorContent(t, o.Result); strings.Contains(msg, "HTTP 429") {
				t.Errorf("message %q leaks the underlying cause", msg)
			}
			if !strings.Contains(o.Err, string(kind)) {
				t.Errorf("Err = %q", o.Err)
			}
		})
	}
}

func TestRetryDisabled(t *testing.T) {
	var calls atomic.Int32
	tl := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) {
		calls.Add(1)
		return nil, tool.Unavailable(nil)
	})
	o := executor.New(&executor.Options{MaxRetries: -1}).Run(context.Background(), call("c", tl, 0))
	if o.Attempts != 1 || calls.Load() != 1 || o.Result.ErrorKind != llm.KindUnavailable {
		t.Errorf("outcome = %+v, calls = %d", o, calls.Load())
	}
	if msg, _ := errorContent(t, o.Result); strings.Contains(msg, "attempts") {
		t.Errorf("single attempt message mentions attempts: %q", msg)
	}
}

func TestRetrySucceedsAfterTransientFailure(t *testing.T) {
	var calls atomic.Int32
	tl := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) {
		if calls.Add(1) == 1 {
			return nil, tool.Unavailable(errors.New("503"))
		}
		return "fine", nil
	})
	o := executor.New(&executor.Options{RetryBackoff: time.Millisecond}).Run(context.Background(), call("c", tl, 0))
	if o.Result.Status != llm.StatusOK || string(o.Result.Content) != `"fine"` || o.Result.ErrorKind != "" {
		t.Errorf("result = %+v", o.Result)
	}
	if o.Attempts != 2 || calls.Load() != 2 || o.Err != "" {
		t.Errorf("outcome = %+v, calls = %d", o, calls.Load())
	}
}

// RetryAfter is a minimum wait: the next attempt starts no sooner, even
// when the executor's own backoff is shorter. (A timer never fires early,
// so a lower bound is safe to assert.)
func TestRetryAfterIsMinimumWait(t *testing.T) {
	const retryAfter = 100 * time.Millisecond
	var mu sync.Mutex
	var starts, ends []time.Time
	tl := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, time.Now())
		defer func() { ends = append(ends, time.Now()) }()
		if len(starts) == 1 {
			return nil, tool.RateLimited(retryAfter, nil)
		}
		return "ok", nil
	})
	ex := executor.New(&executor.Options{RetryBackoff: time.Millisecond})
	o := within(t, retryAfter+margin, func() executor.Outcome { return ex.Run(context.Background(), call("c", tl, 0)) })
	if o.Result.Status != llm.StatusOK || o.Attempts != 2 {
		t.Fatalf("outcome = %+v", o)
	}
	if gap := starts[1].Sub(ends[0]); gap < retryAfter {
		t.Errorf("second attempt started %v after the first ended, want at least %v", gap, retryAfter)
	}
	if o.Duration < retryAfter {
		t.Errorf("Duration = %v, want at least the %v wait", o.Duration, retryAfter)
	}
}

// The backoff doubles between attempts.
func TestRetryBackoffDoubles(t *testing.T) {
	const backoff = 10 * time.Millisecond
	var mu sync.Mutex
	var starts, ends []time.Time
	tl := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, time.Now())
		ends = append(ends, time.Now())
		return nil, tool.Unavailable(nil)
	})
	ex := executor.New(&executor.Options{MaxRetries: 3, RetryBackoff: backoff})
	o := within(t, margin, func() executor.Outcome { return ex.Run(context.Background(), call("c", tl, 0)) })
	if o.Attempts != 4 || len(starts) != 4 {
		t.Fatalf("attempts = %d, starts = %d", o.Attempts, len(starts))
	}
	for i, want := range []time.Duration{backoff, 2 * backoff, 4 * backoff} {
		if gap := starts[i+1].Sub(ends[i]); gap < want {
			t.Errorf("wait before attempt %d = %v, want at least %v", i+2, gap, want)
		}
	}
}

// MaxRetryWait caps a rate limiter's Retry-After.
func TestRetryAfterCapped(t *testing.T) {
	var calls atomic.Int32
	tl := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) {
		if calls.Add(1) == 1 {
			return nil, tool.RateLimited(time.Hour, nil)
		}
		return "ok", nil
	})
	ex := executor.New(&executor.Options{MaxRetryWait: 20 * time.Millisecond, RetryBackoff: time.Millisecond})
	o := within(t, margin, func() executor.Outcome { return ex.Run(context.Background(), call("c", tl, 0)) })
	if o.Result.Status != llm.StatusOK || o.Attempts != 2 {
		t.Errorf("outcome = %+v", o)
	}
}

// Failures that another attempt cannot fix are reported at once.
func TestDeterministicFailuresNotRetried(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		kind    llm.ErrorKind
		message string
	}{
		{"not found", tool.NotFound("no order A1"), llm.KindNotFound, "no order A1"},
		{"needs input", tool.NeedsInput("which address?"), llm.KindNeedsInput, "which address?"},
		{"plain error", errors.New("db constraint violated"), llm.KindInternal, "db constraint violated"},
		{"invalid arguments", &tool.Error{Kind: llm.KindInvalidArguments, Msg: "n must be even"}, llm.KindInvalidArguments, "n must be even"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			tl := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) {
				calls.Add(1)
				return nil, tt.err
			})
			ex := executor.New(&executor.Options{MaxRetries: 5, RetryBackoff: time.Millisecond})
			o := ex.Run(context.Background(), call("c", tl, 0))
			if o.Attempts != 1 || calls.Load() != 1 {
				t.Errorf("attempts = %d, calls = %d; want 1, 1", o.Attempts, calls.Load())
			}
			if o.Result.Status != llm.StatusError || o.Result.ErrorKind != tt.kind || o.StopRun {
				t.Errorf("outcome = %+v", o)
			}
			if msg, _ := errorContent(t, o.Result); msg != tt.message {
				t.Errorf("message = %q, want %q", msg, tt.message)
			}
		})
	}
}

// Arguments the handler cannot decode are an invalid_arguments result, not
// a crash (the executor does not validate; the loop does that first).
func TestUndecodableArguments(t *testing.T) {
	var calls atomic.Int32
	tl := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) { calls.Add(1); return "x", nil })
	c := executor.Call{Call: llm.ToolCall{ID: "c", Name: "t", Arguments: json.RawMessage(`{"n":"two"}`)}, Tool: tl}
	o := executor.New(nil).Run(context.Background(), c)
	if o.Result.ErrorKind != llm.KindInvalidArguments || o.Attempts != 1 || calls.Load() != 0 {
		t.Errorf("outcome = %+v, calls = %d", o, calls.Load())
	}
}

func TestCanceledBeforeRun(t *testing.T) {
	var calls atomic.Int32
	tl := mkTool(t, tool.Spec[args]{Effect: tool.Write}, func(context.Context, args) (any, error) {
		calls.Add(1)
		return "wrote", nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls3 := []executor.Call{call("a", tl, 0), call("b", tl, 1), call("c", tl, 2)}
	for _, ex := range []*executor.Executor{executor.New(nil), executor.New(&executor.Options{MaxParallel: 1})} {
		out := within(t, margin, func() []executor.Outcome { return ex.RunStage(ctx, calls3) })
		for i, o := range out {
			r := o.Result
			if r.CallID != calls3[i].Call.ID || r.Status != llm.StatusSkipped || r.ErrorKind != llm.KindCanceled {
				t.Errorf("outcome %d result = %+v, want skipped/canceled", i, r)
			}
			if !o.StopRun || o.TimedOut {
				t.Errorf("outcome %d = %+v, want StopRun", i, o)
			}
			if o.Attempts != 0 {
				t.Errorf("outcome %d attempts = %d, want 0 for a call that never ran", i, o.Attempts)
			}
			errorContent(t, r)
		}
	}
	// A skipped call never ran: the handler (a write!) was not started.
	if n := calls.Load(); n != 0 {
		t.Errorf("handler ran %d times under a canceled context", n)
	}
}

func TestCanceledDuringRun(t *testing.T) {
	started := make(chan struct{})
	tl := mkTool(t, tool.Spec[args]{Timeout: time.Hour}, func(ctx context.Context, _ args) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan executor.Outcome, 1)
	go func() { done <- executor.New(nil).Run(ctx, call("c", tl, 0)) }()
	<-started
	cancel()
	var o executor.Outcome
	select {
	case o = <-done:
	case <-time.After(margin):
		t.Fatal("Run did not return after cancel")
	}
	if o.Result.Status != llm.StatusSkipped || o.Result.ErrorKind != llm.KindCanceled || !o.StopRun || o.TimedOut {
		t.Errorf("outcome = %+v", o)
	}
	if o.Attempts != 1 {
		t.Errorf("attempts = %d, want 1", o.Attempts)
	}
}

// A hanging tool does not hold a canceled run.
func TestCanceledWhileToolIgnoresContext(t *testing.T) {
	b := newBlocker(t)
	tl := mkTool(t, tool.Spec[args]{Timeout: time.Hour}, b.handle)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan executor.Outcome, 1)
	go func() { done <- executor.New(nil).Run(ctx, call("c", tl, 0)) }()
	<-b.started
	cancel()
	var o executor.Outcome
	select {
	case o = <-done:
	case <-time.After(margin):
		t.Fatal("Run did not return after cancel")
	}
	if o.Result.Status != llm.StatusSkipped || o.Result.ErrorKind != llm.KindCanceled || !o.StopRun || o.TimedOut {
		t.Errorf("outcome = %+v", o)
	}
	b.release()
}

// The run's own deadline ending is not the tool's timeout.
func TestRunDeadlineIsNotToolTimeout(t *testing.T) {
	b := newBlocker(t)
	tl := mkTool(t, tool.Spec[args]{Timeout: time.Hour}, b.handle)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	o := within(t, 50*time.Millisecond+margin, func() executor.Outcome {
		return executor.New(nil).Run(ctx, call("c", tl, 0))
	})
	if o.TimedOut || !o.StopRun || o.Result.ErrorKind != llm.KindCanceled || o.Result.Status != llm.StatusSkipped {
		t.Errorf("outcome = %+v", o)
	}
	b.release()
}

// Cancellation during the wait between attempts ends the call without
// another attempt.
func TestCanceledDuringRetryWait(t *testing.T) {
	var calls atomic.Int32
	failed := make(chan struct{})
	tl := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) {
		if calls.Add(1) == 1 {
			defer close(failed)
		}
		return nil, tool.RateLimited(time.Hour, nil)
	})
	ex := executor.New(&executor.Options{MaxRetries: 5, RetryBackoff: time.Hour, MaxRetryWait: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan executor.Outcome, 1)
	go func() { done <- ex.Run(ctx, call("c", tl, 0)) }()
	<-failed
	cancel()
	var o executor.Outcome
	select {
	case o = <-done:
	case <-time.After(margin):
		t.Fatal("Run kept waiting after cancel")
	}
	if o.Result.Status != llm.StatusSkipped || o.Result.ErrorKind != llm.KindCanceled || !o.StopRun {
		t.Errorf("outcome = %+v", o)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1 (no attempt after cancel)", n)
	}
	if o.Attempts != 1 {
		t.Errorf("attempts = %d, want 1", o.Attempts)
	}
}

// concurrency counts how many handlers run at once.
type concurrency struct {
	cur, max atomic.Int32
	started  chan struct{}
	gate     chan struct{}
}

func (c *concurrency) handle(context.Context, args) (any, error) {
	n := c.cur.Add(1)
	for {
		m := c.max.Load()
		if n <= m || c.max.CompareAndSwap(m, n) {
			break
		}
	}
	c.started <- struct{}{}
	<-c.gate
	c.cur.Add(-1)
	return "ok", nil
}

func TestMaxParallel(t *testing.T) {
	for _, tc := range []struct{ maxParallel, want, calls int }{
		{2, 2, 6},
		{2, 2, 5},
		{1, 1, 4},
		{0, 4, 9}, // default
		{8, 3, 3}, // fewer calls than the cap
	} {
		t.Run(fmt.Sprintf("max%d/calls%d", tc.maxParallel, tc.calls), func(t *testing.T) {
			c := &concurrency{started: make(chan struct{}, tc.calls), gate: make(chan struct{})}
			tl := mkTool(t, tool.Spec[args]{}, c.handle)
			calls := make([]executor.Call, tc.calls)
			for i := range calls {
				calls[i] = call(fmt.Sprint("c", i), tl, i)
			}
			ex := executor.New(&executor.Options{MaxParallel: tc.maxParallel})
			done := make(chan []executor.Outcome, 1)
			go func() { done <- ex.RunStage(context.Background(), calls) }()

			for range tc.want {
				<-c.started // the cap is reached...
			}
			// ...and a buggy executor gets a moment to exceed it.
			time.Sleep(20 * time.Millisecond)
			close(c.gate)
			out := <-done
			if got := int(c.max.Load()); got != tc.want {
				t.Errorf("max concurrent calls = %d, want %d", got, tc.want)
			}
			for i, o := range out {
				if o.Result.Status != llm.StatusOK || o.Result.CallID != calls[i].Call.ID {
					t.Errorf("outcome %d = %+v", i, o.Result)
				}
			}
		})
	}
}

// An Executor is safe for concurrent use by several stages at once.
func TestConcurrentStages(t *testing.T) {
	tl := mkTool(t, tool.Spec[args]{}, func(_ context.Context, in args) (any, error) { return in.N, nil })
	ex := executor.New(&executor.Options{MaxParallel: 3})
	var wg sync.WaitGroup
	for s := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			calls := make([]executor.Call, 5)
			for i := range calls {
				calls[i] = call(fmt.Sprintf("s%d_c%d", s, i), tl, s*10+i)
			}
			for i, o := range ex.RunStage(context.Background(), calls) {
				if o.Result.CallID != calls[i].Call.ID || string(o.Result.Content) != fmt.Sprint(s*10+i) {
					t.Errorf("stage %d outcome %d = %+v", s, i, o.Result)
				}
			}
		}()
	}
	wg.Wait()
}

// A call that was rate limited and then timed out reports the timeout, and
// counts both attempts.
func TestRetryThenTimeout(t *testing.T) {
	b := newBlocker(t)
	var calls atomic.Int32
	tl := mkTool(t, tool.Spec[args]{Timeout: 50 * time.Millisecond, OnTimeout: tool.TimeoutReport}, func(ctx context.Context, in args) (any, error) {
		if calls.Add(1) == 1 {
			return nil, tool.RateLimited(0, nil)
		}
		return b.handle(ctx, in)
	})
	ex := executor.New(&executor.Options{RetryBackoff: time.Millisecond})
	o := within(t, 50*time.Millisecond+margin, func() executor.Outcome { return ex.Run(context.Background(), call("c", tl, 0)) })
	if !o.TimedOut || o.StopRun || o.Attempts != 2 || o.Result.ErrorKind != llm.KindTimeout {
		t.Errorf("outcome = %+v", o)
	}
	b.release()
}

// Outcomes serialise for the run log.
func TestOutcomeJSON(t *testing.T) {
	tl := mkTool(t, tool.Spec[args]{}, func(context.Context, args) (any, error) { return nil, tool.NotFound("none") })
	o := executor.New(nil).Run(context.Background(), call("c", tl, 0))
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var back executor.Outcome
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Result.CallID != "c" || back.Result.ErrorKind != llm.KindNotFound || back.Attempts != 1 || back.Err != o.Err {
		t.Errorf("round trip = %+v", back)
	}
}

// A raw handler's answer that is not JSON is kept as a JSON string; a typed
// tool's answer (JSON by construction) is kept as it is, inline or not.
func TestResultContentIsJSON(t *testing.T) {
	raw, err := tool.NewRaw(tool.Definition{Name: "raw", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage("plain <text>"), nil
		}, nil)
	if err != nil {
		t.Fatal(err)
	}
	typed := mkTool(t, tool.Spec[args]{Name: "typed"}, func(_ context.Context, in args) (any, error) {
		return struct {
			N int `json:"n"`
		}{in.N}, nil
	})
	e := executor.New(nil)
	ctx := context.Background()
	for _, tc := range []struct {
		c    executor.Call
		want string
	}{{call("r", raw, 1), `"plain \u003ctext\u003e"`}, {call("t", typed, 7), `{"n":7}`}} {
		if got := string(e.Run(ctx, tc.c).Result.Content); got != tc.want {
			t.Errorf("%s: Run content %s, want %s", tc.c.Tool.Name(), got, tc.want)
		}
	}
}

// A tool that declares it honors its context runs on the caller's
// goroutine, any other on one of its own; either way a handler's behaviour
// is classified alike: the same outcome for the same behaviour. (Only
// Outcome.Err, the log's detail, may differ: the goroutine path gives up
// at the deadline without waiting for the handler's own error.)
func TestOneClassificationForBothPaths(t *testing.T) {
	errTransient := errors.New("connection reset")
	cases := []struct {
		name string
		h    func(calls int) handler
	}{
		{"ok", func(int) handler { return func(context.Context, args) (any, error) { return "fine", nil } }},
		{"not found", func(int) handler {
			return func(context.Context, args) (any, error) { return nil, tool.NotFound("no such order") }
		}},
		{"plain error", func(int) handler {
			return func(context.Context, args) (any, error) { return nil, errors.New("disk on fire") }
		}},
		{"panic", func(int) handler { return func(context.Context, args) (any, error) { panic("boom") } }},
		{"transient then ok", func(calls int) handler {
			return func(context.Context, args) (any, error) {
				if calls == 1 {
					return nil, tool.Unavailable(errTransient)
				}
				return "second time lucky", nil
			}
		}},
		{"always transient", func(int) handler {
			return func(context.Context, args) (any, error) { return nil, tool.Unavailable(errTransient) }
		}},
		{"waits for its deadline", func(int) handler {
			return func(ctx context.Context, _ args) (any, error) { <-ctx.Done(); return nil, ctx.Err() }
		}},
		{"wraps its deadline", func(int) handler {
			return func(ctx context.Context, _ args) (any, error) {
				<-ctx.Done()
				return nil, fmt.Errorf("query: %w", ctx.Err())
			}
		}},
	}
	type summary struct {
		Status   llm.ResultStatus
		Kind     llm.ErrorKind
		Content  string
		Attempts int
		TimedOut bool
		StopRun  bool
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]summary
			for i, honors := range []bool{false, true} {
				var calls atomic.Int32
				tl := mkTool(t, tool.Spec[args]{Timeout: 20 * time.Millisecond, HonorsContext: honors},
					func(ctx context.Context, in args) (any, error) {
						return tc.h(int(calls.Add(1)))(ctx, in)
					})
				ex := executor.New(&executor.Options{RetryBackoff: time.Millisecond, MaxRetries: 1})
				o := within(t, margin, func() executor.Outcome { return ex.Run(context.Background(), call("c1", tl, 1)) })
				got[i] = summary{o.Result.Status, o.Result.ErrorKind, string(o.Result.Content), o.Attempts, o.TimedOut, o.StopRun}
			}
			if got[0] != got[1] {
				t.Errorf("own goroutine: %+v\ncaller's goroutine: %+v", got[0], got[1])
			}
		})
	}
}

// goroutineID reads the calling goroutine's ID from its stack header
// ("goroutine 42 [running]:"); tests only.
func goroutineID(t *testing.T) string {
	var buf [64]byte
	f := strings.Fields(string(buf[:runtime.Stack(buf[:], false)]))
	if len(f) < 2 {
		t.Fatalf("stack header %q", buf)
	}
	return f[1]
}

// A stage of quick calls that honor their context runs on the caller's
// goroutine alone: helpers join only a stage that is still running after
// SpillAfter (TestMaxParallel shows that slow calls still run side by side).
func TestQuickStageStaysOnTheCaller(t *testing.T) {
	var mu sync.Mutex
	ran := map[string]bool{}
	tl := mkTool(t, tool.Spec[args]{HonorsContext: true}, func(context.Context, args) (any, error) {
		mu.Lock()
		ran[goroutineID(t)] = true
		mu.Unlock()
		return "ok", nil
	})
	calls := []executor.Call{call("c1", tl, 1), call("c2", tl, 2), call("c3", tl, 3)}
	ex := executor.New(&executor.Options{SpillAfter: time.Minute})
	for _, o := range ex.RunStage(context.Background(), calls) {
		if o.Result.Status != llm.StatusOK {
			t.Fatalf("outcome %+v", o)
		}
	}
	if caller := goroutineID(t); len(ran) != 1 || !ran[caller] {
		t.Fatalf("calls ran on goroutines %v; the caller is %s", ran, caller)
	}
}

// A stage's watcher hears of each call as it starts, while it is still
// running, and as it finishes, in the order the calls finished, with the
// outcome RunStageWatched returns. It is never called by two goroutines
// at once: the events go into a plain slice, which the race detector
// would flag otherwise.
func TestRunStageWatched(t *testing.T) {
	const n = 3
	gates := make([]chan struct{}, n)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	tl := mkTool(t, tool.Spec[args]{Name: "gated"}, func(_ context.Context, in args) (any, error) {
		<-gates[in.N]
		return fmt.Sprintf("result %d", in.N), nil
	})
	calls := make([]executor.Call, n)
	for i := range calls {
		calls[i] = call(fmt.Sprintf("call_%d", i), tl, i)
	}
	var events []executor.CallEvent
	var inWatch atomic.Int32
	startedAll := make(chan struct{})
	finishedOne := make(chan int, n)
	watch := func(ev executor.CallEvent) {
		if inWatch.Add(1) != 1 {
			t.Error("watch called by two goroutines at once")
		}
		defer inWatch.Add(-1)
		if ev.Outcome == nil {
			// Slow enough that the helpers' starts would overlap if
			// nothing kept them apart.
			time.Sleep(5 * time.Millisecond)
		}
		events = append(events, ev)
		starts := 0
		for _, e := range events {
			if e.Outcome == nil {
				starts++
			}
		}
		if ev.Outcome == nil && starts == n {
			close(startedAll)
		}
		if ev.Outcome != nil {
			finishedOne <- ev.Index
		}
	}
	ex := executor.New(&executor.Options{MaxParallel: n, SpillAfter: time.Microsecond})
	done := make(chan []executor.Outcome, 1)
	go func() { done <- ex.RunStageWatched(context.Background(), calls, watch) }()
	var closed [n]bool
	var out []executor.Outcome
	t.Cleanup(func() { // a failed test still lets its calls return
		for i := range gates {
			if !closed[i] {
				close(gates[i])
			}
		}
		if out == nil {
			<-done
		}
	})
	select { // every call started while none has finished
	case <-startedAll:
	case <-time.After(margin):
		t.Fatal("the watcher did not hear of every call's start")
	}
	for _, i := range []int{2, 0, 1} {
		close(gates[i])
		closed[i] = true
		if got := <-finishedOne; got != i {
			t.Fatalf("call %d was reported finished, want %d", got, i)
		}
	}
	out = <-done
	if len(events) != 2*n {
		t.Fatalf("%d events, want %d: %+v", len(events), 2*n, events)
	}
	for j, i := range []int{2, 0, 1} {
		ev := events[n+j]
		if ev.Index != i || ev.Outcome != &out[i] || ev.Outcome.Result.Status != llm.StatusOK {
			t.Errorf("finish event %d = %+v, want call %d with its returned outcome", j, ev, i)
		}
	}

	// One call alone runs on the calling goroutine, and is watched too.
	events = nil
	one := ex.RunStageWatched(context.Background(), calls[:1], func(ev executor.CallEvent) { events = append(events, ev) })
	if len(events) != 2 || events[0].Outcome != nil || events[1].Outcome != &one[0] {
		t.Errorf("a single call's events = %+v, want its start then its finish", events)
	}
}

// A handler that never looks at its context costs no context timer: the
// call's context is made real only when the handler asks for Done, so a
// call whose handler does costs at least three allocations more (the
// timer context, its timer and its channel). Found by issue 28's profile,
// where a context per call was 7% of a run's CPU.
func TestQuickCallMakesNoContext(t *testing.T) {
	e := executor.New(nil)
	ctx, cancel := context.WithCancel(context.Background()) // a parent that takes children, as a run's does
	defer cancel()
	allocs := func(h handler) float64 {
		tl := mkTool(t, tool.Spec[args]{HonorsContext: true}, h)
		c := call("c1", tl, 1)
		return testing.AllocsPerRun(200, func() {
			if o := e.Run(ctx, c); o.Result.Status != llm.StatusOK {
				t.Fatalf("outcome = %+v", o)
			}
		})
	}
	ignores := allocs(func(context.Context, args) (any, error) { return 1, nil })
	asks := allocs(func(ctx context.Context, _ args) (any, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		default:
			return 1, nil
		}
	})
	if asks-ignores < 3 {
		t.Errorf("a call whose handler ignores its context allocates %.0f times, one that asks for Done %.0f: want the context made only for the second", ignores, asks)
	}
}

// A goroutine that works through a stage keeps its timer and answer
// channel from one call to the next, but never the channel of a handler
// it gave up on: that handler may still answer, and its late answer must
// not be taken for the next call's. Here the first call ignores its
// context past its timeout and answers while the second call runs. In a
// stage (MaxParallel 2) both calls' first attempts fail in the batch, so
// that their second attempts run one after the other on the caller.
func TestAbandonedAnswerNotTakenByNextCall(t *testing.T) {
	for _, maxParallel := range []int{1, 2} { // the serial path and a stage's worker
		gate, returned := make(chan struct{}), make(chan struct{})
		var slowTries, nextTries atomic.Int32
		slow := mkTool(t, tool.Spec[args]{Name: "slow", Timeout: 30 * time.Millisecond, OnTimeout: tool.TimeoutReport},
			func(context.Context, args) (any, error) {
				if maxParallel > 1 && slowTries.Add(1) == 1 {
					return nil, tool.Unavailable(errors.New("503"))
				}
				defer close(returned)
				<-gate // ignores its context
				return "late", nil
			})
		next := mkTool(t, tool.Spec[args]{Name: "next"}, func(context.Context, args) (any, error) {
			if maxParallel > 1 && nextTries.Add(1) == 1 {
				return nil, tool.Unavailable(errors.New("503"))
			}
			close(gate) // the first call's handler answers now, late
			<-returned
			time.Sleep(20 * time.Millisecond) // for its answer to be sent
			return "second", nil
		})
		e := executor.New(&executor.Options{MaxParallel: maxParallel, SpillAfter: time.Hour, RetryBackoff: time.Millisecond})
		out := e.RunStage(context.Background(), []executor.Call{call("c1", slow, 1), call("c2", next, 2)})
		if out[0].Result.ErrorKind != llm.KindTimeout {
			t.Errorf("MaxParallel %d: first outcome = %+v, want a timeout", maxParallel, out[0])
		}
		if got := string(out[1].Result.Content); got != `"second"` {
			t.Errorf("MaxParallel %d: second call's result = %s, want \"second\" (its own)", maxParallel, got)
		}
	}
}

// A stage's helpers join at SpillAfter also while its caller is held by
// something other than a handler's goroutine: a handler that honors its
// context runs on the caller, and a retry pauses it. The caller's first
// call here waits until the second has started, which only a helper can
// start. (The caller waiting on a handler's goroutine spills on its own
// timer: TestStageSpillsWhileCallerWaits.)
func TestStageSpillsWhileCallerHeld(t *testing.T) {
	for _, held := range []string{"on-caller handler", "retry pause"} {
		t.Run(held, func(t *testing.T) {
			second := make(chan struct{})
			var tries atomic.Int32
			first := mkTool(t, tool.Spec[args]{Name: "first", HonorsContext: held == "on-caller handler"},
				func(ctx context.Context, _ args) (any, error) {
					if held == "retry pause" {
						if tries.Add(1) == 1 {
							return nil, tool.Unavailable(errors.New("503")) // retried after RetryBackoff
						}
						return "ok", nil
					}
					select { // held on the caller until a helper starts the second call
					case <-second:
						return "ok", nil
					case <-time.After(margin):
						return nil, errors.New("the second call did not start while the first held the caller")
					}
				})
			// On the caller too, so that the batch leaves it to the stage's
			// rest, where the caller (held) or a helper takes it.
			next := mkTool(t, tool.Spec[args]{Name: "second", HonorsContext: true}, func(context.Context, args) (any, error) {
				close(second)
				return "ok", nil
			})
			// The pause outlasts the wait for the second call below.
			ex := executor.New(&executor.Options{SpillAfter: time.Millisecond, RetryBackoff: margin / 2})
			calls := []executor.Call{call("c1", first, 1), call("c2", next, 2)}
			done := make(chan []executor.Outcome, 1)
			go func() { done <- ex.RunStage(context.Background(), calls) }()
			select {
			case <-second:
			case <-time.After(margin / 4):
				t.Error("the second call did not start while the first held the caller")
			}
			for i, o := range <-done {
				if o.Result.Status != llm.StatusOK {
					t.Errorf("outcome %d = %+v", i, o)
				}
			}
		})
	}
}

// A goroutine that drives calls leaves its timer running from one call to
// the next while it fires soon enough; each call is still held to its own
// timeout. A quick call with a long timeout followed by one that ignores
// a short timeout: the second times out on time. A quick call with a
// short timeout followed by a slow call with a long one: the timer left
// by the first fires during the second, which is not late for that.
func TestTimeoutsOfCallsInTurn(t *testing.T) {
	quick := func(timeout time.Duration) *tool.Tool {
		return mkTool(t, tool.Spec[args]{Name: "quick", Timeout: timeout}, func(context.Context, args) (any, error) { return "ok", nil })
	}
	gate := make(chan struct{})
	defer close(gate)
	stuck := mkTool(t, tool.Spec[args]{Name: "stuck", Timeout: 50 * time.Millisecond, OnTimeout: tool.TimeoutReport},
		func(context.Context, args) (any, error) {
			select { // a broken executor fails the test rather than hanging it
			case <-gate:
			case <-time.After(2 * margin):
			}
			return "late", nil
		})
	slow := mkTool(t, tool.Spec[args]{Name: "slow", Timeout: time.Minute}, func(context.Context, args) (any, error) {
		time.Sleep(150 * time.Millisecond)
		return "ok", nil
	})
	for _, maxParallel := range []int{1, 2} { // the serial path and a stage's caller
		e := executor.New(&executor.Options{MaxParallel: maxParallel, SpillAfter: time.Hour})
		start := time.Now()
		out := e.RunStage(context.Background(), []executor.Call{call("c1", quick(time.Hour), 1), call("c2", stuck, 2)})
		if took := time.Since(start); out[1].Result.ErrorKind != llm.KindTimeout || took > margin {
			t.Errorf("MaxParallel %d: second outcome = %+v after %v, want a timeout at 50ms", maxParallel, out[1], took)
		}
		out = e.RunStage(context.Background(), []executor.Call{call("c1", quick(20*time.Millisecond), 1), call("c2", slow, 2)})
		if out[1].Result.Status != llm.StatusOK {
			t.Errorf("MaxParallel %d: slow call's outcome = %+v, want ok within its minute", maxParallel, out[1])
		}
	}
}
