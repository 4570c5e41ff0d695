package loop_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// A run whose answer must match a JSON Schema: the scripted model first
// answers in prose, is told what was wrong, and answers in JSON, which
// Decode reads into a struct.
func ExampleDecode() {
	model := llmtest.New(
		llmtest.Text("It is -3 °C in Oslo."),
		llmtest.Text(`{"city": "Oslo", "temp_c": -3}`),
	)
	tools, _ := tool.NewRegistry()
	res, err := loop.Run(context.Background(), loop.Config{
		Model: model,
		Tools: tools,
		OutputSchema: json.RawMessage(`{"type": "object", "required": ["city", "temp_c"],
			"properties": {"city": {"type": "string"}, "temp_c": {"type": "integer"}}}`),
	}, []llm.Message{llm.UserMessage("How cold is Oslo? Answer as JSON.")})
	if err != nil {
		fmt.Println("stopped:", err)
		return
	}
	type weather struct {
		City  string `json:"city"`
		TempC int    `json:"temp_c"`
	}
	w, err := loop.Decode[weather](res)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %d °C after %d turns\n", w.City, w.TempC, res.Steps)
	fmt.Println("correction:", res.Messages[2].Text)
	// Output:
	// Oslo: -3 °C after 2 turns
	// correction: Your answer was refused: the answer is not JSON: invalid character 'I' looking for beginning of value at offset 0. Reply again with only a JSON value that matches the required output schema, and no other text.
}
