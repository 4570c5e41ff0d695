package anthropic

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// A whole run through the real SDK: the model asks for two tools in one
// response, both run, both results go back in one user message linked by
// tool_use_id, and the model answers.
func TestLoopParallelToolUse(t *testing.T) {
	type weatherIn struct {
		City string `json:"city"`
	}
	type weatherOut struct {
		TempC int `json:"temp_c"`
	}
	type timeIn struct {
		Zone string `json:"zone"`
	}
	type timeOut struct {
		Local string `json:"local"`
	}
	weather := tool.MustNew(tool.Spec[weatherIn]{Name: "get_weather", Description: "current weather"},
		func(ctx context.Context, in weatherIn) (weatherOut, error) { return weatherOut{TempC: 12}, nil })
	clock := tool.MustNew(tool.Spec[timeIn]{Name: "get_time", Description: "local time"},
		func(ctx context.Context, in timeIn) (timeOut, error) { return timeOut{Local: "14:05"}, nil })
	tools, err := tool.NewRegistry(weather, clock)
	if err != nil {
		t.Fatal(err)
	}

	s := newServer(t, ok("loop_calls.json"), ok("loop_answer.json"))
	res, err := loop.Run(context.Background(), loop.Config{
		Model:     New(s.client(), nil),
		ModelName: "claude-sonnet-4-6",
		Tools:     tools,
		Budgets:   loop.Budgets{MaxSteps: 4},
	}, []llm.Message{llm.SystemMessage("You are a concise assistant."), llm.UserMessage("Weather and time in Oslo?")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != loop.FinalAnswer || res.Steps != 2 || res.ToolCalls != 2 {
		t.Fatalf("status %s, %d steps, %d calls; want final_answer, 2, 2 (%s)", res.Status, res.Steps, res.ToolCalls, res.Detail)
	}
	if got := res.Answer(); got != "It is 12 °C in Oslo, and the local time is 14:05." {
		t.Fatalf("answer = %q", got)
	}
	wantUsage := llm.Usage{InputTokens: 612 + 90 + 640, OutputTokens: 118 + 24, CachedInputTokens: 640}
	if res.Usage != wantUsage {
		t.Fatalf("usage = %+v, want %+v", res.Usage, wantUsage)
	}

	reqs := s.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	var second struct {
		Model    string `json:"model"`
		System   []struct{ Text string }
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string          `json:"type"`
				Text      string          `json:"text"`
				ID        string          `json:"id"`
				Name      string          `json:"name"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
				IsError   *bool           `json:"is_error"`
				Content   []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[1], &second); err != nil {
		t.Fatal(err)
	}
	if second.Model != "claude-sonnet-4-6" || len(second.System) != 1 || second.System[0].Text != "You are a concise assistant." {
		t.Fatalf("model %q, system %+v", second.Model, second.System)
	}
	if len(second.Messages) != 3 {
		t.Fatalf("second request has %d messages, want user, assistant, user:\n%s", len(second.Messages), reqs[1])
	}
	asst, results := second.Messages[1], second.Messages[2]
	if asst.Role != "assistant" || len(asst.Content) != 3 || asst.Content[0].Type != "text" ||
		asst.Content[1].ID != "toolu_01A09q90qw90lq917835lq9" || asst.Content[2].ID != "toolu_01B7xZ3mR5kW9pQ2nL8vT4yC" {
		t.Fatalf("assistant turn sent back as %+v", asst)
	}
	if results.Role != "user" || len(results.Content) != 2 {
		t.Fatalf("results sent as %+v, want one user message with two tool_result blocks", results)
	}
	for i, want := range []struct{ id, content string }{
		{"toolu_01A09q90qw90lq917835lq9", `{"temp_c":12}`},
		{"toolu_01B7xZ3mR5kW9pQ2nL8vT4yC", `{"local":"14:05"}`},
	} {
		b := results.Content[i]
		if b.Type != "tool_result" || b.ToolUseID != want.id || b.IsError != nil || len(b.Content) != 1 || b.Content[0].Text != want.content {
			t.Fatalf("result %d = %+v, want %s -> %s", i, b, want.id, want.content)
		}
	}
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Fatalf("history: %v", err)
	}
}
