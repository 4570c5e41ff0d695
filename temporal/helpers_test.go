package temporal_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
	tsandbox "github.com/toolloop/toolloop/temporal/sandbox"
)

// sandbox is one scenario set up for the workflow: a fresh book, its
// tools, a step-scripted model and the executor settings of
// orders.Scenario.Run.
type sandbox struct {
	scenario orders.Scenario
	book     *orders.Book
	ledger   *store.Memory
	acts     *temporal.Activities
	env      *testsuite.TestWorkflowEnvironment
}

func newSandbox(t *testing.T, s orders.Scenario) *sandbox {
	t.Helper()
	book, ledger, acts := sandboxActivities(t, s)
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(testLogger())
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	temporal.RegisterWorkflow(env)
	return &sandbox{scenario: s, book: book, ledger: ledger, acts: acts, env: env}
}

// sandboxActivities builds the worker side of a scenario over a fresh
// book and an in-memory ledger (see package temporal/sandbox).
func sandboxActivities(t *testing.T, s orders.Scenario) (*orders.Book, *store.Memory, *temporal.Activities) {
	t.Helper()
	book, ledger := tsandbox.Book(s), store.NewMemory()
	acts, err := tsandbox.Activities(s, book, ledger, func() {})
	if err != nil {
		t.Fatal(err)
	}
	return book, ledger, acts
}

// register registers the activities; tests that wrap one register their
// wrapper first (the first registration of a name wins in the test
// environment) or instead.
func (sb *sandbox) register() { sb.acts.Register(sb.env) }

// input is the scenario's run as orders.Scenario.Run configures it.
func (sb *sandbox) input(runID, sessionID string) temporal.RunInput {
	return scenarioInput(sb.scenario, runID, sessionID)
}

func scenarioInput(s orders.Scenario, runID, sessionID string) temporal.RunInput {
	in := tsandbox.Input(s, runID)
	in.SessionID = sessionID
	return in
}

// run executes the workflow and returns its result, read from its small
// output and the workers' store.
func (sb *sandbox) run(t *testing.T, in temporal.RunInput) *loop.Result {
	t.Helper()
	sb.env.ExecuteWorkflow(temporal.WorkflowName, in)
	if !sb.env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := sb.env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var out temporal.RunOutput
	if err := sb.env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	return readResult(t, sb.ledger, out)
}

// readResult reads a run's whole result from its output and the store.
func readResult(t *testing.T, blobs store.Blobs, out temporal.RunOutput) *loop.Result {
	t.Helper()
	res, err := temporal.ReadResult(context.Background(), blobs, out)
	if err != nil {
		t.Fatal(err)
	}
	if res.RunID != out.RunID || res.Answer() != out.Answer || len(res.Events) != out.Events {
		t.Fatalf("the output (%s, answer %q, %d events) does not match its log (%s, answer %q, %d events)",
			out.RunID, out.Answer, out.Events, res.RunID, res.Answer(), len(res.Events))
	}
	return res
}

func scenario(t *testing.T, name string) orders.Scenario {
	t.Helper()
	s, ok := orders.Lookup(name)
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	return s
}

// comparable renders events without what depends on the clock (times,
// latencies) so that two drivers' logs of one run compare equal.
func comparable(t *testing.T, evs []loop.Event) []string {
	t.Helper()
	out := make([]string, len(evs))
	for i, ev := range evs {
		ev.At, ev.Latency = time.Time{}, 0
		if len(ev.Outcomes) > 0 {
			outs := append([]executor.Outcome(nil), ev.Outcomes...)
			for j := range outs {
				outs[j].Started, outs[j].Duration = time.Time{}, 0
			}
			ev.Outcomes = outs
		}
		if len(ev.Compensations) > 0 {
			comps := append([]loop.CompensationOutcome(nil), ev.Compensations...)
			for j := range comps {
				if o := comps[j].Outcome; o != nil {
					oc := *o
					oc.Started, oc.Duration = time.Time{}, 0
					comps[j].Outcome = &oc
				}
			}
			ev.Compensations = comps
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func kinds(evs []loop.Event) []loop.EventKind {
	out := make([]loop.EventKind, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind
	}
	return out
}

// toolResult finds the result of a call in a history.
func toolResult(msgs []llm.Message, callID string) *llm.ToolResult {
	for _, m := range msgs {
		if m.Result != nil && m.Result.CallID == callID {
			return m.Result
		}
	}
	return nil
}

// testLogger is the SDK's logger in tests: silent unless
// TOOLLOOP_TEMPORAL_LOG is set (to debug, info, warn or error).
func testLogger() sdklog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(os.Getenv("TOOLLOOP_TEMPORAL_LOG"))); err != nil {
		return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	}
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
}
