package llm

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// CheckRetryAfter says whether the wait the provider asked for
// (e.RetryAfter) ends after ctx's deadline, the run's: a retry could only
// begin once the run's time is spent, so a loop that waited would stop with
// nothing but "context deadline exceeded". It then returns a copy of e
// that is not retryable and says so, naming the wait; otherwise e itself.
// Drivers call it with the run's context, not a single request's, whose
// timeout (loop.Config.ModelTimeout) says nothing about a later attempt.
func CheckRetryAfter(ctx context.Context, e *Error) *Error {
	if e == nil || !e.Retryable || e.RetryAfter <= 0 {
		return e
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return e
	}
	left := time.Until(deadline)
	if e.RetryAfter <= left {
		return e
	}
	c := *e
	c.Retryable = false
	c.Err = fmt.Errorf("the provider asked to wait %s s (Retry-After), more than the run has left (%v): %w",
		strconv.FormatFloat(e.RetryAfter.Seconds(), 'f', -1, 64), max(left, 0).Round(time.Millisecond), e.Err)
	return &c
}
