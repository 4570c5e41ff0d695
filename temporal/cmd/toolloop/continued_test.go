package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/internal/cli"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/temporal"
)

// A run that continued as new keeps its earlier events in the workers'
// store: trace show and diagnose read the whole log from it with --db
// (with no worker running, too), and without it say where the events are
// rather than show a log cut short.
func TestTraceContinuedRun(t *testing.T) {
	addr := devAddr(t)
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "worker.db")
	queue := "continued-test-" + suffix()
	stop := runWorker(t, "--temporal", addr, "--task-queue", queue, "--provider", "sandbox", "--tools", "orders", "--db", db)
	defer stop()

	cl, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	id := "toolloop-continued-" + suffix()
	// A tool turn's history passes 5 events, so the workflow continues as
	// new before the model's answer.
	wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName,
		temporal.RunInput{Model: orders.DeskModelName, ContinueAsNewAfter: 5,
			Messages: []llm.Message{llm.UserMessage("Where are A101 and K017?")}})
	if err != nil {
		t.Fatal(err)
	}
	var out temporal.RunOutput
	if err := wr.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.Status != loop.FinalAnswer || out.ContinuedAsNew < 1 || out.ToolCalls != 2 {
		t.Fatalf("run: %+v; want final_answer after a continuation as new, two calls", out)
	}

	// One run, however many workflow executions: listed once, and its
	// status names the stored log.
	if code, stdout, stderr := call(ctx, "runs", "--temporal", addr); code != cli.ExitOK || strings.Count(stdout, id) != 1 {
		t.Errorf("runs: exit %d, %d rows for %s\n%s%s", code, strings.Count(stdout, id), id, stdout, stderr)
	}
	if st, err := temporal.Status(ctx, cl, id); err != nil || st.Log != out.Log {
		t.Errorf("status of the finished run: %+v, %v; want its log %s", st, err, out.Log)
	}

	// Without the store: where the events are, not a log cut short.
	code, stdout, stderr := call(ctx, "trace", "show", "--temporal", addr, id)
	if code == cli.ExitOK || !strings.Contains(stderr, "continued as new") || !strings.Contains(stderr, "--db PATH or --store URL") {
		t.Errorf("trace show without the store: exit %d\n%s%s\nwant an error naming --db and --store", code, stdout, stderr)
	}

	check := func(when string) {
		t.Helper()
		code, stdout, stderr := call(ctx, "trace", "show", "--temporal", addr, "--db", db, id)
		if code != cli.ExitOK {
			t.Fatalf("trace show --db (%s): exit %d\n%s%s", when, code, stdout, stderr)
		}
		// Every event, from the first: the customer's message and the two
		// calls from before the continuation, the answer from after it.
		for _, want := range []string{`"Where are A101 and K017?"`, "desk_1_1", "desk_1_2", "chat order-desk-rules", "step=2 calls=0",
			"stopped status=final_answer steps=2 tool_calls=2"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("trace show --db (%s) does not show %q:\n%s", when, want, stdout)
			}
		}
		code, stdout, stderr = call(ctx, "trace", "diagnose", "--temporal", addr, "--db", db, id)
		if code != cli.ExitOK || !strings.Contains(stdout, "nothing suspicious") {
			t.Errorf("trace diagnose --db (%s): exit %d\n%s%s", when, code, stdout, stderr)
		}
	}
	check("worker running")
	stop()
	check("no worker")
	code, stdout, stderr = call(ctx, "trace", "show", "--temporal", addr, id)
	if code == cli.ExitOK || !strings.Contains(stderr, "--db PATH or --store URL") {
		t.Errorf("trace show with no worker and no store: exit %d\n%s%s\nwant an error naming --db and --store", code, stdout, stderr)
	}

	if code, _, stderr := call(ctx, "trace", "show", "--temporal", addr, "--db", filepath.Join(t.TempDir(), "none.db"), id); code != cli.ExitUsage && code != 1 ||
		!strings.Contains(stderr, "none.db") {
		t.Errorf("trace show with a store that does not exist: exit %d, %q; want an error naming the file", code, stderr)
	}
}

// A run paused for confirmation after it continued as new: trace show
// --db joins the events from before the continuation (from the workers'
// store) to those its workflow holds (from the events query); without the
// store it says where they are.
func TestTraceContinuedRunPaused(t *testing.T) {
	addr := devAddr(t)
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "worker.db")
	st, err := sqlite.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	book, err := orders.OpenSQLiteBook(ctx, st.DB())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := orders.Tools(book)
	if err != nil {
		t.Fatal(err)
	}
	model := llmtest.New(
		llmtest.Calls(llmtest.Call("q1", orders.QueryOrder, map[string]string{"order_id": "A101"})),
		llmtest.Calls(llmtest.Call("r1", orders.RefundOrder, map[string]string{"order_id": "A101", "reason": "broken"})),
		llmtest.Text("never asked: the run waits"))
	acts, err := newActivities(model, reg, policy.ConfirmWrites(), st, false)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	queue := "continued-paused-" + suffix()
	w := worker.New(cl, queue, worker.Options{})
	temporal.RegisterWorkflow(w)
	acts.Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	id := "toolloop-continued-" + suffix()
	if _, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName,
		temporal.RunInput{Model: "scripted", ContinueAsNewAfter: 5,
			Messages: []llm.Message{llm.UserMessage("Refund A101, it arrived broken.")}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run to pause after continuing as new", func() bool {
		s, err := temporal.Status(ctx, cl, id)
		return err == nil && s.Status == string(loop.ConfirmationRequired) && s.ContinuedAsNew >= 1
	})

	code, stdout, stderr := call(ctx, "trace", "show", "--temporal", addr, id)
	if code == cli.ExitOK || !strings.Contains(stderr, "--db PATH or --store URL") || strings.Contains(stderr, "no worker answered") {
		t.Errorf("trace show without the store: exit %d\n%s%s\nwant an error naming --db and --store", code, stdout, stderr)
	}
	code, stdout, stderr = call(ctx, "trace", "show", "--temporal", addr, "--db", db, id)
	if code != cli.ExitOK {
		t.Fatalf("trace show --db: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{`"Refund A101, it arrived broken."`, "call_id=q1", "call_id=r1", "confirmation_required"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("trace show --db does not show %q:\n%s", want, stdout)
		}
	}
}

// runWorker runs toolloop worker with args in this process until stop
// is called (at most once needed; later calls do nothing), which fails
// the test if the worker did not exit cleanly.
func runWorker(t *testing.T, args ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out syncBuffer
	go func() {
		done <- cli.Main(ctx, append([]string{"worker"}, args...), &out, &out, func(string) string { return "" }, extension())
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if code := <-done; code != cli.ExitOK {
				t.Errorf("worker exit %d\n%s", code, out.String())
			}
		})
	}
}
