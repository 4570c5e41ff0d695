// Package eino measures eino's ReAct agent on the workload of toolloop's
// BenchmarkRun (5 model turns of 3 no-op read calls, then a final answer,
// from a scripted model), one run at a time (BenchmarkEinoReAct) and many
// at once (BenchmarkConcurrent), so that the two can be compared on one
// machine in one session. It is a module of its own so that toolloop never
// depends on eino; benchmarks/run.sh builds and runs both sides.
package eino

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

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

// out echoes the call's key, as toolloop's workload does (there, so that
// spin detection sees every turn bring something new).
type out struct {
	OK  bool   `json:"ok"`
	Key string `json:"key"`
}

// readTools are the workload's three no-op reads.
var readTools = [...]string{"read_a", "read_b", "read_c"}

// benchTurns is the workload's number of model turns: 5 of 3 reads, then
// the final answer.
const benchTurns = 6

// scripted answers the workload's turns, telling them by the assistant
// messages in its input, so that it is stateless and shareable across
// runs. It builds each response as a provider adapter does (as toolloop's
// benchmark model does too, so that both sides pay alike): a fresh
// message, ToolCalls slice, response metadata and usage every call, the
// call IDs formatted and the arguments marshalled. When wait is positive
// each turn first waits that long (or until ctx is done), as a remote model
// would; first, when set, is called as each run's first turn begins, and
// an error from it ends the turn.
type scripted struct {
	wait  time.Duration
	first func(context.Context) error
}

func (s scripted) Generate(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	step := 1
	for _, m := range input {
		if m.Role == schema.Assistant {
			step++
		}
	}
	if step == 1 && s.first != nil {
		if err := s.first(ctx); err != nil {
			return nil, err
		}
	}
	if s.wait > 0 {
		t := time.NewTimer(s.wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	msg := &schema.Message{Role: schema.Assistant, ResponseMeta: &schema.ResponseMeta{FinishReason: "tool_calls",
		Usage: &schema.TokenUsage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120}}}
	if step >= benchTurns {
		msg.Content, msg.ResponseMeta.FinishReason = "done", "stop"
		msg.ResponseMeta.Usage.CompletionTokens, msg.ResponseMeta.Usage.TotalTokens = 5, 105
		return msg, nil
	}
	calls := make([]schema.ToolCall, 0, len(readTools))
	for i, name := range readTools {
		args, err := json.Marshal(in{Key: fmt.Sprintf("k%d", step)})
		if err != nil {
			return nil, err
		}
		calls = append(calls, schema.ToolCall{ID: fmt.Sprintf("call_%d_%d", step, i), Type: "function",
			Function: schema.FunctionCall{Name: name, Arguments: string(args)}})
	}
	msg.ToolCalls = calls
	return msg, nil
}

func (s scripted) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	m, err := s.Generate(ctx, input, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{m}), nil
}

func (s scripted) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) { return s, nil }

// newAgent builds the ReAct agent with the workload's tools and m.
func newAgent(b *testing.B, m scripted) *react.Agent {
	b.Helper()
	ctx := context.Background()
	var tools []tool.BaseTool
	for _, name := range readTools {
		t, err := utils.InferTool(name, "no-op read", func(ctx context.Context, x in) (out, error) { return out{OK: true, Key: x.Key}, nil })
		if err != nil {
			b.Fatal(err)
		}
		tools = append(tools, t)
	}
	agent, err := react.NewAgent(ctx, &react.AgentConfig{ToolCallingModel: m,
		ToolsConfig: compose.ToolsNodeConfig{Tools: tools}, MaxStep: 40})
	if err != nil {
		b.Fatal(err)
	}
	return agent
}

// BenchmarkEinoReAct runs the agent once per iteration.
func BenchmarkEinoReAct(b *testing.B) {
	ctx := context.Background()
	agent := newAgent(b, scripted{})
	msgs := []*schema.Message{schema.UserMessage("check the keys")}
	b.ReportAllocs()
	for b.Loop() {
		res, err := agent.Generate(ctx, msgs)
		if err != nil || res.Content != "done" {
			b.Fatalf("%v %v", res, err)
		}
	}
}
