package loop_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// Runs of one runner share nothing mutable: nothing a run handed out (its
// result, the context a handler kept) changes when later runs go on, in
// turn or at once.
func TestLaterRunsLeaveEarlierResultsAndContextsAlone(t *testing.T) {
	var mu sync.Mutex
	var kept []context.Context
	keep := tool.MustNew(tool.Spec[orderIn]{Name: "keep_context"},
		func(ctx context.Context, in orderIn) (orderOut, error) {
			mu.Lock()
			kept = append(kept, ctx)
			mu.Unlock()
			return orderOut{ID: in.ID}, nil
		})
	reg, err := tool.NewRegistry(keep)
	if err != nil {
		t.Fatal(err)
	}
	turns := []llmtest.Turn{
		llmtest.Calls(call("c1", "keep_context", `{"id":"A1"}`), call("c2", "keep_context", `{"id":"A2"}`)),
		llmtest.Calls(call("c3", "keep_context", `{"id":"A3"}`)),
		llmtest.Text("done"),
	}
	r, err := loop.NewRunner(loop.Config{
		Model: llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
			resp := *turns[req.Step-1].Response
			return &resp, nil
		}),
		Tools: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	type snapshot struct {
		res  *loop.Result
		json string
	}
	run := func() snapshot {
		t.Helper()
		res, err := r.Run(context.Background(), user("keep them"))
		mustStatus(t, res, err, loop.FinalAnswer)
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		return snapshot{res, string(b)}
	}
	first := run()
	for range 5 {
		run()
	}
	// Runs side by side, so that -race sees any sharing between them.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				run()
			}
		})
	}
	wg.Wait()
	b, err := json.Marshal(first.res)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != first.json {
		t.Fatalf("the first run's result changed after later runs:\nbefore %s\nafter  %s", first.json, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := 3 * (1 + 5 + 4*5); len(kept) != want {
		t.Fatalf("handlers ran %d times, want %d", len(kept), want)
	}
	for i, ctx := range kept[:3] {
		if got := loop.RunID(ctx); got != first.res.RunID {
			t.Errorf("context kept by call %d of the first run says run %q, want %q", i+1, got, first.res.RunID)
		}
		if ctx.Err() == nil {
			t.Errorf("context kept by call %d of the first run has not ended", i+1)
		}
	}
}
