package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
	"github.com/toolloop/toolloop/tool"
)

// denseModel is a provider whose tokenizer finds twice the tokens the
// loop's estimate does (bytes / 2 of the messages and tools, as JSON):
// it refuses a request past window as too long, and counts a request
// (llm.TokenCounter) as it would bill it.
type denseModel struct {
	window, lastTurn int

	mu                      sync.Mutex
	turns, refused, counted int
	maxTokens               int
}

func (m *denseModel) tokens(req *llm.Request) int {
	msgs, _ := json.Marshal(req.Messages)
	tools, _ := json.Marshal(req.Tools)
	return (len(msgs) + len(tools)) / 2
}

func (m *denseModel) CountTokens(_ context.Context, req *llm.Request) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counted++
	return int64(m.tokens(req)), nil
}

func (m *denseModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	tokens := m.tokens(req)
	m.mu.Lock()
	defer m.mu.Unlock()
	if tokens > m.window {
		m.refused++
		return nil, &llm.Error{Kind: llm.KindContextLengthExceeded, StatusCode: 400,
			Err: fmt.Errorf("prompt is too long: %d tokens > %d maximum", tokens, m.window)}
	}
	m.maxTokens = max(m.maxTokens, tokens)
	resp := &llm.Response{Usage: llm.Usage{InputTokens: int64(tokens), OutputTokens: 40}}
	turn := m.turns
	m.turns++
	if turn >= m.lastTurn {
		resp.Message = llm.Message{Role: llm.RoleAssistant, Text: "I have read every page."}
		return resp, nil
	}
	resp.Message = llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{
		ID: fmt.Sprintf("call_%03d", turn), Name: "fetch", Arguments: json.RawMessage(fmt.Sprintf(`{"page":%d}`, turn))}}}
	return resp, nil
}

// On Temporal the count is a local activity whose answer the workflow
// records as the in-process runner does: against a provider whose
// tokenizer is twice as dense as the estimate, no request is refused,
// and the run's tokens_counted events are the in-process run's.
func TestCountTokensOnTemporal(t *testing.T) {
	const turns, size, window = 30, 16_000, 40_000
	type in struct {
		Page int `json:"page"`
	}
	fetch, err := tool.New(tool.Spec[in]{Name: "fetch", Description: "fetches a page", HonorsContext: true},
		func(_ context.Context, a in) (string, error) { return pageContent(a.Page, size), nil })
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(fetch)
	if err != nil {
		t.Fatal(err)
	}
	policy := &loop.ContextPolicy{Window: window, Margin: 1000, KeepToolResults: 1, CountTokens: true}
	budgets := loop.Budgets{MaxSteps: turns + 5, MaxToolCalls: turns + 5, Deadline: time.Hour}
	msgs := []llm.Message{llm.UserMessage("read every page")}

	model := &denseModel{window: window, lastTurn: turns}
	blobs := store.NewMemory()
	acts, err := temporal.NewActivities(temporal.Config{Model: model, Tools: reg, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(testLogger())
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(3 * time.Minute)
	temporal.RegisterWorkflow(env)
	acts.Register(env)
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{RunID: "run-count", Model: "scripted",
		Messages: msgs, Context: policy, Budgets: budgets})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var out temporal.RunOutput
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	res := readResult(t, blobs, out)
	if res.Status != loop.FinalAnswer || model.refused != 0 || model.maxTokens > window || model.counted == 0 {
		t.Fatalf("%s, %d refused, largest %d tokens, %d counts: %s", res.Status, model.refused, model.maxTokens, model.counted, res.Detail)
	}

	local := &denseModel{window: window, lastTurn: turns}
	want, err := loop.Run(context.Background(), loop.Config{Model: local, ModelName: "scripted", Tools: reg, Context: policy, Budgets: budgets, NewRunID: func() string { return "run-count" }}, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if got, wantCounts := counts(res.Events), counts(want.Events); got != wantCounts {
		t.Fatalf("tokens_counted on Temporal:\n%s\nin process:\n%s", got, wantCounts)
	}
	t.Logf("%d of %d turns counted, largest request %d tokens (window %d)", model.counted, turns+1, model.maxTokens, window)
}

// counts lists a log's tokens_counted events, each with the event
// before it.
func counts(events []loop.Event) string {
	var b []byte
	for i, ev := range events {
		if ev.Kind == loop.TokensCounted && i > 0 {
			c, _ := json.Marshal(ev.Count)
			b = fmt.Appendf(b, "after %s: %s\n", events[i-1].Kind, c)
		}
	}
	return string(b)
}
