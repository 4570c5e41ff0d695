package anthropic_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
	anthropicllm "github.com/toolloop/toolloop/llm/anthropic"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// Build the SDK client yourself (here aimed at a stand-in server so that
// the example runs offline), hand it to New, and give the Model to a run.
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-6",
			"content":[{"type":"text","text":"Hello! What can I do for you?"}],
			"stop_reason":"end_turn","stop_sequence":null,
			"usage":{"input_tokens":12,"output_tokens":9}}`)
	}))
	defer api.Close()

	client := anthropic.NewClient(
		option.WithoutEnvironmentDefaults(), // the caller decides what is read from where
		option.WithAPIKey("sk-ant-example"),
		option.WithBaseURL(api.URL), // leave out to reach api.anthropic.com
		option.WithMaxRetries(0),    // the loop retries, and logs each attempt
	)
	model := anthropicllm.New(client, &anthropicllm.Options{MaxTokens: 1024, PromptCaching: true})

	tools, err := tool.NewRegistry()
	if err != nil {
		panic(err)
	}
	res, err := loop.Run(context.Background(), loop.Config{
		Model:     model,
		ModelName: "claude-sonnet-4-6", // sent with every request
		Tools:     tools,
		Budgets:   loop.Budgets{MaxSteps: 8},
	}, []llm.Message{llm.UserMessage("Hi!")})
	if err != nil {
		fmt.Println("stopped:", err)
		return
	}
	fmt.Println(res.Status, res.Usage.InputTokens, res.Usage.OutputTokens)
	fmt.Println(res.Answer())
	// Output:
	// final_answer 12 9
	// Hello! What can I do for you?
}
