package llm

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestHTTPError(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cause := errors.New("sdk error")
	cases := []struct {
		status    int
		header    http.Header
		body      string
		kind      ErrorClass
		retryable bool
		after     time.Duration
	}{
		{429, http.Header{"Retry-After": {"2"}}, "", ErrorRateLimited, true, 2 * time.Second},
		{429, http.Header{"Retry-After-Ms": {"1500"}}, "", ErrorRateLimited, true, 1500 * time.Millisecond},
		{503, http.Header{"Retry-After": {now.Add(3 * time.Second).Format(http.TimeFormat)}}, "", ErrorUnavailable, true, 3 * time.Second},
		{500, nil, "", ErrorUnavailable, true, 0},
		{529, nil, "overloaded", ErrorUnavailable, true, 0},
		{401, nil, "bad key", ErrorAuth, false, 0},
		{403, nil, "", ErrorAuth, false, 0},
		{404, nil, "model not found", ErrorUnknownModel, false, 0},
		{400, nil, `{"error":{"code":"context_length_exceeded"}}`, ErrorContextLength, false, 0},
		{400, nil, "prompt is too long: 250000 tokens > 200000 maximum", ErrorContextLength, false, 0},
		{400, nil, "bad parameter", ErrorBadRequest, false, 0},
	}
	for _, c := range cases {
		e := HTTPError(c.status, c.header, c.body, cause, now)
		if e.Kind != c.kind || e.Retryable != c.retryable || e.RetryAfter != c.after || e.StatusCode != c.status || !errors.Is(e, cause) {
			t.Errorf("%d %q: got %+v", c.status, c.body, e)
		}
	}
	if got := (&Error{Kind: ErrorAuth, Err: cause}).Error(); got != "authentication: sdk error" {
		t.Errorf("Error() = %q", got)
	}
}
