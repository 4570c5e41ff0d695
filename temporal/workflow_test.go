package temporal_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
)

// override registers fn under an activity name already registered.
func (sb *sandbox) override(name string, fn any) {
	sb.env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name, DisableAlreadyRegisteredCheck: true})
}

// TestParallelStage checks that the calls of a parallel stage run at the
// same time, each in its own activity, and that their results come back in
// the model's call order.
func TestParallelStage(t *testing.T) {
	sb := newSandbox(t, scenario(t, "parallel"))
	sb.register()
	var mu sync.Mutex
	running, most := 0, 0
	both := make(chan struct{})
	sb.override(temporal.ToolActivity, func(ctx context.Context, in temporal.CallInput) (executor.Outcome, error) {
		stage0 := in.Call.ID == "call_q1" || in.Call.ID == "call_t1"
		if stage0 {
			mu.Lock()
			running++
			most = max(most, running)
			if running == 2 {
				close(both)
			}
			mu.Unlock()
			// Hold the call until the other one is running too (or give
			// up: the assertion below then fails).
			select {
			case <-both:
			case <-time.After(5 * time.Second):
			}
		}
		o, err := sb.acts.ExecuteCall(ctx, in)
		if stage0 {
			mu.Lock()
			running--
			mu.Unlock()
		}
		return o, err
	})
	out := sb.run(t, sb.input("run-parallel", "sandbox"))
	if out.Status != loop.FinalAnswer {
		t.Fatalf("status %s: %s", out.Status, out.Detail)
	}
	if most != 2 {
		t.Fatalf("at most %d call(s) of the parallel stage ran at once, want 2", most)
	}
	var plan *executor.Plan
	var ids []string
	for _, ev := range out.Events {
		if ev.Kind == loop.StagePlanned {
			plan = ev.Plan
		}
	}
	if plan == nil || len(plan.Stages) != 3 || len(plan.Stages[0]) != 2 {
		t.Fatalf("plan %+v, want [[0 1] [2] [3]]", plan)
	}
	for _, m := range out.Messages {
		if m.Result != nil {
			ids = append(ids, m.Result.CallID)
		}
	}
	if strings.Join(ids, ",") != "call_q1,call_t1,call_r1,call_q2" {
		t.Fatalf("results in order %v, want the model's call order", ids)
	}
	if n := sb.book.Refunds("A103"); n != 1 {
		t.Fatalf("%d refunds of A103", n)
	}
}

// updateResult collects what an update's callbacks report.
type updateResult struct {
	rejected error
	accepted bool
	done     bool
	status   temporal.RunStatus
	err      error
}

func (sb *sandbox) update(id string, a loop.Confirmation) *updateResult {
	r := &updateResult{}
	sb.env.UpdateWorkflow(temporal.ConfirmUpdate, id, &testsuite.TestUpdateCallback{
		OnReject: func(err error) { r.rejected = err },
		OnAccept: func() { r.accepted = true },
		OnComplete: func(v any, err error) {
			r.done, r.err = true, err
			if st, ok := v.(temporal.RunStatus); ok {
				r.status = st
			}
		},
	}, a)
	return r
}

