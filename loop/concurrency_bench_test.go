//go:build unix

package loop_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolloop/toolloop/internal/benchload"
	"github.com/toolloop/toolloop/loop"
)

// BenchmarkConcurrent starts N runs of BenchmarkRun's workload at once,
// with the default runner and a model that waits benchload.TurnWait per
// turn, and reports the wall time until all are done against the ideal,
// and the memory and goroutines per run while all are in flight.
// benchmarks/eino runs eino's ReAct agent the same way, with the same
// harness (internal/benchload). Run it with -test.benchtime 1x.
func BenchmarkConcurrent(b *testing.B) {
	for _, n := range []int{10_000, 50_000} {
		for _, honors := range []bool{false, true} {
			name := fmt.Sprintf("N=%d", n)
			if honors {
				name += "/honors"
			}
			b.Run(name, func(b *testing.B) {
				var all benchload.Gate
				cfg, msgs := benchConfig(b, nil, honors, benchModel(benchload.TurnWait, all.Wait))
				r, err := loop.NewRunner(cfg)
				if err != nil {
					b.Fatal(err)
				}
				benchload.Measure(b, n, &all, func(ctx context.Context) error {
					res, err := r.Run(ctx, msgs)
					if err == nil && res.ToolCalls != 15 {
						err = fmt.Errorf("%d tool calls", res.ToolCalls)
					}
					return err
				})
			})
		}
	}
}
