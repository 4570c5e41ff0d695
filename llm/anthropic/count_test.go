package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/toolloop/toolloop/llm"
)

// countRequest is a turn with a system prompt, a tool, a call and its
// result: everything a count must include.
func countRequest() *llm.Request {
	weather := llm.ToolDefinition{Name: "get_weather", Description: "current weather",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}
	return &llm.Request{Model: "claude-sonnet-4-6", Tools: []llm.ToolDefinition{weather}, Messages: []llm.Message{
		llm.SystemMessage("You answer questions about the weather."),
		llm.UserMessage("Weather in Oslo?"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "toolu_01", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}},
		{Role: llm.RoleTool, Result: &llm.ToolResult{CallID: "toolu_01", Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":4}`)}},
	}}
}

// The count goes to count_tokens with the very messages, system prompt,
// tools and thinking that Generate sends (cache breakpoints included),
// and without what count_tokens does not take (max_tokens, metadata).
func TestCountTokens(t *testing.T) {
	opts := &Options{PromptCaching: true, ThinkingBudget: 2048, MaxTokens: 8192, UserID: "u-1", StopSequences: []string{"END"}}
	s := newServer(t, ok("count_tokens.json"), ok("final_answer.json"))
	m := New(s.client(), opts)
	n, err := m.CountTokens(context.Background(), countRequest())
	if err != nil {
		t.Fatal(err)
	}
	if n != 2095 {
		t.Errorf("count = %d, want the 2095 the API counted", n)
	}
	if _, err := m.Generate(context.Background(), countRequest()); err != nil {
		t.Fatal(err)
	}
	if s.paths[0] != "POST /v1/messages/count_tokens" || s.paths[1] != "POST /v1/messages" {
		t.Fatalf("paths = %q, want count_tokens then messages", s.paths)
	}
	var count, gen map[string]json.RawMessage
	if err := json.Unmarshal(s.bodies[0], &count); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(s.bodies[1], &gen); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"model", "messages", "system", "tools", "thinking"} {
		if string(count[k]) == "" || string(count[k]) != string(gen[k]) {
			t.Errorf("count's %s = %s, want Generate's %s", k, count[k], gen[k])
		}
	}
	for _, k := range []string{"max_tokens", "metadata", "stop_sequences", "stream"} {
		if _, ok := count[k]; ok {
			t.Errorf("count carries %s, which count_tokens does not take", k)
		}
	}
}

// A count that fails is classified as a turn's failure would be, from
// the API's own error bodies.
func TestCountTokensErrors(t *testing.T) {
	cases := []struct {
		name      string
		reply     reply
		kind      llm.ErrorKind
		retryable bool
	}{
		{"rate limited", reply{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "3"}, file: "rate_limited.json"}, llm.KindRateLimited, true},
		{"overloaded", reply{status: 529, file: "overloaded.json"}, llm.KindUnavailable, true},
		{"invalid request", reply{status: http.StatusBadRequest, file: "count_invalid.json"}, llm.KindBadRequest, false},
		{"unknown model", reply{status: http.StatusNotFound, file: "not_found.json"}, llm.KindUnknownModel, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, c.reply)
			n, err := New(s.client(), nil).CountTokens(context.Background(), countRequest())
			var le *llm.Error
			if !errors.As(err, &le) || le.Kind != c.kind || le.Retryable != c.retryable || n != 0 {
				t.Fatalf("CountTokens = %d, %v; want 0 and a %s error, retryable %v", n, err, c.kind, c.retryable)
			}
		})
	}
}

// A request the adapter cannot build is refused before anything is sent.
func TestCountTokensBadRequest(t *testing.T) {
	s := newServer(t, ok("count_tokens.json"))
	_, err := New(s.client(), nil).CountTokens(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}})
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindBadRequest || len(s.requests()) != 0 {
		t.Fatalf("err = %v after %d requests; want a bad request and none sent", err, len(s.requests()))
	}
}

// The writes to the hour-long cache are reported apart (part of the
// writes), from the usage's cache_creation, so that a run is priced
// right whoever chose the cache's lifetime.
func TestCacheWrite1hUsage(t *testing.T) {
	s := newServer(t, ok("cache_write_1h.json"))
	resp, err := New(s.client(), nil).Generate(context.Background(), countRequest())
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Usage{InputTokens: 60 + 1800 + 30, OutputTokens: 20, CachedInputTokens: 30, CacheWriteTokens: 1800, CacheWrite1hTokens: 1200, ReasoningTokens: 5}
	if resp.Usage != want {
		t.Fatalf("usage %+v, want %+v", resp.Usage, want)
	}
}
