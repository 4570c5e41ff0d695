package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/temporal"
	"github.com/toolloop/toolloop/tool"
)

// This file measures the workflow at scale on a real server for
// docs/BENCHMARKS.md ("Temporal at scale"). It prints figures and asserts
// nothing about time. It is self-contained apart from scale_adapt_test.go
// (how to configure and read a run), so the same file runs against the
// code before conversations by reference: copy it with
// testdata/scale/before_adapt_test.go.txt (as scale_adapt_test.go) into a
// checkout of that code.
//
// TOOLLOOP_SCALE_EAGER=1 starts the runs with eager workflow start
// (client.StartWorkflowOptions.EnableEagerStart: the server hands the
// first workflow task to this process's worker in the start's answer).
// TOOLLOOP_SCALE picks the measurements (comma-separated: long, turn,
// many); without it, or without TOOLLOOP_TEMPORAL_ADDR, the test skips.
// TOOLLOOP_SCALE_TURNS and TOOLLOOP_SCALE_BYTES set the long run (500 x
// 20,000 B), TOOLLOOP_SCALE_REPS the repetitions of the tool-turn
// measurement (3) and TOOLLOOP_SCALE_RUNS the short runs started at once
// (500). TOOLLOOP_SCALE_MODEL_DELAY (a duration) makes each model answer
// take that long; scale_adapt_test.go reads how the runs make their
// requests and calls (TOOLLOOP_SCALE_ACTIVITIES, TOOLLOOP_SCALE_LOCAL_MODEL).

// scaleInt reads a positive integer from the environment.
func scaleInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s is %q; want a positive integer", name, v)
	}
	return n
}

// loadavg is the machine's load average, noted with every figure: the
// machine is shared.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// scalePage is the fetch tool's result for page p: size bytes, different
// for every page.
func scalePage(p, size int) string {
	line := fmt.Sprintf("page %d: the quick brown fox jumps over the lazy dog. ", p)
	return strings.Repeat(line, size/len(line)+1)[:size]
}

// scaleParts is the model and tools of a run of turns model turns that
// each call fetch once (a result of size bytes), then answer. The model
// checks the conversation's length and that the last result arrived in
// full, so a run that lost or truncated a message fails with model_error
// rather than being measured.
func scaleParts(t *testing.T, turns, size int) (llm.Model, *tool.Registry) {
	t.Helper()
	type in struct {
		Page int `json:"page"`
	}
	fetch, err := tool.New(tool.Spec[in]{Name: "fetch", Description: "fetches a page", HonorsContext: true},
		func(_ context.Context, a in) (string, error) { return scalePage(a.Page, size), nil })
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(fetch)
	if err != nil {
		t.Fatal(err)
	}
	// TOOLLOOP_SCALE_MODEL_DELAY makes each answer take that long, as a
	// real model's would.
	delay, _ := time.ParseDuration(os.Getenv("TOOLLOOP_SCALE_MODEL_DELAY"))
	model := llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		time.Sleep(delay)
		k := req.Step
		if want := 1 + 2*(k-1); len(req.Messages) != want {
			return nil, fmt.Errorf("turn %d sees %d messages, want %d", k, len(req.Messages), want)
		}
		if k > 1 {
			var got string
			r := req.Messages[len(req.Messages)-1].Result
			if r == nil || json.Unmarshal(r.Content, &got) != nil || len(got) != size {
				return nil, fmt.Errorf("turn %d: the last result is not the page in full", k)
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
	return model, reg
}

// startOptions are a measured run's start options.
func startOptions(id, queue string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: id, TaskQueue: queue, EnableEagerStart: os.Getenv("TOOLLOOP_SCALE_EAGER") == "1"}
}

// isModelRequest reports whether ev schedules a model request: the model
// activity, or the marker of the model's local activity.
func isModelRequest(ev *historypb.HistoryEvent) bool {
	if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
		return a.GetActivityType().GetName() == temporal.ModelActivity
	}
	m := ev.GetMarkerRecordedEventAttributes()
	if m == nil || m.GetMarkerName() != "LocalActivity" || len(m.GetDetails()["data"].GetPayloads()) == 0 {
		return false
	}
	var data struct{ ActivityType string }
	return json.Unmarshal(m.GetDetails()["data"].GetPayloads()[0].GetData(), &data) == nil && data.ActivityType == temporal.ModelActivity
}

