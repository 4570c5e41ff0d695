package anthropic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmhttp"
)

// response maps a Messages API reply onto an llm.Response. prefix gives
// the digest the reply's thinking is bound to (replyState); nil records
// none.
func response(msg *anthropic.Message, prefix func() string) (*llm.Response, error) {
	if msg == nil {
		return nil, errors.New("anthropic: the API returned an empty response")
	}
	if msg.StopReason == anthropic.StopReasonRefusal {
		return nil, &llm.Error{Kind: llm.KindRefusal, Err: refusal(msg)}
	}
	var text strings.Builder
	var calls []llm.ToolCall
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args := bytes.Clone(b.Input)
			if len(args) == 0 { // input is required; be lenient if it is missing
				args = bytes.Clone(emptyObject)
			}
			calls = append(calls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
		// Thinking blocks go to Reasoning and State (replyState);
		// server-tool blocks have no place in llm.Message and are dropped.
	}
	if err := llm.CheckCallIDs(calls); err != nil {
		return nil, err
	}
	reasoning, state, err := replyState(msg.Content, prefix)
	if err != nil {
		return nil, err
	}
	return &llm.Response{
		ID:    msg.ID,
		Model: msg.Model,
		Message: llm.Message{
			Role:      llm.RoleAssistant,
			Text:      text.String(),
			ToolCalls: calls,
			Reasoning: reasoning,
			State:     state,
		},
		Usage:        usage(msg.Usage),
		FinishReason: string(msg.StopReason),
		// The SDK's Message has no input_transformations (a beta field):
		// it is read from the reply's JSON.
		DroppedReasoning: droppedThinking(msg.RawJSON()),
		Truncated:        msg.StopReason == anthropic.StopReasonMaxTokens || msg.StopReason == anthropic.StopReasonModelContextWindowExceeded,
	}, nil
}

// usage maps a reply's usage, a whole one or the running total of a
// stream, onto llm.Usage.
func usage(u anthropic.Usage) llm.Usage {
	return llm.Usage{
		// input_tokens counts only the uncached part of the prompt.
		InputTokens:        u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		OutputTokens:       u.OutputTokens,
		CachedInputTokens:  u.CacheReadInputTokens,
		CacheWriteTokens:   u.CacheCreationInputTokens,
		CacheWrite1hTokens: u.CacheCreation.Ephemeral1hInputTokens,
		ReasoningTokens:    u.OutputTokensDetails.ThinkingTokens,
	}
}

// refusal describes a refused reply from its stop_details.
func refusal(msg *anthropic.Message) error {
	s := "anthropic: the model refused to continue"
	if c := msg.StopDetails.Category; c != "" {
		s += " (category " + string(c) + ")"
	}
	if e := msg.StopDetails.Explanation; e != "" {
		s += ": " + e
	}
	if msg.ID != "" {
		s += " [message " + msg.ID + "]"
	}
	return errors.New(s)
}

// classify turns an SDK failure into an error the loop can act on.
func classify(ctx context.Context, err error, now time.Time) error {
	if ctx.Err() != nil {
		// The caller canceled or its deadline passed: not the provider's
		// failure, and not worth a retry.
		return err
	}
	var le *llm.Error
	if errors.As(err, &le) {
		// The response guard's verdict on the body: it says all there is.
		return le
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		return apiError(apiErr, apiErr.StatusCode, err, now)
	}
	var netErr net.Error
	var urlErr *url.Error
	if errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) {
		// No complete response: a connection failure, a body cut off, or
		// the SDK's own per-request timeout. Another attempt may succeed.
		return &llm.Error{Kind: llm.KindUnavailable, Retryable: true, Err: err}
	}
	return fmt.Errorf("anthropic: %w", err)
}

// apiError classifies an HTTP error response with the given status (the
// response's own, or for an error event in a stream the one its type has
// outside a stream). llmhttp.HTTPError does the status-based work; the error
// body's type and code refine it.
func apiError(apiErr *anthropic.Error, status int, err error, now time.Time) *llm.Error {
	var header http.Header
	if apiErr.Response != nil {
		header = apiErr.Response.Header
	}
	e := llmhttp.HTTPError(status, header, apiErr.RawJSON(), err, now)
	if isPrefixMismatch(apiErr) {
		// The same body fails the same way: name the cause.
		e.Kind, e.Retryable, e.Err = llm.KindBadRequest, false, &prefixError{api: err}
		return e
	}
	switch apiErr.Type() {
	case anthropic.ErrorTypeOverloadedError:
		e.Kind, e.Retryable = llm.KindUnavailable, true
	case anthropic.ErrorTypeRateLimitError:
		e.Kind, e.Retryable = llm.KindRateLimited, true
	case anthropic.ErrorTypeAuthenticationError, anthropic.ErrorTypePermissionError:
		e.Kind, e.Retryable = llm.KindAuthentication, false
	}
	if e.Retryable && e.RetryAfter == 0 {
		e.RetryAfter = retryAfter(header, now)
	}
	// A spent budget answers 429 but lasts until the period or the limit
	// changes; and the server may say outright that a retry cannot help.
	if strings.HasSuffix(string(apiErr.ErrorCode()), "spend_limit_reached") ||
		(header != nil && header.Get("X-Should-Retry") == "false") {
		e.Retryable, e.RetryAfter = false, 0
	}
	return e
}

// retryAfter reads the server's requested wait through llmhttp.HTTPError, for
// an error whose retryability came from the body rather than the status.
func retryAfter(header http.Header, now time.Time) time.Duration {
	return llmhttp.HTTPError(http.StatusTooManyRequests, header, "", nil, now).RetryAfter
}
