package llmhttp

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolloop/toolloop/llm"
)

// HTTPError classifies a provider's HTTP failure for adapters: 429 is
// rate_limited and 408, 409 and 5xx are unavailable (both retryable, with
// the Retry-After header honoured, in seconds or as an HTTP date); 401 and
// 403 are authentication, 404 an unknown model; a 400 whose body talks
// about the context window is context_length_exceeded; any other 4xx is a
// bad request. err is the SDK's error, kept as the cause.
func HTTPError(status int, header http.Header, body string, err error, now time.Time) *llm.Error {
	e := &llm.Error{StatusCode: status, Err: err}
	lower := strings.ToLower(body)
	switch {
	case status == http.StatusTooManyRequests:
		e.Kind, e.Retryable = llm.KindRateLimited, true
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
		e.Kind, e.Retryable = llm.KindUnavailable, true
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Kind = llm.KindAuthentication
	case status == http.StatusNotFound:
		e.Kind = llm.KindUnknownModel
	case isContextLength(lower):
		e.Kind = llm.KindContextLengthExceeded
	default:
		e.Kind = llm.KindBadRequest
	}
	if e.Retryable {
		e.RetryAfter = retryAfter(header, now)
	}
	return e
}

func isContextLength(body string) bool {
	for _, s := range []string{"context_length", "context length", "context window", "maximum context", "prompt is too long", "too many tokens", "exceeds the maximum number of tokens"} {
		if strings.Contains(body, s) {
			return true
		}
	}
	return false
}

// retryAfter reads Retry-After (seconds or an HTTP date) and the
// retry-after-ms header some providers send.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if ms := h.Get("Retry-After-Ms"); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v > 0 {
			return time.Duration(v * float64(time.Millisecond))
		}
	}
	ra := h.Get("Retry-After")
	if ra == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(ra, 64); err == nil && secs > 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(ra); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
