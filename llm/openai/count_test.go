package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/openai"
)

func countRequest() *llm.Request {
	return &llm.Request{Model: "gpt-5-mini",
		Tools: []llm.ToolDefinition{{Name: "get_weather", Description: "current weather",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
		Output: &llm.OutputFormat{Name: "weather", Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
		Messages: []llm.Message{
			llm.SystemMessage("You answer weather questions."),
			llm.UserMessage("Weather in Oslo?"),
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}},
			llm.ToolMessage(llm.ToolResult{CallID: "call_a", Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":8}`)}),
		},
	}
}

// The count goes to responses/input_tokens with the input items, tools,
// reasoning and output format that Generate sends, and without what the
// count does not take (store, max_output_tokens, prompt_cache_key).
func TestResponsesCountTokens(t *testing.T) {
	s := newServer(t, "responses", ok("input_tokens.json"), ok("final_answer.json"))
	m := openai.NewResponses(s.client(), &openai.ResponsesOptions{ReasoningEffort: "low", MaxOutputTokens: 2000, CacheKeyPerRun: true})
	n, err := m.CountTokens(context.Background(), countRequest())
	if err != nil {
		t.Fatal(err)
	}
	if n != 1288 {
		t.Errorf("count = %d, want the 1288 the API counted", n)
	}
	if _, err := m.Generate(context.Background(), countRequest()); err != nil {
		t.Fatal(err)
	}
	if s.paths[0] != "/responses/input_tokens" || s.paths[1] != "/responses" {
		t.Fatalf("paths = %q, want /responses/input_tokens then /responses", s.paths)
	}
	var count, gen map[string]json.RawMessage
	if err := json.Unmarshal(s.request(0), &count); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(s.request(1), &gen); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"model", "input", "tools", "reasoning", "text"} {
		if string(count[k]) == "" || string(count[k]) != string(gen[k]) {
			t.Errorf("count's %s = %s, want Generate's %s", k, count[k], gen[k])
		}
	}
	for _, k := range []string{"store", "max_output_tokens", "prompt_cache_key", "include"} {
		if _, ok := count[k]; ok {
			t.Errorf("count carries %s, which input_tokens does not take", k)
		}
	}
}

// A count that fails is classified as a turn's failure would be, from
// the API's own error bodies.
func TestResponsesCountTokensErrors(t *testing.T) {
	cases := []struct {
		name      string
		reply     reply
		kind      llm.ErrorKind
		retryable bool
	}{
		{"rate limited", reply{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "2"}, file: "rate_limited.json"}, llm.KindRateLimited, true},
		{"server error", reply{status: http.StatusInternalServerError, file: "server_error.json"}, llm.KindUnavailable, true},
		{"unknown model", reply{status: http.StatusNotFound, file: "model_not_found.json"}, llm.KindUnknownModel, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, "responses", c.reply)
			n, err := openai.NewResponses(s.client(), nil).CountTokens(context.Background(), countRequest())
			var le *llm.Error
			if !errors.As(err, &le) || le.Kind != c.kind || le.Retryable != c.retryable || n != 0 {
				t.Fatalf("CountTokens = %d, %v; want 0 and a %s error, retryable %v", n, err, c.kind, c.retryable)
			}
		})
	}
}
