package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
	"github.com/toolloop/toolloop/tool"
)

// pageContent is what the fetch tool returns for page p: about size
// bytes, different for every page (so no turn repeats an earlier one).
func pageContent(p, size int) string {
	line := fmt.Sprintf("page %d: the quick brown fox jumps over the lazy dog. ", p)
	return strings.Repeat(line, size/len(line)+1)[:size]
}

// longRunParts is a worker for a run of turns model turns, each calling a
// tool whose result is size bytes, then a final answer. The model checks
// at every turn that it sees the whole conversation, every result in
// full: a reference leaking to the model, or a result left out, fails
// the run with model_error.
func longRunParts(t *testing.T, turns, size int, blobs store.Blobs, opts ...func(*temporal.Config)) *temporal.Activities {
	t.Helper()
	acts, err := pagesActivities(turns, size, blobs, func(_ context.Context, p int) (string, error) {
		return pageContent(p, size), nil
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return acts
}

// pagesActivities is longRunParts with the fetch tool's handler given,
// for a worker with no *testing.T (TestDevServerLostWorkerLocalRead's
// worker process).
func pagesActivities(turns, size int, blobs store.Blobs, fetchPage func(ctx context.Context, page int) (string, error),
	opts ...func(*temporal.Config)) (*temporal.Activities, error) {
	type in struct {
		Page int `json:"page"`
	}
	fetch, err := tool.New(tool.Spec[in]{Name: "fetch", Description: "fetches a page", HonorsContext: true},
		func(ctx context.Context, a in) (string, error) { return fetchPage(ctx, a.Page) })
	if err != nil {
		return nil, err
	}
	reg, err := tool.NewRegistry(fetch)
	if err != nil {
		return nil, err
	}
	model := llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		k := req.Step
		if want := 1 + 2*(k-1); len(req.Messages) != want {
			return nil, fmt.Errorf("turn %d sees %d messages, want %d", k, len(req.Messages), want)
		}
		for p := 1; p < k; p++ {
			r := req.Messages[2*p].Result
			var got string
			if r == nil || json.Unmarshal(r.Content, &got) != nil || got != pageContent(p, size) {
				return nil, fmt.Errorf("turn %d: the result of page %d is not the page in full", k, p)
			}
		}
		resp := &llm.Response{Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}
		if k > turns {
			resp.Message = llm.Message{Role: llm.RoleAssistant, Text: fmt.Sprintf("read %d pages", turns)}
			return resp, nil
		}
		resp.Message = llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{
			ID: fmt.Sprintf("call_%d", k), Name: "fetch", Arguments: json.RawMessage(fmt.Sprintf(`{"page":%d}`, k))}}}
		return resp, nil
	})
	cfg := temporal.Config{Model: model, Tools: reg, Blobs: blobs}
	for _, o := range opts {
		o(&cfg)
	}
	return temporal.NewActivities(cfg)
}

