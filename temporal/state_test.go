package temporal_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
	"github.com/toolloop/toolloop/tool"
)

// opaqueState returns state bytes an encoder could rewrite if it were not
// careful: base64 with +, / and =, bytes that are not UTF-8, a NUL,
// characters JSON encoders escape, and white space at both ends.
func opaqueState(tag string) []byte {
	b := []byte(" \n" + tag + ":EqQBCkgIARABGAIiQL+/9w==\x00\xff\xfe\x80<>&\u2028\"\\ \t")
	return append(b, 0xc3, 0x28, 0xed, 0xa0, 0x80)
}

// reasoningTurn is an answer of a reasoning model: shown and hidden
// thinking, and provider state on the message and on each call.
func reasoningTurn(step int, calls ...llm.ToolCall) llm.Message {
	for i := range calls {
		calls[i].State = &llm.ProviderState{Provider: "gemini", Data: opaqueState(fmt.Sprintf("call%d.%d", step, i))}
	}
	return llm.Message{
		Role: llm.RoleAssistant, Text: fmt.Sprintf("turn %d", step), ToolCalls: calls,
		Reasoning: []llm.Reasoning{{Provider: "anthropic", Text: "a+b/c=d <ok> & \u00e9"}, {Provider: "anthropic", Hidden: true}},
		State:     &llm.ProviderState{Provider: "anthropic", Data: opaqueState(fmt.Sprintf("msg%d", step))},
	}
}

type noteIn struct {
	To string `json:"to"`
}

// stateActivities is a worker's side of the state runs: a write that
// needs confirmation, and model, over the workers' shared blob store.
func stateActivities(t *testing.T, model llm.Model, blobs store.Blobs) *temporal.Activities {
	t.Helper()
	send := tool.MustNew(tool.Spec[noteIn]{Name: "send_note", Effect: tool.Write},
		func(_ context.Context, in noteIn) (map[string]string, error) {
			return map[string]string{"sent_to": in.To}, nil
		})
	reg, err := tool.NewRegistry(send)
	if err != nil {
		t.Fatal(err)
	}
	acts, err := temporal.NewActivities(temporal.Config{Model: model, Tools: reg, Policy: policy.ConfirmWrites(), Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	return acts
}

// mustHold checks that msgs[i] is want exactly, state bytes included.
func mustHold(t *testing.T, msgs []llm.Message, i int, want llm.Message) {
	t.Helper()
	if i >= len(msgs) {
		t.Fatalf("%d messages, want message %d", len(msgs), i)
	}
	got := msgs[i]
	if got.State == nil || !bytes.Equal(got.State.Data, want.State.Data) {
		t.Fatalf("message %d state = %+v, want %q", i, got.State, want.State.Data)
	}
	for j := range want.ToolCalls {
		if j >= len(got.ToolCalls) || got.ToolCalls[j].State == nil ||
			!bytes.Equal(got.ToolCalls[j].State.Data, want.ToolCalls[j].State.Data) {
			t.Fatalf("message %d calls = %+v, want call %d's state %q", i, got.ToolCalls, j, want.ToolCalls[j].State.Data)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("message %d = %+v\nwant %+v", i, got, want)
	}
}

// In the test environment, provider state and reasoning go through the
// workflow's payloads (activity results, the history it sends back) byte
// for byte.
func TestStateThroughWorkflow(t *testing.T) {
	first, second := reasoningTurn(1, llmtest.Call("c1", "send_note", `{"to":"dana"}`)), reasoningTurn(2)
	model := llmtest.New(llmtest.Turn{Response: &llm.Response{Message: first}}, llmtest.Turn{Response: &llm.Response{Message: second}})
	sb := newSandbox(t, scenario(t, "confirmation_required"))
	blobs := store.NewMemory()
	sb.acts = stateActivities(t, model, blobs)
	sb.register()
	var approve *updateResult
	sb.env.RegisterDelayedCallback(func() {
		approve = sb.update("u1", loop.Confirmation{CallID: "c1", Approved: true, By: "dana"})
	}, time.Minute)
	sb.env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{RunID: "state-wf", Messages: []llm.Message{llm.UserMessage("send dana a note")}})
	if approve == nil || approve.err != nil || approve.rejected != nil {
		t.Fatalf("approval: %+v", approve)
	}
	if err := sb.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var out temporal.RunOutput
	if err := sb.env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	if out.Status != loop.FinalAnswer {
		t.Fatalf("status %s (%s)", out.Status, out.Detail)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	mustHold(t, reqs[1].Messages, 1, first)
	res, err := temporal.ReadResult(context.Background(), blobs, out)
	if err != nil {
		t.Fatal(err)
	}
	mustHold(t, res.Messages, 3, second)
}

// A run on a real server whose worker stops while it waits for a
// confirmation: another worker, with no cache of the workflow, replays it
// from the server's history and sends the first turn's state and
// reasoning with the next request, byte for byte.
func TestDevServerStateAcrossWorkers(t *testing.T) {
	c := devClient(t)
	first, second := reasoningTurn(1, llmtest.Call("c1", "send_note", `{"to":"dana"}`)), reasoningTurn(2)
	modelA := llmtest.New(llmtest.Turn{Response: &llm.Response{Message: first}})
	modelB := llmtest.New(llmtest.Turn{Response: &llm.Response{Message: second}})
	queue := "toolloop-test-state-" + suffix()
	blobs := store.NewMemory() // the store both workers reach
	newWorker := func(model llm.Model) worker.Worker {
		w := worker.New(c, queue, worker.Options{})
		temporal.RegisterWorkflow(w)
		stateActivities(t, model, blobs).Register(w)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	wA := newWorker(modelA)
	stopA := sync1(wA.Stop)
	defer stopA()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "toolloop-test-state-" + suffix()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName,
		temporal.RunInput{RunID: id, Messages: []llm.Message{llm.UserMessage("send dana a note")}})
	if err != nil {
		t.Fatal(err)
	}
	waitPaused(ctx, t, c, id)
	stopA()
	wB := newWorker(modelB)
	defer wB.Stop()
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: temporal.ConfirmUpdate,
		Args: []any{loop.Confirmation{CallID: "c1", Approved: true, By: "dana"}}, WaitForStage: client.WorkflowUpdateStageCompleted})
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
	if n := len(modelA.Requests()); n != 1 {
		t.Fatalf("worker A's model got %d requests, want 1", n)
	}
	reqs := modelB.Requests()
	if len(reqs) != 1 || reqs[0].Step != 2 {
		t.Fatalf("worker B's model got %+v, want the step 2 request", reqs)
	}
	mustHold(t, reqs[0].Messages, 1, first)
	res, err := temporal.ReadResult(ctx, blobs, out)
	if err != nil {
		t.Fatal(err)
	}
	mustHold(t, res.Messages, 3, second)
	replay(t, "state", history(t, c, id, run.GetRunID()))
}

// sync1 returns f wrapped to run once however often it is called.
func sync1(f func()) func() {
	done := false
	return func() {
		if !done {
			done = true
			f()
		}
	}
}