// scaleRun is one measured run: how it ended and its history over every
// workflow run (the first and each continuation as new).
type scaleRun struct {
	end     scaleEnd
	err     error
	elapsed time.Duration
	// bytes and events of each workflow run's history.
	bytes, events []int
	// last is the last event's type, reason a termination's reason.
	last, reason string
	// result is the size of the workflow's result (the completion's
	// payload).
	result int
	// models and tools are how many model and tool activities the
	// histories schedule.
	models, tools int
	// histories are the workflow runs' histories, first to last.
	histories []*historypb.History
}

func (r *scaleRun) total() (bytes, events int) {
	for i := range r.bytes {
		bytes += r.bytes[i]
		events += r.events[i]
	}
	return bytes, events
}

// runScaled starts one run of turns turns on queue, waits for its end and
// reads its histories.
func runScaled(t *testing.T, c client.Client, queue string, turns int, timeout time.Duration) *scaleRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	id := "toolloop-scale-" + suffix()
	in := scaleInput([]llm.Message{llm.UserMessage("read every page")},
		loop.Budgets{MaxSteps: turns + 1, MaxToolCalls: turns, Deadline: timeout})
	start := time.Now()
	run, err := c.ExecuteWorkflow(ctx, startOptions(id, queue), temporal.WorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	// The handle's run ID moves to the last workflow run once Get has
	// followed the continuations as new.
	firstRun := run.GetRunID()
	r := &scaleRun{}
	r.end, r.err = scaleGet(ctx, run)
	r.elapsed = time.Since(start)
	for runID := firstRun; runID != ""; {
		h := history(t, c, id, runID)
		r.histories = append(r.histories, h)
		b := 0
		for _, ev := range h.Events {
			b += proto.Size(ev)
			if isModelRequest(ev) {
				r.models++
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == temporal.ToolActivity {
				r.tools++
			}
		}
		r.bytes, r.events = append(r.bytes, b), append(r.events, len(h.Events))
		last := h.Events[len(h.Events)-1]
		r.last, runID = last.GetEventType().String(), ""
		switch last.GetEventType() {
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			runID = last.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			r.result = proto.Size(last.GetWorkflowExecutionCompletedEventAttributes().GetResult())
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
			r.reason = last.GetWorkflowExecutionTerminatedEventAttributes().GetReason()
		}
	}
	return r
}

// TestDevServerScale prints the figures of docs/BENCHMARKS.md's
// "Temporal at scale" section (see the comment at the top of this file).
func TestDevServerScale(t *testing.T) {
	which := os.Getenv("TOOLLOOP_SCALE")
	if which == "" {
		t.Skip("TOOLLOOP_SCALE is not set (long, turn, many): the scale measurements are run on request")
	}
	c := devClient(t)
	for _, m := range strings.Split(which, ",") {
		switch m {
		case "long":
			t.Run("long", func(t *testing.T) { scaleLong(t, c) })
		case "turn":
			t.Run("turn", func(t *testing.T) { scaleTurn(t, c) })
		case "many":
			t.Run("many", func(t *testing.T) { scaleMany(t, c) })
		default:
			t.Fatalf("TOOLLOOP_SCALE names %q; want long, turn or many", m)
		}
	}
}

// scaleLong is the long run: turns turns of size-byte results.
func scaleLong(t *testing.T, c client.Client) {
	turns, size := scaleInt(t, "TOOLLOOP_SCALE_TURNS", 500), scaleInt(t, "TOOLLOOP_SCALE_BYTES", 20_000)
	model, reg := scaleParts(t, turns, size)
	queue := startWorker(t, c, scaleActivities(t, model, reg))
	load := loadavg()
	r := runScaled(t, c, queue, turns, time.Minute+time.Duration(turns)*2*time.Second)
	bytes, events := r.total()
	output := turns * size
	t.Logf("long run %d turns x %d B (tool output %d B), load before %s after %s", turns, size, output, load, loadavg())
	t.Logf("  ended: %+v, error: %v; last event %s %q; result %d B", r.end, r.err, r.last, r.reason, r.result)
	// Per turn reached: a terminated run stops short of turns.
	reached := max(r.tools, 1)
	t.Logf("  wall %v (%v per turn reached); %d model and %d tool activities scheduled", r.elapsed.Round(time.Millisecond),
		(r.elapsed / time.Duration(reached)).Round(time.Millisecond), r.models, r.tools)
	t.Logf("  history %d B, %d events over %d workflow runs (%d continuations); per turn reached %d B, %.1f events; %.3f x the tool output of the turns reached",
		bytes, events, len(r.bytes), len(r.bytes)-1, bytes/reached, float64(events)/float64(reached), float64(bytes)/float64(reached*size))
	t.Logf("  per workflow run: bytes %v, events %v", r.bytes, r.events)
	for i, h := range r.histories {
		t.Logf("  workflow run %d by event, the 6 largest kinds: %s", i+1, byKind(h, 6))
	}
}

// byKind sums a history's bytes by event type (and activity or marker
// name), with each kind's first and last event's size, which shows what
// grows as a run goes on.
func byKind(h *historypb.History, top int) string {
	type kind struct{ n, bytes, first, last int }
	kinds := map[string]*kind{}
	var names []string
	for _, ev := range h.Events {
		name := strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			name += "(" + a.GetActivityType().GetName() + ")"
		}
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil {
			name += "(" + m.GetMarkerName() + ")"
		}
		k := kinds[name]
		if k == nil {
			k = &kind{}
			kinds[name] = k
			names = append(names, name)
		}
		size := proto.Size(ev)
		if k.n == 0 {
			k.first = size
		}
		k.n, k.bytes, k.last = k.n+1, k.bytes+size, size
	}
	slices.SortFunc(names, func(a, b string) int { return kinds[b].bytes - kinds[a].bytes })
	var parts []string
	for _, name := range names[:min(top, len(names))] {
		k := kinds[name]
		parts = append(parts, fmt.Sprintf("%s n=%d %d B (first %d, last %d)", name, k.n, k.bytes, k.first, k.last))
	}
	return strings.Join(parts, "; ")
}

