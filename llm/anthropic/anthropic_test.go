package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
)

// reply is one HTTP answer of the test server: a status, headers and a
// body file from testdata/ holding the API's wire JSON.
type reply struct {
	status int
	header map[string]string
	file   string
}

func ok(file string) reply { return reply{status: http.StatusOK, file: file} }

// server stands in for api.anthropic.com. It answers the n-th request with
// the n-th reply (the last one repeats) and records every request.
type server struct {
	t       *testing.T
	URL     string
	replies []reply

	mu      sync.Mutex
	bodies  [][]byte
	paths   []string
	headers []http.Header
}

func newServer(t *testing.T, replies ...reply) *server {
	t.Helper()
	s := &server{t: t, replies: replies}
	// Read every file up front so that a missing fixture fails the test
	// here rather than as a puzzling 500 later.
	bodies := make([][]byte, len(replies))
	for i, r := range replies {
		b, err := os.ReadFile(filepath.Join("testdata", r.file))
		if err != nil {
			t.Fatal(err)
		}
		bodies[i] = b
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		s.mu.Lock()
		n := len(s.bodies)
		s.bodies = append(s.bodies, body)
		s.paths = append(s.paths, req.Method+" "+req.URL.Path)
		s.headers = append(s.headers, req.Header.Clone())
		s.mu.Unlock()
		i := min(n, len(replies)-1)
		for k, v := range replies[i].header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_test")
		w.WriteHeader(replies[i].status)
		w.Write(bodies[i])
	}))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// requests returns the bodies received so far.
func (s *server) requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

// last returns the body of the last request, or nil.
func (s *server) last() []byte {
	r := s.requests()
	if len(r) == 0 {
		return nil
	}
	return r[len(r)-1]
}

// client builds a real SDK client aimed at the test server: no retries
// (the loop owns them) and nothing read from the environment.
func (s *server) client() anthropic.Client {
	return anthropic.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(s.URL),
		option.WithAPIKey("test"),
		option.WithMaxRetries(0),
	)
}

// caseReplies is the wire reply for each conformance case.
var caseReplies = map[llmtest.Case]reply{
	llmtest.CaseFinalAnswer:      ok("final_answer.json"),
	llmtest.CaseSingleCall:       ok("single_call.json"),
	llmtest.CaseParallelCalls:    ok("parallel_calls.json"),
	llmtest.CaseRateLimited:      {status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "2"}, file: "rate_limited.json"},
	llmtest.CaseServerError:      {status: http.StatusInternalServerError, file: "server_error.json"},
	llmtest.CaseUnauthorized:     {status: http.StatusUnauthorized, file: "unauthorized.json"},
	llmtest.CaseContextLength:    {status: http.StatusBadRequest, file: "context_length.json"},
	llmtest.CaseTruncated:        ok("truncated.json"),
	llmtest.CaseReasoningCall:    ok("reasoning_call.json"),
	llmtest.CaseInvalidArguments: {}, // Anthropic sends tool input as a JSON object
	// A stream ends with message_stop, after the stop reason.
	llmtest.CaseStreamWithoutFinishReason: {},
}

func TestConformance(t *testing.T) {
	llmtest.RunConformance(t, llmtest.Harness{
		NewModel: func(t *testing.T, c llmtest.Case) (llm.Model, func() []byte, bool) {
			r, known := caseReplies[c]
			if !known {
				t.Fatalf("no wire reply for case %s", c)
			}
			if r.file == "" {
				return nil, nil, true
			}
			s := newServer(t, r)
			return New(s.client(), nil), s.last, false
		},
		Results: toolResults,
	})
}

// toolResults reads, from a request body, each tool_result block's
// content keyed by its tool_use_id.
func toolResults(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("request body: %v\n%s", err, body)
	}
	got := map[string]string{}
	for _, m := range req.Messages {
		for _, raw := range m.Content {
			var b struct {
				Type      string `json:"type"`
				ToolUseID string `json:"tool_use_id"`
				Content   []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			}
			if err := json.Unmarshal(raw, &b); err != nil {
				t.Fatal(err)
			}
			if b.Type != "tool_result" {
				continue
			}
			var text strings.Builder
			for _, c := range b.Content {
				text.WriteString(c.Text)
			}
			got[b.ToolUseID] = text.String()
		}
	}
	return got
}

