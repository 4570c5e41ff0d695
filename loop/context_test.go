package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/anthropic"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/tool"
)

// windowAPI is a fake Anthropic Messages API that enforces a context
// window as the real one does: a request counted past it gets the real
// 400 "prompt is too long" body. It counts a request's tokens as its
// body's bytes / 4 and bills cache reads (0.1x) for the bytes a request
// shares with the one before from the start, writes (1.25x) for the rest.
// Until turn lastTurn the model asks for one page a turn; then it answers.
type windowAPI struct {
	window, lastTurn int

	mu        sync.Mutex
	prev      []byte
	requests  int
	refused   int
	turns     int // turns answered, summaries aside
	summaries int
	maxTokens int
	input     int64 // tokens billed at the base rate
	read      int64 // tokens read from the cache
	write     int64 // tokens written to the cache
	output    int64
}

func newWindowAPI(t *testing.T, window, lastTurn int) (*windowAPI, llm.Model) {
	t.Helper()
	a := &windowAPI{window: window, lastTurn: lastTurn}
	hs := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(hs.Close)
	client := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(hs.URL),
		option.WithAPIKey("test"), option.WithMaxRetries(0))
	return a, anthropic.New(client, &anthropic.Options{Model: "claude-sonnet-4-6", PromptCaching: true})
}

func (a *windowAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tokens := len(body) / 4
	a.mu.Lock()
	defer a.mu.Unlock()
	if tokens > a.window {
		a.refused++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: %d tokens > %d maximum"},"request_id":"req_011"}`, tokens, a.window)
		return
	}
	a.requests++
	a.maxTokens = max(a.maxTokens, tokens)
	shared := 0
	for shared < len(body) && shared < len(a.prev) && body[shared] == a.prev[shared] {
		shared++
	}
	a.prev = body
	read := int64(shared / 4)
	write := int64(tokens) - read
	a.read += read
	a.write += write
	if bytes.Contains(body, []byte("is being compacted")) {
		// A compaction's summary request: a short summary, no calls.
		a.summaries++
		a.output += 150
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_s%d","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"text","text":"Pages 0 to %d were read; each says little."}],`+
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":150}}`,
			a.summaries, a.turns-1, write, read)
		return
	}
	turn := a.turns
	a.turns++
	content, stop, out := fmt.Sprintf(`[{"type":"tool_use","id":"toolu_%03d","name":"fetch_page","input":{"page":%d}}]`, turn, turn), "tool_use", 40
	if turn >= a.lastTurn {
		content, stop, out = `[{"type":"text","text":"I have read every page."}]`, "end_turn", 12
	}
	a.output += int64(out)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"msg_%03d","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":%s,`+
		`"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,`+
		`"cache_read_input_tokens":%d,"output_tokens":%d}}`, turn, content, stop, 0, write, read, out)
}