func (sb *sandbox) status(t *testing.T) temporal.RunStatus {
	t.Helper()
	v, err := sb.env.QueryWorkflow(temporal.StatusQuery)
	if err != nil {
		t.Fatal(err)
	}
	var st temporal.RunStatus
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestConfirmByUpdate pauses for a refund, answers it through the update
// (after two answers the validator rejects), and checks that the refund
// runs exactly once and the run goes on to the final answer.
func TestConfirmByUpdate(t *testing.T) {
	sb := newSandbox(t, scenario(t, "confirmation_required"))
	sb.register()
	var paused temporal.RunStatus
	var wrongCall, noBy, approve, twice *updateResult
	sb.env.RegisterDelayedCallback(func() {
		// Paused by now: activities take no workflow time.
		paused = sb.status(t)
		wrongCall = sb.update("u1", loop.Confirmation{CallID: "call_q1", Approved: true, By: "ops-1"})
		noBy = sb.update("u2", loop.Confirmation{CallID: "call_r1", Approved: true})
		approve = sb.update("u3", loop.Confirmation{CallID: "call_r1", Approved: true, By: "ops-1", Note: "photo checked"})
		twice = sb.update("u4", loop.Confirmation{CallID: "call_r1", Approved: false, By: "ops-2"})
	}, time.Minute)
	out := sb.run(t, sb.input("run-confirm", "sandbox"))

	if paused.Status != string(loop.ConfirmationRequired) || len(paused.Pending) != 1 || paused.Pending[0].CallID != "call_r1" {
		t.Fatalf("status while paused: %+v", paused)
	}
	if wrongCall.rejected == nil || !strings.Contains(wrongCall.rejected.Error(), "not pending") {
		t.Errorf("answer to a call that is not pending: rejected with %v", wrongCall.rejected)
	}
	if noBy.rejected == nil || !strings.Contains(noBy.rejected.Error(), "who decided") {
		t.Errorf("answer without By: rejected with %v", noBy.rejected)
	}
	if approve.rejected != nil || !approve.accepted || !approve.done || approve.err != nil {
		t.Fatalf("approval: %+v", approve)
	}
	if twice.rejected == nil || !strings.Contains(twice.rejected.Error(), "already approved by ops-1") {
		t.Errorf("second answer: rejected with %v", twice.rejected)
	}
	if out.Status != loop.FinalAnswer {
		t.Fatalf("status %s: %s", out.Status, out.Detail)
	}
	if n := sb.book.Refunds("A103"); n != 1 {
		t.Fatalf("%d refunds of A103, want 1", n)
	}
	r := toolResult(out.Messages, "call_r1")
	if r == nil || r.Status != llm.StatusOK {
		t.Fatalf("refund result %+v", r)
	}
	// The log records the pause, the answer (who, note, when) and the
	// resumption, like Runner.Continue does in-process.
	var ks []string
	for _, k := range kinds(out.Events) {
		ks = append(ks, string(k))
	}
	if want := "stopped,confirmation_decided,resumed,stage_planned"; !strings.Contains(strings.Join(ks, ","), want) {
		t.Fatalf("events %v lack %s", ks, want)
	}
	for _, ev := range out.Events {
		if ev.Kind == loop.ConfirmationDecided {
			c := ev.Confirmation
			if c.By != "ops-1" || c.Note != "photo checked" || !c.Approved || ev.At.IsZero() {
				t.Fatalf("recorded answer %+v at %v", c, ev.At)
			}
		}
	}
	if err := llm.CheckHistory(out.Messages); err != nil {
		t.Fatal(err)
	}
}

// TestConfirmDenied denies the refund: nothing is refunded, and the model
// is told who denied it and why.
func TestConfirmDenied(t *testing.T) {
	s := scenario(t, "confirmation_required")
	sb := newSandbox(t, s)
	sb.register()
	var deny *updateResult
	sb.env.RegisterDelayedCallback(func() {
		deny = sb.update("deny", loop.Confirmation{CallID: "call_r1", Approved: false, By: "ops-2", Note: "no photo of the damage"})
	}, time.Minute)
	out := sb.run(t, sb.input("run-deny", "sandbox"))
	if deny.rejected != nil || deny.err != nil {
		t.Fatalf("denial: %+v", deny)
	}
	if out.Status != loop.FinalAnswer {
		t.Fatalf("status %s: %s", out.Status, out.Detail)
	}
	if n := sb.book.Refunds("A103"); n != 0 {
		t.Fatalf("%d refunds of A103 after a denial", n)
	}
	r := toolResult(out.Messages, "call_r1")
	if r == nil || r.Status != llm.StatusError || r.ErrorKind != llm.KindPermissionDenied ||
		!strings.Contains(string(r.Content), "ops-2") || !strings.Contains(string(r.Content), "no photo of the damage") {
		t.Fatalf("the model was told %+v", r)
	}
	for _, ev := range out.Events {
		if ev.Kind == loop.StageFinished {
			for _, o := range ev.Outcomes {
				if o.Result.CallID == "call_r1" {
					t.Fatal("the denied refund was executed")
				}
			}
		}
	}
}

// TestConfirmBySignal answers through the signal; an invalid signal is
// dropped, not recorded.
func TestConfirmBySignal(t *testing.T) {
	sb := newSandbox(t, scenario(t, "confirmation_required"))
	sb.register()
	sb.env.RegisterDelayedCallback(func() {
		sb.env.SignalWorkflow(temporal.ConfirmSignal, loop.Confirmation{CallID: "nope", Approved: true, By: "ops-1"})
	}, time.Minute)
	sb.env.RegisterDelayedCallback(func() {
		sb.env.SignalWorkflow(temporal.ConfirmSignal, loop.Confirmation{CallID: "call_r1", Approved: true, By: "ops-1"})
	}, 2*time.Minute)
	out := sb.run(t, sb.input("run-signal", "sandbox"))
	if out.Status != loop.FinalAnswer || sb.book.Refunds("A103") != 1 {
		t.Fatalf("status %s (%s), %d refunds", out.Status, out.Detail, sb.book.Refunds("A103"))
	}
	n := 0
	for _, ev := range out.Events {
		if ev.Kind == loop.ConfirmationDecided {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d answers recorded, want 1", n)
	}
}

// TestConfirmationTimeout: nobody answers; the workflow completes with the
// paused run, status confirmation_required, after ConfirmationTimeout.
func TestConfirmationTimeout(t *testing.T) {
	sb := newSandbox(t, scenario(t, "confirmation_required"))
	sb.register()
	in := sb.input("run-timeout", "sandbox")
	in.ConfirmationTimeout = 24 * time.Hour
	out := sb.run(t, in)
	if out.Status != loop.ConfirmationRequired || len(out.Pending) != 1 || sb.book.Refunds("A103") != 0 {
		t.Fatalf("status %s, pending %v, %d refunds", out.Status, out.Pending, sb.book.Refunds("A103"))
	}
	if !errors.Is(out.Err(), loop.ConfirmationRequired) {
		t.Fatalf("Err() = %v", out.Err())
	}
}

// TestCancelWhilePaused cancels a paused run: the workflow ends canceled,
// and the error's details hold the paused run.
func TestCancelWhilePaused(t *testing.T) {
	sb := newSandbox(t, scenario(t, "confirmation_required"))
	sb.register()
	sb.env.RegisterDelayedCallback(sb.env.CancelWorkflow, time.Minute)
	sb.env.ExecuteWorkflow(temporal.WorkflowName, sb.input("run-cancel", "sandbox"))
	var ce *sdktemporal.CanceledError
	if err := sb.env.GetWorkflowError(); !errors.As(err, &ce) {
		t.Fatalf("workflow error %v, want canceled", err)
	}
	var out temporal.RunOutput
	if err := ce.Details(&out); err != nil {
		t.Fatal(err)
	}
	if out.Status != loop.ConfirmationRequired || sb.book.Refunds("A103") != 0 {
		t.Fatalf("status %s, %d refunds", out.Status, sb.book.Refunds("A103"))
	}
}

// An answer that comes once a paused run stopped waiting (its confirmation
// timeout passed, or the workflow was canceled), while the workflow stores
// its log and ends, is refused: the output is the paused run's, and the
// stored log holds every event the output counts.
func TestAnswerWhileClosing(t *testing.T) {
	for _, mode := range []string{"timeout", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			sb := newSandbox(t, scenario(t, "confirmation_required"))
			sb.register()
			in := sb.input("run-closing", "sandbox")
			var upd *updateResult
			answer := func() {
				st := sb.status(t)
				upd = sb.update("run-closing", loop.Confirmation{CallID: st.Pending[0].CallID, Approved: true, By: "ops"})
			}
			if mode == "cancel" {
				sb.env.RegisterDelayedCallback(func() { sb.env.CancelWorkflow(); answer() }, time.Minute)
			} else {
				in.ConfirmationTimeout = time.Minute
				sb.env.RegisterDelayedCallback(answer, time.Minute)
			}
			sb.env.ExecuteWorkflow(temporal.WorkflowName, in)
			var out temporal.RunOutput
			err := sb.env.GetWorkflowResult(&out)
			if ce := (*sdktemporal.CanceledError)(nil); errors.As(err, &ce) {
				err = ce.Details(&out)
			}
			if err != nil {
				t.Fatal(err)
			}
			if upd == nil || upd.rejected == nil || upd.accepted {
				t.Fatalf("the answer: %+v; want it refused", upd)
			}
			if out.Status != loop.ConfirmationRequired || len(out.Pending) != 1 || sb.book.Refunds("A103") != 0 {
				t.Fatalf("output status %q, pending %v, %d refunds; want the paused run", out.Status, out.Pending, sb.book.Refunds("A103"))
			}
			res, err := temporal.ReadResult(context.Background(), sb.ledger, out)
			if err != nil || len(res.Events) != out.Events {
				t.Fatalf("stored log: %v, %d events; the output counts %d", err, len(res.Events), out.Events)
			}
		})
	}
}