// weatherHistory is a finished tool round: two calls, one ok result and
// one error result.
func weatherHistory() []llm.Message {
	return []llm.Message{
		llm.SystemMessage("You answer weather questions."),
		llm.UserMessage("Weather in Oslo and Bergen?"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
			{ID: "toolu_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)},
			{ID: "toolu_b", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Bergen"}`)},
		}},
		llm.ToolMessage(llm.ToolResult{CallID: "toolu_a", Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":8}`)}),
		llm.ToolMessage(llm.ToolResult{CallID: "toolu_b", Name: "get_weather", Status: llm.StatusError, ErrorKind: llm.KindNotFound,
			Content: llm.ErrorContent(llm.KindNotFound, "no station in Bergen")}),
	}
}

func weatherTools() []llm.ToolDefinition {
	return []llm.ToolDefinition{
		{Name: "get_weather", Description: "current weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)},
		{Name: "get_time", Description: "local time", InputSchema: json.RawMessage(`{"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}`)},
	}
}

// assertJSON fails unless got and the golden file hold the same JSON value
// (key order and whitespace aside).
func assertJSON(t *testing.T, got []byte, golden string) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("testdata", golden))
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("request is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: %v", golden, err)
	}
	if !reflect.DeepEqual(g, w) {
		var pretty bytes.Buffer
		json.Indent(&pretty, got, "", "  ")
		t.Fatalf("request differs from testdata/%s; sent:\n%s", golden, pretty.String())
	}
}

// The request for a finished tool round: the system prompt in the system
// field, both results in one user message linked by tool_use_id, is_error
// on the failed one, the tools with their schemas.
func TestRequestToolRound(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	m := New(s.client(), &Options{MaxTokens: 1024})
	_, err := m.Generate(context.Background(), &llm.Request{Model: "claude-sonnet-4-6", Messages: weatherHistory(), Tools: weatherTools()})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	path, h := s.paths[0], s.headers[0]
	s.mu.Unlock()
	if path != "POST /v1/messages" {
		t.Fatalf("request went to %s", path)
	}
	// SDK v2 speaks API version 2026-10-21 (no sampling parameters) and
	// sends the key as a bearer token. A change here needs a look at the
	// package documentation.
	if v := h.Get("Anthropic-Version"); v != "2026-10-21" {
		t.Errorf("anthropic-version = %q", v)
	}
	if a := h.Get("Authorization"); a != "Bearer test" {
		t.Errorf("authorization = %q", a)
	}
	assertJSON(t, s.last(), "request_tool_round.json")
}

// Options reach the wire; broken arguments go out as {}; a result with no
// content still tells the model why; user text sent after the results
// joins their message, behind them; system messages anywhere go to the
// system field; consecutive user messages merge.
func TestRequestEdgeCases(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	m := New(s.client(), &Options{
		Model:                  "claude-haiku-4-5",
		MaxTokens:              512,
		DisableParallelToolUse: true,
		PromptCaching:          true,
		StopSequences:          []string{"END"},
		UserID:                 "user-7f3a",
	})
	history := []llm.Message{
		llm.SystemMessage("Be brief."),
		llm.UserMessage("Hi."),
		llm.UserMessage(""),
		llm.UserMessage("Weather in Oslo?"),
		{Role: llm.RoleAssistant, Text: "Checking.", ToolCalls: []llm.ToolCall{
			{ID: "toolu_x", Name: "get_weather", Arguments: json.RawMessage(`{"city": `)},
			{ID: "toolu_y", Name: "get_time", Arguments: json.RawMessage(` {"zone": "Europe/Oslo"} `)},
		}},
		llm.ToolMessage(llm.ToolResult{CallID: "toolu_x", Name: "get_weather", Status: llm.StatusError, ErrorKind: llm.KindInvalidArguments,
			Content: llm.ErrorContent(llm.KindInvalidArguments, "arguments are not valid JSON")}),
		llm.SystemMessage("Answer in Norwegian."),
		llm.UserMessage("Never mind the time."),
		llm.ToolMessage(llm.ToolResult{CallID: "toolu_y", Name: "get_time", Status: llm.StatusSkipped}),
	}
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: history, Tools: weatherTools()[:1]}); err != nil {
		t.Fatal(err)
	}
	assertJSON(t, s.last(), "request_edge_cases.json")
}

