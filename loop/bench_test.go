package loop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

type noopIn struct {
	Key string `json:"key"`
}

type noopOut struct {
	OK bool `json:"ok"`
}

// benchWorkload is the workload: 5 model turns of 3 read-only no-op
// calls each, then a final answer.
func benchWorkload(b *testing.B, planner executor.Planner) (*loop.Runner, []llm.Message) {
	b.Helper()
	var tools []*tool.Tool
	for _, name := range []string{"read_a", "read_b", "read_c"} {
		tools = append(tools, tool.MustNew(tool.Spec[noopIn]{Name: name},
			func(context.Context, noopIn) (noopOut, error) { return noopOut{OK: true}, nil }))
	}
	reg, err := tool.NewRegistry(tools...)
	if err != nil {
		b.Fatal(err)
	}
	var turns []llmtest.Turn
	for t := 1; t <= 5; t++ {
		var calls []llm.ToolCall
		for i, name := range []string{"read_a", "read_b", "read_c"} {
			calls = append(calls, llmtest.Call(fmt.Sprintf("call_%d_%d", t, i), name, fmt.Sprintf(`{"key":"k%d"}`, t)))
		}
		turns = append(turns, llmtest.Calls(calls...).WithUsage(100, 20))
	}
	turns = append(turns, llmtest.Text("done").WithUsage(100, 5))
	// One model per run: the scripted model keeps its position. Building it
	// is outside the loop's cost, so the model is rebuilt cheaply below.
	r, err := loop.NewRunner(loop.Config{
		Model: llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
			// The turn is chosen by the request's step number, which keeps
			// the model stateless and shareable across iterations.
			t := turns[req.Step-1]
			resp := *t.Response
			return &resp, nil
		}),
		ModelName: "bench",
		Tools:     reg,
		Budgets:   loop.Budgets{MaxSteps: 10},
		Planner:   planner,
	})
	if err != nil {
		b.Fatal(err)
	}
	return r, []llm.Message{llm.UserMessage("check the keys")}
}

// BenchmarkRun measures one whole run of the workload with the
// in-process runner, no tracer and no store: with the default planner
// (the three reads of a turn form one parallel stage) and with the serial
// planner (one call per stage).
func BenchmarkRun(b *testing.B) {
	for _, bc := range []struct {
		name    string
		planner executor.Planner
	}{{"planned", nil}, {"serial", executor.SerialPlanner()}} {
		b.Run(bc.name, func(b *testing.B) {
			r, msgs := benchWorkload(b, bc.planner)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res, err := r.Run(ctx, msgs)
				if err != nil || res.ToolCalls != 15 {
					b.Fatalf("run: %v, %d tool calls", err, res.ToolCalls)
				}
			}
		})
	}
}

// BenchmarkParallelStage runs one turn of 50 independent reads that each
// sleep 20 ms, with MaxParallel 50, then a final answer. The ideal is one
// sleep; the reported ratio is the run's time over 20 ms.
func BenchmarkParallelStage(b *testing.B) {
	const n, sleep = 50, 20 * time.Millisecond
	slow := tool.MustNew(tool.Spec[noopIn]{Name: "slow_read"}, func(ctx context.Context, in noopIn) (noopOut, error) {
		t := time.NewTimer(sleep)
		defer t.Stop()
		select {
		case <-t.C:
			return noopOut{OK: true}, nil
		case <-ctx.Done():
			return noopOut{}, ctx.Err()
		}
	})
	reg, err := tool.NewRegistry(slow)
	if err != nil {
		b.Fatal(err)
	}
	calls := make([]llm.ToolCall, n)
	for i := range calls {
		calls[i] = llmtest.Call(fmt.Sprintf("c%d", i), "slow_read", fmt.Sprintf(`{"key":"k%d"}`, i))
	}
	turns := []llmtest.Turn{llmtest.Calls(calls...), llmtest.Text("done")}
	r, err := loop.NewRunner(loop.Config{
		Model: llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
			resp := *turns[req.Step-1].Response
			return &resp, nil
		}),
		Tools:    reg,
		Executor: executor.New(&executor.Options{MaxParallel: n}),
	})
	if err != nil {
		b.Fatal(err)
	}
	msgs := []llm.Message{llm.UserMessage("read everything")}
	ctx := context.Background()
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := r.Run(ctx, msgs)
		total += time.Since(start)
		if err != nil || res.ToolCalls != n {
			b.Fatalf("run: %v, %d tool calls", err, res.ToolCalls)
		}
	}
	b.ReportMetric(float64(total)/float64(b.N)/float64(sleep), "x_sleep")
}
