package llm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
)

func TestUsage(t *testing.T) {
	a := llm.Usage{InputTokens: 10, OutputTokens: 5, CachedInputTokens: 2, ReasoningTokens: 1}
	b := llm.Usage{InputTokens: 1, OutputTokens: 2, CachedInputTokens: 3, ReasoningTokens: 4}
	got := a.Add(b)
	want := llm.Usage{InputTokens: 11, OutputTokens: 7, CachedInputTokens: 5, ReasoningTokens: 5}
	if got != want {
		t.Errorf("Add = %+v, want %+v", got, want)
	}
	if a != (llm.Usage{InputTokens: 10, OutputTokens: 5, CachedInputTokens: 2, ReasoningTokens: 1}) {
		t.Errorf("Add modified its receiver: %+v", a)
	}
	// Cached and reasoning tokens are part of input and output already.
	if got.Total() != 18 {
		t.Errorf("Total = %d, want 18", got.Total())
	}
}

func TestModelError(t *testing.T) {
	cause := errors.New("429 too many requests")
	err := fmt.Errorf("turn 3: %w", &llm.Error{StatusCode: 429, Retryable: true, RetryAfter: time.Second, Err: cause})
	if !llm.IsRetryable(err) {
		t.Error("IsRetryable(wrapped retryable error) = false")
	}
	if !errors.Is(err, cause) {
		t.Error("llm.Error does not unwrap to its cause")
	}
	var me *llm.Error
	if !errors.As(err, &me) || me.RetryAfter != time.Second || me.StatusCode != 429 {
		t.Errorf("errors.As = %+v", me)
	}
	if got := (&llm.Error{Err: cause}).Error(); got != cause.Error() {
		t.Errorf("Error() = %q, want %q", got, cause.Error())
	}
	if got := (&llm.Error{}).Error(); got == "" {
		t.Error("Error() without a cause is empty")
	}
	if llm.IsRetryable(&llm.Error{StatusCode: 400, Err: cause}) {
		t.Error("IsRetryable(non-retryable llm.Error) = true")
	}
	if llm.IsRetryable(cause) {
		t.Error("IsRetryable(plain error) = true")
	}
	if llm.IsRetryable(nil) {
		t.Error("IsRetryable(nil) = true")
	}
}

func TestModelFunc(t *testing.T) {
	var m llm.Model = llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Text: fmt.Sprint("step ", req.Step)}}, nil
	})
	resp, err := m.Generate(context.Background(), &llm.Request{Step: 2})
	if err != nil || resp.Message.Text != "step 2" {
		t.Fatalf("Generate = %+v, %v", resp, err)
	}
}
