package temporal_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
)

// The sandbox scenarios whose outcome does not hang on wall-clock timing
// beyond a tool's own timeout (deadline_exceeded and canceled do: their
// cause is the run's clock or a caller in another goroutine).
var compared = []string{
	"normal", "unknown_tool", "loop_forever", "not_found", "tool_timeout", "tool_budget_exceeded",
	"cost_budget_exceeded", "spin_detected", "permission_denied", "confirmation_required", "protocol_error",
	"model_error", "parallel", "refund_retry", "refund_twice", "refund_unknown",
}

// TestScenariosMatchInProcess runs each scenario with the in-process
// runner and as a workflow, and compares status, detail, the event log
// (times aside), the final history and the refunds the book holds; and
// again with RunInput.LocalModel (the model's local activity).
func TestScenariosMatchInProcess(t *testing.T) {
	for _, local := range []bool{false, true} {
		for _, name := range compared {
			test := name
			if local {
				test = "local_model_" + name
			}
			t.Run(test, func(t *testing.T) { scenarioMatchesInProcess(t, name, local) })
		}
	}
}

func scenarioMatchesInProcess(t *testing.T, name string, local bool) {
	s := scenario(t, name)
	s.Ledger = store.NewMemory()
	want, wantBook, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want.Status != s.Want {
		t.Fatalf("in-process: status %s, the scenario says %s", want.Status, s.Want)
	}
	start := want.Events[0].Start

	sb := newSandbox(t, s)
	sb.register()
	in := sb.input(start.RunID, start.SessionID)
	in.ConfirmationTimeout = time.Hour // confirmation_required: do not wait for ever
	in.LocalModel = local
	got := sb.run(t, in)

	if got.Status != want.Status || got.Detail != want.Detail {
		t.Fatalf("workflow: %s (%s)\nin-process: %s (%s)", got.Status, got.Detail, want.Status, want.Detail)
	}
	if g, w := comparable(t, got.Events), comparable(t, want.Events); !slices.Equal(g, w) {
		for i := range max(len(g), len(w)) {
			var ge, we string
			if i < len(g) {
				ge = g[i]
			}
			if i < len(w) {
				we = w[i]
			}
			if ge != we {
				t.Fatalf("event %d differs:\nworkflow:   %s\nin-process: %s", i+1, ge, we)
			}
		}
	}
	if g, w := jsonOf(t, got.Messages), jsonOf(t, want.Messages); g != w {
		t.Fatalf("histories differ:\nworkflow:   %s\nin-process: %s", g, w)
	}
	if err := llm.CheckHistory(got.Messages); err != nil && got.Status != loop.ConfirmationRequired {
		t.Fatalf("workflow history: %v", err)
	}
	if g, w := sb.book.TotalRefunds(), wantBook.TotalRefunds(); g != w {
		t.Fatalf("refunds: workflow %d, in-process %d", g, w)
	}
	if got.Steps != want.Steps || got.ToolCalls != want.ToolCalls || got.Usage != want.Usage {
		t.Fatalf("counters: workflow %d/%d/%+v, in-process %d/%d/%+v",
			got.Steps, got.ToolCalls, got.Usage, want.Steps, want.ToolCalls, want.Usage)
	}
}
