//go:build unix

package eino

import (
	"context"
	"fmt"
	"testing"

	"github.com/cloudwego/eino/schema"

	"github.com/toolloop/toolloop/internal/benchload"
)

// BenchmarkConcurrent starts N runs of the agent at once, with a model that
// waits benchload.TurnWait per turn, and reports the wall time until all
// are done against the ideal, and the memory and goroutines per run while
// all are in flight: toolloop's BenchmarkConcurrent, with the same harness
// (internal/benchload). Run it with -test.benchtime 1x.
func BenchmarkConcurrent(b *testing.B) {
	for _, n := range []int{10_000, 50_000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var all benchload.Gate
			agent := newAgent(b, scripted{wait: benchload.TurnWait, first: all.Wait})
			msgs := []*schema.Message{schema.UserMessage("check the keys")}
			benchload.Measure(b, n, &all, func(ctx context.Context) error {
				res, err := agent.Generate(ctx, msgs)
				if err == nil && res.Content != "done" {
					err = fmt.Errorf("answer %q", res.Content)
				}
				return err
			})
		})
	}
}