// scaleTurn measures a tool turn: runs of 1 and 1+extra turns (small
// results), reps times; a turn's events and wall time are the
// differences divided by extra. It prints one turn's events too.
func scaleTurn(t *testing.T, c client.Client) {
	const extra, size = 20, 100
	reps := scaleInt(t, "TOOLLOOP_SCALE_REPS", 3)
	model1, reg1 := scaleParts(t, 1, size)
	modelN, regN := scaleParts(t, 1+extra, size)
	q1 := startWorker(t, c, scaleActivities(t, model1, reg1))
	qN := startWorker(t, c, scaleActivities(t, modelN, regN))
	runScaled(t, c, q1, 1, time.Minute) // warm up the worker and the server
	var perTurn []time.Duration
	var one, many *scaleRun
	for i := range reps {
		load := loadavg()
		one = runScaled(t, c, q1, 1, time.Minute)
		many = runScaled(t, c, qN, 1+extra, 2*time.Minute)
		if one.err != nil || many.err != nil || one.end.Status != string(loop.FinalAnswer) || many.end.Status != string(loop.FinalAnswer) {
			t.Fatalf("runs ended %+v (%v) and %+v (%v)", one.end, one.err, many.end, many.err)
		}
		d := (many.elapsed - one.elapsed) / extra
		perTurn = append(perTurn, d)
		_, e1 := one.total()
		_, eN := many.total()
		t.Logf("rep %d (load %s): 1 turn %v, %d events; %d turns %v, %d events; a tool turn: %v, %.1f events",
			i+1, load, one.elapsed.Round(time.Millisecond), e1, 1+extra, many.elapsed.Round(time.Millisecond), eN,
			d.Round(time.Millisecond), float64(eN-e1)/extra)
	}
	slices.Sort(perTurn)
	t.Logf("a tool turn, median of %d: %v (all %v)", reps, perTurn[len(perTurn)/2].Round(time.Millisecond), perTurn)
	// One turn's events: from the second model activity's scheduling to
	// the third's.
	var seen int
	var turn []string
	for _, ev := range many.histories[0].Events {
		if isModelRequest(ev) {
			seen++
		}
		if seen == 2 {
			name := strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				name += "(" + a.GetActivityType().GetName() + ")"
			}
			if m := ev.GetMarkerRecordedEventAttributes(); m != nil {
				name += "(" + m.GetMarkerName() + ")"
			}
			turn = append(turn, name)
		}
	}
	t.Logf("one tool turn's %d events: %s", len(turn), strings.Join(turn, " "))
	act, wft := queueWaits(many.histories[0])
	t.Logf("queue wait (scheduled to started) in the last %d-turn run: activity tasks %v, workflow tasks %v (means)",
		1+extra, act.Round(time.Millisecond), wft.Round(time.Millisecond))
}

