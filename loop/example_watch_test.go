package loop_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// A streamed run, watched as it goes: the answer's text arrives in pieces
// (here gathered, where a chat application would print each), and each
// call is shown once its arguments are complete, with its outcome.
func ExampleConfig_watch() {
	type stockIn struct {
		SKU string `json:"sku"`
	}
	stock := tool.MustNew(tool.Spec[stockIn]{Name: "stock", Description: "units in stock"},
		func(ctx context.Context, in stockIn) (int, error) { return 12, nil })
	tools, err := tool.NewRegistry(stock)
	if err != nil {
		panic(err)
	}
	model := llmtest.New( // it streams each turn in pieces of a few bytes
		llmtest.Calls(llmtest.Call("call_1", "stock", `{"sku":"MA-07"}`)),
		llmtest.Text("There are 12 monitor arms in stock."),
	)
	var text strings.Builder
	deltas := 0
	watch := func(ctx context.Context, u loop.Update) {
		switch u.Kind {
		case loop.UpdateDelta:
			deltas++
			if u.Delta.Kind == llm.DeltaText {
				text.WriteString(u.Delta.Text)
			}
		case loop.UpdateCallStarted:
			fmt.Printf("step %d: %s %s %s\n", u.Step, u.Call.ID, u.Call.Name, u.Call.Arguments)
		case loop.UpdateCallFinished:
			fmt.Printf("step %d: %s %s\n", u.Step, u.Call.ID, u.Outcome.Result.Status)
		case loop.UpdateStopped:
			fmt.Printf("%s: %s\n", u.Status, text.String())
		}
	}
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: tools, Stream: true, Watch: watch},
		[]llm.Message{llm.UserMessage("How many MA-07 are in stock?")})
	if err != nil {
		panic(err)
	}
	fmt.Println(deltas > 2, res.Answer() == text.String())
	// Output:
	// step 1: call_1 stock {"sku":"MA-07"}
	// step 1: call_1 ok
	// final_answer: There are 12 monitor arms in stock.
	// true true
}
