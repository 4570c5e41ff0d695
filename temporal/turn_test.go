package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
	"github.com/toolloop/toolloop/tool"
)

// TestDevServerTurnEvents counts a one-call tool turn's history events on
// a real server. With the defaults, the model's request and the stage of
// one read are local activities of the workflow task: a turn is three
// markers (the model, the batch's preparation, the read) and nothing
// dispatched through the server's queues; the test fails a turn of more
// than 10 events (issue 28's bound), a turn that schedules an activity,
// and a run whose turns are not 3 events most of the time (a turn may
// also hold the SDK's renewal of a long workflow task, or the timer that
// ends one held for a second: see RunInput.LocalModel). With every
// request and call an activity (ModelAsActivity, LocalReadBound -1) and
// an in-memory policy, the batch's validation, policy decisions and plan
// are one local activity (one marker) and the log's last events are
// stored by a local activity: a turn is the model's activity, a workflow
// task, the marker, the tool's activity and a workflow task, 13 events and
// two workflow tasks (it was 20 and three, with the policy's activity),
// and no run schedules an AuthorizeCalls activity, nor a SaveLog activity
// but, in a run with local model requests, the one after its last request
// that commits its markers before the workflow closes. The policy
// is asked once per call, no more. With Config.RemotePolicy the policy is
// asked in its own activity, once per call too (20 events a turn), and
// the run ends the same way. With RunInput.LocalModel and reads as
// activities the model's request is a marker where it was an activity and
// the workflow task after it: 8 events a turn, and no model activity is
// scheduled.
func TestDevServerTurnEvents(t *testing.T) {
	c := devClient(t)
	const turns = 4
	activities := func(in *temporal.RunInput) { in.ModelAsActivity, in.LocalReadBound = true, -1 }
	for _, v := range []struct {
		name   string
		remote bool
		// local says the model's requests are local activities.
		local bool
		input func(*temporal.RunInput)
		// want is every turn's events, or, with atMost, the most common
		// count, and atMost the bound no turn may pass.
		want, atMost int
	}{
		{"default", false, true, func(*temporal.RunInput) {}, 3, 10},
		{"local_policy", false, false, activities, 13, 0},
		// The policy's activity, the workflow task after it, the plan's marker.
		{"remote_policy", true, false, activities, 20, 0},
		// RunInput.LocalModel: the model's marker replaces its activity
		// and the workflow task after it.
		{"local_model", false, true, func(in *temporal.RunInput) { in.LocalModel, in.LocalReadBound = true, -1 }, 8, 0},
	} {
		name, remote := v.name, v.remote
		t.Run(name, func(t *testing.T) {
			var asked atomic.Int32
			pol := policy.Func(func(_ context.Context, req policy.Request) (policy.Decision, error) {
				asked.Add(1)
				return policy.Decision{Verdict: policy.Allow, Rule: "test", Reason: "reads are fine"}, nil
			})
			blobs := store.NewMemory()
			queue := startWorker(t, c, longRunParts(t, turns, 100, blobs, func(cfg *temporal.Config) {
				cfg.Policy, cfg.RemotePolicy = pol, remote
			}))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			id := "toolloop-test-turn-" + name + "-" + suffix()
			in := temporal.RunInput{Model: "scripted", Messages: []llm.Message{llm.UserMessage("read every page")},
				Budgets: loop.Budgets{MaxSteps: turns + 1}}
			v.input(&in)
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName, in)
			if err != nil {
				t.Fatal(err)
			}
			var out temporal.RunOutput
			if err := run.Get(ctx, &out); err != nil {
				t.Fatal(err)
			}
			if out.Status != loop.FinalAnswer || out.ToolCalls != turns {
				t.Fatalf("output %+v", out)
			}
			if n := asked.Load(); n != turns {
				t.Fatalf("the policy was asked %d times for %d calls", n, turns)
			}
			res := readResult(t, blobs, out)
			if len(res.Events) != out.Events || res.Events[len(res.Events)-1].Kind != loop.Stopped {
				t.Fatalf("the stored log has %d events, the output says %d", len(res.Events), out.Events)
			}
			h := history(t, c, id, run.GetRunID())
			scheduled := map[string]int{}
			var models []int // index of each model request's scheduling (or marker)
			for i, ev := range h.Events {
				if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
					scheduled[a.GetActivityType().GetName()]++
					if a.GetActivityType().GetName() == temporal.ModelActivity {
						models = append(models, i)
					}
				}
				if v.local && isModelRequest(ev) {
					models = append(models, i)
				}
			}
			if v.local && scheduled[temporal.ModelActivity] != 0 {
				t.Fatalf("%d model activities scheduled with LocalModel", scheduled[temporal.ModelActivity])
			}
			if len(models) != turns+1 {
				t.Fatalf("%d model requests for %d turns", len(models), turns+1)
			}
			common := 0
			for k := 1; k < len(models); k++ {
				n := models[k] - models[k-1]
				var kinds []string
				for _, ev := range h.Events[models[k-1]:models[k]] {
					kinds = append(kinds, ev.GetEventType().String())
					if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && v.atMost > 0 {
						t.Fatalf("tool turn %d schedules activity %s: %s", k, a.GetActivityType().GetName(), strings.Join(kinds, " "))
					}
				}
				t.Logf("tool turn %d: %d history events: %s", k, n, strings.Join(kinds, " "))
				switch {
				case v.atMost == 0 && n != v.want:
					t.Fatalf("tool turn %d: %d history events, want %d: %s", k, n, v.want, strings.Join(kinds, " "))
				case v.atMost > 0 && n > v.atMost:
					t.Fatalf("tool turn %d: %d history events, want at most %d: %s", k, n, v.atMost, strings.Join(kinds, " "))
				case n == v.want:
					common++
				}
			}
			if v.atMost > 0 && common*2 <= turns {
				t.Fatalf("%d of %d tool turns had %d history events, want most", common, turns, v.want)
			}
			// No turn ends its workflow task (the turns above schedule no
			// activity, or their exact count): the one SaveLog activity of
			// a run with local requests comes after its last request, and
			// ends the task that holds its markers before the workflow
			// closes (commitBeforeClose).
			if got, w := scheduled[temporal.SaveLogActivity], map[bool]int{false: 0, true: 1}[v.local]; got != w {
				t.Fatalf("%d SaveLog activities, want %d", got, w)
			}
			if got, w := scheduled[temporal.AuthorizeActivity], map[bool]int{false: 0, true: turns}[remote]; got != w {
				t.Fatalf("%d AuthorizeCalls activities, want %d", got, w)
			}
			if name != "default" {
				// As recorded before the defaults changed.
				replayOnly(t, "turn_"+name, h)
				return
			}
			replay(t, "turn_"+name, h)
		})
	}
}

