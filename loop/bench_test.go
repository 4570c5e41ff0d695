package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
)

type noopIn struct {
	Key string `json:"key"`
}

// noopOut echoes the call's key, so that every turn brings the model
// something new: a workload whose results all repeated earlier ones would
// be stopped by spin detection's no-new-information rule, as it should.
type noopOut struct {
	OK  bool   `json:"ok"`
	Key string `json:"key"`
}

// readTools are the workload's three no-op reads.
var readTools = [...]string{"read_a", "read_b", "read_c"}

// benchTurns is the workload's number of model turns: 5 of 3 reads, then
// the final answer.
const benchTurns = 6

// benchResponse builds the response to turn step of the workload as a
// provider adapter does: every call allocates a fresh response, message and
// ToolCalls slice, formats the call IDs and marshals each call's arguments,
// since that is what a run gets from a real client. A model that handed
// out one prebuilt response would hide what the loop does with what it is
// given (copies, validation, the history it keeps).
func benchResponse(step int) (*llm.Response, error) {
	resp := &llm.Response{
		ID:           fmt.Sprintf("resp_%d", step),
		Model:        "bench",
		Message:      llm.Message{Role: llm.RoleAssistant},
		Usage:        llm.Usage{InputTokens: 100, OutputTokens: 20},
		FinishReason: "tool_calls",
	}
	if step >= benchTurns {
		resp.Message.Text, resp.Usage.OutputTokens, resp.FinishReason = "done", 5, "stop"
		return resp, nil
	}
	calls := make([]llm.ToolCall, 0, len(readTools))
	for i, name := range readTools {
		args, err := json.Marshal(noopIn{Key: fmt.Sprintf("k%d", step)})
		if err != nil {
			return nil, err
		}
		calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("call_%d_%d", step, i), Name: name, Arguments: args})
	}
	resp.Message.ToolCalls = calls
	return resp, nil
}

// benchModel answers the workload's turns with benchResponse. The turn is
// the request's step number, which keeps the model stateless and shareable
// across runs. When wait is positive each turn first waits that long (or
// until ctx is done), as a remote model would; first, when set, is called
// as each run's first turn begins, and an error from it ends the turn.
func benchModel(wait time.Duration, first func(context.Context) error) llm.Model {
	return llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		if req.Step == 1 && first != nil {
			if err := first(ctx); err != nil {
				return nil, err
			}
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
		return benchResponse(req.Step)
	})
}

// sleep waits for d, or until ctx is done, as a remote call would.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// benchConfig is the workload: 5 model turns of 3 read-only no-op
// calls each, then a final answer, from model. honors says whether the
// no-op tools declare that they honor their context (which they do: they
// never block). It returns the configuration rather than a runner so that
// callers may add a store; only the public API is used, so that the same
// benchmarks run against any version of the runner.
func benchConfig(b *testing.B, planner executor.Planner, honors bool, model llm.Model) (loop.Config, []llm.Message) {
	b.Helper()
	var tools []*tool.Tool
	for _, name := range readTools {
		tools = append(tools, tool.MustNew(tool.Spec[noopIn]{Name: name, HonorsContext: honors},
			func(_ context.Context, in noopIn) (noopOut, error) { return noopOut{OK: true, Key: in.Key}, nil }))
	}
	reg, err := tool.NewRegistry(tools...)
	if err != nil {
		b.Fatal(err)
	}
	return loop.Config{
		Model:     model,
		ModelName: "bench",
		Tools:     reg,
		Budgets:   loop.Budgets{MaxSteps: 10},
		Planner:   planner,
	}, []llm.Message{llm.UserMessage("check the keys")}
}

