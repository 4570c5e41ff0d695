package temporal_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
	tsandbox "github.com/toolloop/toolloop/temporal/sandbox"
)

var record = flag.Bool("temporal.record", false,
	"with TOOLLOOP_TEMPORAL_ADDR: write each run's history to testdata/histories for TestReplayRecordedHistories")

// devClient dials the server TOOLLOOP_TEMPORAL_ADDR names (namespace
// TOOLLOOP_TEMPORAL_NAMESPACE, default "default"), or skips the test.
func devClient(t *testing.T) client.Client {
	t.Helper()
	addr := os.Getenv("TOOLLOOP_TEMPORAL_ADDR")
	if addr == "" {
		t.Skip("TOOLLOOP_TEMPORAL_ADDR is not set: no Temporal server to test against (see README.md)")
	}
	ns := os.Getenv("TOOLLOOP_TEMPORAL_NAMESPACE")
	if ns == "" {
		ns = "default"
	}
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: ns, Logger: testLogger()})
	if err != nil {
		t.Fatalf("dialing %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// history fetches a closed workflow's history.
func history(t *testing.T, c client.Client, id, runID string) *historypb.History {
	t.Helper()
	h := &historypb.History{}
	it := c.GetWorkflowHistory(context.Background(), id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	return h
}

// replay replays a real history against the workflow code, and records
// it when -temporal.record is set.
func replay(t *testing.T, name string, h *historypb.History) {
	t.Helper()
	replayOnly(t, name, h)
	if *record {
		b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join("testdata", "histories")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// replayOnly replays a real history against the workflow code without
// recording it.
func replayOnly(t *testing.T, name string, h *historypb.History) {
	t.Helper()
	r := worker.NewWorkflowReplayer()
	temporal.RegisterWorkflow(r)
	if err := r.ReplayWorkflowHistory(testLogger(), h); err != nil {
		t.Fatalf("replaying the history of %s: %v", name, err)
	}
}

// startWorker runs a worker for one scenario's activities on a task queue
// of its own.
func startWorker(t *testing.T, c client.Client, acts *temporal.Activities) string {
	t.Helper()
	queue := "toolloop-test-" + suffix()
	w := worker.New(c, queue, worker.Options{})
	temporal.RegisterWorkflow(w)
	acts.Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return queue
}

// TestDevServer runs the sandbox scenarios on a real Temporal server,
// compares them with the in-process runner, and replays each recorded
// history with worker.NewWorkflowReplayer to prove the workflow
// deterministic. Each scenario runs three ways: with the defaults (model
// requests and short stages of reads as local activities), with every
// request and call an activity (RunInput.ModelAsActivity, LocalReadBound
// -1), and with RunInput.LocalModel and the calls as activities (retries,
// failures and budgets must end the run the same way each time).
func TestDevServer(t *testing.T) {
	c := devClient(t)
	for _, m := range scenarioModes {
		for _, name := range compared {
			if name == "confirmation_required" {
				continue // TestDevServerConfirm
			}
			devServerScenario(t, c, name, m)
		}
		if m.prefix == "default_" {
			// The deadline passes while a local read waits on a slow
			// carrier: the read is bounded by the run's remaining time, and
			// the worker's clock moves with it.
			devServerScenario(t, c, "deadline_exceeded", m)
		}
	}
}

// scenarioMode is one way of running TestDevServer's scenarios: the
// subtests' prefix, what it sets in the input, and which scenarios'
// histories -temporal.record writes (the histories of the other modes
// are those recorded by the versions before the defaults changed, kept
// as they are, so that TestReplayRecordedHistories goes on replaying
// them).
type scenarioMode struct {
	prefix   string
	set      func(*temporal.RunInput)
	recorded []string
}

var scenarioModes = []scenarioMode{
	{prefix: "default_", set: func(*temporal.RunInput) {},
		recorded: []string{"normal", "parallel", "model_error", "refund_twice", "not_found", "spin_detected"}},
	{prefix: "", set: func(in *temporal.RunInput) { in.ModelAsActivity, in.LocalReadBound = true, -1 }},
	{prefix: "local_model_", set: func(in *temporal.RunInput) { in.LocalModel, in.LocalReadBound = true, -1 }},
}

// compared are the sandbox scenarios TestDevServer runs: those whose
// outcome does not hang on wall-clock timing beyond a tool's own timeout
// (deadline_exceeded and canceled do: their cause is the run's clock or a
// caller in another goroutine; TestDevServerCanceled plays the second).
var compared = []string{
	"normal", "unknown_tool", "loop_forever", "not_found", "tool_timeout", "tool_budget_exceeded",
	"cost_budget_exceeded", "spin_detected", "permission_denied", "confirmation_required", "protocol_error",
	"model_error", "parallel", "refund_retry", "refund_twice", "refund_unknown",
}

func devServerScenario(t *testing.T, c client.Client, name string, m scenarioMode) {
	test := m.prefix + name
	t.Run(test, func(t *testing.T) {
		s := scenario(t, name)
		s.Ledger = store.NewMemory()
		want, wantBook, err := s.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		book, st, acts := sandboxActivities(t, s)
		queue := startWorker(t, c, acts)
		start := want.Events[0].Start
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		in := scenarioInput(s, start.RunID, start.SessionID)
		m.set(&in)
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "toolloop-test-" + test + "-" + suffix(), TaskQueue: queue},
			temporal.WorkflowName, in)
		if err != nil {
			t.Fatal(err)
		}
		var small temporal.RunOutput
		if err := run.Get(ctx, &small); err != nil {
			t.Fatal(err)
		}
		got := readResult(t, st, small)
		if got.Status != want.Status || got.Detail != want.Detail {
			t.Fatalf("workflow: %s (%s)\nin-process: %s (%s)", got.Status, got.Detail, want.Status, want.Detail)
		}
		if g, w := jsonOf(t, got.Messages), jsonOf(t, want.Messages); g != w {
			t.Fatalf("histories differ:\nworkflow:   %s\nin-process: %s", g, w)
		}
		if book.TotalRefunds() != wantBook.TotalRefunds() {
			t.Fatalf("refunds: workflow %d, in-process %d", book.TotalRefunds(), wantBook.TotalRefunds())
		}
		h := history(t, c, run.GetID(), run.GetRunID())
		if !slices.Contains(m.recorded, name) {
			replayOnly(t, test, h)
			return
		}
		replay(t, test, h)
	})
}

// TestDevServerConfirm pauses a run for confirmation on a real server,
// answers through the update (a wrong answer is rejected first), and
// replays the history, which holds the update's protocol messages.
func TestDevServerConfirm(t *testing.T) {
	c := devClient(t)
	s := scenario(t, "confirmation_required")
	book, st, acts := sandboxActivities(t, s)
	queue := startWorker(t, c, acts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "toolloop-test-confirm-" + suffix()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue},
		temporal.WorkflowName, scenarioInput(s, "", "sandbox"))
	if err != nil {
		t.Fatal(err)
	}
	waitPaused(ctx, t, c, id)
	answer := func(a loop.Confirmation) error {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: temporal.ConfirmUpdate,
			Args: []any{a}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err != nil {
			return err
		}
		return h.Get(ctx, nil)
	}
	if err := answer(loop.Confirmation{CallID: "call_q1", Approved: true, By: "ops-1"}); err == nil ||
		!strings.Contains(err.Error(), "not pending") {
		t.Fatalf("answering a call that is not pending: %v", err)
	}
	if err := answer(loop.Confirmation{CallID: "call_r1", Approved: true, By: "ops-1", Note: "photo checked"}); err != nil {
		t.Fatal(err)
	}
	var small temporal.RunOutput
	if err := run.Get(ctx, &small); err != nil {
		t.Fatal(err)
	}
	out := readResult(t, st, small)
	if out.Status != loop.FinalAnswer || book.Refunds("A103") != 1 {
		t.Fatalf("status %s (%s), %d refunds", out.Status, out.Detail, book.Refunds("A103"))
	}
	if err := llm.CheckHistory(out.Messages); err != nil {
		t.Fatal(err)
	}
	replay(t, "default_confirm", history(t, c, id, run.GetRunID()))
}

// TestDevServerCanceled cancels a workflow while its model activity
// produces an answer (the canceled scenario, its caller played by
// CancelWorkflow): the server waits for the activity, so the log is the
// in-process one, answer recorded and its call skipped, and the history
// of this path is recorded too. With local model requests (RunInput.
// LocalModel, and the defaults) the cancellation reaches the workflow at
// its next workflow task, after the model's local activity has ended in
// this one and its answer is recorded.
func TestDevServerCanceled(t *testing.T) {
	for _, v := range []struct {
		name string
		set  func(*temporal.RunInput)
	}{
		{"canceled", func(in *temporal.RunInput) { in.ModelAsActivity, in.LocalReadBound = true, -1 }},
		{"local_model_canceled", func(in *temporal.RunInput) { in.LocalModel, in.LocalReadBound = true, -1 }},
		{"default_canceled", func(*temporal.RunInput) {}},
	} {
		t.Run(v.name, func(t *testing.T) { devServerCanceled(t, v.name, v.set) })
	}
}

func devServerCanceled(t *testing.T, name string, set func(*temporal.RunInput)) {
	c := devClient(t)
	s := scenario(t, "canceled")
	s.Ledger = store.NewMemory()
	want, _, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	id := "toolloop-test-canceled-" + suffix()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	book, st := tsandbox.Book(s), store.NewMemory()
	parts, err := s.Parts(book, st, func() {
		if err := c.CancelWorkflow(ctx, id, ""); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every request the model answers is paid for: count them, to hold
	// the log to them.
	var paid atomic.Int32
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		resp, err := parts.Model.Generate(ctx, req)
		if err == nil {
			paid.Add(1)
		}
		return resp, err
	})
	acts, err := temporal.NewActivities(temporal.Config{
		Model: model, Tools: parts.Tools, Policy: s.Policy, Executor: parts.Executor, Blobs: st,
	})
	if err != nil {
		t.Fatal(err)
	}
	queue := startWorker(t, c, acts)
	start := want.Events[0].Start
	in := scenarioInput(s, start.RunID, start.SessionID)
	set(&in)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	var ce *sdktemporal.CanceledError
	if err := run.Get(ctx, nil); !errors.As(err, &ce) {
		t.Fatalf("workflow error %v, want canceled", err)
	}
	var small temporal.RunOutput
	if err := ce.Details(&small); err != nil {
		t.Fatal(err)
	}
	got := readResult(t, st, small)
	switch name {
	case "local_model_canceled":
		devServerCanceledLocal(t, got, want)
		replayOnly(t, name, history(t, c, id, run.GetRunID())) // as recorded before the defaults changed
		return
	case "default_canceled":
		devServerCanceledDefault(t, got, want, int(paid.Load()))
		replay(t, name, history(t, c, id, run.GetRunID()))
		return
	}
	if got.Status != loop.Canceled || !slices.Equal(kinds(got.Events), kinds(want.Events)) {
		t.Fatalf("workflow %s: %v\nin-process %s: %v", got.Status, kinds(got.Events), want.Status, kinds(want.Events))
	}
	if g, w := jsonOf(t, got.Messages), jsonOf(t, want.Messages); g != w {
		t.Fatalf("histories differ:\nworkflow:   %s\nin-process: %s", g, w)
	}
	replayOnly(t, name, history(t, c, id, run.GetRunID())) // as recorded before the defaults changed
}

// devServerCanceledDefault checks TestDevServerCanceled's run with the
// defaults. The cancellation reaches the workflow at its next workflow
// task, and the run's turns are quick local activities of one workflow
// task, which goes on meanwhile: it answers, runs the call and gets the
// final answer. Were that task to close the workflow, the server would
// refuse the close, as a cancellation came in during the task, and drop
// the task's markers with it: the next task would start canceled, its
// turns not in the log although their requests were made. The workflow
// ends the task with the SaveLog activity first (commitBeforeClose), so
// the turns are in the history, and closes canceled in the next task: the
// output says how the run ended (a final answer, the cancellation having
// come after it), and every request the model answered is in the log. On
// a loaded machine a workflow task may end between the turns instead, and
// the run stops canceled at a later turn with the turns before it
// recorded: the same holds.
func devServerCanceledDefault(t *testing.T, got, want *loop.Result, paid int) {
	t.Helper()
	if got.Status != loop.Canceled && got.Status != loop.FinalAnswer {
		t.Fatalf("workflow %s (%s), want canceled, or final_answer when the cancellation came after it", got.Status, got.Detail)
	}
	if err := llm.CheckHistory(got.Messages); err != nil {
		t.Fatal(err)
	}
	responded := 0
	for _, ev := range got.Events {
		if ev.Kind == loop.ModelResponded {
			responded++
		}
	}
	if paid == 0 || responded != paid {
		t.Fatalf("the model answered %d requests; the log records %d: %v", paid, responded, kinds(got.Events))
	}
	t.Logf("%s with %d events in the log (in-process %s, %d), %d model requests paid: %v",
		got.Status, len(got.Events), want.Status, len(want.Events), paid, kinds(got.Events))
}

// devServerCanceledLocal checks TestDevServerCanceled's run with
// RunInput.LocalModel. The cancellation reaches the workflow at the
// workflow task after the one whose local activity got the answer, and
// that one went on: it recorded the answer (as in-process), prepared its
// call and scheduled the call's activity. The next workflow task cancels
// the activity: the call is skipped as canceled, or, had its activity
// started first, its outcome is recorded (a write's is waited for). The
// run ends canceled either way, its history well-formed.
func devServerCanceledLocal(t *testing.T, got, want *loop.Result) {
	t.Helper()
	if got.Status != loop.Canceled {
		t.Fatalf("workflow %s (%s), want canceled", got.Status, got.Detail)
	}
	responded := func(evs []loop.Event) (n int) {
		for _, ev := range evs {
			if ev.Kind == loop.ModelResponded {
				n++
			}
		}
		return n
	}
	if g, w := responded(got.Events), responded(want.Events); g != w {
		t.Fatalf("%d model responses recorded, in-process %d: %v", g, w, kinds(got.Events))
	}
	o := outcome(got.Events, "call_t1")
	if o == nil {
		t.Fatalf("no outcome for the answer's call: %v", kinds(got.Events))
	}
	if o.Attempts == 0 && (o.Result.Status != llm.StatusSkipped || o.Result.ErrorKind != llm.KindCanceled) {
		t.Fatalf("the call that never ran: %+v", o.Result)
	}
	if err := llm.CheckHistory(got.Messages); err != nil {
		t.Fatal(err)
	}
}

// waitPaused polls run id's status query until the run pauses for
// confirmation, and returns that status; any other ending fails t.
func waitPaused(ctx context.Context, t *testing.T, c client.Client, id string) temporal.RunStatus {
	t.Helper()
	for {
		v, err := c.QueryWorkflow(ctx, id, "", temporal.StatusQuery)
		if err != nil {
			t.Fatal(err)
		}
		var st temporal.RunStatus
		if err := v.Get(&st); err != nil {
			t.Fatal(err)
		}
		if st.Status == string(loop.ConfirmationRequired) {
			return st
		}
		if st.Status != loop.RunningStatus {
			t.Fatalf("status %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