// TestCanceledMidRun is the sandbox's canceled scenario with the caller's
// cancel played by canceling the workflow while the model's second answer
// is being produced. The run stops with status canceled and the answer's
// call never runs, as in-process. One difference, of the SDK's test
// environment only: it settles a canceled activity at once, whatever its
// WaitForCancellation, so the request fails as canceled (ModelFailed) and
// the late answer never enters the log. A real server waits for the model
// activity, and the log matches in-process (ModelResponded, then
// Interrupted): TestDevServerCanceled.
func TestCanceledMidRun(t *testing.T) {
	s := scenario(t, "canceled")
	s.Ledger = store.NewMemory()
	want, _, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, s)
	turns := s.Script(sb.env.CancelWorkflow)
	reg, err := orders.Tools(sb.book)
	if err != nil {
		t.Fatal(err)
	}
	sb.acts, err = temporal.NewActivities(temporal.Config{Model: orders.Scripted(turns, false), Tools: reg, Blobs: sb.ledger})
	if err != nil {
		t.Fatal(err)
	}
	sb.register()
	start := want.Events[0].Start
	sb.env.ExecuteWorkflow(temporal.WorkflowName, sb.input(start.RunID, start.SessionID))
	var ce *sdktemporal.CanceledError
	if err := sb.env.GetWorkflowError(); !errors.As(err, &ce) {
		t.Fatalf("workflow error %v, want canceled", err)
	}
	var small temporal.RunOutput
	if err := ce.Details(&small); err != nil {
		t.Fatal(err)
	}
	got := readResult(t, sb.ledger, small)
	if got.Status != loop.Canceled || want.Status != loop.Canceled {
		t.Fatalf("workflow %s (%s), in-process %s", got.Status, got.Detail, want.Status)
	}
	// The same log up to the second model request.
	g, w := comparable(t, got.Events), comparable(t, want.Events)
	for i := range 6 {
		if g[i] != w[i] {
			t.Fatalf("event %d differs:\nworkflow:   %s\nin-process: %s", i+1, g[i], w[i])
		}
	}
	last := got.Events[len(got.Events)-2]
	if last.Kind != loop.ModelFailed || last.Failure == nil || last.Failure.Kind != loop.FailCanceled {
		t.Fatalf("event before stopped: %+v", last)
	}
	if err := llm.CheckHistory(got.Messages); err != nil {
		t.Fatal(err)
	}
	if outcome(got.Events, "call_t1") != nil {
		t.Fatal("the call of the answer that came after the cancel ran")
	}
}

