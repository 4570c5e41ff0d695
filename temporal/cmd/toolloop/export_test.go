package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/internal/cli"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/temporal"
	tsandbox "github.com/toolloop/toolloop/temporal/sandbox"
	"github.com/toolloop/toolloop/tool"
)

// sandboxRun runs scenario s as a workflow with ID id on the server, with
// a worker of its own over st (the workers' store) that stops when the
// run has ended, unless keep is set: then the caller stops it.
func sandboxRun(t *testing.T, cl client.Client, st *sqlite.Store, s orders.Scenario, id string, continueAfter int, keep bool) (out temporal.RunOutput, stop func()) {
	t.Helper()
	ctx := context.Background()
	cancel := func() {
		cctx, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		_ = cl.CancelWorkflow(cctx, id, "")
	}
	acts, err := tsandbox.Activities(s, tsandbox.Book(s), st, cancel)
	if err != nil {
		t.Fatal(err)
	}
	queue := "export-test-" + suffix()
	w := worker.New(cl, queue, worker.Options{})
	temporal.RegisterWorkflow(w)
	acts.Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	in := tsandbox.Input(s, id)
	in.ConfirmationTimeout = time.Millisecond // as toolloop demo --temporal: the run ends paused
	in.ContinueAsNewAfter = continueAfter
	wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName, in)
	if err != nil {
		w.Stop()
		t.Fatal(err)
	}
	res, err := outputOf(ctx, cl, wr.GetID(), wr.GetRunID(), st)
	if err != nil {
		w.Stop()
		t.Fatalf("%s: %v", s.Name, err)
	}
	// The status is not checked against the scenario's: canceled may
	// end final_answer, the cancellation reaching a run of local turns
	// only at its workflow task's end (DESIGN §13, local turns). The
	// export must replay to whatever status the run recorded.
	o, err := smallOutput(ctx, cl, id, "")
	if err != nil {
		w.Stop()
		t.Fatalf("%s: %v", s.Name, err)
	}
	if o.Status != res.Status {
		t.Errorf("%s: output %s, log %s", s.Name, o.Status, res.Status)
	}
	out = *o
	if !keep {
		w.Stop()
		return out, func() {}
	}
	return out, w.Stop
}

