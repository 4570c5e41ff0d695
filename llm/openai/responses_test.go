package openai_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/openai"
)

// The exact request the SDK sends: store=false and the whole history as
// input items in order (assistant text as a message, each call as a
// function_call item with its call_id and no item ID, each result as a
// function_call_output linked by call_id), function tools with strict=false,
// and the options.
func TestResponsesRequestJSON(t *testing.T) {
	s := newServer(t, "responses", ok("final_answer.json"))
	m := openai.NewResponses(s.client(), &openai.ResponsesOptions{
		Model:             "gpt-5-mini",
		MaxOutputTokens:   512,
		ParallelToolCalls: new(false),
		ReasoningEffort:   "low",
		PromptCacheKey:    "weather-bot",
	})
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: history(), Tools: weatherTools(), Step: 3}); err != nil {
		t.Fatal(err)
	}
	if s.paths[0] != "/responses" {
		t.Errorf("path = %s", s.paths[0])
	}
	assertJSON(t, s.last(), "responses", "request.json")
}

func TestResponsesUsageAndIDs(t *testing.T) {
	s := newServer(t, "responses", ok("final_answer.json"))
	resp, err := openai.NewResponses(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-5-mini", Messages: history()})
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 30, ReasoningTokens: 5}
	if resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	if resp.ID != "resp_68a1f0c2d9e48196a7c1b35f0e2d4a6b0c8e9f1a2b3c4d5e" || resp.Model != "gpt-5-mini-2025-08-07" || resp.FinishReason != "stop" {
		t.Errorf("id %q, model %q, finish %q", resp.ID, resp.Model, resp.FinishReason)
	}
	if resp.Message.Text != "It is 12 °C in Oslo." {
		t.Errorf("text = %q (the reasoning item must be skipped)", resp.Message.Text)
	}
}

func TestResponsesToolCalls(t *testing.T) {
	s := newServer(t, "responses", ok("parallel_calls.json"))
	resp, err := openai.NewResponses(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-5-mini", Messages: history()})
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls
	// The call_id, not the item's fc_ ID, is the call's ID.
	if len(calls) != 2 || calls[0].ID != "call_1" || calls[1].ID != "call_2" ||
		string(calls[0].Arguments) != `{"city":"Oslo"}` || string(calls[1].Arguments) != `{"zone":"Europe/Oslo"}` {
		t.Fatalf("calls = %+v", calls)
	}
	if resp.FinishReason != "tool_calls" || resp.Usage.ReasoningTokens != 64 {
		t.Errorf("finish reason %q, usage %+v", resp.FinishReason, resp.Usage)
	}
}

func TestResponsesIncompleteKeepsRawArguments(t *testing.T) {
	s := newServer(t, "responses", ok("invalid_arguments.json"))
	resp, err := openai.NewResponses(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-5-mini", Messages: history()})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Message.ToolCalls[0].Arguments); got != `{"city":` || resp.FinishReason != "length" {
		t.Fatalf("arguments %q, finish reason %q", got, resp.FinishReason)
	}
}

func TestResponsesRefusal(t *testing.T) {
	s := newServer(t, "responses", ok("refusal.json"))
	_, err := openai.NewResponses(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-4o", Messages: history()})
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindRefusal || me.Retryable {
		t.Fatalf("err = %v, want a non-retryable refusal", err)
	}
	if !strings.Contains(err.Error(), "I'm sorry, I can't assist with that request.") {
		t.Errorf("the refusal text is lost: %v", err)
	}
}

func TestResponsesMissingCallID(t *testing.T) {
	s := newServer(t, "responses", ok("missing_call_id.json"))
	req := &llm.Request{Model: "gpt-oss-20b", Messages: history(), Step: 2}
	m := openai.NewResponses(s.client(), nil)
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != 1 || !strings.HasPrefix(calls[0].ID, openai.GeneratedIDPrefix) || calls[0].Name != "get_weather" {
		t.Fatalf("calls = %+v", calls)
	}
	again, _ := m.Generate(context.Background(), req)
	if again.Message.ToolCalls[0].ID != calls[0].ID {
		t.Errorf("generated ID is not stable: %s vs %s", again.Message.ToolCalls[0].ID, calls[0].ID)
	}
}

// A response can come back with HTTP 200 and status "failed": it is
// classified by its error code.
func TestResponsesFailedStatus(t *testing.T) {
	s := newServer(t, "responses", ok("failed.json"))
	_, err := openai.NewResponses(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-5-mini", Messages: history()})
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindUnavailable || !me.Retryable || !strings.Contains(err.Error(), "server_error") {
		t.Fatalf("err = %v", err)
	}
}

func TestResponsesContextLength(t *testing.T) {
	s := newServer(t, "responses", caseReplies["context_length"])
	_, err := openai.NewResponses(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-5-mini", Messages: history()})
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindContextLengthExceeded || me.Retryable || !strings.Contains(err.Error(), "context window") {
		t.Fatalf("err = %v", err)
	}
}