// benchRunner is benchConfig's workload with a model that answers at once.
func benchRunner(b *testing.B, planner executor.Planner, honors bool) (*loop.Runner, []llm.Message) {
	b.Helper()
	cfg, msgs := benchConfig(b, planner, honors, benchModel(0, nil))
	r, err := loop.NewRunner(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return r, msgs
}

// BenchmarkRun measures one whole run of the workload with the
// in-process runner, no tracer and no store: with the default planner
// (the three reads of a turn form one parallel stage) and with the serial
// planner (one call per stage), both with tools that declare nothing, so
// that each handler runs on a goroutine of its own; and with the default
// planner and tools that declare they honor their context, so that their
// handlers run on the goroutine driving the run (on-caller). The model
// builds each response afresh (benchResponse), which is part of every
// figure.
func BenchmarkRun(b *testing.B) {
	for _, bc := range []struct {
		name    string
		planner executor.Planner
		honors  bool
	}{{"planned", nil, false}, {"serial", executor.SerialPlanner(), false}, {"on-caller", nil, true}} {
		b.Run(bc.name, func(b *testing.B) {
			r, msgs := benchRunner(b, bc.planner, bc.honors)
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
	const n, pause = 50, 20 * time.Millisecond
	slow := tool.MustNew(tool.Spec[noopIn]{Name: "slow_read"}, func(ctx context.Context, in noopIn) (noopOut, error) {
		if err := sleep(ctx, pause); err != nil {
			return noopOut{}, err
		}
		return noopOut{OK: true}, nil
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
	b.Run("toolloop", func(b *testing.B) {
		var total time.Duration
		for b.Loop() {
			start := time.Now()
			res, err := r.Run(ctx, msgs)
			total += time.Since(start)
			if err != nil || res.ToolCalls != n {
				b.Fatalf("run: %v, %d tool calls", err, res.ToolCalls)
			}
		}
		b.ReportMetric(float64(total)/float64(b.N)/float64(pause), "x_sleep")
	})
	// The same sleeps on bare goroutines: what the machine's scheduler and
	// timers cost on their own, measured in the same run.
	b.Run("bare-goroutines", func(b *testing.B) {
		var total time.Duration
		for b.Loop() {
			start := time.Now()
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					t := time.NewTimer(pause)
					defer t.Stop()
					<-t.C
				})
			}
			wg.Wait()
			total += time.Since(start)
		}
		b.ReportMetric(float64(total)/float64(b.N)/float64(pause), "x_sleep")
	})
}

// countingLog counts what a durable run writes, beyond its first event
// (which carries the run's initial messages once).
type countingLog struct {
	store.EventLog
	bytes, appends int
}

func (c *countingLog) Append(ctx context.Context, runID string, evs []store.EventRecord, sum store.RunSummary) error {
	for _, ev := range evs {
		if ev.Seq > 1 {
			c.bytes += len(ev.Data)
		}
	}
	c.appends++
	return c.EventLog.Append(ctx, runID, evs, sum)
}

// BenchmarkDurableBytesPerStep measures the bytes a durable run appends per
// model turn after histories of 10, 100 and 1000 messages: it must not grow
// with the history, since only new events are written.
func BenchmarkDurableBytesPerStep(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			msgs := make([]llm.Message, 0, n)
			for i := 0; len(msgs) < n; i++ {
				msgs = append(msgs, llm.UserMessage(fmt.Sprintf("earlier message %d with some text in it", i)))
			}
			cfg, _ := benchConfig(b, nil, false, benchModel(0, nil))
			var bytes, steps int
			for b.Loop() {
				cl := &countingLog{EventLog: store.NewMemory()}
				cfg.Store = cl
				rr, err := loop.NewRunner(cfg)
				if err != nil {
					b.Fatal(err)
				}
				res, err := rr.Run(context.Background(), msgs)
				if err != nil {
					b.Fatal(err)
				}
				bytes += cl.bytes
				steps += res.Steps
			}
			b.ReportMetric(float64(bytes)/float64(steps), "bytes/step")
		})
	}
}

// BenchmarkRunDurable is BenchmarkRun's workload with every run appended
// to a SQLite event log (synchronous FULL and NORMAL), against the same
// run in memory.
func BenchmarkRunDurable(b *testing.B) {
	cfg, msgs := benchConfig(b, nil, false, benchModel(0, nil))
	for _, sync := range []string{"memory", "FULL", "NORMAL"} {
		b.Run("store="+sync, func(b *testing.B) {
			var st store.EventLog = store.NewMemory()
			if sync != "memory" {
				s, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"), &sqlite.Options{Synchronous: sync})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				st = s
			}
			cfg.Store = st
			rr, err := loop.NewRunner(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rr.Run(context.Background(), msgs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// streamedBench is benchModel as a streaming model: each turn is built
// by benchResponse and handed over in the pieces llmtest.Deltas cuts it
// into (text and arguments a few bytes at a time), as an adapter would
// yield them from the wire.
type streamedBench struct{ llm.Model }

func (m streamedBench) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		resp, err := benchResponse(req.Step)
		if err != nil {
			yield(llm.Delta{}, err)
			return
		}
		for _, d := range llmtest.Deltas(resp) {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// BenchmarkRunStream measures BenchmarkRun's planned workload on a model
// that streams: assembled from its deltas ("stream"), with a watcher that
// is shown every update ("stream-watched"), and asked for whole turns
// ("no-stream", Config.Stream false). The difference between the first and
// the last is what assembling a turn from deltas costs the loop.
func BenchmarkRunStream(b *testing.B) {
	for _, bc := range []struct {
		name            string
		noStream, watch bool
	}{{"stream", false, false}, {"stream-watched", false, true}, {"no-stream", true, false}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg, msgs := benchConfig(b, nil, false, streamedBench{benchModel(0, nil)})
			cfg.Stream = !bc.noStream
			updates := 0
			if bc.watch {
				cfg.Watch = func(context.Context, loop.Update) { updates++ }
			}
			r, err := loop.NewRunner(cfg)
			if err != nil {
				b.Fatal(err)
			}
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