// TestDevServerSpinAcrossContinuation: the decider's spin window crosses
// a continuation as new. The model asks for page 1, then, in the first
// turn of the new workflow run, for page 1 again: the run stops with
// spin_detected, as it does without a continuation, because the state the
// new workflow run starts from (loop.State's encoding) holds the previous turn's
// calls.
func TestDevServerSpinAcrossContinuation(t *testing.T) {
	c := devClient(t)
	type in struct {
		Page int `json:"page"`
	}
	fetch, err := tool.New(tool.Spec[in]{Name: "fetch", Description: "fetches a page", HonorsContext: true},
		func(_ context.Context, a in) (string, error) { return pageContent(a.Page, 100), nil })
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(fetch)
	if err != nil {
		t.Fatal(err)
	}
	model := llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{
			ID: fmt.Sprintf("call_%d", req.Step), Name: "fetch", Arguments: json.RawMessage(`{"page":1}`)}}}}, nil
	})
	blobs := store.NewMemory()
	acts, err := temporal.NewActivities(temporal.Config{Model: model, Tools: reg, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	queue := startWorker(t, c, acts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "toolloop-test-spin-can-" + suffix()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName,
		temporal.RunInput{Model: "scripted", Messages: []llm.Message{llm.UserMessage("read page 1")},
			Budgets: loop.Budgets{MaxSteps: 5}, ContinueAsNewAfter: 6})
	if err != nil {
		t.Fatal(err)
	}
	var out temporal.RunOutput
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.Status != loop.SpinDetected || out.ContinuedAsNew != 1 || out.Steps != 2 ||
		!strings.Contains(out.Detail, "call_2 repeats fetch with the same arguments as call call_1") {
		t.Fatalf("output %+v", out)
	}
	res := readResult(t, blobs, out)
	if len(res.Events) != out.Events || res.Status != loop.SpinDetected {
		t.Fatalf("the stored log: %d events (output %d), %s", len(res.Events), out.Events, res.Status)
	}
}