// chainHistory sums the bytes and events of a workflow's histories, from
// its first run through every continuation as new; it returns the bytes
// and events of each workflow run.
func chainHistory(t *testing.T, c client.Client, id, runID string) (bytes, events []int) {
	t.Helper()
	for runID != "" {
		h := history(t, c, id, runID)
		b := 0
		for _, ev := range h.Events {
			b += proto.Size(ev)
		}
		bytes, events = append(bytes, b), append(events, len(h.Events))
		runID = ""
		if last := h.Events[len(h.Events)-1]; last.GetEventType() == enums.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW {
			runID = last.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		}
	}
	return bytes, events
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestDevServerLongRun is issue 16's long run: 120 turns, each with a
// 20 KB tool result (TOOLLOOP_LONGRUN_TURNS and TOOLLOOP_LONGRUN_BYTES
// change them; 500 x 20 KB is the target, its figures in
// docs/BENCHMARKS.md come from TestDevServerScale), on a real server. Carried by value, such a run was
// terminated by the server at turn 71 (history past 50 MB). Carried by
// reference, it ends final_answer, continuing as new on the way (every
// 140 history events here, some 46 turns of 3 events with the defaults;
// TOOLLOOP_LONGRUN_CAN changes it) without the
// caller seeing it: the same run ID, the status query answers, and the
// result whose log holds every turn in full. Its history grows by a
// bounded number of bytes per turn, well under one tool result.
func TestDevServerLongRun(t *testing.T) {
	c := devClient(t)
	turns, size := envInt("TOOLLOOP_LONGRUN_TURNS", 120), envInt("TOOLLOOP_LONGRUN_BYTES", 20_000)
	blobs := store.NewMemory()
	queue := startWorker(t, c, longRunParts(t, turns, size, blobs))
	// A turn takes about 300 ms on a dev server; a second a turn leaves
	// room for a loaded machine (500 turns: 8m20s).
	timeout := max(5*time.Minute, time.Duration(turns)*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	id := "toolloop-test-longrun-" + suffix()
	in := temporal.RunInput{Model: "scripted", Messages: []llm.Message{llm.UserMessage("read every page")},
		Budgets:            loop.Budgets{MaxSteps: turns + 1, MaxToolCalls: turns, Deadline: timeout},
		ContinueAsNewAfter: envInt("TOOLLOOP_LONGRUN_CAN", 140)}
	start := time.Now()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	// The caller's handle is the first workflow run's; Get follows the
	// continuations to the result.
	firstRun := run.GetRunID()
	var out temporal.RunOutput
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	if out.Status != loop.FinalAnswer || out.RunID != id || out.Steps != turns+1 || out.ToolCalls != turns ||
		out.Answer != fmt.Sprintf("read %d pages", turns) {
		t.Fatalf("output %+v", out)
	}
	if b, _ := json.Marshal(out); len(b) > 4<<10 {
		t.Fatalf("the output is %d bytes; it should not grow with the run", len(b))
	}
	res := readResult(t, blobs, out)
	if len(res.Messages) != 2*turns+2 || toolResult(res.Messages, fmt.Sprintf("call_%d", turns)) == nil {
		t.Fatalf("the log's history has %d messages", len(res.Messages))
	}
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Fatal(err)
	}

	// The same queries, on the workflow ID, after the continuations.
	v, err := c.QueryWorkflow(ctx, id, "", temporal.StatusQuery)
	if err != nil {
		t.Fatal(err)
	}
	var st temporal.RunStatus
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	if st.Status != string(loop.FinalAnswer) || st.RunID != id || st.Steps != turns+1 || st.Events != out.Events {
		t.Fatalf("status query after the run: %+v", st)
	}
	// The events query holds the last workflow run's events (the new
	// workflow run does not read the log back); the earlier ones are in
	// the blob store, whose log ends with the same events.
	page := func(p temporal.EventsPage) []loop.Event {
		t.Helper()
		v, err := c.QueryWorkflow(ctx, id, "", temporal.EventsQuery, p)
		if err != nil {
			t.Fatal(err)
		}
		var evs []loop.Event
		if err := v.Get(&evs); err != nil {
			t.Fatal(err)
		}
		return evs
	}
	evs := page(temporal.EventsPage{})
	if len(evs) == 0 || len(evs) >= out.Events || evs[0].Seq != out.Events-len(evs)+1 || evs[len(evs)-1].Kind != loop.Stopped {
		t.Fatalf("events query after the run: %d events of %d, from %d", len(evs), out.Events, evs[0].Seq)
	}
	// A page within the events the last workflow run holds. With local
	// turns a run continues at the end of a workflow task, which may be
	// a turn or two before the end, so it may hold only the last few
	// events: the page starts no earlier than the first one held.
	off := max(out.Events-3, evs[0].Seq-1)
	if p := page(temporal.EventsPage{Offset: off, Limit: 2}); len(p) != min(2, out.Events-off) || p[0].Seq != off+1 || p[len(p)-1].Seq != off+len(p) {
		t.Fatalf("a page of 2 from offset %d: %d events (%v)", off, len(p), eventSeqs(p))
	}
	// A page that begins before them begins at the first one held.
	if p := page(temporal.EventsPage{Offset: 0, Limit: 1}); len(p) != 1 || p[0].Seq != evs[0].Seq {
		t.Fatalf("a page from offset 0: seqs %v, want the first one held (seq %d)", eventSeqs(p), evs[0].Seq)
	}
	if st.Log != out.Log {
		t.Fatalf("the status names log %s, the output %s", st.Log, out.Log)
	}
	stored, err := temporal.ReadLog(ctx, blobs, st.Log)
	if err != nil || len(stored) != out.Events || stored[0].Kind != loop.Started ||
		stored[len(stored)-len(evs)].Seq != evs[0].Seq || stored[len(stored)-1].Kind != loop.Stopped {
		t.Fatalf("the stored log: %d events, %v", len(stored), err)
	}
	if full, err := temporal.Status(ctx, c, id); err != nil || full.Status != string(loop.FinalAnswer) {
		t.Fatalf("temporal.Status: %+v, %v", full, err)
	}

	bytes, events := chainHistory(t, c, id, firstRun)
	if len(bytes) < 2 || out.ContinuedAsNew != len(bytes)-1 || st.ContinuedAsNew != out.ContinuedAsNew {
		t.Fatalf("%d workflow runs; the output counts %d continuations, the status %d", len(bytes), out.ContinuedAsNew, st.ContinuedAsNew)
	}
	total, n := 0, 0
	for i := range bytes {
		total += bytes[i]
		n += events[i]
	}
	perTurn := total / turns
	t.Logf("%d turns x %d B results: %v; %d workflow runs, history %v B (%d B, %.1f events per turn), per run %v events",
		turns, size, elapsed.Round(time.Millisecond), len(bytes), bytes, perTurn, float64(n)/float64(turns), events)
	// Linear: a bounded amount per turn, under one tool result (by value
	// a turn's history carried its result and then the whole
	// conversation again).
	if perTurn > 12_000 || (size >= 20_000 && perTurn > size/2) {
		t.Fatalf("history grows by %d B per turn", perTurn)
	}
	// A continuation adds a bounded amount: each workflow run starts from
	// the decider's state its input carries, not by reading the log
	// back, which made each run some 34 KB larger than the one before
	// (20 KB a turn, every 600 events of 13 a turn, about 30 turns a run). What still
	// grows is the state's call IDs and result hashes, some 30 bytes a
	// call, carried twice (in the continued-as-new event and in the next
	// run's start): with about 46 turns a run, 3 KB a run. A run
	// continues at the end of a workflow task, and a task of local turns
	// holds several, so runs differ by a few events; those are counted
	// at the chain's bytes per event before the growth is judged.
	if len(bytes) >= 4 {
		mid, midEvents := bytes[1:len(bytes)-1], events[1:len(events)-1]
		perEvent := total / n
		for i := 1; i < len(mid); i++ {
			grew := mid[i] - mid[i-1] - (midEvents[i]-midEvents[i-1])*perEvent
			if grew > 4<<10 {
				t.Fatalf("the workflow runs that continue hold %v B in %v events: run %d is %d B larger than the one before, its %d more events aside",
					mid, midEvents, i+2, grew, midEvents[i]-midEvents[i-1])
			}
		}
	}
	// No workflow run's history comes near Temporal's limits.
	for i, b := range bytes {
		if b > 10<<20 || events[i] > 10_000 {
			t.Fatalf("workflow run %d: %d B, %d events", i+1, b, events[i])
		}
	}
}

// TestDevServerContinueAsNew is a short run that continues as new twice
// or more (8 turns of 10 KB results, every 10 history events, with the
// markers of the current workflow task counted): the result and log are
// whole, and each workflow run's history replays against the workflow
// code (recorded with -temporal.record as default_continued_1.json, ...;
// default_continued_v1_1.json, ... are those of the first version of local
// turns, before a workflow task's markers were committed ahead of the
// continuation, and continued_1.json, ... those of the version before
// local turns): the
// first run, and runs that start from the decider's state their input
// carries.
func TestDevServerContinueAsNew(t *testing.T) {
	c := devClient(t)
	const turns, size = 8, 10_000
	blobs := store.NewMemory()
	queue := startWorker(t, c, longRunParts(t, turns, size, blobs))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "toolloop-test-continued-" + suffix()
	in := temporal.RunInput{RunID: "run-continued", Model: "scripted", Messages: []llm.Message{llm.UserMessage("read every page")},
		Budgets: loop.Budgets{MaxSteps: turns + 1}, ContinueAsNewAfter: 10}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	firstRun := run.GetRunID()
	var out temporal.RunOutput
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.Status != loop.FinalAnswer || out.RunID != "run-continued" || out.ContinuedAsNew < 2 {
		t.Fatalf("output %+v", out)
	}
	res := readResult(t, blobs, out)
	if len(res.Messages) != 2*turns+2 {
		t.Fatalf("%d messages", len(res.Messages))
	}
	runID := firstRun
	for i := 1; runID != ""; i++ {
		h := history(t, c, id, runID)
		replay(t, fmt.Sprintf("default_continued_%d", i), h)
		runID = ""
		if last := h.Events[len(h.Events)-1]; last.GetEventType() == enums.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW {
			runID = last.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		}
	}
}

// TestDevServerHistoryLimit: a run whose history reaches its limit (30
// events here, 40,000 by default, under Temporal's 51,200) and cannot
// continue as new stops itself with deadline_exceeded and a detail naming
// the limit, and returns its output, instead of being terminated by the
// server; the status query agrees.
func TestDevServerHistoryLimit(t *testing.T) {
	c := devClient(t)
	const turns = 20
	blobs := store.NewMemory()
	queue := startWorker(t, c, longRunParts(t, turns, 100, blobs))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "toolloop-test-limit-" + suffix()
	in := temporal.RunInput{Model: "scripted", Messages: []llm.Message{llm.UserMessage("read every page")},
		Budgets: loop.Budgets{MaxSteps: turns + 1}, HistoryLimit: 30}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	var out temporal.RunOutput
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.Status != loop.DeadlineExceeded || !strings.Contains(out.Detail, "before Temporal's limits") ||
		!strings.Contains(out.Detail, "its limit is 30") || out.Steps >= turns {
		t.Fatalf("output %+v", out)
	}
	res := readResult(t, blobs, out)
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Fatal(err)
	}
	st, err := temporal.Status(ctx, c, id)
	if err != nil || st.Status != string(loop.DeadlineExceeded) || st.Detail != out.Detail {
		t.Fatalf("status %+v, %v", st, err)
	}
}

