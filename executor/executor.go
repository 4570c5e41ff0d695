package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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
	// SpillAfter is how long RunStageInline works through a stage alone
	// before more goroutines join. Default DefaultSpillAfter.
	SpillAfter time.Duration
	// Ledger is the idempotency ledger for write calls. Default an
	// in-memory ledger owned by the executor.
	Ledger store.Ledger
	// LedgerRetention is how long finished keys are kept; older ones are
	// pruned as the executor goes. Default 7 days; negative keeps them
	// forever.
	LedgerRetention time.Duration
}

// Executor runs stages of tool calls. It is safe for concurrent use.
type Executor struct {
	opts      Options
	ledger    store.Ledger
	lastPrune atomic.Int64 // unix nanoseconds of the last ledger prune

	// running counts, per idempotency key, write handlers of this process
	// that have not returned yet, including ones given up on after a
	// timeout: while one runs, its write may still land, so no other
	// attempt may take the key over.
	mu      sync.Mutex
	running map[string]int

	// alarms are the timers of closed watchdogs (see NewWatchdog);
	// stages the stageRuns of stages that ended with no other goroutine
	// holding them.
	alarms, stages sync.Pool
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
		o.SpillAfter = DefaultSpillAfter
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
	return &Executor{opts: o, ledger: o.Ledger}
}

// Options returns the executor's effective options, defaults filled in.
func (e *Executor) Options() Options { return e.opts }

// Call is one authorized call to execute.
type Call struct {
	Call llm.ToolCall
	Tool *tool.Tool
	// Timeout overrides the tool's timeout when positive.
	Timeout time.Duration
	// IdempotencyKey, for a write, names the write in the ledger; a write
	// without one runs unguarded. ArgsHash identifies its arguments, and
	// RunID is recorded with the key.
	IdempotencyKey string
	ArgsHash       string
	RunID          string
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
	// (The flags come last, together, which keeps an Outcome 8 bytes
	// smaller than with padding between them.)

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
}

// RunStage executes the calls of one stage, at most MaxParallel at once,
// and returns their outcomes in the order of calls, whatever order they
// finished in.
func (e *Executor) RunStage(ctx context.Context, calls []Call) []Outcome {
	out := make([]Outcome, len(calls))
	if len(calls) == 1 || e.opts.MaxParallel == 1 {
		for i := range calls {
			out[i] = e.Run(ctx, calls[i])
		}
		return out
	}
	sem := make(chan struct{}, e.opts.MaxParallel)
	var wg sync.WaitGroup
	for i := range calls {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = e.Run(ctx, calls[i])
		}()
	}
	wg.Wait()
	return out
}

// Run executes one call: attempts with backoff while the failure is
// retryable, then a classified outcome. The handler runs on its own
// goroutine, so Run returns at the timeout even if the handler ignores its
// context.
func (e *Executor) Run(ctx context.Context, c Call) Outcome {
	if c.guarded() {
		o, _ := e.guardedWrite(ctx, c, func(store.Record) (Outcome, bool) { return e.run(ctx, c), true })
		return o
	}
	return e.run(ctx, c)
}

func (e *Executor) run(ctx context.Context, c Call) Outcome {
	timeout := e.timeout(&c)
	start := time.Now()
	wait := e.opts.RetryBackoff
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			// The run ended before this attempt: do not start the handler,
			// since the call is reported as skipped.
			return ended(&c, attempt-1, start, err)
		}
		content, err, late := e.once(ctx, c, timeout)
		switch {
		case err == nil:
			var o Outcome
			succeeded(&o, &c, attempt, start, time.Now(), content)
			return o
		case ctx.Err() != nil:
			return ended(&c, attempt, start, ctx.Err())
		case late:
			return timedOut(&c, attempt, start, timeout, err)
		}
		if d, retry := e.retryWait(err, attempt, &wait); retry {
			sleep(ctx, d) // if the run ends meanwhile, the next attempt reports it
			continue
		}
		return failed(&c, attempt, start, err)
	}
}

func (e *Executor) timeout(c *Call) time.Duration {
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

// succeeded sets *o to the outcome of a call that began at start and
// whose handler returned content at end: in place, since an Outcome is
// large and the driver's goes straight into the stage's results.
func succeeded(o *Outcome, c *Call, attempt int, start, end time.Time, content json.RawMessage) {
	if len(content) == 0 {
		content = json.RawMessage("null")
	} else if !c.Tool.JSONResults() && !json.Valid(content) {
		// A raw handler answered with something that is not JSON: keep it,
		// as a JSON string, so that the result can be sent and stored.
		b, _ := json.Marshal(string(content)) // a string always encodes
		content = b
	}
	*o = Outcome{
		Result:   llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Status: llm.StatusOK, Content: content},
		Attempts: attempt, Started: start, Duration: end.Sub(start),
	}
}

// ended reports a call cut short because the run itself was canceled or
// ran out of time: not the tool's fault, and nothing the model can fix.
func ended(c *Call, attempt int, start time.Time, err error) Outcome {
	kind := llm.ErrCanceled
	return Outcome{
		Result: llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Status: llm.StatusSkipped, ErrorKind: kind,
			Content: llm.ErrorContent(kind, "the run ended before this call finished")},
		Attempts: attempt, Started: start, Duration: time.Since(start), StopRun: true, Err: err.Error(),
	}
}

func timedOut(c *Call, attempt int, start time.Time, timeout time.Duration, err error) Outcome {
	kind := tool.KindTimeout
	return Outcome{
		Result: llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Status: llm.StatusError, ErrorKind: kind,
			Content: llm.ErrorContent(kind, fmt.Sprintf("the tool did not finish within %v", timeout))},
		Attempts: attempt, Started: start, Duration: time.Since(start), TimedOut: true,
		StopRun: c.Tool.OnTimeout() == tool.TimeoutStop, Err: err.Error(),
	}
}

func failed(c *Call, attempt int, start time.Time, err error) Outcome {
	kind := tool.KindOf(err)
	return Outcome{
		Result: llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Status: llm.StatusError, ErrorKind: kind,
			Content: llm.ErrorContent(kind, modelMessage(err, attempt))},
		Attempts: attempt, Started: start, Duration: time.Since(start), Err: err.Error(),
	}
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

type attempt struct {
	content json.RawMessage
	err     error
}

// once runs the handler in its own goroutine so that a tool which ignores
// its context cannot hold the run past the timeout: the executor stops
// waiting and the goroutine finishes on its own later.
func (e *Executor) once(ctx context.Context, c Call, timeout time.Duration) (json.RawMessage, error, bool) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan attempt, 1) // buffered: an abandoned handler never blocks
	if c.guarded() {
		e.begin(c.IdempotencyKey)
	}
	go func() {
		if c.guarded() {
			defer e.end(c.IdempotencyKey)
		}
		defer func() {
			if p := recover(); p != nil {
				done <- attempt{err: fmt.Errorf("tool %q panicked: %v", c.Call.Name, p)}
			}
		}()
		out, err := c.Tool.Invoke(cctx, c.Call.Arguments)
		done <- attempt{out, err}
	}()
	select {
	case a := <-done:
		timedOut := a.err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) &&
			errors.Is(a.err, context.DeadlineExceeded)
		return a.content, a.err, timedOut
	case <-cctx.Done():
		if ctx.Err() != nil {
			return nil, ctx.Err(), false
		}
		return nil, cctx.Err(), true
	}
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