// Without tools there is no tools array and no tool_choice, even when
// parallel tool use is disabled.
func TestRequestWithoutTools(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	m := New(s.client(), &Options{Model: "claude-haiku-4-5", DisableParallelToolUse: true})
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("Hi.")}}); err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(s.last(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tools", "tool_choice", "system", "cache_control", "metadata", "temperature"} {
		if _, ok := got[k]; ok {
			t.Errorf("request carries %q: %s", k, got[k])
		}
	}
	if string(got["max_tokens"]) != "4096" {
		t.Errorf("max_tokens = %s, want the default 4096", got["max_tokens"])
	}
}

func TestRequestNeedsModel(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	_, err := New(s.client(), nil).Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("Hi.")}})
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindBadRequest || me.Retryable {
		t.Fatalf("err = %v, want a non-retryable bad request", err)
	}
	if len(s.requests()) != 0 {
		t.Fatal("a request without a model reached the server")
	}
}

func TestRequestRejectsNonObjectSchema(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	_, err := New(s.client(), &Options{Model: "m"}).Generate(context.Background(), &llm.Request{
		Messages: []llm.Message{llm.UserMessage("Hi.")},
		Tools:    []llm.ToolDefinition{{Name: "echo", InputSchema: json.RawMessage(`{"type":"string"}`)}},
	})
	if llm.IsRetryable(err) || err == nil || !strings.Contains(err.Error(), "echo") {
		t.Fatalf("err = %v, want a non-retryable error naming the tool", err)
	}
}

// Tool input reaches llm.ToolCall byte for byte, spacing included.
func TestArgumentsKeptAsSent(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "single_call.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, ok("single_call.json"))
	resp, err := New(s.client(), &Options{Model: "m"}).Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("Oslo?")}})
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Message.ToolCalls
	if len(c) != 1 || c[0].ID != "call_1" || c[0].Name != "get_weather" {
		t.Fatalf("calls = %+v", c)
	}
	if want := `{"city": "Oslo"}`; string(c[0].Arguments) != want || !bytes.Contains(raw, []byte(want)) {
		t.Fatalf("arguments = %s, want %s as on the wire", c[0].Arguments, want)
	}
	if resp.Message.Text != "I'll look up the current weather in Oslo." || resp.FinishReason != "tool_use" {
		t.Fatalf("response = %+v", resp)
	}
}

// Text blocks are joined as they come (a cited answer arrives in pieces);
// thinking blocks are dropped.
func TestTextBlocksJoined(t *testing.T) {
	s := newServer(t, ok("cited_answer.json"))
	resp, err := New(s.client(), &Options{Model: "m"}).Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("Oslo?")}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "According to the bulletin, Oslo had 12 °C at noon."; resp.Message.Text != want || len(resp.Message.ToolCalls) != 0 {
		t.Fatalf("message = %+v, want text %q", resp.Message, want)
	}
}

// Usage counts the whole prompt: uncached input, cache reads and cache
// writes (Anthropic's input_tokens counts neither); cached input is the
// cache reads, cache-write tokens the cache_creation_input_tokens.
func TestUsageWithCache(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	resp, err := New(s.client(), &Options{Model: "m"}).Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("Oslo?")}})
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Usage{InputTokens: 60 + 30 + 10, OutputTokens: 20, CachedInputTokens: 30, CacheWriteTokens: 10, ReasoningTokens: 5}
	if resp.Usage != want {
		t.Fatalf("usage = %+v, want %+v", resp.Usage, want)
	}
	if resp.ID != "msg_01XFDUDYJgAACzvnptvVoYEL" || resp.Model != "claude-sonnet-4-6" || resp.FinishReason != "end_turn" {
		t.Fatalf("response = %+v", resp)
	}
}

