package llm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckRetryAfter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	asked := &Error{Kind: KindRateLimited, Retryable: true, RetryAfter: time.Hour, Err: errors.New("429")}
	long := CheckRetryAfter(ctx, asked)
	if long.Retryable || !asked.Retryable {
		t.Error("a wait past the deadline is still retryable, or the provider's error was changed")
	}
	for _, w := range []string{"rate_limited: the provider asked to wait 3600 s (Retry-After), more than the run has left (", "): 429"} {
		if !strings.Contains(long.Error(), w) {
			t.Errorf("err = %q, want %q", long, w)
		}
	}
	short := &Error{Kind: KindRateLimited, Retryable: true, RetryAfter: time.Second, Err: errors.New("429")}
	if CheckRetryAfter(ctx, short) != short || !short.Retryable || short.Error() != "rate_limited: 429" {
		t.Errorf("a wait within the deadline changed: %v", short)
	}
	none := &Error{Kind: KindRateLimited, Retryable: true, RetryAfter: time.Hour, Err: errors.New("429")}
	if CheckRetryAfter(context.Background(), none) != none || !none.Retryable {
		t.Error("without a deadline the wait is not too long")
	}
}
