package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

type keyArgs struct {
	Key string `json:"key"`
}

type okResult struct {
	OK bool `json:"ok"`
}

// noopRead is a read-only tool that does nothing, as in the loop's
// BenchmarkRun: what remains is the executor's own cost.
var noopRead = tool.MustNew(tool.Spec[keyArgs]{Name: "noop"},
	func(context.Context, keyArgs) (okResult, error) { return okResult{OK: true}, nil })

// noopReadHonoring is noopRead declaring what it does: it never blocks.
var noopReadHonoring = tool.MustNew(tool.Spec[keyArgs]{Name: "noop", HonorsContext: true},
	func(context.Context, keyArgs) (okResult, error) { return okResult{OK: true}, nil })

func noopArgs(i int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"key":"k%d"}`, i)) }

// BenchmarkRunStage runs stages of 1 and 3 no-op reads, as the loop runs
// a turn's calls, with tools that do and do not declare that they honor
// their context (run on the caller's goroutine, or each on its own).
func BenchmarkRunStage(b *testing.B) {
	for _, t := range []*tool.Tool{noopRead, noopReadHonoring} {
		for _, n := range []int{1, 3} {
			b.Run(fmt.Sprintf("honors=%v/calls=%d", t.HonorsContext(), n), func(b *testing.B) {
				ex, ctx := executor.New(nil), context.Background()
				calls := make([]executor.Call, n)
				for i := range calls {
					calls[i] = executor.Call{Call: llm.ToolCall{ID: fmt.Sprint("c", i), Name: "noop", Arguments: noopArgs(i)}, Tool: t}
				}
				b.ReportAllocs()
				for b.Loop() {
					if outs := ex.RunStage(ctx, calls); len(outs) != n || outs[n-1].Result.Status != llm.StatusOK {
						b.Fatalf("%d outcomes: %+v", len(outs), outs)
					}
				}
			})
		}
	}
}

// BenchmarkRulePlanner plans a batch of 3 independent reads, the usual
// batch, and one with a write among reads of its resource.
func BenchmarkRulePlanner(b *testing.B) {
	reads := make([]executor.PlanCall, 3)
	for i := range reads {
		reads[i] = executor.PlanCall{Call: llm.ToolCall{ID: fmt.Sprint("c", i), Name: "noop", Arguments: noopArgs(i)}, Tool: noopRead}
	}
	for _, bc := range []struct {
		name  string
		batch []executor.PlanCall
	}{
		{"reads", reads},
		{"write", []executor.PlanCall{pcall("c1", readT, false), pcall("c2", writeT, false, "r"), pcall("c3", readT, false, "r")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			planner := executor.RulePlanner(4)
			idx := make([]int, len(bc.batch))
			for i := range idx {
				idx[i] = i
			}
			b.ReportAllocs()
			for b.Loop() {
				executor.PlanPart(planner, bc.batch, idx)
			}
		})
	}
}
