package temporal_test

import (
	"context"
	"encoding/json"
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

// windowModel stands in for a provider that enforces a context window: a
// request counted (bytes / 4 of its messages and tools, as JSON) past
// window is refused with llm.KindContextLengthExceeded, the kind the
// adapters give Anthropic's "prompt is too long". Until turn lastTurn it
// asks for one page a turn; then it answers.
type windowModel struct {
	window, lastTurn int

	mu                   sync.Mutex
	requests, refused    int
	turns, summaries     int
	maxTokens, allTokens int
}

func (m *windowModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	msgs, _ := json.Marshal(req.Messages)
	tools, _ := json.Marshal(req.Tools)
	tokens := (len(msgs) + len(tools)) / 4
	m.mu.Lock()
	defer m.mu.Unlock()
	if tokens > m.window {
		m.refused++
		return nil, &llm.Error{Kind: llm.KindContextLengthExceeded, StatusCode: 400,
			Err: fmt.Errorf("prompt is too long: %d tokens > %d maximum", tokens, m.window)}
	}
	m.requests++
	m.maxTokens = max(m.maxTokens, tokens)
	m.allTokens += tokens
	resp := &llm.Response{Usage: llm.Usage{InputTokens: int64(tokens), OutputTokens: 40}}
	if last := req.Messages[len(req.Messages)-1]; strings.Contains(last.Text, "is being compacted") {
		m.summaries++
		resp.Message = llm.Message{Role: llm.RoleAssistant, Text: fmt.Sprintf("Pages 0 to %d were read.", m.turns-1)}
		return resp, nil
	}
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

// windowRun runs turns turns whose results are size bytes against a
// windowModel on the SDK's test environment (which does not continue as
// new; the context memory a continuation carries is in the decider's
// state, which TestStateRoundTrip in loop checks).
func windowRun(t *testing.T, turns, size, window int, ctxp *loop.ContextPolicy) (*windowModel, *loop.Result) {
	t.Helper()
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
	model := &windowModel{window: window, lastTurn: turns}
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
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{RunID: "run-window", Model: "scripted",
		Messages: []llm.Message{llm.UserMessage("read every page")}, Context: ctxp,
		Budgets: loop.Budgets{MaxSteps: turns + 5, MaxToolCalls: turns + 5, Deadline: time.Hour}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var out temporal.RunOutput
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	return model, readResult(t, blobs, out)
}

// The long run on Temporal: 150 turns whose results are about
// 2,000 tokens (9,000 bytes, so carried by reference), a 60,000-token
// window. Without context
// management the provider refuses the request once the history passes
// the window (model_error); with it the run ends final_answer, no request
// past the window, and the log's history is valid.
func TestContextManagementLongRunOnTemporal(t *testing.T) {
	const turns, size, window = 150, 9_000, 60_000
	model, res := windowRun(t, turns, size, window, nil)
	if res.Status != loop.ModelError || model.refused != 1 {
		t.Fatalf("without context management: %s after %d refusal(s); want model_error after one", res.Status, model.refused)
	}
	model, res = windowRun(t, turns, size, window, &loop.ContextPolicy{Window: window})
	if res.Status != loop.FinalAnswer || res.Steps != turns+1 || model.refused != 0 || model.maxTokens > window {
		t.Fatalf("%s after %d steps, %d refused, largest request %d tokens (window %d): %s",
			res.Status, res.Steps, model.refused, model.maxTokens, window, res.Detail)
	}
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Fatal(err)
	}
	edits := 0
	for _, ev := range res.Events {
		if ev.Kind == loop.ContextEdited {
			edits++
		}
	}
	if edits == 0 {
		t.Fatal("no context_edited event in the log")
	}
	t.Logf("%d requests, largest %d tokens (window %d), %d edits, %d input tokens in all",
		model.requests, model.maxTokens, window, edits, model.allTokens)
}

// With the window unknown to the run, the model activity's "prompt too
// long" reaches the workflow as such (not as a plain model failure): the
// decider clears and the turn is asked again, each time, and the run ends
// final_answer.
func TestPromptTooLongOnTemporal(t *testing.T) {
	const turns, size, window = 60, 9_000, 60_000
	model, res := windowRun(t, turns, size, window, &loop.ContextPolicy{})
	if res.Status != loop.FinalAnswer || model.refused == 0 {
		t.Fatalf("%s after %d refusal(s): %s", res.Status, model.refused, res.Detail)
	}
	edits := 0
	for _, ev := range res.Events {
		if ev.Kind == loop.ContextEdited && ev.Edit.Reason == loop.EditForPromptTooLong {
			edits++
		}
	}
	if edits != model.refused {
		t.Fatalf("%d refusals, %d edits", model.refused, edits)
	}
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Fatal(err)
	}
}

// Compaction on Temporal: every result is of a tool excluded from
// clearing, so only the summary request (the model activity with a
// summary to make) keeps the run inside the window; it ends final_answer
// with the summaries in its log and their tokens in its usage.
func TestCompactionOnTemporal(t *testing.T) {
	const turns, size, window = 150, 9_000, 60_000
	model, res := windowRun(t, turns, size, window, &loop.ContextPolicy{Window: window, ExcludeTools: []string{"fetch"}, Compact: true})
	if res.Status != loop.FinalAnswer || res.Steps != turns+1 || model.refused != 0 || model.maxTokens > window || model.summaries == 0 {
		t.Fatalf("%s after %d steps, %d refused, largest request %d tokens, %d summaries: %s",
			res.Status, res.Steps, model.refused, model.maxTokens, model.summaries, res.Detail)
	}
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Fatal(err)
	}
	logged := 0
	for _, ev := range res.Events {
		if ev.Kind == loop.ContextSummarized {
			logged++
		}
	}
	if logged != model.summaries || res.Usage.InputTokens != int64(model.allTokens) {
		t.Fatalf("%d summaries logged of %d; input tokens %d, the model counted %d", logged, model.summaries, res.Usage.InputTokens, model.allTokens)
	}
	t.Logf("%d requests (%d summaries), largest %d tokens (window %d)", model.requests, model.summaries, model.maxTokens, window)
}
