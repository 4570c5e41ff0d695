package temporal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	const turns, window = 30, countWindow
	model := &denseModel{window: window, lastTurn: turns}
	res, reg := countRun(t, model, turns)
	if res.Status != loop.FinalAnswer || model.refused != 0 || model.maxTokens > window || model.counted == 0 {
		t.Fatalf("%s, %d refused, largest %d tokens, %d counts: %s", res.Status, model.refused, model.maxTokens, model.counted, res.Detail)
	}

	local := &denseModel{window: window, lastTurn: turns}
	want, err := loop.Run(context.Background(), loop.Config{Model: local, ModelName: "scripted", Tools: reg, Context: countPolicy(window), Budgets: countBudgets(turns),
		NewRunID: func() string { return "run-count" }}, []llm.Message{llm.UserMessage("read every page")})
	if err != nil {
		t.Fatal(err)
	}
	if got, wantCounts := counts(res.Events), counts(want.Events); got != wantCounts {
		t.Fatalf("tokens_counted on Temporal:\n%s\nin process:\n%s", got, wantCounts)
	}
	t.Logf("%d of %d turns counted, largest request %d tokens (window %d)", model.counted, turns+1, model.maxTokens, window)
}

// failingCounter is a denseModel whose count always fails as an
// overloaded provider's does.
type failingCounter struct{ *denseModel }

func (failingCounter) CountTokens(context.Context, *llm.Request) (int64, error) {
	return 0, &llm.Error{Kind: llm.KindUnavailable, StatusCode: 529, Retryable: true, Err: errors.New("overloaded_error: Overloaded")}
}

// A count that fails on a worker is recorded and the run goes on, on its
// estimate, to its final answer.
func TestCountFailsOnTemporal(t *testing.T) {
	const turns, window = 30, countWindow
	model := failingCounter{&denseModel{window: window, lastTurn: turns}}
	res, _ := countRun(t, model, turns)
	failed := 0
	for _, ev := range res.Events {
		if ev.Kind == loop.TokensCounted {
			if ev.Count.Tokens != 0 || !strings.Contains(ev.Count.Error, "Overloaded") {
				t.Fatalf("tokens_counted %+v; want the provider's failure", ev.Count)
			}
			failed++
		}
	}
	if res.Status != loop.FinalAnswer || failed == 0 {
		t.Fatalf("%s after %d failed counts: %s", res.Status, failed, res.Detail)
	}
}

// countWindow is the window of the counting runs, in tokens.
const countWindow = 40_000

func countPolicy(window int) *loop.ContextPolicy {
	return &loop.ContextPolicy{Window: window, Margin: 1000, KeepToolResults: 1, CountTokens: true}
}

func countBudgets(turns int) loop.Budgets {
	return loop.Budgets{MaxSteps: turns + 5, MaxToolCalls: turns + 5, Deadline: time.Hour}
}

// countRun runs turns turns of 16,000-byte pages against model on the
// SDK's test environment, with countPolicy, and returns the result and
// the tools.
func countRun(t *testing.T, model llm.Model, turns int) (*loop.Result, *tool.Registry) {
	t.Helper()
	const size = 16_000
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
		Messages: []llm.Message{llm.UserMessage("read every page")}, Context: countPolicy(countWindow), Budgets: countBudgets(turns)})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var out temporal.RunOutput
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	return readResult(t, blobs, out), reg
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