// TestDevServerTerminatedStatus: a workflow terminated (by an operator
// here, by a limit in real life) reports it: temporal.Status says
// workflow_terminated with the reason and who terminated it, and the
// counters reached, where the status query alone still says running
// (the workflow never learns it was terminated).
func TestDevServerTerminatedStatus(t *testing.T) {
	c := devClient(t)
	blobs := store.NewMemory()
	release := make(chan struct{})
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	model := llm.ModelFunc(func(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Text: "late"}}, nil
	})
	defer close(release)
	acts, err := temporal.NewActivities(temporal.Config{Model: model, Tools: reg, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	queue := startWorker(t, c, acts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "toolloop-test-terminated-" + suffix()
	// The blocked request is an activity (ModelAsActivity): as a local
	// activity it would hold the workflow task, and the status query
	// below would wait for it.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName,
		temporal.RunInput{Model: "blocked", Messages: []llm.Message{llm.UserMessage("hello")}, ModelAsActivity: true})
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := temporal.Status(ctx, c, id)
		if err == nil && st.Events > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the run never reported its first event: %+v, %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := c.TerminateWorkflow(ctx, id, "", "operator: history limit drill"); err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err == nil {
		t.Fatal("a terminated workflow returned no error")
	}
	st, err := temporal.Status(ctx, c, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != temporal.StatusTerminated || !strings.Contains(st.Detail, "operator: history limit drill") || st.RunID == "" {
		t.Fatalf("status after termination: %+v", st)
	}
}

// eventSeqs lists the sequence numbers of evs, for a failure's message.
func eventSeqs(evs []loop.Event) []int {
	seqs := make([]int, len(evs))
	for i, ev := range evs {
		seqs[i] = ev.Seq
	}
	return seqs
}
