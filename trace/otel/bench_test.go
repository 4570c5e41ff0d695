package otel_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/trace"
	traceotel "github.com/toolloop/toolloop/trace/otel"
)

// discard is an exporter that drops every span: the benchmark measures
// building spans, not shipping them.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

type noopOut struct {
	OK bool `json:"ok"`
}

// workload is loop/bench_test.go's: 5 model turns of 3 read-only no-op
// calls each, then a final answer.
func workload(b *testing.B, obs loop.Observer, planner executor.Planner) (*loop.Runner, []llm.Message) {
	b.Helper()
	var tools []*tool.Tool
	for _, name := range []string{"read_a", "read_b", "read_c"} {
		tools = append(tools, tool.MustNew(tool.Spec[keyIn]{Name: name},
			func(context.Context, keyIn) (noopOut, error) { return noopOut{OK: true}, nil }))
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
	r, err := loop.NewRunner(loop.Config{
		Model: llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
			resp := *turns[req.Step-1].Response
			return &resp, nil
		}),
		ModelName: "bench",
		Tools:     reg,
		Budgets:   loop.Budgets{MaxSteps: 10},
		Observer:  obs,
		Planner:   planner,
	})
	if err != nil {
		b.Fatal(err)
	}
	return r, []llm.Message{llm.UserMessage("check the keys")}
}

// BenchmarkRunTraced runs the loop's benchmark workload (BenchmarkRun in
// loop/bench_test.go: the rule planner makes each turn's three reads one
// parallel stage; the serial planner, one stage per call) without a tracer
// and with the OpenTelemetry observer over an SDK TracerProvider whose
// exporter drops everything (every span sampled, built and ended), over an
// SDK provider that samples nothing, over the API's no-op provider, and
// with the JSON Lines log writer to io.Discard.
//
// Besides ns/op (wall time, which includes the runner's waits and suffers
// on a loaded machine) it reports cpu-ns/op, the process's CPU time per
// run, and for each tracer cpu_overhead_x, its cpu-ns/op over the untraced
// run's with the same planner, measured in the same process.
func BenchmarkRunTraced(b *testing.B) {
	tracers := []struct {
		name string
		obs  func() (loop.Observer, func())
	}{
		{"untraced", func() (loop.Observer, func()) { return nil, func() {} }},
		{"otel_sdk", func() (loop.Observer, func()) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(discard{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
			return traceotel.NewObserver(tp, &traceotel.Options{ProviderName: "bench"}), func() { _ = tp.Shutdown(context.Background()) }
		}},
		{"otel_sdk_unsampled", func() (loop.Observer, func()) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(discard{}), sdktrace.WithSampler(sdktrace.NeverSample()))
			return traceotel.NewObserver(tp, &traceotel.Options{ProviderName: "bench"}), func() { _ = tp.Shutdown(context.Background()) }
		}},
		{"otel_noop", func() (loop.Observer, func()) {
			return traceotel.NewObserver(noop.NewTracerProvider(), nil), func() {}
		}},
		{"jsonl", func() (loop.Observer, func()) { return trace.NewLogWriter(io.Discard, nil), func() {} }},
	}
	for _, pl := range []struct {
		name    string
		planner executor.Planner
	}{{"planned", nil}, {"serial", executor.SerialPlanner()}} {
		var base float64 // untraced cpu-ns/op
		for _, tc := range tracers {
			b.Run(pl.name+"/"+tc.name, func(b *testing.B) {
				obs, done := tc.obs()
				defer done()
				r, msgs := workload(b, obs, pl.planner)
				ctx := context.Background()
				b.ReportAllocs()
				var cpu time.Duration
				for b.Loop() {
					start := cpuTime()
					res, err := r.Run(ctx, msgs)
					cpu += cpuTime() - start
					if err != nil || res.ToolCalls != 15 {
						b.Fatalf("run: %v, %d tool calls", err, res.ToolCalls)
					}
				}
				perOp := float64(cpu.Nanoseconds()) / float64(b.N)
				b.ReportMetric(perOp, "cpu-ns/op")
				if tc.name == "untraced" {
					base = perOp
				} else if base > 0 {
					b.ReportMetric(perOp/base, "cpu_overhead_x")
				}
			})
		}
	}
}