// queueWaits is the mean time activity tasks and workflow tasks waited in
// their queues (from scheduled to started) in a history.
func queueWaits(h *historypb.History) (activity, workflowTask time.Duration) {
	at := map[int64]time.Time{}
	var sumA, sumW time.Duration
	var nA, nW int
	for _, ev := range h.Events {
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, enums.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			at[ev.GetEventId()] = ev.GetEventTime().AsTime()
		case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			sumA += ev.GetEventTime().AsTime().Sub(at[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()])
			nA++
		case enums.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			sumW += ev.GetEventTime().AsTime().Sub(at[ev.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()])
			nW++
		}
	}
	if nA > 0 {
		activity = sumA / time.Duration(nA)
	}
	if nW > 0 {
		workflowTask = sumW / time.Duration(nW)
	}
	return activity, workflowTask
}

// scaleMany starts runs short runs (two model turns, one call) at once
// against one worker and reports runs per second.
func scaleMany(t *testing.T, c client.Client) {
	runs := scaleInt(t, "TOOLLOOP_SCALE_RUNS", 500)
	model, reg := scaleParts(t, 1, 100)
	queue := startWorker(t, c, scaleActivities(t, model, reg))
	runScaled(t, c, queue, 1, time.Minute) // warm up
	load := loadavg()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[string]int{}
	start := time.Now()
	for i := range runs {
		wg.Go(func() {
			in := scaleInput([]llm.Message{llm.UserMessage("read a page")}, loop.Budgets{MaxSteps: 2, MaxToolCalls: 1, Deadline: 15 * time.Minute})
			status := ""
			run, err := c.ExecuteWorkflow(ctx, startOptions(fmt.Sprintf("toolloop-scale-many-%s-%d", suffix(), i), queue),
				temporal.WorkflowName, in)
			if err == nil {
				var end scaleEnd
				end, err = scaleGet(ctx, run)
				status = end.Status
			}
			if err != nil {
				status = "error: " + err.Error()
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("%d short runs at once, one worker, eager start %v (load before %s, after %s): %v, %.2f runs/s; endings %v",
		runs, startOptions("", "").EnableEagerStart, load, loadavg(), elapsed.Round(time.Millisecond), float64(runs)/elapsed.Seconds(), statuses)
}
