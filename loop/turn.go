package loop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/toolloop/toolloop/llm"
)

// DefaultModelTimeout is Config.ModelTimeout's default: long enough for a
// reasoning model's slow turn, short against a run's default deadline.
const DefaultModelTimeout = 5 * time.Minute

// DefaultModelRetries and DefaultModelRetryBackoff are the defaults of
// Config.ModelRetries and Config.ModelRetryBackoff: how many times a
// retryable model failure is tried again, and the first wait, doubled
// each time.
const (
	DefaultModelRetries      = 2
	DefaultModelRetryBackoff = 500 * time.Millisecond
)

// MaxModelRetryWait caps one wait between model attempts, whatever a
// provider's Retry-After asks; the run's deadline bounds the total.
const MaxModelRetryWait = 30 * time.Second

// TurnOptions says how ModelTurn makes one attempt at a model turn.
type TurnOptions struct {
	// Stream asks a model that can stream (an llm.StreamingModel) for
	// the turn as a stream; other models are asked with Generate.
	Stream bool
	// Timeout bounds the time the model may stay quiet: the whole of a
	// request, and for a stream the wait for its first delta with
	// something to show and for each one after (a usage report alone is
	// not heard). Zero or negative for none.
	Timeout time.Duration
	// OnDelta, when set, is called with each delta the stream accepts,
	// on the goroutine that reads it: the in-process runner shows it to
	// Config.Watch, the Temporal activity counts it for its heartbeats.
	// Its time is not the stream's: while it runs, the stream is not
	// quiet.
	OnDelta func(llm.Delta)
}

// ModelTurn makes one attempt at a model turn, the work behind a
// RequestModel effect that every driver does alike; drivers differ only
// in how they try again (a loop in process, a retry policy on Temporal).
//
// It returns the turn, or an error that says what went wrong: a model that
// was quiet for TurnOptions.Timeout while ctx had not ended is a
// retryable llm.KindTimeout, and a provider's Retry-After that ends past
// ctx's deadline (the run's) is not retryable (llm.CheckRetryAfter). A
// stream that fails after it has shown something returns what it had
// received with the error: such a turn is not tried again, since a retry
// would show another one (see ModelFailure). A stream whose turn was
// complete (its finish received) is the turn, even if the connection then
// stays silent until the timeout.
func ModelTurn(ctx context.Context, m llm.Model, req *llm.Request, o TurnOptions) (*llm.Response, error) {
	var resp *llm.Response
	var err error
	if sm, ok := m.(llm.StreamingModel); ok && o.Stream {
		resp, err = streamTurn(ctx, sm, req, o)
	} else {
		resp, err = generateTurn(ctx, m, req, o.Timeout)
		if err != nil {
			resp = nil // only a stream has a partial turn
		}
	}
	if err == nil && resp == nil {
		err = errors.New("the model client returned neither a response nor an error")
	}
	if err == nil || resp != nil {
		return resp, err
	}
	var me *llm.Error
	if ctx.Err() == nil && errors.As(err, &me) {
		// A provider that asks to wait past the run's deadline ends the
		// run now, saying so, rather than at the deadline with nothing but
		// "context deadline exceeded".
		if c := llm.CheckRetryAfter(ctx, me); c != me {
			err = c
		}
	}
	return nil, err
}

// ModelRetryWait is the wait before the attempt after a retryable failure
// err when the backoff would wait backoff: what the provider asked
// (Retry-After) when that is longer, and never more than
// MaxModelRetryWait.
func ModelRetryWait(err error, backoff time.Duration) time.Duration {
	var me *llm.Error
	if errors.As(err, &me) && me.RetryAfter > backoff {
		backoff = me.RetryAfter
	}
	return min(backoff, MaxModelRetryWait)
}

// ModelFailure is the failure of a model turn that will not be tried
// again after attempts attempts, failed with err; partial says a stream
// broke after it had shown something. A reply that broke its provider's
// protocol (llm.KindProtocolError) is a protocol failure, anything else a
// model failure.
func ModelFailure(attempts int, err error, partial bool) *Failure {
	var me *llm.Error
	switch {
	case errors.As(err, &me) && me.Kind == llm.KindProtocolError:
		return &Failure{Kind: FailProtocol, Message: fmt.Sprintf("the model's reply broke its protocol (attempt %d): %v", attempts, err)}
	case errors.As(err, &me) && me.Kind == llm.KindContextLengthExceeded:
		return &Failure{Kind: FailContextLength, Message: fmt.Sprintf("the provider refused the request as too long for the model's window: %v", err)}
	case partial:
		return &Failure{Kind: FailModel, Message: fmt.Sprintf(
			"the model's reply broke off after it began streaming (a stream is not retried once it has shown something): %v", err)}
	}
	return &Failure{Kind: FailModel, Message: fmt.Sprintf("model request failed after %d attempt(s): %v", attempts, err)}
}