// writeFile writes data to a new file in a test directory and returns
// its path.
func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every sandbox scenario run on Temporal exports, from the workers' store
// with no worker running, as a self-contained file that the core
// commands take: toolloop replay FILE finds no difference, and toolloop
// runs import adds it to a SQLite store, where it replays again. replay
// --temporal reads the same runs from the server and finds none either.
func TestExportTemporalScenarios(t *testing.T) {
	addr := devAddr(t)
	db := filepath.Join(t.TempDir(), "worker.db")
	st, err := sqlite.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cl, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	var scenarios []orders.Scenario
	for _, s := range orders.Scenarios() {
		if !s.Interactive {
			scenarios = append(scenarios, s)
		}
	}
	ids := make([]string, len(scenarios))
	ended := make([]loop.Status, len(scenarios))
	t.Run("run", func(t *testing.T) {
		for i, s := range scenarios {
			ids[i] = "run-" + s.Name + "-" + suffix()
			t.Run(s.Name, func(t *testing.T) {
				t.Parallel()
				out, _ := sandboxRun(t, cl, st, s, ids[i], 0, false)
				ended[i] = out.Status
			})
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	ctx := context.Background()
	imported := filepath.Join(t.TempDir(), "imported.db")
	for i, s := range scenarios {
		id := ids[i]
		code, out, errs := call(ctx, "runs", "export", "--temporal", addr, "--db", db, id)
		if code != cli.ExitOK || errs != "" {
			t.Errorf("%s: runs export --temporal: exit %d\n%s", s.Name, code, errs)
			continue
		}
		file := writeFile(t, s.Name+".jsonl", out)
		if code, out, errs := call(ctx, "replay", file); code != cli.ExitOK || !strings.Contains(out, "run "+id+": no difference ("+string(ended[i])+")") {
			t.Errorf("%s: replay of the export: exit %d\n%s%s", s.Name, code, out, errs)
		}
		code, out, errs = call(ctx, "runs", "import", file, "--db", imported)
		if code != cli.ExitOK || !strings.HasPrefix(out, "imported run "+id+" (") {
			t.Errorf("%s: runs import: exit %d\n%s%s", s.Name, code, out, errs)
		}
		if code, out, errs := call(ctx, "replay", "--temporal", addr, "--db", db, id); code != cli.ExitOK || !strings.Contains(out, "run "+id+": no difference (") {
			t.Errorf("%s: replay --temporal: exit %d\n%s%s", s.Name, code, out, errs)
		}
	}
	// The imported runs are the core store's own: listed as they ended,
	// and replayed from it with no difference.
	code, out, errs := call(ctx, "replay", "--db", imported, "--all")
	if code != cli.ExitOK || strings.Count(out, ": no difference (") != len(scenarios) {
		t.Errorf("replay of the imported runs: exit %d\n%s%s", code, out, errs)
	}
	_, out, _ = call(ctx, "runs", "--db", imported)
	for i, id := range ids {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(id) + ` +` + string(ended[i]) + ` `).MatchString(out) {
			t.Errorf("the imported run %s is not listed as it ended (%s):\n%s", id, ended[i], out)
		}
	}
}

// A run that continued as new exports whole only with the workers'
// store; without it runs export and replay --temporal say so and name the
// flags rather than write or replay the part its last workflow holds. A
// run that did not continue exports from a worker the same log as from
// the store.
func TestExportTemporalContinued(t *testing.T) {
	addr := devAddr(t)
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "worker.db")
	st, err := sqlite.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cl, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, _ := orders.Lookup("parallel")

	id := "run-parallel-" + suffix()
	out, stop := sandboxRun(t, cl, st, s, id, 5, true)
	defer stop()
	if out.ContinuedAsNew < 1 {
		t.Fatalf("the run did not continue as new: %+v", out)
	}
	for _, args := range [][]string{{"runs", "export", id}, {"replay", id}} {
		code, stdout, errs := call(ctx, append(args, "--temporal", addr)...)
		if code == cli.ExitOK || stdout != "" || !strings.Contains(errs, "continued as new") || !strings.Contains(errs, "--db PATH or --store URL") {
			t.Errorf("%v without the store: exit %d, stdout %q, stderr %q; want an error naming --db and --store", args, code, stdout, errs)
		}
	}
	code, whole, errs := call(ctx, "runs", "export", "--temporal", addr, "--db", db, id)
	if code != cli.ExitOK || !strings.HasPrefix(whole, `{"seq":1,`) {
		t.Fatalf("runs export --db: exit %d\n%s%s", code, whole, errs)
	}
	file := writeFile(t, "continued.jsonl", whole)
	if code, out, errs := call(ctx, "replay", file); code != cli.ExitOK || !strings.Contains(out, "no difference (final_answer)") {
		t.Errorf("replay of the continued run's export: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := call(ctx, "replay", "--temporal", addr, "--db", db, id); code != cli.ExitOK || !strings.Contains(out, "no difference (final_answer)") {
		t.Errorf("replay --temporal --db of the continued run: exit %d\n%s%s", code, out, errs)
	}

	// Without continuing, a worker answers for the log: the same file.
	id2 := "run-parallel-" + suffix()
	_, stop2 := sandboxRun(t, cl, st, s, id2, 0, true)
	defer stop2()
	_, fromStore, _ := call(ctx, "runs", "export", "--temporal", addr, "--db", db, id2)
	code, fromWorker, errs := call(ctx, "runs", "export", "--temporal", addr, id2)
	if code != cli.ExitOK || fromWorker != fromStore || fromStore == "" {
		t.Errorf("export from a worker: exit %d, %s\ndiffers from the store's:\n%s\n%s", code, fromWorker, fromStore, errs)
	}
	var recorded int
	for range strings.SplitSeq(strings.TrimSpace(fromStore), "\n") {
		recorded++
	}
	if recorded < 8 {
		t.Errorf("the export holds %d events", recorded)
	}
}

// A tool result over temporal.RefThreshold lives in the workers' store,
// the run's history holding a reference to it: runs export and replay
// --temporal without the store refuse the run, naming the flags, rather
// than write a file of references; with it the export holds the result.
func TestExportTemporalByReference(t *testing.T) {
	addr := devAddr(t)
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "worker.db")
	st, err := sqlite.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	big := strings.Repeat("x", temporal.RefThreshold+100)
	page, err := tool.New(tool.Spec[struct{}]{Name: "page", Description: "a long page", Effect: tool.ReadOnly},
		func(context.Context, struct{}) (string, error) { return big, nil })
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(page)
	if err != nil {
		t.Fatal(err)
	}
	model := llmtest.New(llmtest.Calls(llmtest.Call("p1", "page", map[string]any{})), llmtest.Text("read it"))
	acts, err := newActivities(model, reg, nil, st, false)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	queue := "export-byref-" + suffix()
	w := worker.New(cl, queue, worker.Options{})
	temporal.RegisterWorkflow(w)
	acts.Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	id := "run-byref-" + suffix()
	wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName,
		temporal.RunInput{Model: "scripted", Messages: []llm.Message{llm.UserMessage("read the page")}})
	if err != nil {
		t.Fatal(err)
	}
	var out temporal.RunOutput
	if err := wr.Get(ctx, &out); err != nil || out.Status != loop.FinalAnswer {
		t.Fatalf("run: %+v, %v", out, err)
	}

	for _, args := range [][]string{{"runs", "export", id}, {"replay", id, "--tools", "orders"}} {
		code, stdout, errs := call(ctx, append(args, "--temporal", addr)...)
		if code == cli.ExitOK || stdout != "" || !strings.Contains(errs, "tool results of over 8 KB in the workers' store") ||
			!strings.Contains(errs, "--db PATH or --store URL") {
			t.Errorf("%v without the store: exit %d, stdout %q, stderr %q; want an error naming --db and --store", args, code, stdout, errs)
		}
	}
	code, whole, errs := call(ctx, "runs", "export", "--temporal", addr, "--db", db, id)
	if code != cli.ExitOK || !strings.Contains(whole, big) || strings.Contains(whole, "$toolloop_blob") {
		t.Fatalf("runs export --db: exit %d, %d bytes, stderr %q; want the page whole, no reference", code, len(whole), errs)
	}
	file := writeFile(t, "byref.jsonl", whole)
	imported := filepath.Join(t.TempDir(), "imported.db")
	if code, out, errs := call(ctx, "runs", "import", file, "--db", imported); code != cli.ExitOK {
		t.Fatalf("runs import: exit %d\n%s%s", code, out, errs)
	}
	if code, again, errs := call(ctx, "runs", "export", id, "--db", imported); code != cli.ExitOK || again != whole {
		t.Errorf("the imported run exports differently: exit %d, %s", code, errs)
	}
}