// pageTools is a registry with fetch_page, whose result is about
// tokens tokens (4 bytes each) of text that differs from page to page.
func pageTools(t *testing.T, tokens int) *tool.Registry {
	t.Helper()
	type pageIn struct {
		Page int `json:"page"`
	}
	type pageOut struct {
		Text string `json:"text"`
	}
	fetch := tool.MustNew(tool.Spec[pageIn]{Name: "fetch_page", Description: "reads one page"},
		func(ctx context.Context, in pageIn) (pageOut, error) {
			line := fmt.Sprintf("page %d says little. ", in.Page)
			return pageOut{Text: strings.Repeat(line, tokens*4/len(line))}, nil
		})
	reg, err := tool.NewRegistry(fetch)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func longRunConfig(t *testing.T, m llm.Model, turns int, ctxp *loop.ContextPolicy) loop.Config {
	return loop.Config{
		Model: m, ModelName: "claude-sonnet-4-6", Tools: pageTools(t, 2000), Context: ctxp,
		Budgets: loop.Budgets{MaxSteps: turns + 5, MaxToolCalls: turns + 5},
	}
}

// A 150-turn run whose tool returns about 2,000 tokens a turn, in a
// 60,000-token window: without context management the provider refuses
// the request once the history passes the window and the run stops with
// model_error; with it, old results are cleared in chunks, no request
// passes the window, and the run ends with its final answer.
func TestContextManagementLongRun(t *testing.T) {
	const window, turns = 60_000, 150
	t.Run("off", func(t *testing.T) {
		api, m := newWindowAPI(t, window, turns)
		res, err := loop.Run(context.Background(), longRunConfig(t, m, turns, nil), []llm.Message{llm.UserMessage("Read every page.")})
		if !errors.Is(err, loop.ModelError) || api.refused != 1 {
			t.Fatalf("without context management: err %v, %d refused; want model_error after one refusal", err, api.refused)
		}
		t.Logf("off: stopped %s after %d turns", res.Status, res.Steps)
	})
	t.Run("on", func(t *testing.T) {
		api, m := newWindowAPI(t, window, turns)
		res, err := loop.Run(context.Background(), longRunConfig(t, m, turns, &loop.ContextPolicy{Window: window}),
			[]llm.Message{llm.UserMessage("Read every page.")})
		if err != nil {
			t.Fatalf("run: %v (%d requests, %d refused, largest %d tokens)", err, api.requests, api.refused, api.maxTokens)
		}
		if res.Steps != turns+1 || api.refused != 0 || api.maxTokens > window {
			t.Fatalf("%d steps, %d refused, largest request %d tokens; want %d steps, none refused, none past %d",
				res.Steps, api.refused, api.maxTokens, turns+1, window)
		}
		if err := llm.CheckHistory(res.Messages); err != nil {
			t.Fatalf("history after the edits: %v", err)
		}
		edits := 0
		for _, ev := range res.Events {
			if ev.Kind == loop.ContextEdited {
				edits++
				if len(ev.Edit.Cleared) < 5 || ev.Edit.TokensAfter > window/2 {
					t.Errorf("edit %d: %v; want a chunk of results, down to the low-water mark", edits, ev.Edit)
				}
			}
		}
		// The log rebuilds the same history: replay, resume and Temporal
		// send what this run sent.
		if got := loop.Replay(res.Events).History(); len(got) != len(res.Messages) || !sameHistory(got, res.Messages) {
			t.Fatal("the replayed history differs from the run's")
		}
		base := float64(api.input+api.read+api.write) * 3
		billed := float64(api.input)*3 + float64(api.read)*0.3 + float64(api.write)*3.75
		t.Logf("on: %d requests, largest %d tokens (window %d), %d edits; input tokens %d (%d cache reads, %d cache writes), output %d; billed %.2fx uncached",
			api.requests, api.maxTokens, window, edits, api.input+api.read+api.write, api.read, api.write, api.output, billed/base)
	})
}

func sameHistory(a, b []llm.Message) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// With the window unknown to the run, the provider's "prompt is too long"
// makes it clear and try the turn again, each time it comes, and the run
// still ends with its final answer.
func TestPromptTooLongClearsAndRetries(t *testing.T) {
	const window, turns = 60_000, 60
	api, m := newWindowAPI(t, window, turns)
	res, err := loop.Run(context.Background(), longRunConfig(t, m, turns, &loop.ContextPolicy{}),
		[]llm.Message{llm.UserMessage("Read every page.")})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	edits := 0
	for _, ev := range res.Events {
		if ev.Kind == loop.ContextEdited {
			edits++
			if ev.Edit.Reason != loop.EditForPromptTooLong {
				t.Errorf("edit reason %q", ev.Edit.Reason)
			}
		}
	}
	if api.refused == 0 || edits != api.refused {
		t.Fatalf("%d refusals, %d edits; want one edit per refusal", api.refused, edits)
	}
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Fatal(err)
	}
}

// A history that cannot fit, every result the run may clear cleared,
// stops the run with context_exhausted before a request past the window
// is sent.
func TestContextExhausted(t *testing.T) {
	const window, turns = 60_000, 150
	api, m := newWindowAPI(t, window, turns)
	res, err := loop.Run(context.Background(), longRunConfig(t, m, turns, &loop.ContextPolicy{Window: window, KeepToolResults: 40}),
		[]llm.Message{llm.UserMessage("Read every page.")})
	if !errors.Is(err, loop.ContextExhausted) {
		t.Fatalf("err %v; want context_exhausted", err)
	}
	if api.refused != 0 || api.maxTokens > window {
		t.Fatalf("%d refused, largest %d tokens", api.refused, api.maxTokens)
	}
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Fatal(err)
	}
	t.Log(res.Detail)
}

