package gemini

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmhttp"
)

// Type URLs of the google.rpc error details the adapter reads.
const (
	retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"
	errorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"
)

// classify turns an SDK failure into an *llm.Error, or returns the
// context's own error when ctx ended.
func (m *Model) classify(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	var le *llm.Error
	if errors.As(err, &le) {
		// The response guard's verdict on the body: it says all there is.
		return le
	}
	if apiErr, ok := asAPIError(err); ok {
		return apiError(apiErr, time.Now())
	}
	var urlErr *url.Error
	var netErr net.Error
	// A reply whose connection broke before its end is read as
	// io.ErrUnexpectedEOF, outside any url.Error: the server went away,
	// which a new attempt may not meet.
	if errors.As(err, &urlErr) || errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &llm.Error{Kind: llm.KindUnavailable, Retryable: true, Err: fmt.Errorf("gemini: %w", err)}
	}
	return &llm.Error{Kind: llm.KindBadRequest, Err: fmt.Errorf("gemini: %w", err)}
}

// asAPIError finds the SDK's APIError, which it returns by value.
func asAPIError(err error) (genai.APIError, bool) {
	var v genai.APIError
	if errors.As(err, &v) {
		return v, true
	}
	var p *genai.APIError
	if errors.As(err, &p) && p != nil {
		return *p, true
	}
	return genai.APIError{}, false
}

// apiError classifies an error reply of the Gemini API through
// llmhttp.HTTPError, then adds what only its body tells: the RetryInfo delay
// and the API_KEY_INVALID reason of a 400.
func apiError(e genai.APIError, now time.Time) *llm.Error {
	reasons := detailStrings(e.Details, errorInfoType, "reason")
	body := strings.Join(append([]string{e.Status, e.Message}, reasons...), " ")
	code := e.Code
	if code == 0 {
		code = statusCode(e.Status)
	}
	out := llmhttp.HTTPError(code, nil, body, fmt.Errorf("gemini: %w", e), now)
	for _, r := range reasons {
		if r == "API_KEY_INVALID" {
			out.Kind, out.Retryable = llm.KindAuthentication, false
		}
	}
	if out.Retryable && out.RetryAfter == 0 {
		out.RetryAfter = retryDelay(e.Details)
	}
	return out
}

// statusCode maps a google.rpc status name to its HTTP status, for an
// error body that carries no code; 0 when the name is unknown.
func statusCode(status string) int {
	switch status {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return http.StatusBadRequest
	case "UNAUTHENTICATED":
		return http.StatusUnauthorized
	case "PERMISSION_DENIED":
		return http.StatusForbidden
	case "NOT_FOUND":
		return http.StatusNotFound
	case "RESOURCE_EXHAUSTED":
		return http.StatusTooManyRequests
	case "INTERNAL", "UNKNOWN", "DATA_LOSS":
		return http.StatusInternalServerError
	case "UNAVAILABLE":
		return http.StatusServiceUnavailable
	case "DEADLINE_EXCEEDED":
		return http.StatusGatewayTimeout
	}
	return 0
}

// retryDelay reads the retryDelay of a google.rpc.RetryInfo detail, a
// protobuf Duration in its JSON form ("2s", "1.500s").
func retryDelay(details []map[string]any) time.Duration {
	for _, s := range detailStrings(details, retryInfoType, "retryDelay") {
		if d, err := time.ParseDuration(s); err == nil && d > 0 {
			return d
		}
	}
	return 0
}

// detailStrings returns the string field key of each detail of type typ.
func detailStrings(details []map[string]any, typ, key string) []string {
	var out []string
	for _, d := range details {
		if t, _ := d["@type"].(string); t != typ {
			continue
		}
		if s, ok := d[key].(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}
