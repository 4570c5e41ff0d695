package llmhttp

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
)

func TestHTTPError(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cause := errors.New("sdk error")
	cases := []struct {
		status    int
		header    http.Header
		body      string
		kind      llm.ErrorKind
		retryable bool
		after     time.Duration
	}{
		{429, http.Header{"Retry-After": {"2"}}, "", llm.KindRateLimited, true, 2 * time.Second},
		{429, http.Header{"Retry-After-Ms": {"1500"}}, "", llm.KindRateLimited, true, 1500 * time.Millisecond},
		{503, http.Header{"Retry-After": {now.Add(3 * time.Second).Format(http.TimeFormat)}}, "", llm.KindUnavailable, true, 3 * time.Second},
		{500, nil, "", llm.KindUnavailable, true, 0},
		{529, nil, "overloaded", llm.KindUnavailable, true, 0},
		{401, nil, "bad key", llm.KindAuthentication, false, 0},
		{403, nil, "", llm.KindAuthentication, false, 0},
		{404, nil, "model not found", llm.KindUnknownModel, false, 0},
		{400, nil, `{"error":{"code":"context_length_exceeded"}}`, llm.KindContextLengthExceeded, false, 0},
		{400, nil, "prompt is too long: 250000 tokens > 200000 maximum", llm.KindContextLengthExceeded, false, 0},
		{400, nil, "bad parameter", llm.KindBadRequest, false, 0},
	}
	for _, c := range cases {
		e := HTTPError(c.status, c.header, c.body, cause, now)
		if e.Kind != c.kind || e.Retryable != c.retryable || e.RetryAfter != c.after || e.StatusCode != c.status || !errors.Is(e, cause) {
			t.Errorf("%d %q: got %+v", c.status, c.body, e)
		}
	}
	if got := (&llm.Error{Kind: llm.KindAuthentication, Err: cause}).Error(); got != "authentication: sdk error" {
		t.Errorf("Error() = %q", got)
	}
}