// TestWriteActivityRetryReplaysLedger: the refund's activity does the
// write, records it in the ledger, and then its worker "loses" the
// activity (a retryable failure). Temporal runs the activity again; the
// executor finds the key done in the ledger and replays the result. The
// book holds one refund, and the run's history is the uninterrupted one.
func TestWriteActivityRetryReplaysLedger(t *testing.T) {
	s := scenario(t, "refund_twice")
	s.Ledger = store.NewMemory()
	want, _, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, s)
	sb.register()
	var attempts []int32
	sb.override(temporal.ToolActivity, func(ctx context.Context, in temporal.CallInput) (executor.Outcome, error) {
		o, err := sb.acts.ExecuteCall(ctx, in)
		if in.Call.ID == "call_r1" {
			n := activity.GetInfo(ctx).Attempt
			attempts = append(attempts, n)
			if n == 1 {
				return executor.Outcome{}, errors.New("worker lost after the write")
			}
		}
		return o, err
	})
	start := want.Events[0].Start
	out := sb.run(t, sb.input(start.RunID, start.SessionID))
	if out.Status != loop.FinalAnswer {
		t.Fatalf("status %s: %s", out.Status, out.Detail)
	}
	if len(attempts) != 2 {
		t.Fatalf("refund activity attempts %v, want [1 2]", attempts)
	}
	if n := sb.book.Refunds("A103"); n != 1 {
		t.Fatalf("%d refunds of A103, want 1", n)
	}
	first := outcome(out.Events, "call_r1")
	if first == nil || !first.Replayed || first.Result.Status != llm.StatusOK {
		t.Fatalf("the retried refund's outcome: %+v", first)
	}
	if g, w := jsonOf(t, out.Messages), jsonOf(t, want.Messages); g != w {
		t.Fatalf("histories differ:\nworkflow:   %s\nin-process: %s", g, w)
	}
}

