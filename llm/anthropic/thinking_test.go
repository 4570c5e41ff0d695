package anthropic

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// wireBlock is a content block as it travels, in a reply or a request.
type wireBlock struct {
	Type      string          `json:"type"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
}

func isThinking(typ string) bool { return typ == "thinking" || typ == "redacted_thinking" }

// wireRequest is the part of a Messages API request that thinkingAPI
// checks.
type wireRequest struct {
	Thinking *struct {
		Type         string `json:"type"`
		BudgetTokens int64  `json:"budget_tokens"`
	} `json:"thinking"`
	Messages []struct {
		Role    string      `json:"role"`
		Content []wireBlock `json:"content"`
	} `json:"messages"`
}

// thinkingAPI stands in for the Messages API with thinking on, and is as
// strict as the real one about the assistant turns it gets back: a turn in
// the tool loop must start with its thinking, every thinking block must
// carry the signature issued with it, and the thinking blocks of the latest
// assistant turn must come back as they were issued, in place. It answers
// what breaks these rules with the API's 400 and its own words (as seen in
// its replies reported on GitHub), and the rest with its replies in turn.
type thinkingAPI struct {
	t       *testing.T
	URL     string
	replies [][]byte

	mu      sync.Mutex
	issued  [][]wireBlock     // the content of each reply served, in order
	sigs    map[string]string // signature -> the thinking it signs
	bodies  [][]byte
	headers []http.Header
}

func newThinkingAPI(t *testing.T, files ...string) *thinkingAPI {
	t.Helper()
	a := &thinkingAPI{t: t, sigs: map[string]string{}}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		a.replies = append(a.replies, b)
	}
	hs := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(hs.Close)
	a.URL = hs.URL
	return a
}

func (a *thinkingAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bodies = append(a.bodies, body)
	a.headers = append(a.headers, r.Header.Clone())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_011CThinkingTest")
	var req wireRequest
	problem := ""
	if err := json.Unmarshal(body, &req); err != nil {
		problem = "invalid request body: " + err.Error()
	} else {
		problem = a.check(&req)
	}
	if problem != "" {
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]any{
			"type":       "error",
			"error":      map[string]string{"type": "invalid_request_error", "message": problem},
			"request_id": "req_011CThinkingTest",
		})
		return
	}
	reply := a.replies[min(len(a.issued), len(a.replies)-1)]
	var msg struct{ Content []wireBlock }
	if err := json.Unmarshal(reply, &msg); err != nil {
		a.t.Errorf("fixture: %v", err)
	}
	for _, b := range msg.Content {
		if b.Type == "thinking" {
			a.sigs[b.Signature] = b.Thinking
		}
	}
	a.issued = append(a.issued, msg.Content)
	w.Write(reply)
}

// check returns the API's error message for a request it refuses, or "".
// The k-th assistant message of a request is taken to be the k-th reply
// this server gave (a plain tool loop).
func (a *thinkingAPI) check(req *wireRequest) string {
	if req.Thinking == nil || req.Thinking.Type == "disabled" {
		return ""
	}
	msgs := req.Messages
	last := -1
	for i, m := range msgs {
		if m.Role == "assistant" {
			last = i
		}
	}
	inToolLoop := false
	if n := len(msgs); n > 0 && msgs[n-1].Role == "user" {
		for _, b := range msgs[n-1].Content {
			inToolLoop = inToolLoop || b.Type == "tool_result"
		}
	}
	k := -1
	for i, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		k++
		for j, b := range m.Content {
			if sig, ok := a.sigs[b.Signature]; b.Type == "thinking" && (!ok || sig != b.Thinking) {
				return fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
		}
		if i != last {
			continue
		}
		if inToolLoop && (len(m.Content) == 0 || !isThinking(m.Content[0].Type)) {
			found := "nothing"
			if len(m.Content) > 0 {
				found = m.Content[0].Type
			}
			return fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. "+
				"When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "+
				"We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. "+
				"Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking", i, found)
		}
		if k < len(a.issued) {
			if j := modifiedAt(a.issued[k], m.Content); j >= 0 {
				return fmt.Sprintf("messages.%d.content.%d: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified. "+
					"These blocks must remain as they were in the original response.", i, j)
			}
		}
	}
	return ""
}

// modifiedAt returns the first position where sent differs from issued in
// a thinking or redacted_thinking block (changed, moved or missing), or -1.
func modifiedAt(issued, sent []wireBlock) int {
	for j := range max(len(issued), len(sent)) {
		var o, s wireBlock
		if j < len(issued) {
			o = issued[j]
		}
		if j < len(sent) {
			s = sent[j]
		}
		if !isThinking(o.Type) && !isThinking(s.Type) {
			continue
		}
		if o.Type != s.Type || o.Thinking != s.Thinking || o.Signature != s.Signature || o.Data != s.Data {
			return j
		}
	}
	return -1
}

func (a *thinkingAPI) requests() [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([][]byte(nil), a.bodies...)
}

// client builds a new SDK client aimed at the server; each call gives
// another, as another process would build its own.
func (a *thinkingAPI) client(opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(a.URL),
		option.WithAPIKey("test"),
		option.WithMaxRetries(0),
	}, opts...)...)
}

// fixtureContent reads a reply's content blocks from testdata.
func fixtureContent(t *testing.T, file string) []wireBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var msg struct{ Content []wireBlock }
	if err := json.Unmarshal(b, &msg); err != nil {
		t.Fatal(err)
	}
	return msg.Content
}

// sentTurn returns the content of message i of a request body.
func sentTurn(t *testing.T, body []byte, i int) []wireBlock {
	t.Helper()
	var req wireRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	if i >= len(req.Messages) {
		t.Fatalf("request has %d messages, want at least %d:\n%s", len(req.Messages), i+1, body)
	}
	return req.Messages[i].Content
}

// assertSameTurn checks that an assistant turn went back exactly as the
// reply gave it: every block in its place, thinking, signatures and
// redacted data the same strings byte for byte, tool inputs the same JSON.
func assertSameTurn(t *testing.T, sent, reply []wireBlock) {
	t.Helper()
	if len(sent) != len(reply) {
		t.Fatalf("turn sent back with %d blocks, the reply had %d:\nsent  %+v\nreply %+v", len(sent), len(reply), sent, reply)
	}
	for j := range reply {
		s, r := sent[j], reply[j]
		var si, ri bytes.Buffer
		if len(r.Input) > 0 {
			if err := json.Compact(&ri, r.Input); err != nil {
				t.Fatal(err)
			}
			if err := json.Compact(&si, s.Input); err != nil {
				t.Fatalf("block %d: input %s: %v", j, s.Input, err)
			}
		}
		if s.Type != r.Type || s.Thinking != r.Thinking || s.Signature != r.Signature || s.Data != r.Data ||
			s.Text != r.Text || s.ID != r.ID || s.Name != r.Name || si.String() != ri.String() {
			t.Fatalf("block %d sent back as %+v, the reply had %+v", j, s, r)
		}
	}
}

// refundTools is one write tool, so that policy.ConfirmWrites pauses on it.
func refundTools(t *testing.T, refunds *int) *tool.Registry {
	t.Helper()
	type refundIn struct {
		OrderID string `json:"order_id"`
	}
	refund := tool.MustNew(tool.Spec[refundIn]{Name: "refund_order", Description: "refund an order", Effect: tool.Write},
		func(ctx context.Context, in refundIn) (map[string]any, error) {
			*refunds++
			return map[string]any{"order_id": in.OrderID, "refunded": true}, nil
		})
	reg, err := tool.NewRegistry(refund)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

var thinkingOpts = Options{ThinkingBudget: 2048, MaxTokens: 8192}

// A tool loop with thinking on: the model thinks (one thinking block, one
// redacted_thinking block), says a word and calls a tool; the turn goes back
// with the result exactly as it came, blocks in their order, and the model
// answers. The API refuses the second request otherwise (thinkingAPI).
func TestThinkingToolLoop(t *testing.T) {
	api := newThinkingAPI(t, "thinking_calls.json", "thinking_answer.json")
	refunds := 0
	res, err := loop.Run(context.Background(), loop.Config{
		Model:     New(api.client(), &thinkingOpts),
		ModelName: "claude-sonnet-4-6",
		Tools:     refundTools(t, &refunds),
		Budgets:   loop.Budgets{MaxSteps: 4},
	}, []llm.Message{llm.UserMessage("Refund order A100.")})
	if err != nil {
		t.Fatalf("%v (%s)", err, res.Detail)
	}
	if res.Status != loop.FinalAnswer || res.Answer() != "Order A100 is refunded." || refunds != 1 {
		t.Fatalf("status %s, answer %q, %d refunds", res.Status, res.Answer(), refunds)
	}
	reqs := api.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for i, body := range reqs {
		var req wireRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		if req.Thinking == nil || req.Thinking.Type != "enabled" || req.Thinking.BudgetTokens != 2048 {
			t.Fatalf("request %d: thinking %+v, want enabled with budget 2048 on every request of the loop", i, req.Thinking)
		}
	}
	assertSameTurn(t, sentTurn(t, reqs[1], 1), fixtureContent(t, "thinking_calls.json"))

	asst := res.Messages[1]
	want := []llm.Reasoning{
		{Provider: "anthropic", Text: fixtureContent(t, "thinking_calls.json")[0].Thinking},
		{Provider: "anthropic", Hidden: true},
	}
	if asst.Role != llm.RoleAssistant || len(asst.Reasoning) != 2 || asst.Reasoning[0] != want[0] || asst.Reasoning[1] != want[1] {
		t.Fatalf("assistant reasoning = %+v, want %+v", asst.Reasoning, want)
	}
	if asst.State == nil || asst.State.Provider != "anthropic" || asst.Text != "I'll refund order A100." {
		t.Fatalf("assistant message = %+v", asst)
	}
	if final := res.Messages[len(res.Messages)-1]; final.State != nil || final.Reasoning != nil {
		t.Fatalf("an answer without thinking has state %v and reasoning %v", final.State, final.Reasoning)
	}
}

// The fake API is as strict as the real one: a turn sent back without its
// thinking, with a signature altered, or with its thinking blocks out of
// order is a 400 with the API's message, which the adapter reports as a
// non-retryable bad request. The turn as the adapter keeps it passes.
func TestThinkingTurnMustComeBackUnchanged(t *testing.T) {
	api := newThinkingAPI(t, "thinking_calls.json", "thinking_answer.json")
	m := New(api.client(), &thinkingOpts)
	ctx := context.Background()
	first, err := m.Generate(ctx, &llm.Request{Model: "claude-sonnet-4-6", Messages: []llm.Message{llm.UserMessage("Refund order A100.")}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := decodeState(first.Message.State.Data)
	if err != nil {
		t.Fatal(err)
	}
	withState := func(edit func(*turnState)) *llm.ProviderState {
		c := turnState{V: st.V, Blocks: append([]stateBlock(nil), st.Blocks...)}
		edit(&c)
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return &llm.ProviderState{Provider: "anthropic", Data: data}
	}
	for _, tc := range []struct {
		name  string
		state *llm.ProviderState
		want  string // "" for success
	}{
		{"unchanged", first.Message.State, ""},
		{"thinking dropped", nil, "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. When `thinking` is enabled"},
		{"signature altered", withState(func(s *turnState) { s.Blocks[0].Signature = strings.Replace(s.Blocks[0].Signature, "E", "F", 1) }),
			"messages.1.content.0: Invalid `signature` in `thinking` block"},
		{"thinking edited", withState(func(s *turnState) { s.Blocks[0].Thinking += " " }),
			"messages.1.content.0: Invalid `signature` in `thinking` block"},
		{"blocks out of order", withState(func(s *turnState) { s.Blocks[0], s.Blocks[1] = s.Blocks[1], s.Blocks[0] }),
			"messages.1.content.0: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified."},
		{"redacted data altered", withState(func(s *turnState) { s.Blocks[1].Data = "x" + s.Blocks[1].Data }),
			"messages.1.content.1: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asst := first.Message
			asst.State = tc.state
			call := asst.ToolCalls[0]
			_, err := m.Generate(ctx, &llm.Request{Model: "claude-sonnet-4-6", Messages: []llm.Message{
				llm.UserMessage("Refund order A100."),
				asst,
				llm.ToolMessage(llm.ToolResult{CallID: call.ID, Name: call.Name, Status: llm.StatusOK, Content: json.RawMessage(`{"refunded":true}`)}),
			}})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var le *llm.Error
			if !errors.As(err, &le) || le.Kind != llm.KindBadRequest || le.Retryable || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a non-retryable bad request saying %q", err, tc.want)
			}
		})
	}
}

// A durable run with thinking pauses after the first turn for a person's
// confirmation; the answer is recorded and another runner, with a new
// adapter on a new client (another process, days later), resumes it from
// the store. The turn it sends back carries the thinking blocks exactly as
// the API gave them: the state went through the log's JSON byte for byte.
func TestThinkingDurableResume(t *testing.T) {
	api := newThinkingAPI(t, "thinking_calls.json", "thinking_answer.json")
	st := store.NewMemory()
	refunds := 0
	runner := func() *loop.Runner {
		r, err := loop.NewRunner(loop.Config{
			Model:     New(api.client(), &thinkingOpts),
			ModelName: "claude-sonnet-4-6",
			Tools:     refundTools(t, &refunds),
			Policy:    policy.ConfirmWrites(),
			Store:     st,
			NewRunID:  func() string { return "run-think" },
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ctx := context.Background()
	paused, err := runner().Run(ctx, []llm.Message{llm.UserMessage("Refund order A100.")})
	if !errors.Is(err, loop.ConfirmationRequired) || paused.Status != loop.ConfirmationRequired || refunds != 0 {
		t.Fatalf("first run: %v, status %s, %d refunds; want a pause before the refund", err, paused.Status, refunds)
	}
	kept := paused.Messages[1].State
	if kept == nil || kept.Provider != "anthropic" {
		t.Fatalf("the paused run's turn has state %+v", kept)
	}

	events, err := loop.LoadEvents(ctx, st, "run-think")
	if err != nil {
		t.Fatal(err)
	}
	var logged *llm.Response
	for i := range events {
		if events[i].Kind == loop.ModelResponded {
			logged = events[i].Response
		}
	}
	if logged == nil || logged.Message.State == nil || !bytes.Equal(logged.Message.State.Data, kept.Data) ||
		logged.Message.State.Provider != "anthropic" || len(logged.Message.Reasoning) != 2 {
		t.Fatalf("the log's response = %+v, want the state %s byte for byte", logged, kept.Data)
	}

	if err := loop.Decide(ctx, st, "run-think", loop.Confirmation{CallID: paused.Pending[0].CallID, Approved: true, By: "bob"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	res, err := runner().Resume(ctx, "run-think")
	if err != nil {
		t.Fatalf("resume: %v (%s)", err, res.Detail)
	}
	if res.Status != loop.FinalAnswer || res.Answer() != "Order A100 is refunded." || refunds != 1 {
		t.Fatalf("resumed run: status %s, answer %q, %d refunds", res.Status, res.Answer(), refunds)
	}
	reqs := api.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	assertSameTurn(t, sentTurn(t, reqs[1], 1), fixtureContent(t, "thinking_calls.json"))
}

// A history moved over from another provider keeps its text and calls but
// not that provider's opaque state, which is left out of the request and
// counted in the response, so that the run's log says so.
func TestForeignStateDropped(t *testing.T) {
	api := newThinkingAPI(t, "thinking_answer.json")
	secret := []byte("gemini-thought-signature-Q2lwaGVy")
	history := []llm.Message{
		llm.UserMessage("Refund order A100."),
		{
			Role: llm.RoleAssistant, Text: "Refunding.",
			ToolCalls: []llm.ToolCall{{ID: "call_g1", Name: "refund_order", Arguments: json.RawMessage(`{"order_id":"A100"}`)}},
			Reasoning: []llm.Reasoning{{Provider: "gemini", Text: "check the order"}},
			State:     &llm.ProviderState{Provider: "gemini", Data: secret},
		},
		llm.ToolMessage(llm.ToolResult{CallID: "call_g1", Name: "refund_order", Status: llm.StatusOK, Content: json.RawMessage(`{"refunded":true}`)}),
	}
	st := store.NewMemory()
	refunds := 0
	r, err := loop.NewRunner(loop.Config{
		Model:     New(api.client(), nil),
		ModelName: "claude-sonnet-4-6",
		Tools:     refundTools(t, &refunds),
		Store:     st,
		NewRunID:  func() string { return "run-moved" },
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), history)
	if err != nil {
		t.Fatalf("%v (%s)", err, res.Detail)
	}
	events, err := loop.LoadEvents(context.Background(), st, "run-moved")
	if err != nil {
		t.Fatal(err)
	}
	var dropped []int
	for _, ev := range events {
		if ev.Kind == loop.ModelResponded {
			dropped = append(dropped, ev.Response.DroppedState)
		}
	}
	if len(dropped) != 1 || dropped[0] != 1 {
		t.Fatalf("model_responded events record dropped state %v, want [1]", dropped)
	}
	body := api.requests()[0]
	if bytes.Contains(body, secret) || bytes.Contains(body, []byte(base64.StdEncoding.EncodeToString(secret))) || bytes.Contains(body, []byte("check the order")) {
		t.Fatalf("the request carries the other provider's state or reasoning:\n%s", body)
	}
	assertSameTurn(t, sentTurn(t, body, 1), []wireBlock{
		{Type: "text", Text: "Refunding."},
		{Type: "tool_use", ID: "call_g1", Name: "refund_order", Input: json.RawMessage(`{"order_id":"A100"}`)},
	})

	// A foreign state on a call counts too; the adapter's own does not.
	own, err := replyStateOf(t, `[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"call_a","name":"refund_order","input":{}}]`)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []llm.Message{
		llm.UserMessage("go"),
		{Role: llm.RoleAssistant, State: own, ToolCalls: []llm.ToolCall{{ID: "call_a", Name: "refund_order", Arguments: json.RawMessage(`{}`),
			State: &llm.ProviderState{Provider: "gemini", Data: secret}}}},
		llm.ToolMessage(llm.ToolResult{CallID: "call_a", Name: "refund_order", Status: llm.StatusOK, Content: json.RawMessage(`{}`)}),
	}
	resp, err := New(api.client(), &Options{Model: "m"}).Generate(context.Background(), &llm.Request{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if resp.DroppedState != 1 {
		t.Fatalf("DroppedState = %d, want 1 (the call's gemini state)", resp.DroppedState)
	}
}

// replyStateOf runs a reply's content (wire JSON) through replyState.
func replyStateOf(t *testing.T, content string) (*llm.ProviderState, error) {
	t.Helper()
	var blocks []anthropic.ContentBlockUnion
	if err := json.Unmarshal([]byte(content), &blocks); err != nil {
		t.Fatal(err)
	}
	_, st, err := replyState(blocks, nil)
	return st, err
}

// Thinking settings the API would refuse, or that contradict each other,
// are refused with a message naming the setting, by Validate and by every
// Generate, before anything is sent.
func TestThinkingOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{ThinkingBudget: 1023, MaxTokens: 8192}, "ThinkingBudget is 1023; it must be 0 (thinking off) or at least 1024"},
		{Options{ThinkingBudget: -1}, "ThinkingBudget is -1"},
		{Options{ThinkingBudget: 4096}, "ThinkingBudget (4096) must be less than MaxTokens (4096)"},
		{Options{ThinkingBudget: 9000, MaxTokens: 8192}, "ThinkingBudget (9000) must be less than MaxTokens (8192)"},
		{Options{ThinkingBudget: 2048, MaxTokens: 8192, AdaptiveThinking: true}, "ThinkingBudget and AdaptiveThinking are both set"},
		{Options{InterleavedThinking: true}, "InterleavedThinking needs thinking on"},
		{Options{InterleavedThinking: true, AdaptiveThinking: true}, "adaptive thinking already thinks between tool calls"},
	} {
		err := tc.opts.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error saying %q", tc.opts, err, tc.want)
			continue
		}
		api := newThinkingAPI(t, "thinking_answer.json")
		_, err = New(api.client(), &tc.opts).Generate(context.Background(), &llm.Request{Model: "m", Messages: []llm.Message{llm.UserMessage("hi")}})
		var le *llm.Error
		if !errors.As(err, &le) || le.Kind != llm.KindBadRequest || le.Retryable || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Generate with %+v: err = %v, want a non-retryable bad request saying %q", tc.opts, err, tc.want)
		}
		if n := len(api.requests()); n != 0 {
			t.Errorf("Generate with %+v sent %d requests", tc.opts, n)
		}
	}
	for _, ok := range []Options{
		{},
		{ThinkingBudget: 1024, MaxTokens: 1025},
		{ThinkingBudget: 3000},
		{ThinkingBudget: 16000, MaxTokens: 8192, InterleavedThinking: true},
		{AdaptiveThinking: true},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", ok, err)
		}
	}
}

// What each thinking setting sends: thinking enabled with its budget,
// adaptive, or nothing; the interleaved-thinking beta joins the beta names
// the client already sends.
func TestThinkingRequest(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     Options
		thinking string // the request's thinking field, "" for none
		beta     string
	}{
		{"off", Options{}, "", "context-1m-2025-08-07"},
		{"budget", Options{ThinkingBudget: 2048, MaxTokens: 8192}, `{"budget_tokens":2048,"type":"enabled"}`, "context-1m-2025-08-07"},
		{"adaptive", Options{AdaptiveThinking: true}, `{"type":"adaptive"}`, "context-1m-2025-08-07"},
		{"interleaved", Options{ThinkingBudget: 16000, MaxTokens: 8192, InterleavedThinking: true},
			`{"budget_tokens":16000,"type":"enabled"}`, "context-1m-2025-08-07,interleaved-thinking-2025-05-14"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newThinkingAPI(t, "thinking_answer.json")
			client := api.client(option.WithHeader("anthropic-beta", "context-1m-2025-08-07"))
			if _, err := New(client, &tc.opts).Generate(context.Background(), &llm.Request{Model: "m", Messages: []llm.Message{llm.UserMessage("hi")}}); err != nil {
				t.Fatal(err)
			}
			var req struct {
				Thinking json.RawMessage `json:"thinking"`
			}
			if err := json.Unmarshal(api.requests()[0], &req); err != nil {
				t.Fatal(err)
			}
			if got := string(req.Thinking); got != tc.thinking {
				t.Errorf("thinking = %s, want %s", got, tc.thinking)
			}
			api.mu.Lock()
			h := api.headers[0]
			api.mu.Unlock()
			if got := strings.Join(h.Values("anthropic-beta"), ";"); got != tc.beta {
				t.Errorf("anthropic-beta = %q, want %q", got, tc.beta)
			}
		})
	}
}

// The state keeps a reply's layout: thinking interleaved with text and
// calls goes back where it stood, and thinking shown as "omitted" (empty
// text, signature kept) is reasoning that is hidden. A message whose text
// was changed since keeps its thinking blocks, first and unchanged, then
// its text and calls.
func TestThinkingLayout(t *testing.T) {
	content := `[
		{"type":"thinking","thinking":"","signature":"sig-1"},
		{"type":"text","text":"First, "},
		{"type":"tool_use","id":"toolu_1","name":"a","input":{"x":1}},
		{"type":"redacted_thinking","data":"cmVkYWN0ZWQ="},
		{"type":"text","text":"then."},
		{"type":"tool_use","id":"toolu_2","name":"b","input":{}}
	]`
	var blocks []anthropic.ContentBlockUnion
	if err := json.Unmarshal([]byte(content), &blocks); err != nil {
		t.Fatal(err)
	}
	reasoning, state, err := replyState(blocks, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(reasoning) != 2 || !reasoning[0].Hidden || reasoning[0].Text != "" || !reasoning[1].Hidden {
		t.Fatalf("reasoning = %+v, want two hidden pieces", reasoning)
	}
	msg := llm.Message{Role: llm.RoleAssistant, Text: "First, then.", State: state, ToolCalls: []llm.ToolCall{
		{ID: "toolu_1", Name: "a", Arguments: json.RawMessage(`{"x":1}`)},
		{ID: "toolu_2", Name: "b", Arguments: json.RawMessage(`{}`)},
	}}
	send := func(msg llm.Message) []wireBlock {
		t.Helper()
		_, out, err := messages([]llm.Message{llm.UserMessage("go"), msg})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(out[1])
		if err != nil {
			t.Fatal(err)
		}
		var sent struct{ Content []wireBlock }
		if err := json.Unmarshal(b, &sent); err != nil {
			t.Fatal(err)
		}
		return sent.Content
	}
	var want []wireBlock
	if err := json.Unmarshal([]byte(content), &want); err != nil {
		t.Fatal(err)
	}
	assertSameTurn(t, send(msg), want)

	msg.Text = "Edited."
	assertSameTurn(t, send(msg), []wireBlock{want[0], want[3], {Type: "text", Text: "Edited."}, want[2], want[5]})

	msg.State = &llm.ProviderState{Provider: "anthropic", Data: []byte(`{"v":2,"blocks":[]}`)}
	if _, _, err := messages([]llm.Message{llm.UserMessage("go"), msg}); err == nil || !strings.Contains(err.Error(), "message 1: its anthropic state has version 2") {
		t.Fatalf("err = %v, want one naming message 1 and the state's version", err)
	}
}
