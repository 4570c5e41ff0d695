package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/openai"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// A run over Chat Completions. A test server stands in for OpenAI: it asks
// for two tool calls, then answers. In a program, the client would be
// sdk.NewClient(option.WithAPIKey(key), option.WithMaxRetries(0)).
func ExampleNewChat() {
	replies := []string{"testdata/chat/parallel_calls.json", "testdata/chat/final_answer.json"}
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := os.ReadFile(replies[min(int(n.Add(1))-1, len(replies)-1)])
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer srv.Close()

	client := sdk.NewClient(
		option.WithBaseURL(srv.URL),
		option.WithAPIKey("sk-example"),
		option.WithMaxRetries(0), // the loop retries, and logs each attempt
	)
	model := openai.NewChat(client, &openai.ChatOptions{MaxOutputTokens: 1024})

	type weatherIn struct {
		City string `json:"city"`
	}
	type timeIn struct {
		Zone string `json:"zone"`
	}
	tools, _ := tool.NewRegistry(
		tool.MustNew(tool.Spec[weatherIn]{Name: "get_weather", Description: "current weather"},
			func(ctx context.Context, in weatherIn) (map[string]int, error) {
				return map[string]int{"temp_c": 12}, nil
			}),
		tool.MustNew(tool.Spec[timeIn]{Name: "get_time", Description: "local time"},
			func(ctx context.Context, in timeIn) (map[string]string, error) {
				return map[string]string{"time": "14:05"}, nil
			}),
	)
	res, err := loop.Run(context.Background(), loop.Config{
		Model: model, ModelName: "gpt-4.1", Tools: tools,
		Budgets: loop.Budgets{MaxSteps: 4},
	}, []llm.Message{llm.UserMessage("Weather and time in Oslo?")})
	if err != nil {
		fmt.Println("stopped:", err)
		return
	}
	fmt.Println(res.Status, res.Steps, res.ToolCalls)
	fmt.Println(res.Answer())
	fmt.Println(res.Usage.InputTokens, res.Usage.OutputTokens)
	// Output:
	// final_answer 2 2
	// It is 12 °C in Oslo.
	// 182 68
}

// The Responses API, stateless: each turn sends the whole history with
// store=false.
func ExampleNewResponses() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := os.ReadFile("testdata/responses/single_call.json")
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer srv.Close()

	client := sdk.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("sk-example"), option.WithMaxRetries(0))
	model := openai.NewResponses(client, &openai.ResponsesOptions{Model: "gpt-5-mini", ReasoningEffort: "low"})
	resp, err := model.Generate(context.Background(), &llm.Request{
		Messages: []llm.Message{llm.UserMessage("Weather in Oslo?")},
		Tools: []llm.ToolDefinition{{Name: "get_weather", Description: "current weather",
			InputSchema: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := resp.Message.ToolCalls[0]
	fmt.Println(resp.FinishReason, c.ID, c.Name, string(c.Arguments))
	// Output:
	// tool_calls call_1 get_weather {"city":"Oslo"}
}

// A local OpenAI-compatible server. NewCompatible reads no environment
// variables and sends a placeholder key when given none.
func ExampleNewCompatible() {
	model := openai.NewCompatible("http://localhost:11434/v1", "", &openai.ChatOptions{
		Model:             "qwen2.5:7b",
		ParallelToolCalls: new(false),
	})
	_ = model // loop.Config{Model: model, ...}
}
