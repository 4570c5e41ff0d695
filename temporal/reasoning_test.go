package temporal_test

// The real adapters (official SDKs over HTTP) must carry a reasoning
// model's opaque state from one Temporal worker to another: the worker
// that resumes never saw the reply, so the state can only come from the
// workflow's history and the shared blob store.

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/llm/llmtest/reasoningtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
	"github.com/toolloop/toolloop/tool"
)

type weatherIn struct {
	City string `json:"city"`
}

// cityLog records the city of each get_weather execution, whichever
// worker ran it.
type cityLog struct {
	mu     sync.Mutex
	cities []string
}

func (l *cityLog) add(city string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cities = append(l.cities, city)
}

func (l *cityLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.cities...)
}

// weatherActivities is a worker's side of the reasoning runs: get_weather
// is a write, so policy.ConfirmWrites pauses for a human before it runs;
// the run's log lives in the workers' shared blob store.
func weatherActivities(t *testing.T, model llm.Model, blobs store.Blobs, ran *cityLog) *temporal.Activities {
	t.Helper()
	weather := tool.MustNew(tool.Spec[weatherIn]{Name: "get_weather", Description: "current weather", Effect: tool.Write},
		func(_ context.Context, in weatherIn) (map[string]int, error) {
			ran.add(in.City)
			return map[string]int{"temp_c": 12}, nil
		})
	reg, err := tool.NewRegistry(weather)
	if err != nil {
		t.Fatal(err)
	}
	acts, err := temporal.NewActivities(temporal.Config{Model: model, Tools: reg, Policy: policy.ConfirmWrites(), Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	return acts
}

// A run on a real server, through each real adapter: worker A's adapter
// gets the reply carrying llmtest.ReasoningToken and the run waits for
// confirmation; worker A stops, and worker B, with a new adapter and a new
// provider server, takes the approval, runs the tool and sends the next
// request, which gives the token back exactly where the provider reads it.
func TestDevServerReasoningAdaptersAcrossWorkers(t *testing.T) {
	c := devClient(t)
	for _, a := range reasoningtest.Adapters("../llm") {
		t.Run(a.Name, func(t *testing.T) {
			queue := "toolloop-test-reasoning-" + suffix()
			blobs := store.NewMemory() // the store both workers reach
			ran := &cityLog{}
			newWorker := func(srv *reasoningtest.WireServer) worker.Worker {
				w := worker.New(c, queue, worker.Options{})
				temporal.RegisterWorkflow(w)
				weatherActivities(t, a.New(t, srv.URL), blobs, ran).Register(w)
				if err := w.Start(); err != nil {
					t.Fatal(err)
				}
				return w
			}
			srvA := reasoningtest.NewWireServer(t, a.Testdata, "reasoning_call.json")
			wA := newWorker(srvA)
			stopA := sync1(wA.Stop)
			defer stopA()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			id := "toolloop-test-reasoning-" + a.Name + "-" + suffix()
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName,
				temporal.RunInput{RunID: id, Messages: []llm.Message{llm.UserMessage("What is the weather in Oslo?")}})
			if err != nil {
				t.Fatal(err)
			}
			st := waitPaused(ctx, t, c, id)
			var args weatherIn
			if len(st.Pending) != 1 || st.Pending[0].Tool != "get_weather" ||
				json.Unmarshal(st.Pending[0].Arguments, &args) != nil || args.City != "Oslo" {
				t.Fatalf("pending %+v, want get_weather for Oslo", st.Pending)
			}
			stopA()

			srvB := reasoningtest.NewWireServer(t, a.Testdata, "final_answer.json")
			wB := newWorker(srvB)
			defer wB.Stop()
			h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: temporal.ConfirmUpdate,
				Args:         []any{loop.Confirmation{CallID: st.Pending[0].CallID, Approved: true, By: "dana"}},
				WaitForStage: client.WorkflowUpdateStageCompleted})
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Get(ctx, nil); err != nil {
				t.Fatal(err)
			}
			var out temporal.RunOutput
			if err := run.Get(ctx, &out); err != nil {
				t.Fatal(err)
			}
			if out.Status != loop.FinalAnswer {
				t.Fatalf("status %s (%s)", out.Status, out.Detail)
			}
			if got := ran.all(); !reflect.DeepEqual(got, []string{"Oslo"}) {
				t.Fatalf("get_weather ran for %v, want Oslo once", got)
			}
			if n := len(srvA.Requests()); n != 1 {
				t.Fatalf("worker A's provider got %d requests, want 1", n)
			}
			reqs := srvB.Requests()
			if len(reqs) != 1 {
				t.Fatalf("worker B's provider got %d requests, want 1", len(reqs))
			}
			body := reqs[0]
			if !bytes.Contains(body, []byte(llmtest.ReasoningToken)) {
				t.Fatalf("worker B's request does not carry the reasoning state %s:\n%s", llmtest.ReasoningToken, body)
			}
			if got := a.Sent(t, body); !reflect.DeepEqual(got, []string{llmtest.ReasoningToken}) {
				t.Fatalf("worker B's request's reasoning state fields hold %q, want [%q]:\n%s", got, llmtest.ReasoningToken, body)
			}
			res, err := temporal.ReadResult(ctx, blobs, out)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Answer(); got != "It is 12 °C in Oslo." {
				t.Fatalf("answer %q", got)
			}
			replay(t, "reasoning "+a.Name, history(t, c, id, run.GetRunID()))
		})
	}
}
