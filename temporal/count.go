package temporal

import (
	"context"
	"time"

	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
)

// CountActivity counts the next request's input tokens with the
// provider's own count (loop.CountTokens effect), as a local activity:
// its input, which may carry the turn's new events, is not kept in the
// workflow's history, and its result is a few bytes.
const CountActivity = "toolloop.CountTokens"

// CountOutput is CountActivity's result.
type CountOutput struct {
	// Count is the provider's count, or why there is none.
	Count *loop.TokenCount `json:"count"`
	// Log is the digest of the log's segment that ends with the input's
	// New events, as ModelOutput.Log.
	Log string `json:"log,omitempty"`
}

// CountTokens counts the request the model activity would send for in
// (loop.CountRequest). A count that fails is a result, not an error:
// the run goes on on its estimate. Only the blob store's failure is an
// error.
func (a *Activities) CountTokens(ctx context.Context, in ModelInput) (CountOutput, error) {
	head, msgs, err := a.conversation(ctx, in)
	if err != nil {
		return CountOutput{}, storeError(err)
	}
	req := a.turnRequest(in, msgs)
	ev := loop.CountRequest(ctx, a.cfg.Model, &req)
	return CountOutput{Count: ev.Count, Log: head}, nil
}

// turnRequest is the request of the model turn in asks for, over msgs.
func (a *Activities) turnRequest(in ModelInput, msgs []llm.Message) llm.Request {
	return llm.Request{Model: in.Model, Messages: msgs, Step: in.Step, Tools: a.cfg.Tools.Definitions(), CacheKey: loop.CacheKey(in.RunID), Output: in.Output}
}

// CountTokens has the count activity count the next turn's request. Its
// failure, the store's included, is recorded in the event and leaves the
// decision to the estimate.
func (w *workflowDriver) CountTokens() loop.Event {
	d, ctx := w.d, w.ctx
	s := &d.state
	in := ModelInput{Model: d.in.Model, Step: s.Steps + 1, Log: d.head, New: d.log[d.saved:], RunID: s.RunID, Output: s.Output.Format()}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: loop.CountTimeout + 30*time.Second,
		RetryPolicy:         &sdktemporal.RetryPolicy{MaximumAttempts: 2},
	})
	var out CountOutput
	if err := workflow.ExecuteLocalActivity(lctx, CountActivity, in).Get(ctx, &out); err != nil || out.Count == nil {
		msg := "the count activity returned no count"
		if err != nil {
			msg = "the count activity failed: " + cause(err)
		}
		return loop.Event{Kind: loop.TokensCounted, Count: &loop.TokenCount{Error: msg + "; the estimate stands"}}
	}
	if out.Log != "" {
		d.head, d.saved = out.Log, len(d.log)
	}
	return loop.Event{Kind: loop.TokensCounted, Count: out.Count}
}