// generateTurn makes one model request under timeout. A request that
// fails because that time ran out, rather than ctx's, is a retryable
// llm.KindTimeout.
func generateTurn(ctx context.Context, m llm.Model, req *llm.Request, timeout time.Duration) (*llm.Response, error) {
	if timeout <= 0 {
		return m.Generate(ctx, req)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := m.Generate(actx, req)
	if err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		err = &llm.Error{Kind: llm.KindTimeout, Retryable: true,
			Err: fmt.Errorf("the model did not answer within %v (the model request timeout): %w", timeout, err)}
	}
	return resp, err
}

// heard reports whether d has something to show, which tells that the
// model is at work: a usage report (which some servers send on their
// own) or an empty piece of text does not.
func heard(d llm.Delta) bool {
	switch d.Kind {
	case llm.DeltaUsage:
		return false
	case llm.DeltaText:
		return d.Text != ""
	case llm.DeltaReasoning:
		return d.Text != "" || d.Hidden
	}
	return true
}

// streamTurn makes one streamed model request, hands each accepted delta
// to o.OnDelta, and assembles the turn. It returns the turn; or the error
// with no response when the stream failed before it showed anything, and
// with what it had received when it failed after. The request's context
// ends when the stream has been quiet for o.Timeout, which is then a
// retryable llm.KindTimeout (a stream that had shown something is not
// retried all the same). Leaving the range loop early, on a refused delta
// or an ended context, is how the adapter learns to close the connection
// (see llm.StreamingModel).
func streamTurn(ctx context.Context, m llm.StreamingModel, req *llm.Request, o TurnOptions) (*llm.Response, error) {
	timeout := o.Timeout
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var idle *time.Timer
	var quiet atomic.Bool
	if timeout > 0 {
		idle = time.AfterFunc(timeout, func() { quiet.Store(true); cancel() })
		defer idle.Stop()
	}
	var acc llm.Accumulator
	var err error
	for delta, derr := range m.Stream(sctx, req) {
		if derr == nil {
			derr = acc.Add(delta)
		}
		if derr != nil {
			err = derr
			break
		}
		news := idle != nil && heard(delta)
		if o.OnDelta != nil {
			if news {
				// The watcher's time is not the stream's.
				idle.Stop()
			}
			o.OnDelta(delta)
		}
		if err = sctx.Err(); err != nil && !acc.Finished() {
			// The run ended, or the stream went quiet too long, and the
			// adapter has not noticed: stop reading, which closes it.
			break
		}
		err = nil
		if news {
			idle.Reset(timeout)
		}
	}
	if acc.Finished() && (err == nil || (quiet.Load() && ctx.Err() == nil)) {
		// The turn is complete: whatever ended meanwhile, and a
		// connection that then stayed silent until the timeout (the
		// adapter waiting for an end that never came), do not undo it.
		return acc.Response(), nil
	}
	switch {
	case ctx.Err() != nil:
		if err == nil {
			err = ctx.Err()
		}
	case quiet.Load():
		if err == nil {
			err = context.DeadlineExceeded
		}
		err = &llm.Error{Kind: llm.KindTimeout, Retryable: true,
			Err: fmt.Errorf("the model sent nothing for %v (the model request timeout): %w", timeout, err)}
	case err == nil:
		err = &llm.Error{Kind: llm.KindProtocolError, Err: errors.New("inconsistent stream: the stream ended without a finish")}
	}
	if !acc.Started() {
		return nil, err
	}
	return acc.Response(), err
}

// CacheKey is the prompt-cache key of the run named runID (llm.Request.
// CacheKey): every turn of a run, in process or on any Temporal worker,
// carries the same one, and another run another. It is a digest, so the
// run ID itself never leaves for the provider.
func CacheKey(runID string) string {
	if runID == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(runID))
	return "toolloop-" + hex.EncodeToString(sum[:12])
}
