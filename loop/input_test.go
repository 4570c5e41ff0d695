package loop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
)

// nestedArgs returns a JSON object nested depth levels deep.
func nestedArgs(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1)
}

// Arguments nested about as deep as encoding/json allows (10,000 levels,
// which json.Valid accepts) neither break the run nor its log: the call
// gets a recoverable invalid_arguments result naming the depth limit, the
// run ends as the model decides, and its stored log loads and replays to
// the same state, with the arguments as the model sent them.
func TestOverDeepArgumentsAreRecoverableAndReplayable(t *testing.T) {
	for _, depth := range []int{10000, 9998, 65} {
		t.Run(fmt.Sprint(depth), func(t *testing.T) {
			f := newFixture(t)
			args := nestedArgs(depth)
			st := store.NewMemory()
			model := llmtest.New(llmtest.Calls(call("c1", "query_order", args)), llmtest.Text("gave up"))
			cfg := loop.Config{Model: model, Tools: f.reg, Store: st, NewRunID: func() string { return "run-deep" }}
			res, err := loop.Run(context.Background(), cfg, user("q"))
			mustStatus(t, res, err, loop.FinalAnswer)
			r := resultFor(t, res.Messages, "c1")
			if r.ErrorKind != llm.KindInvalidArguments || !strings.Contains(string(r.Content), "more than 64 levels") {
				t.Fatalf("result %s %s", r.ErrorKind, r.Content)
			}
			if f.queries.Load() != 0 {
				t.Fatal("the tool ran on arguments past the limit")
			}
			events, err := loop.LoadEvents(context.Background(), st, "run-deep")
			if err != nil {
				t.Fatalf("the stored log does not load: %v", err)
			}
			s := loop.Replay(events)
			if !s.Done || s.Status != res.Status || s.Steps != res.Steps {
				t.Fatalf("replayed: done %v status %s steps %d", s.Done, s.Status, s.Steps)
			}
			if got := events[1].Response.Message.ToolCalls[0].Arguments; string(got) != args {
				t.Fatalf("the log changed the arguments (%d bytes back, %d sent)", len(got), len(args))
			}
			if a, b := historyJSON(t, s.History()), historyJSON(t, res.Messages); a != b {
				t.Fatal("the replayed history differs from the run's")
			}
			runs, err := st.Runs(context.Background(), "")
			if err != nil || len(runs) != 1 || runs[0].Status != string(loop.FinalAnswer) {
				t.Fatalf("summaries %+v, %v", runs, err)
			}
		})
	}
}

// The size and depth limits are configuration, recorded in the run's log.
func TestArgumentLimitsAreConfigurable(t *testing.T) {
	run := func(t *testing.T, b loop.Budgets, args string) (*loop.Result, *fixture) {
		t.Helper()
		f := newFixture(t)
		model := llmtest.New(llmtest.Calls(call("c1", "query_order", args)), llmtest.Text("done"))
		res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Budgets: b}, user("q"))
		mustStatus(t, res, err, loop.FinalAnswer)
		return res, f
	}
	padded := `{"id":"A1"` + strings.Repeat(" ", 2<<20) + `}`
	t.Run("default size", func(t *testing.T) {
		res, f := run(t, loop.Budgets{}, padded)
		r := resultFor(t, res.Messages, "c1")
		if r.ErrorKind != llm.KindInvalidArguments || !strings.Contains(string(r.Content), "limit of 1048576 bytes") || f.queries.Load() != 0 {
			t.Fatalf("result %s %s", r.ErrorKind, r.Content)
		}
		if got := res.Events[0].Start.Budgets.MaxArgumentBytes; got != loop.DefaultMaxArgumentBytes {
			t.Fatalf("the log records a size limit of %d", got)
		}
	})
	t.Run("size switched off", func(t *testing.T) {
		res, f := run(t, loop.Budgets{MaxArgumentBytes: -1}, padded)
		if r := resultFor(t, res.Messages, "c1"); r.Status != llm.StatusOK || f.queries.Load() != 1 {
			t.Fatalf("result %s %s", r.Status, r.Content)
		}
	})
	t.Run("smaller size", func(t *testing.T) {
		res, _ := run(t, loop.Budgets{MaxArgumentBytes: 10}, `{"id":"A100"}`)
		if r := resultFor(t, res.Messages, "c1"); !strings.Contains(string(r.Content), "13 bytes, more than the limit of 10 bytes") {
			t.Fatalf("result %s", r.Content)
		}
	})
	t.Run("deeper", func(t *testing.T) {
		res, _ := run(t, loop.Budgets{MaxArgumentDepth: 200}, nestedArgs(150))
		// Within the limit: the schema, not the limit, refuses it.
		if r := resultFor(t, res.Messages, "c1"); strings.Contains(string(r.Content), "levels") {
			t.Fatalf("result %s", r.Content)
		}
	})
	for _, depth := range []int{-1, loop.MaxArgumentDepthCeiling + 1} {
		if _, err := (loop.Budgets{MaxArgumentDepth: depth}).Normalized(); err == nil || !strings.Contains(err.Error(), "MaxArgumentDepth") {
			t.Errorf("MaxArgumentDepth %d: %v", depth, err)
		}
	}
}

// A call over a limit is a recoverable invalid_arguments, and the same
// call asked for again is a retry of a deterministic failure.
func TestOverLargeArgumentsRetriedIsASpin(t *testing.T) {
	f := newFixture(t)
	big := `{"id":"` + strings.Repeat("A", 200) + `"}`
	model := llmtest.New(
		llmtest.Calls(call("c1", "query_order", big)),
		llmtest.Calls(call("c2", "query_order", `{"id":"A1"}`)),
		llmtest.Calls(call("c3", "query_order", big)),
	)
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Budgets: loop.Budgets{MaxArgumentBytes: 100}}, user("q"))
	mustStatus(t, res, err, loop.SpinDetected)
	if !strings.Contains(res.Detail, "invalid_arguments") {
		t.Fatalf("detail %q", res.Detail)
	}
}