// failFinishOnce is a ledger whose first Finish fails: the process died
// between the write and recording it.
type failFinishOnce struct {
	store.Ledger
	mu     sync.Mutex
	failed bool
}

func (l *failFinishOnce) Finish(ctx context.Context, key string, result json.RawMessage, at time.Time) error {
	l.mu.Lock()
	first := !l.failed
	l.failed = true
	l.mu.Unlock()
	if first {
		return errors.New("connection lost")
	}
	return l.Ledger.Finish(ctx, key, result, at)
}

// TestWriteActivityRetryReconciles: the refund applies but its worker dies
// before recording it, so the retried activity finds the key in flight;
// the tool's status look-up finds the refund, and the call succeeds
// without a second refund.
func TestWriteActivityRetryReconciles(t *testing.T) {
	s := scenario(t, "refund_retry")
	s.Setup = nil // no hang: the write answers, the ledger does not
	sb := newSandbox(t, s)
	reg, err := orders.Tools(sb.book)
	if err != nil {
		t.Fatal(err)
	}
	ledger := &failFinishOnce{Ledger: store.NewMemory()}
	sb.acts, err = temporal.NewActivities(temporal.Config{Blobs: sb.ledger,
		Model: orders.Scripted(s.Script(func() {}), s.Repeat), Tools: reg,
		Executor: executor.New(&executor.Options{Ledger: ledger}),
	})
	if err != nil {
		t.Fatal(err)
	}
	sb.register()
	sb.override(temporal.ToolActivity, func(ctx context.Context, in temporal.CallInput) (executor.Outcome, error) {
		o, err := sb.acts.ExecuteCall(ctx, in)
		if activity.GetInfo(ctx).Attempt == 1 {
			return executor.Outcome{}, errors.New("worker died before recording the write")
		}
		return o, err
	})
	out := sb.run(t, sb.input("run-reconcile", "sandbox"))
	if out.Status != loop.FinalAnswer {
		t.Fatalf("status %s: %s", out.Status, out.Detail)
	}
	if n := sb.book.Refunds("A103"); n != 1 {
		t.Fatalf("%d refunds of A103, want 1", n)
	}
	if o := outcome(out.Events, "call_r1"); o == nil || !o.Reconciled || o.Result.Status != llm.StatusOK {
		t.Fatalf("outcome %+v", o)
	}
}

