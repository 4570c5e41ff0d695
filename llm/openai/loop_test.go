package openai_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/openai"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

func weatherRegistry(t *testing.T) *tool.Registry {
	t.Helper()
	type weatherIn struct {
		City string `json:"city"`
	}
	type timeIn struct {
		Zone string `json:"zone"`
	}
	weather := tool.MustNew(tool.Spec[weatherIn]{Name: "get_weather", Description: "current weather"},
		func(ctx context.Context, in weatherIn) (map[string]any, error) {
			return map[string]any{"city": in.City, "temp_c": 12}, nil
		})
	clock := tool.MustNew(tool.Spec[timeIn]{Name: "get_time", Description: "local time"},
		func(ctx context.Context, in timeIn) (map[string]any, error) {
			return map[string]any{"zone": in.Zone, "time": "14:05"}, nil
		})
	reg, err := tool.NewRegistry(weather, clock)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// A whole run through the real SDK against the test server: the model asks
// for two tool calls in one reply, the loop runs them and sends both
// results back linked by call ID, and the model answers.
func TestLoopEndToEnd(t *testing.T) {
	for _, api := range []struct {
		name    string
		model   func(s *server) llm.Model
		results func(*testing.T, []byte) map[string]string
		usage   llm.Usage
	}{
		{"chat", func(s *server) llm.Model { return openai.NewChat(s.client(), nil) }, chatResults,
			llm.Usage{InputTokens: 182, OutputTokens: 68, CachedInputTokens: 30, ReasoningTokens: 5}},
		{"responses", func(s *server) llm.Model { return openai.NewResponses(s.client(), nil) }, responsesResults,
			llm.Usage{InputTokens: 182, OutputTokens: 132, CachedInputTokens: 30, ReasoningTokens: 69}},
	} {
		t.Run(api.name, func(t *testing.T) {
			s := newServer(t, api.name, ok("parallel_calls.json"), ok("final_answer.json"))
			res, err := loop.Run(context.Background(), loop.Config{
				Model:     api.model(s),
				ModelName: "gpt-test",
				Tools:     weatherRegistry(t),
				Budgets:   loop.Budgets{MaxSteps: 4, MaxToolCalls: 4},
			}, []llm.Message{llm.SystemMessage("You answer weather questions."), llm.UserMessage("Weather and time in Oslo?")})
			if err != nil {
				t.Fatalf("%v (%s)", err, res.Detail)
			}
			if res.Status != loop.FinalAnswer || res.Answer() != "It is 12 °C in Oslo." || res.Steps != 2 || res.ToolCalls != 2 {
				t.Fatalf("status %s, answer %q, steps %d, calls %d", res.Status, res.Answer(), res.Steps, res.ToolCalls)
			}
			if res.Usage != api.usage {
				t.Errorf("usage = %+v, want %+v", res.Usage, api.usage)
			}
			if err := llm.CheckHistory(res.Messages); err != nil {
				t.Error(err)
			}
			if s.count() != 2 {
				t.Fatalf("%d requests, want 2", s.count())
			}
			got := api.results(t, s.request(1))
			if len(got) != 2 || !strings.Contains(got["call_1"], `"temp_c":12`) || !strings.Contains(got["call_2"], `"time":"14:05"`) {
				t.Fatalf("second request carried results %v", got)
			}
			for _, name := range []string{`"get_weather"`, `"get_time"`, `"gpt-test"`} {
				if !strings.Contains(string(s.request(0)), name) {
					t.Errorf("first request lacks %s: %s", name, s.request(0))
				}
			}
		})
	}
}

// With the SDK's retries off, a 429 reaches the loop, which waits as the
// server asked and tries again: one logged retry, not a hidden one.
func TestLoopRetriesRateLimit(t *testing.T) {
	s := newServer(t, "chat",
		reply{status: http.StatusTooManyRequests, file: "rate_limited.json", header: map[string]string{"Retry-After-Ms": "20"}},
		ok("final_answer.json"))
	res, err := loop.Run(context.Background(), loop.Config{
		Model:             openai.NewChat(s.client(), nil),
		ModelName:         "gpt-test",
		Tools:             weatherRegistry(t),
		ModelRetryBackoff: time.Millisecond,
	}, []llm.Message{llm.UserMessage("Weather in Oslo?")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != loop.FinalAnswer || s.count() != 2 {
		t.Fatalf("status %s after %d requests", res.Status, s.count())
	}
	var attempts int
	for _, ev := range res.Events {
		if ev.Kind == loop.ModelResponded {
			attempts = ev.Attempts
		}
	}
	if attempts != 2 {
		t.Errorf("the log records %d attempts, want 2", attempts)
	}
}

// A 429 whose Retry-After is longer than the run has left ends the run at
// once with a detail that says so, not by sleeping until the deadline and
// reporting a bare "context deadline exceeded".
func TestLoopRetryAfterBeyondDeadline(t *testing.T) {
	s := newServer(t, "chat", reply{status: http.StatusTooManyRequests, file: "rate_limited.json", header: map[string]string{"Retry-After": "3600"}})
	start := time.Now()
	res, err := loop.Run(context.Background(), loop.Config{
		Model:     openai.NewChat(s.client(), nil),
		ModelName: "gpt-test",
		Tools:     weatherRegistry(t),
		Budgets:   loop.Budgets{Deadline: 2 * time.Second},
	}, []llm.Message{llm.UserMessage("Weather in Oslo?")})
	if err == nil || res.Status != loop.ModelError {
		t.Fatalf("status %s (%s), want model_error", res.Status, res.Detail)
	}
	if !strings.Contains(res.Detail, "the provider asked to wait 3600 s (Retry-After), more than the run has left") {
		t.Errorf("detail = %q", res.Detail)
	}
	if d := time.Since(start); d > time.Second || s.count() != 1 {
		t.Errorf("the run took %v and %d requests; it should stop at the first reply", d, s.count())
	}
}

// An answer cut off at the output token limit still ends the run with
// final_answer, but the result says it is truncated, from the log.
func TestLoopTruncatedAnswer(t *testing.T) {
	s := newServer(t, "chat", ok("truncated.json"))
	res, err := loop.Run(context.Background(), loop.Config{
		Model: openai.NewChat(s.client(), nil), ModelName: "gpt-test", Tools: weatherRegistry(t),
	}, []llm.Message{llm.UserMessage("Weather in Oslo this week?")})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated() || !strings.HasSuffix(res.Detail, "; "+loop.TruncatedDetail) {
		t.Errorf("Truncated() = %v, detail %q", res.Truncated(), res.Detail)
	}
	s2 := newServer(t, "chat", ok("final_answer.json"))
	res, err = loop.Run(context.Background(), loop.Config{
		Model: openai.NewChat(s2.client(), nil), ModelName: "gpt-test", Tools: weatherRegistry(t),
	}, []llm.Message{llm.UserMessage("Weather in Oslo?")})
	if err != nil || res.Truncated() || strings.Contains(res.Detail, "truncated") {
		t.Errorf("a whole answer: Truncated() = %v, detail %q, err %v", res.Truncated(), res.Detail, err)
	}
}

// The model request timeout bounds one attempt, not the wait between
// attempts: a Retry-After longer than it, but within the run's time, is
// waited out and the request tried again.
func TestLoopRetryAfterLongerThanTheModelTimeout(t *testing.T) {
	s := newServer(t, "chat", reply{status: http.StatusTooManyRequests, file: "rate_limited.json", header: map[string]string{"Retry-After": "1"}},
		ok("final_answer.json"))
	res, err := loop.Run(context.Background(), loop.Config{
		Model:        openai.NewChat(s.client(), nil),
		ModelName:    "gpt-test",
		Tools:        weatherRegistry(t),
		ModelTimeout: 500 * time.Millisecond,
		Budgets:      loop.Budgets{Deadline: time.Minute},
	}, []llm.Message{llm.UserMessage("Weather in Oslo?")})
	if err != nil || s.count() != 2 {
		t.Fatalf("status %s (%s) after %d requests, want final_answer after 2", res.Status, res.Detail, s.count())
	}
}
