package trace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/trace"
)

func writeLog(t *testing.T, events []loop.Event, opts *trace.LogOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := trace.NewLogWriter(&buf, opts)
	for i := range events {
		w.Observe(context.Background(), &events[i])
	}
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// logged returns events as a log file gives them back: redacted.
func logged(t *testing.T, events []loop.Event) []loop.Event {
	t.Helper()
	got, err := trace.ReadLog(bytes.NewReader(writeLog(t, events, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestLogRoundTrip(t *testing.T) {
	res := scenario(t, "parallel")
	data := writeLog(t, res.Events, nil)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != len(res.Events) {
		t.Fatalf("%d lines for %d events", len(lines), len(res.Events))
	}
	// Summaries, not values: the order IDs never appear in arguments or
	// results, but call IDs, tools and statuses do.
	if strings.Contains(string(data), "Ada Lovelace") || strings.Contains(string(data), `"order_id":"A100"`) {
		t.Errorf("the log holds tool content:\n%s", data)
	}
	if !strings.Contains(string(data), `"order_id":"<string:4>"`) {
		t.Errorf("the log has no argument summaries:\n%s", data)
	}
	got, err := trace.ReadLog(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(res.Events) {
		t.Fatalf("read %d events, want %d", len(got), len(res.Events))
	}
	for i, ev := range got {
		want := res.Events[i]
		if ev.Seq != want.Seq || ev.Kind != want.Kind || !ev.At.Equal(want.At) || ev.Status != want.Status ||
			ev.Latency != want.Latency || len(ev.Outcomes) != len(want.Outcomes) {
			t.Errorf("event %d: got %+v\nwant %+v", i, ev, want)
		}
		for j, o := range ev.Outcomes {
			w := want.Outcomes[j]
			if o.Result.CallID != w.Result.CallID || o.Result.Status != w.Result.Status || o.Attempts != w.Attempts ||
				!o.Started.Equal(w.Started) || o.Duration != w.Duration || o.IdempotencyKey != w.IdempotencyKey {
				t.Errorf("event %d outcome %d: got %+v\nwant %+v", i, j, o, w)
			}
		}
	}
	// The redacted log still replays: same statuses, same history shape.
	if s := loop.Replay(got); s.Status != res.Status || len(s.History()) != len(res.Messages) {
		t.Errorf("replayed log: status %s, %d messages; want %s, %d", s.Status, len(s.History()), res.Status, len(res.Messages))
	}

	// With full content the arguments and results are kept.
	full := writeLog(t, res.Events, &trace.LogOptions{Redactor: trace.NewRedactor(&trace.RedactOptions{FullContent: true})})
	got, err = trace.ReadLog(bytes.NewReader(full))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(loop.Replay(got).History(), loop.Replay(res.Events).History()) {
		t.Error("a full-content log does not replay to the same history")
	}
}

func TestRedactEventLeavesInputAlone(t *testing.T) {
	res := scenario(t, "normal")
	before, err := json.Marshal(res.Events)
	if err != nil {
		t.Fatal(err)
	}
	red := trace.NewRedactor(nil)
	for i := range res.Events {
		trace.RedactEvent(red, &res.Events[i])
	}
	after, _ := json.Marshal(res.Events)
	if !bytes.Equal(before, after) {
		t.Error("RedactEvent changed the event it was given")
	}
}

func TestReadLogErrors(t *testing.T) {
	_, err := trace.ReadLog(strings.NewReader("{\"seq\":1,\"kind\":\"started\"}\n\n{not json}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("error %v, want one naming line 3", err)
	}
	events, err := trace.ReadLog(strings.NewReader(`{"seq":1,"kind":"started"}`))
	if err != nil || len(events) != 1 {
		t.Errorf("a last line without a newline: %v, %d events", err, len(events))
	}
}

// ordersRun runs a sandbox-like conversation with obs attached.
func ordersRun(ctx context.Context, t *testing.T, obs loop.Observer, runID string, turns ...llmtest.Turn) *loop.Result {
	t.Helper()
	reg, err := orders.Tools(orders.NewBook())
	if err != nil {
		t.Fatal(err)
	}
	res, _ := loop.Run(ctx, loop.Config{
		Model: llmtest.New(turns...), ModelName: orders.ModelName, Tools: reg, Observer: obs,
		Executor: executor.New(&executor.Options{Ledger: store.NewMemory()}),
		NewRunID: func() string { return runID }, SessionID: "s1",
	}, orders.Messages("Where is A100?"))
	if res == nil {
		t.Fatal("no result")
	}
	return res
}

func TestFileObserver(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs")
	obs := trace.FileObserver(dir, nil)
	const n = 6
	var wg sync.WaitGroup
	results := make([]*loop.Result, n)
	for i := range n {
		wg.Go(func() {
			results[i] = ordersRun(context.Background(), t, obs, fmt.Sprintf("run-%d", i),
				llmtest.Calls(llmtest.Call("c1", orders.QueryOrder, `{"order_id":"A100"}`),
					llmtest.Call("c2", orders.TrackShipment, `{"order_id":"A100"}`)),
				llmtest.Text("on its way"))
		})
	}
	wg.Wait()
	if err := obs.Close(); err != nil {
		t.Fatal(err)
	}
	for i, res := range results {
		path := filepath.Join(dir, fmt.Sprintf("run-%d.jsonl", i))
		if obs.Path(res.RunID) != path {
			t.Errorf("Path(%s) = %s, want %s", res.RunID, obs.Path(res.RunID), path)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		events, err := trace.ReadLog(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != len(res.Events) || events[0].Start.RunID != res.RunID || events[len(events)-1].Kind != loop.Stopped {
			t.Errorf("%s: %d events, want %d, from started to stopped", path, len(events), len(res.Events))
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", path, st.Mode().Perm())
		}
	}
}

func TestFileObserverRejectsBadRunIDs(t *testing.T) {
	dir := t.TempDir()
	obs := trace.FileObserver(dir, nil)
	ordersRun(context.Background(), t, obs, "../escape", llmtest.Text("hi"))
	if err := obs.Close(); err == nil || !strings.Contains(err.Error(), "cannot name a log file") {
		t.Errorf("error %v, want one about the run ID", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "..", "escape.jsonl")); err == nil {
		t.Error("a log was written outside the directory")
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"run-normal", "run-spin_detected", "run-spin_other"} {
		if err := os.WriteFile(filepath.Join(dir, id+".jsonl"), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "run-normal.jsonl")
	for _, tc := range []struct{ ref, want string }{
		{file, file},
		{"run-normal", file},
		{"run-normal.jsonl", file},
		{"run-n", file},
	} {
		got, err := trace.Resolve(tc.ref, dir)
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.ref, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ ref, mention string }{
		{"run-missing", filepath.Join(dir, "run-missing.jsonl")},
		{"run-spin", "run-spin_detected, run-spin_other"},
		{filepath.Join(dir, "nope.jsonl"), "nope.jsonl"},
	} {
		_, err := trace.Resolve(tc.ref, dir)
		if !errors.Is(err, trace.ErrNoLog) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("Resolve(%q): %v; want ErrNoLog mentioning %q", tc.ref, err, tc.mention)
		}
	}
	if _, _, err := trace.Open("run-missing", dir); !errors.Is(err, trace.ErrNoLog) {
		t.Errorf("Open of a missing run: %v", err)
	}
}

func TestFileObserverFollowsAResumedRun(t *testing.T) {
	dir := t.TempDir()
	obs := trace.FileObserver(dir, nil)
	reg, err := orders.Tools(orders.NewBook())
	if err != nil {
		t.Fatal(err)
	}
	r, err := loop.NewRunner(loop.Config{
		Model: llmtest.New(llmtest.Calls(llmtest.Call("r1", orders.RefundOrder, `{"order_id":"A100"}`)), llmtest.Text("refunded")),
		Tools: reg, Policy: policy.ConfirmWrites(), Observer: obs, NewRunID: func() string { return "paused-run" },
		Executor: executor.New(&executor.Options{Ledger: store.NewMemory()}),
	})
	if err != nil {
		t.Fatal(err)
	}
	paused, _ := r.Run(context.Background(), nil)
	if paused.Status != loop.ConfirmationRequired {
		t.Fatalf("status %s: %s", paused.Status, paused.Detail)
	}
	res, err := r.Continue(context.Background(), paused, loop.Confirmation{CallID: "r1", Approved: true, By: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if err := obs.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(obs.Path("paused-run"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := trace.ReadLog(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != len(res.Events) {
		t.Fatalf("the file has %d events, the run %d", len(events), len(res.Events))
	}
	var kinds []loop.EventKind
	for i, ev := range events {
		if ev.Seq != i+1 {
			t.Fatalf("line %d has seq %d", i+1, ev.Seq)
		}
		kinds = append(kinds, ev.Kind)
	}
	if !strings.Contains(fmt.Sprint(kinds), "stopped confirmation_decided resumed") || kinds[len(kinds)-1] != loop.Stopped {
		t.Fatalf("kinds %v", kinds)
	}
}

func TestReadLogKeepsWhatCameBeforeACutLine(t *testing.T) {
	res := ordersRun(context.Background(), t, nil, "run-cut",
		llmtest.Calls(llmtest.Call("c1", orders.QueryOrder, `{"order_id":"A100"}`)), llmtest.Text("done"))
	data := writeLog(t, res.Events, nil)
	lines := bytes.SplitAfter(data, []byte("\n"))
	last := lines[len(lines)-2] // SplitAfter leaves an empty tail
	cut := data[:len(data)-len(last)/2]
	events, err := trace.ReadLog(bytes.NewReader(cut))
	var tr *trace.TruncatedError
	if !errors.As(err, &tr) {
		t.Fatalf("error %v, want a *TruncatedError", err)
	}
	if want := len(res.Events); tr.Line != want || len(events) != want-1 {
		t.Errorf("cut line %d with %d events before it, want line %d and %d events", tr.Line, len(events), want, want-1)
	}
	if !strings.Contains(err.Error(), "cut off") {
		t.Errorf("error %q does not say the line was cut off", err)
	}
	// A bad line that is not the last is not a cut: it is an error.
	bad := append(append([]byte{}, lines[0]...), []byte("{\"seq\":2,\n")...)
	bad = append(bad, lines[1]...)
	if _, err := trace.ReadLog(bytes.NewReader(bad)); err == nil || errors.As(err, &tr) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad middle line: %v, want an error naming line 2 that is not a cut", err)
	}
}

// A killed process must leave every line it was told about in the file:
// the lines are written as they come, not held in a buffer until the run
// stops.
func TestFileObserverWritesEachLineAtOnce(t *testing.T) {
	res := ordersRun(context.Background(), t, nil, "run-live",
		llmtest.Calls(llmtest.Call("c1", orders.QueryOrder, `{"order_id":"A100"}`)), llmtest.Text("done"))
	dir := t.TempDir()
	obs := trace.FileObserver(dir, nil)
	defer obs.Close()
	ctx := context.Background()
	for i := range res.Events[:len(res.Events)-1] {
		obs.Observe(ctx, &res.Events[i])
		data, err := os.ReadFile(obs.Path("run-live"))
		if err != nil {
			t.Fatal(err)
		}
		events, err := trace.ReadLog(bytes.NewReader(data))
		if err != nil || len(events) != i+1 {
			t.Fatalf("after event %d the file holds %d events (%v), want %d", i+1, len(events), err, i+1)
		}
	}
}