// TestWriteActivityLost: a write's activity fails on every attempt; the
// workflow cannot know whether it wrote, so the run stops with
// tool_outcome_unknown rather than guess.
func TestWriteActivityLost(t *testing.T) {
	sb := newSandbox(t, scenario(t, "refund_twice"))
	sb.register()
	sb.override(temporal.ToolActivity, func(ctx context.Context, in temporal.CallInput) (executor.Outcome, error) {
		return executor.Outcome{}, errors.New("no worker can reach the order service")
	})
	out := sb.run(t, sb.input("run-lost", "sandbox"))
	if out.Status != loop.ToolOutcomeUnknown || !strings.Contains(out.Detail, "refund:A103") {
		t.Fatalf("status %s: %s", out.Status, out.Detail)
	}
}

// TestReadActivityLost: a read's activity fails for good; the model is
// told the tool is unavailable and answers.
func TestReadActivityLost(t *testing.T) {
	sb := newSandbox(t, scenario(t, "not_found"))
	sb.register()
	sb.override(temporal.ToolActivity, func(ctx context.Context, in temporal.CallInput) (executor.Outcome, error) {
		return executor.Outcome{}, errors.New("no worker can reach the order service")
	})
	out := sb.run(t, sb.input("run-read-lost", "sandbox"))
	r := toolResult(out.Messages, "call_q1")
	if out.Status != loop.FinalAnswer || r == nil || r.ErrorKind != llm.KindUnavailable ||
		!strings.Contains(string(r.Content), "no worker can reach the order service") {
		t.Fatalf("status %s, result %+v", out.Status, r)
	}
}

func outcome(evs []loop.Event, callID string) *executor.Outcome {
	for _, ev := range evs {
		for i := range ev.Outcomes {
			if ev.Outcomes[i].Result.CallID == callID {
				return &ev.Outcomes[i]
			}
		}
	}
	return nil
}

// TestInvalidJSONArguments: a model sends arguments that are not JSON.
// They travel through Temporal as they are and the log keeps them so;
// validation rejects the call, the model hears about it (a recoverable
// error, as in-process) and answers.
func TestInvalidJSONArguments(t *testing.T) {
	s := scenario(t, "not_found")
	s.Script = func(context.CancelFunc) []llmtest.Turn {
		return []llmtest.Turn{
			llmtest.Calls(llm.ToolCall{ID: "call_bad", Name: orders.QueryOrder, Arguments: json.RawMessage(`{"order_id":`)}),
			llmtest.Text("Could you give me the order number again?"),
		}
	}
	sb := newSandbox(t, s)
	sb.register()
	out := sb.run(t, sb.input("run-bad-json", "sandbox"))
	r := toolResult(out.Messages, "call_bad")
	if out.Status != loop.FinalAnswer || r == nil || r.ErrorKind != llm.KindInvalidArguments {
		t.Fatalf("status %s (%s), result %+v", out.Status, out.Detail, r)
	}
	if got := out.Events[1].Response.Message.ToolCalls[0].Arguments; string(got) != `{"order_id":` {
		t.Fatalf("the log records the arguments as %s", got)
	}
}

