// Package eino measures eino's ReAct agent on the workload of toolloop's
// BenchmarkRun (5 model turns of 3 no-op read calls, then a final answer,
// from a scripted model), so that the two can be compared on one machine in
// one session. It is a module of its own so that toolloop never depends on
// eino; see docs/BENCHMARKS.md for how to run both.
package eino

import (
	"context"
	"fmt"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
)

type in struct {
	Key string `json:"key"`
}
type out struct {
	OK bool `json:"ok"`
}

// scripted answers by counting assistant turns in the input: 5 turns of 3
// calls, then a final answer (the same workload as toolloop's BenchmarkRun).
type scripted struct{}

func (scripted) Generate(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	turn := 1
	for _, m := range input {
		if m.Role == schema.Assistant {
			turn++
		}
	}
	if turn > 5 {
		return &schema.Message{Role: schema.Assistant, Content: "done"}, nil
	}
	var calls []schema.ToolCall
	for i, name := range []string{"read_a", "read_b", "read_c"} {
		calls = append(calls, schema.ToolCall{ID: fmt.Sprintf("call_%d_%d", turn, i), Type: "function",
			Function: schema.FunctionCall{Name: name, Arguments: fmt.Sprintf(`{"key":"k%d"}`, turn)}})
	}
	return &schema.Message{Role: schema.Assistant, ToolCalls: calls}, nil
}

func (scripted) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	m, err := scripted{}.Generate(ctx, input, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{m}), nil
}

func (s scripted) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) { return s, nil }

// BenchmarkEinoReAct runs the agent once per iteration.
func BenchmarkEinoReAct(b *testing.B) {
	ctx := context.Background()
	var tools []tool.BaseTool
	for _, name := range []string{"read_a", "read_b", "read_c"} {
		t, err := utils.InferTool(name, "no-op read", func(ctx context.Context, x in) (out, error) { return out{OK: true}, nil })
		if err != nil {
			b.Fatal(err)
		}
		tools = append(tools, t)
	}
	agent, err := react.NewAgent(ctx, &react.AgentConfig{ToolCallingModel: scripted{},
		ToolsConfig: compose.ToolsNodeConfig{Tools: tools}, MaxStep: 40})
	if err != nil {
		b.Fatal(err)
	}
	msgs := []*schema.Message{schema.UserMessage("check the keys")}
	b.ReportAllocs()
	for b.Loop() {
		res, err := agent.Generate(ctx, msgs)
		if err != nil || res.Content != "done" {
			b.Fatalf("%v %v", res, err)
		}
	}
}
