package temporal_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdktemporal "go.temporal.io/sdk/temporal"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
	tsandbox "github.com/toolloop/toolloop/temporal/sandbox"
)

// TestScenariosMatchInProcess runs every sandbox scenario with the
// in-process runner and as a workflow, and compares status, detail, the
// event log (times aside), the final history and the refunds the book
// holds: with the defaults (model requests and short stages of reads as
// local activities), and again with every request and call an activity
// (RunInput.ModelAsActivity, LocalReadBound -1), the activities_ tests.
//
// deadline_exceeded does not run here: the SDK's test environment gives
// an activity of a run with a deadline a context whose deadline has
// already passed when it starts (its clock lags the wall clock's), so the
// first model activity fails at once; and its workflow clock does not
// move with local activities, where a worker's SDK moves it by each one's
// time, so the run's deadline never passes. TestDeadlineExceeded runs it
// with activities, TestDevServer with the defaults. canceled runs
// with activities only: with local activities, the cancellation reaches
// the workflow at its next workflow task, here after the run has ended
// (the trade-off RunInput.LocalModel documents; TestDevServerCanceled
// checks that path on a server).
func TestScenariosMatchInProcess(t *testing.T) {
	if len(orders.Scenarios()) < 23 {
		t.Fatalf("%d scenarios; this test is meant to cover them all", len(orders.Scenarios()))
	}
	for _, local := range []bool{false, true} {
		for _, sc := range orders.Scenarios() {
			name, test := sc.Name, sc.Name
			if !local {
				test = "activities_" + name
			}
			t.Run(test, func(t *testing.T) {
				switch {
				case name == "deadline_exceeded" && !local:
					t.Skip("the test environment's activity deadlines run on its lagging clock (see the test's comment)")
				case name == "deadline_exceeded":
					t.Skip("the test environment's clock does not move with local activities (see the test's comment)")
				case name == "canceled" && local:
					t.Skip("with local activities a cancellation comes at the next workflow task, by design (see the test's comment)")
				}
				scenarioMatchesInProcess(t, name, local)
			})
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
	if s.Name == "canceled" {
		cancelOnAnswer(t, sb, s)
	}
	sb.register()
	in := sb.input(start.RunID, start.SessionID)
	in.ConfirmationTimeout = time.Hour // confirmation_required: do not wait for ever
	if !local {
		in.ModelAsActivity, in.LocalReadBound = true, -1
	}
	got := sb.runToEnd(t, in)

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
	// refund_reversed: the compensation ran as an activity, once.
	ctx := context.Background()
	if g, _ := sb.book.ReversalCount(ctx, ""); g != map[bool]int{true: 1}[name == "refund_reversed"] {
		t.Fatalf("reversals: workflow %d", g)
	}
	if g, w := jsonOf(t, got.Writes), jsonOf(t, want.Writes); g != w {
		t.Fatalf("writes: workflow %s, in-process %s", g, w)
	}
	if got.Steps != want.Steps || got.ToolCalls != want.ToolCalls || got.Usage != want.Usage {
		t.Fatalf("counters: workflow %d/%d/%+v, in-process %d/%d/%+v",
			got.Steps, got.ToolCalls, got.Usage, want.Steps, want.ToolCalls, want.Usage)
	}
}

// cancelOnAnswer plays the canceled scenario's caller: its model cancels
// the run as its second answer comes back. On a server the workflow's
// cancellation reaches a model activity that is waited for
// (WaitForCancellation) once it has answered, and the log matches the
// in-process one (TestDevServerCanceled); the SDK's test environment
// settles a canceled activity at once instead. So the cancel is played
// when the model's activity has completed: the answer is in, the
// workflow is canceled, as on a server.
func cancelOnAnswer(t *testing.T, sb *sandbox, s orders.Scenario) {
	t.Helper()
	var asked atomic.Bool
	acts, err := tsandbox.Activities(s, sb.book, sb.ledger, func() { asked.Store(true) })
	if err != nil {
		t.Fatal(err)
	}
	sb.acts = acts
	cancel := func(info *activity.Info, _ converter.EncodedValue, _ error) {
		if info.ActivityType.Name == temporal.ModelActivity && asked.CompareAndSwap(true, false) {
			sb.env.CancelWorkflow()
		}
	}
	sb.env.SetOnActivityCompletedListener(cancel)
}

// runToEnd is sandbox.run for a workflow that may end canceled: its
// output is then the CanceledError's detail.
func (sb *sandbox) runToEnd(t *testing.T, in temporal.RunInput) *loop.Result {
	t.Helper()
	sb.env.ExecuteWorkflow(temporal.WorkflowName, in)
	if !sb.env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	var out temporal.RunOutput
	var ce *sdktemporal.CanceledError
	switch err := sb.env.GetWorkflowError(); {
	case errors.As(err, &ce):
		if err := ce.Details(&out); err != nil {
			t.Fatal(err)
		}
	case err != nil:
		t.Fatalf("workflow error: %v", err)
	default:
		if err := sb.env.GetWorkflowResult(&out); err != nil {
			t.Fatal(err)
		}
	}
	return readResult(t, sb.ledger, out)
}