func TestRefusal(t *testing.T) {
	s := newServer(t, ok("refusal.json"))
	resp, err := New(s.client(), &Options{Model: "m"}).Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("...")}})
	if resp != nil {
		t.Fatalf("response = %+v, want none", resp)
	}
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindRefusal || me.Retryable {
		t.Fatalf("err = %v, want a non-retryable refusal", err)
	}
	for _, want := range []string{"refusal", "cyber", "declined"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		name      string
		reply     reply
		kind      llm.ErrorKind
		retryable bool
		after     time.Duration
	}{
		{"overloaded", reply{status: 529, file: "overloaded.json"}, llm.KindUnavailable, true, 0},
		{"overloaded with retry-after", reply{status: 529, header: map[string]string{"Retry-After": "7"}, file: "overloaded.json"}, llm.KindUnavailable, true, 7 * time.Second},
		{"rate limited", reply{status: 429, header: map[string]string{"Retry-After": "2"}, file: "rate_limited.json"}, llm.KindRateLimited, true, 2 * time.Second},
		{"spend limit", reply{status: 429, file: "spend_limit.json"}, llm.KindRateLimited, false, 0},
		{"server says no retry", reply{status: 500, header: map[string]string{"X-Should-Retry": "false"}, file: "server_error.json"}, llm.KindUnavailable, false, 0},
		{"server error", reply{status: 500, file: "server_error.json"}, llm.KindUnavailable, true, 0},
		{"unauthorized", reply{status: 401, file: "unauthorized.json"}, llm.KindAuthentication, false, 0},
		{"unknown model", reply{status: 404, file: "not_found.json"}, llm.KindUnknownModel, false, 0},
		{"prompt too long", reply{status: 400, file: "context_length.json"}, llm.KindContextLengthExceeded, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, c.reply)
			_, err := New(s.client(), &Options{Model: "m"}).Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("Hi.")}})
			var me *llm.Error
			if !errors.As(err, &me) {
				t.Fatalf("err = %v, want an *llm.Error", err)
			}
			if me.Kind != c.kind || me.Retryable != c.retryable || me.RetryAfter != c.after || me.StatusCode != c.reply.status {
				t.Fatalf("got kind %s retryable %v after %v status %d, want %s %v %v %d (%v)",
					me.Kind, me.Retryable, me.RetryAfter, me.StatusCode, c.kind, c.retryable, c.after, c.reply.status, err)
			}
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("the SDK's error is not kept as the cause: %v", err)
			}
			if len(s.requests()) != 1 {
				t.Fatalf("%d requests, want 1: the SDK must not retry on its own", len(s.requests()))
			}
		})
	}
}

// A connection failure may pass; the caller's cancellation is returned as
// is, never as a retryable model failure.
func TestTransportErrors(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	client := s.client()
	m := New(anthropic.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL("http://127.0.0.1:1"), // nothing listens on port 1
		option.WithAPIKey("test"),
		option.WithMaxRetries(0),
	), &Options{Model: "m"})
	_, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("Hi.")}})
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindUnavailable || !me.Retryable {
		t.Fatalf("connection refused: err = %v, want a retryable unavailable error", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = New(client, &Options{Model: "m"}).Generate(ctx, &llm.Request{Messages: []llm.Message{llm.UserMessage("Hi.")}})
	if !errors.Is(err, context.Canceled) || llm.IsRetryable(err) {
		t.Fatalf("canceled: err = %v, want context.Canceled, not retryable", err)
	}
}

// The SDK refuses, before sending, a non-streaming request whose
// max_tokens implies a long generation; that is a configuration error.
func TestLargeMaxTokensNeedsTimeout(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	req := &llm.Request{Messages: []llm.Message{llm.UserMessage("Hi.")}}
	_, err := New(s.client(), &Options{Model: "m", MaxTokens: 64000}).Generate(context.Background(), req)
	if err == nil || llm.IsRetryable(err) {
		t.Fatalf("err = %v, want a non-retryable error", err)
	}
	m := New(s.client(), &Options{Model: "m", MaxTokens: 64000, RequestOptions: []option.RequestOption{option.WithRequestTimeout(time.Minute)}})
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatalf("with a request timeout: %v", err)
	}
}

// Generate may be called from concurrent runs.
func TestConcurrentGenerate(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	m := New(s.client(), &Options{Model: "m", RequestOptions: []option.RequestOption{option.WithHeader("X-Test", "1")}})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := m.Generate(context.Background(), &llm.Request{Messages: weatherHistory(), Tools: weatherTools()}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
