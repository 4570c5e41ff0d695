package temporal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// TestBudgetDefaultsMatchLoop compares normalizeBudgets with the budgets a
// loop.Runner records in its Started event.
func TestBudgetDefaultsMatchLoop(t *testing.T) {
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	prices := loop.Prices{"m": {InputPerMTok: 1, OutputPerMTok: 2}}
	for _, b := range []loop.Budgets{
		{},
		{MaxSteps: 3, Deadline: time.Second, ToolTimeout: time.Millisecond, MaxToolCalls: 7, MaxTokens: 100, MaxCost: 0.5},
		{MaxSteps: 1, Deadline: -1, ToolTimeout: -1, MaxToolCalls: -1, MaxTokens: -1, MaxCost: -1},
		{MaxSteps: -1},
	} {
		t.Run(fmt.Sprintf("%+v", b), func(t *testing.T) {
			got, gotErr := normalizeBudgets(b)
			b.Prices = prices
			res, err := loop.Run(context.Background(), loop.Config{
				Model: llmtest.New(llmtest.Text("hi")), ModelName: "m", Tools: reg, Budgets: b,
			}, []llm.Message{llm.UserMessage("hello")})
			if res == nil {
				if gotErr == nil || err == nil || gotErr.Error() != err.Error()[len("loop: "):] {
					t.Fatalf("loop: %v; here: %v", err, gotErr)
				}
				return
			}
			want := res.Events[0].Start.Budgets
			want.Prices = nil
			if gotErr != nil || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
				t.Fatalf("here %+v (%v), loop %+v", got, gotErr, want)
			}
		})
	}
}

// TestCheckAnswerMatchesLoop compares checkAnswer with loop.Decide's
// verdicts (and messages) on a paused run, an answered one and a finished
// one.
func TestCheckAnswerMatchesLoop(t *testing.T) {
	s, ok := orders.Lookup("confirmation_required")
	if !ok {
		t.Fatal("no confirmation_required scenario")
	}
	reg, err := orders.Tools(orders.NewBook())
	if err != nil {
		t.Fatal(err)
	}
	turns := s.Script(func() {})
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		return llmtest.New(turns[req.Step-1]).Generate(ctx, req)
	})
	st := store.NewMemory()
	r, err := loop.NewRunner(loop.Config{Model: model, Tools: reg, Policy: s.Policy, Identity: s.Identity, Store: st,
		NewRunID: func() string { return "run-1" }})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := r.Run(context.Background(), orders.Messages(s.Ask))
	if res.Status != loop.ConfirmationRequired {
		t.Fatalf("status %s", res.Status)
	}
	answers := []loop.Confirmation{
		{CallID: "call_r1", Approved: true},
		{CallID: "call_q1", Approved: true, By: "a"},
		{CallID: "nope", Approved: false, By: "a"},
		{CallID: "call_r1", Approved: false, By: "a", Note: "no"},
		{CallID: "call_r1", Approved: true, By: "a"},
	}
	// compare checks every answer against the stored log's state.
	compare := func(t *testing.T, events []store.EventRecord) {
		for _, a := range answers {
			copyStore := store.NewMemory()
			if err := copyStore.Append(context.Background(), "run-1", events, store.RunSummary{}); err != nil {
				t.Fatal(err)
			}
			evs, err := loop.LoadEvents(context.Background(), copyStore, "run-1")
			if err != nil {
				t.Fatal(err)
			}
			got := checkAnswer(loop.Replay(evs), a)
			want := loop.Decide(context.Background(), copyStore, "run-1", a, time.Now())
			if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
				t.Errorf("answer %+v: here %v, loop %v", a, got, want)
			}
		}
	}
	events, err := st.Events(context.Background(), "run-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("paused", func(t *testing.T) { compare(t, events) })
	if err := loop.Decide(context.Background(), st, "run-1", loop.Confirmation{CallID: "call_r1", Approved: true, By: "ops"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	events, _ = st.Events(context.Background(), "run-1")
	t.Run("answered", func(t *testing.T) { compare(t, events) })
	if res, err := r.Resume(context.Background(), "run-1"); err != nil || res.Status != loop.FinalAnswer {
		t.Fatalf("resume: %v", err)
	}
	events, _ = st.Events(context.Background(), "run-1")
	t.Run("finished", func(t *testing.T) { compare(t, events) })
}
