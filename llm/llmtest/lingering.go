package llmtest

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/toolloop/toolloop/llm"
)

// Lingering is a streaming model whose stream sends Deltas and then does
// not end, as a server may that keeps its connection open: it sends a
// usage report every UsageEvery, or (zero) nothing, until its context
// ends. The drivers' tests use it for the model's quiet time: usage alone
// is not being heard, and a turn whose finish came is complete however
// long the connection then stays open. Generate fails: it only streams.
type Lingering struct {
	Deltas     []llm.Delta
	UsageEvery time.Duration
}

// Generate implements llm.Model; it always fails.
func (m *Lingering) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, errors.New("llmtest.Lingering only streams")
}

// Stream implements llm.StreamingModel.
func (m *Lingering) Stream(ctx context.Context, _ *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		for _, d := range m.Deltas {
			if !yield(d, nil) {
				return
			}
		}
		for {
			var tick <-chan time.Time
			if m.UsageEvery > 0 {
				tick = time.After(m.UsageEvery)
			}
			select {
			case <-ctx.Done():
				yield(llm.Delta{}, ctx.Err())
				return
			case <-tick:
				if !yield(llm.Delta{Kind: llm.DeltaUsage, Usage: &llm.Usage{InputTokens: 10}}, nil) {
					return
				}
			}
		}
	}
}