// TestArgumentsPastTheLimits: arguments nested as deep as encoding/json
// allows, or larger than the run's size limit, travel through Temporal's
// payloads unchanged and come back to the model as a recoverable
// invalid_arguments naming the limit, as in-process.
func TestArgumentsPastTheLimits(t *testing.T) {
	nested := func(depth int) string {
		return strings.Repeat(`{"a":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1)
	}
	deep, deeper := nested(9998), nested(10000)
	// Megabytes would hold the workflow goroutine past the test
	// environment's deadlock detector under -race; a smaller limit
	// shows the same, and that the run's budgets reach the activity.
	large := `{"order_id":"A100"` + strings.Repeat(" ", 120000) + `}`
	s := scenario(t, "not_found")
	s.Script = func(context.CancelFunc) []llmtest.Turn {
		return []llmtest.Turn{
			llmtest.Calls(
				llm.ToolCall{ID: "call_deep", Name: orders.QueryOrder, Arguments: json.RawMessage(deep)},
				llm.ToolCall{ID: "call_deeper", Name: orders.QueryOrder, Arguments: json.RawMessage(deeper)},
				llm.ToolCall{ID: "call_large", Name: orders.QueryOrder, Arguments: json.RawMessage(large)}),
			llmtest.Text("Could you give me the order number again?"),
		}
	}
	sb := newSandbox(t, s)
	sb.register()
	in := sb.input("run-deep", "sandbox")
	in.Budgets.MaxArgumentBytes = 100000
	out := sb.run(t, in)
	if out.Status != loop.FinalAnswer {
		t.Fatalf("status %s (%s)", out.Status, out.Detail)
	}
	for id, want := range map[string]string{"call_deep": "more than 64 levels", "call_deeper": "more than 64 levels", "call_large": "limit of 100000 bytes"} {
		r := toolResult(out.Messages, id)
		if r == nil || r.ErrorKind != llm.KindInvalidArguments || !strings.Contains(string(r.Content), want) {
			t.Fatalf("%s: result %+v", id, r)
		}
	}
	var sent []llm.ToolCall
	for _, ev := range out.Events {
		if ev.Kind == loop.ModelResponded && len(ev.Response.Message.ToolCalls) > 0 {
			sent = ev.Response.Message.ToolCalls
		}
	}
	if len(sent) != 3 || string(sent[0].Arguments) != deep || string(sent[1].Arguments) != deeper || string(sent[2].Arguments) != large {
		t.Fatal("the log does not keep the arguments the model sent")
	}
}

// TestEventsQuery reads the log through the query and finds the run's
// whole log, then pages of it.
func TestEventsQuery(t *testing.T) {
	sb := newSandbox(t, scenario(t, "normal"))
	sb.register()
	out := sb.run(t, sb.input("run-query", "sandbox"))
	v, err := sb.env.QueryWorkflow(temporal.EventsQuery)
	if err != nil {
		t.Fatal(err)
	}
	var evs []loop.Event
	if err := v.Get(&evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(out.Events) || evs[len(evs)-1].Kind != loop.Stopped {
		t.Fatalf("query gave %d events, the run has %d", len(evs), len(out.Events))
	}
	st := sb.status(t)
	if st.Status != string(loop.FinalAnswer) || st.Events != len(out.Events) || st.RunID != "run-query" {
		t.Fatalf("status %+v", st)
	}
	// Pages: an offset and a limit, past the end, and a bad one.
	page := func(p temporal.EventsPage) ([]loop.Event, error) {
		v, err := sb.env.QueryWorkflow(temporal.EventsQuery, p)
		if err != nil {
			return nil, err
		}
		var evs []loop.Event
		return evs, v.Get(&evs)
	}
	n := len(out.Events)
	for _, c := range []struct {
		p         temporal.EventsPage
		from, len int
	}{
		{temporal.EventsPage{Offset: 2, Limit: 3}, 3, 3},
		{temporal.EventsPage{Offset: n - 1}, n, 1},
		{temporal.EventsPage{Limit: 1}, 1, 1},
		{temporal.EventsPage{Offset: n + 5, Limit: 2}, 0, 0},
	} {
		evs, err := page(c.p)
		if err != nil || len(evs) != c.len || (c.len > 0 && evs[0].Seq != c.from) {
			t.Fatalf("page %+v: %d events, %v", c.p, len(evs), err)
		}
	}
	if _, err := page(temporal.EventsPage{Offset: -1}); err == nil || !strings.Contains(err.Error(), "offset -1") {
		t.Fatalf("a negative offset: %v", err)
	}
}

// TestInvalidInput: MaxCost without a price fails the workflow at once.
func TestInvalidInput(t *testing.T) {
	sb := newSandbox(t, scenario(t, "normal"))
	sb.register()
	in := sb.input("run-bad", "sandbox")
	in.Budgets.MaxCost = 1
	sb.env.ExecuteWorkflow(temporal.WorkflowName, in)
	if err := sb.env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "Price") {
		t.Fatalf("workflow error %v", err)
	}
}

// TestEmptyPromptRefused: a run started with a user message that says
// nothing is refused before any model turn, as in process.
func TestEmptyPromptRefused(t *testing.T) {
	sb := newSandbox(t, scenario(t, "normal"))
	sb.register()
	in := sb.input("run-empty", "sandbox")
	in.Messages = []llm.Message{{Role: llm.RoleUser, Text: " \n\t"}}
	sb.env.ExecuteWorkflow(temporal.WorkflowName, in)
	if err := sb.env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("workflow error %v, want the empty user message named", err)
	}
}

// TestDefaultRunID: without RunID the run is named after the workflow ID.
func TestDefaultRunID(t *testing.T) {
	sb := newSandbox(t, scenario(t, "normal"))
	sb.register()
	out := sb.run(t, sb.input("", "sandbox"))
	if out.RunID == "" || out.RunID != out.Events[0].Start.RunID {
		t.Fatalf("run ID %q", out.RunID)
	}
}

// TestDeadlineExceeded is the sandbox's deadline_exceeded scenario: the
// run's 100ms pass while track_shipment waits on a slow carrier. The
// tool's activity is bounded by the run's remaining time, so it times out
// with the run; the call is reported cut short and the run stops with
// deadline_exceeded, as in-process. The calls and requests are activities
// (ModelAsActivity, LocalReadBound -1): the test environment's clock does
// not move with local activities as a worker's does (the default path
// runs in TestScenariosMatchInProcess/deadline_exceeded).
func TestDeadlineExceeded(t *testing.T) {
	s := scenario(t, "deadline_exceeded")
	s.Ledger = store.NewMemory()
	want, _, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, s)
	sb.register()
	start := want.Events[0].Start
	in := sb.input(start.RunID, start.SessionID)
	in.ModelAsActivity, in.LocalReadBound = true, -1
	got := sb.run(t, in)
	if got.Status != loop.DeadlineExceeded || want.Status != loop.DeadlineExceeded {
		t.Fatalf("workflow %s (%s), in-process %s (%s)", got.Status, got.Detail, want.Status, want.Detail)
	}
	if g, w := jsonOf(t, kinds(got.Events)), jsonOf(t, kinds(want.Events)); g != w {
		t.Fatalf("events:\nworkflow:   %s\nin-process: %s", g, w)
	}
	g, w := toolResult(got.Messages, "call_t1"), toolResult(want.Messages, "call_t1")
	if g == nil || w == nil || g.Status != w.Status || g.ErrorKind != w.ErrorKind || string(g.Content) != string(w.Content) {
		t.Fatalf("call_t1: workflow %+v, in-process %+v", g, w)
	}
}

// TestModelInputNamesTheRun checks that every model turn of a run on
// Temporal names the run, from which the activity makes the request's
// prompt-cache key (loop.CacheKey), as the in-process runner does.
func TestModelInputNamesTheRun(t *testing.T) {
	sb := newSandbox(t, scenario(t, "normal"))
	sb.register()
	var mu sync.Mutex
	var ids []string
	sb.override(temporal.ModelActivity, func(ctx context.Context, in temporal.ModelInput) (temporal.ModelOutput, error) {
		mu.Lock()
		ids = append(ids, in.RunID)
		mu.Unlock()
		return sb.acts.RequestModel(ctx, in)
	})
	out := sb.run(t, sb.input("run-cache-key", "sandbox"))
	if out.Status != loop.FinalAnswer {
		t.Fatalf("status %s: %s", out.Status, out.Detail)
	}
	if len(ids) < 2 {
		t.Fatalf("%d model turns, want at least 2", len(ids))
	}
	for i, id := range ids {
		if id != "run-cache-key" {
			t.Fatalf("turn %d: ModelInput.RunID = %q, want run-cache-key", i+1, id)
		}
	}
}