// An excluded tool's results are never cleared, however old; the others
// are, oldest first, and the note that replaces each names its call and
// tool.
func TestContextEditSkipsExcludedTools(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", 3000) + `"`)
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	var s loop.State
	var eff loop.Effect
	feed := func(ev loop.Event) {
		at = at.Add(time.Second)
		ev.At = at
		eff = loop.Next(&s, &ev)
	}
	feed(loop.Event{Kind: loop.Started, Start: &loop.StartInfo{RunID: "r", Budgets: loop.Budgets{MaxSteps: 9, MaxToolCalls: 9, Deadline: time.Hour},
		Context:  &loop.ContextPolicy{Window: 4000, Margin: 400, LowWater: 1000, KeepToolResults: -1, ExcludeTools: []string{"keep_me"}},
		Messages: []llm.Message{llm.UserMessage("go")}}})
	for i, name := range []string{"keep_me", "fetch", "fetch"} {
		id := fmt.Sprintf("c%d", i+1)
		feed(loop.Event{Kind: loop.ModelResponded, Response: &llm.Response{Usage: llm.Usage{InputTokens: int64(100 + 1500*i)},
			Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: name, Arguments: json.RawMessage(`{}`)}}}}})
		feed(loop.Event{Kind: loop.CallsValidated, Checks: []loop.CallCheck{{Known: true, Key: uint64(i + 1)}}})
		feed(loop.Event{Kind: loop.PolicyDecided, Decisions: []policy.Decision{{Verdict: policy.Allow}}})
		feed(loop.Event{Kind: loop.StagePlanned, Plan: &executor.Plan{Stages: [][]int{{0}}}})
		feed(loop.Event{Kind: loop.StageFinished, Outcomes: []executor.Outcome{{Result: llm.ToolResult{CallID: id, Name: name, Status: llm.StatusOK, Content: big}}}})
	}
	if eff.Kind != loop.EditContext {
		t.Fatalf("effect %s after three results of ~750 tokens in a 4,000-token window; want edit_context", eff.Kind)
	}
	var cleared []string
	for _, r := range eff.Edit.Cleared {
		cleared = append(cleared, r.CallID)
	}
	if strings.Join(cleared, ",") != "c2,c3" {
		t.Fatalf("cleared %v; want c2 and c3, not the excluded c1", cleared)
	}
	feed(loop.Event{Kind: loop.ContextEdited, Edit: eff.Edit})
	if eff.Kind != loop.RequestModel {
		t.Fatalf("effect %s after the edit", eff.Kind)
	}
	h := s.History()
	if err := llm.CheckHistory(h); err != nil {
		t.Fatal(err)
	}
	for _, m := range h {
		if r := m.Result; r != nil {
			note := strings.Contains(string(r.Content), "was cleared")
			if note != (r.CallID != "c1") || note && !strings.Contains(string(r.Content), "call "+r.CallID+" ("+r.Name+")") {
				t.Errorf("result of %s: %s", r.CallID, r.Content)
			}
		}
	}
}

// When clearing cannot make room (here every result is of a tool the
// policy excludes from clearing), compaction does: the model summarizes
// the earlier turns in a request of its own, counted in the run's usage,
// and the run goes on from the opening message, the summary and the
// latest turns. Without Compact the same run stops context_exhausted.
func TestCompactionLongRun(t *testing.T) {
	const window, turns = 60_000, 150
	policy := func(compact bool) *loop.ContextPolicy {
		return &loop.ContextPolicy{Window: window, ExcludeTools: []string{"fetch_page"}, Compact: compact}
	}
	api, m := newWindowAPI(t, window, turns)
	_, err := loop.Run(context.Background(), longRunConfig(t, m, turns, policy(false)), []llm.Message{llm.UserMessage("Read every page.")})
	if !errors.Is(err, loop.ContextExhausted) || api.refused != 0 {
		t.Fatalf("without compaction: err %v, %d refused; want context_exhausted before any refusal", err, api.refused)
	}
	api, m = newWindowAPI(t, window, turns)
	res, err := loop.Run(context.Background(), longRunConfig(t, m, turns, policy(true)), []llm.Message{llm.UserMessage("Read every page.")})
	if err != nil {
		t.Fatalf("run: %v (%d requests, %d refused, largest %d tokens)", err, api.requests, api.refused, api.maxTokens)
	}
	if res.Steps != turns+1 || api.refused != 0 || api.maxTokens > window || api.summaries == 0 {
		t.Fatalf("%d steps, %d refused, largest request %d tokens, %d summaries", res.Steps, api.refused, api.maxTokens, api.summaries)
	}
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Fatalf("history after the compactions: %v", err)
	}
	if res.Messages[0].Text != "Read every page." || !strings.Contains(res.Messages[1].Text, "Pages 0 to") {
		t.Fatalf("the history does not go on from the opening message and a summary: %q, %q", res.Messages[0].Text, res.Messages[1].Text)
	}
	summarized := 0
	for _, ev := range res.Events {
		if ev.Kind == loop.ContextSummarized {
			summarized++
		}
	}
	// The summaries' tokens are the run's too.
	if summarized != api.summaries || res.Usage.OutputTokens != api.output || res.Usage.InputTokens != api.input+api.read+api.write {
		t.Fatalf("%d summaries logged of %d; usage %+v, billed output %d, input %d", summarized, api.summaries, res.Usage, api.output, api.input+api.read+api.write)
	}
	if got := loop.Replay(res.Events).History(); !sameHistory(got, res.Messages) {
		t.Fatal("the replayed history differs from the run's")
	}
	t.Logf("compaction: %d requests (%d summaries), largest %d tokens (window %d); input tokens %d, output %d",
		api.requests, api.summaries, api.maxTokens, window, api.input+api.read+api.write, api.output)
}
