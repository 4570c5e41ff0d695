package loop_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/tool"
)

// A typed tool, a scripted model standing in for a provider, and a run with
// budgets and a policy.
func Example() {
	type weatherIn struct {
		City string `json:"city" jsonschema:"the city to report on"`
	}
	type weatherOut struct {
		TempC int `json:"temp_c"`
	}
	weather := tool.MustNew(tool.Spec[weatherIn]{Name: "weather", Description: "current temperature"},
		func(ctx context.Context, in weatherIn) (weatherOut, error) {
			if in.City != "Oslo" {
				return weatherOut{}, tool.NotFound("no station in " + in.City)
			}
			return weatherOut{TempC: -3}, nil
		})
	tools, err := tool.NewRegistry(weather)
	if err != nil {
		panic(err)
	}
	model := llmtest.New(
		llmtest.Calls(llmtest.Call("call_1", "weather", `{"city":"Oslo"}`)),
		llmtest.Text("It is -3 °C in Oslo."),
	)
	res, err := loop.Run(context.Background(), loop.Config{
		Model:   model,
		Tools:   tools,
		Policy:  policy.Allowlist("weather"),
		Budgets: loop.Budgets{MaxSteps: 4, MaxToolCalls: 8},
	}, []llm.Message{llm.UserMessage("How cold is Oslo?")})
	if err != nil {
		fmt.Println("stopped:", err)
		return
	}
	fmt.Println(res.Status, res.Steps, res.ToolCalls)
	fmt.Println(res.Answer())
	// Output:
	// final_answer 2 1
	// It is -3 °C in Oslo.
}

// A budget stop is an error whose status can be tested with errors.Is.
func ExampleStopError() {
	tools, _ := tool.NewRegistry()
	model := llmtest.Repeating(llmtest.Calls(llmtest.Call("c1", "shell", `{"cmd":"rm -rf /"}`)))
	_, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: tools}, []llm.Message{llm.UserMessage("clean up")})
	fmt.Println(errors.Is(err, loop.ToolNotAllowed))
	fmt.Println(err)
	// Output:
	// true
	// toolloop: run stopped: tool_not_allowed: call c1 names tool "shell", which is not registered
}
