package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/openai"
)

// The exact request the SDK sends: messages in order, assistant text and
// tool calls together, every result linked by tool_call_id (not by
// position: the results here come out of call order), arguments byte for
// byte, the tools array with each schema verbatim, and the options.
func TestChatRequestJSON(t *testing.T) {
	s := newServer(t, "chat", ok("final_answer.json"))
	m := openai.NewChat(s.client(), &openai.ChatOptions{
		Model:             "gpt-4.1",
		MaxOutputTokens:   512,
		Temperature:       new(0.2),
		ParallelToolCalls: new(false),
		PromptCacheKey:    "weather-bot",
	})
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: history(), Tools: weatherTools(), Step: 3}); err != nil {
		t.Fatal(err)
	}
	if s.paths[0] != "/chat/completions" {
		t.Errorf("path = %s", s.paths[0])
	}
	if got := s.headers[0].Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}
	assertJSON(t, s.last(), "chat", "request.json")
}

// Without tools, parallel_tool_calls is left out (OpenAI rejects it), and
// the request's model wins over the default.
func TestChatRequestWithoutTools(t *testing.T) {
	s := newServer(t, "chat", ok("final_answer.json"))
	m := openai.NewChat(s.client(), &openai.ChatOptions{Model: "default-model", ParallelToolCalls: new(true), MaxOutputTokens: 64, UseMaxTokens: true})
	if _, err := m.Generate(context.Background(), &llm.Request{Model: "gpt-4.1-mini", Messages: []llm.Message{llm.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(s.last(), &got)
	if _, ok := got["parallel_tool_calls"]; ok {
		t.Error("parallel_tool_calls sent without tools")
	}
	if _, ok := got["tools"]; ok {
		t.Error("an empty tools array was sent")
	}
	if got["model"] != "gpt-4.1-mini" || got["max_tokens"] != 64.0 || got["max_completion_tokens"] != nil {
		t.Errorf("request = %s", s.last())
	}
}

func TestChatUsageAndIDs(t *testing.T) {
	s := newServer(t, "chat", ok("final_answer.json"))
	resp, err := openai.NewChat(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: history()})
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 30, ReasoningTokens: 5}
	if resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	if resp.ID != "chatcmpl-BxkQ3pZLrv1ZL9y4Xh2cVt6mNqD0a" || resp.Model != "gpt-4.1-2025-04-14" || resp.FinishReason != "stop" {
		t.Errorf("id %q, model %q, finish %q", resp.ID, resp.Model, resp.FinishReason)
	}
}

func TestChatToolCalls(t *testing.T) {
	s := newServer(t, "chat", ok("parallel_calls.json"))
	resp, err := openai.NewChat(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: history()})
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != 2 || calls[0].ID != "call_1" || calls[1].ID != "call_2" ||
		string(calls[0].Arguments) != `{"city":"Oslo"}` || string(calls[1].Arguments) != `{"zone":"Europe/Oslo"}` {
		t.Fatalf("calls = %+v", calls)
	}
	if resp.FinishReason != "tool_calls" {
		t.Errorf("finish reason %q", resp.FinishReason)
	}
}

func TestChatInvalidArgumentsKeptRaw(t *testing.T) {
	s := newServer(t, "chat", ok("invalid_arguments.json"))
	resp, err := openai.NewChat(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: history()})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Message.ToolCalls[0].Arguments); got != `{"city":` {
		t.Fatalf("arguments = %q, want the cut-off string as sent", got)
	}
	if resp.FinishReason != "length" {
		t.Errorf("finish reason %q", resp.FinishReason)
	}
}

func TestChatRefusal(t *testing.T) {
	s := newServer(t, "chat", ok("refusal.json"))
	_, err := openai.NewChat(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-4o", Messages: history()})
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindRefusal || me.Retryable {
		t.Fatalf("err = %v, want a non-retryable refusal", err)
	}
	if !strings.Contains(err.Error(), "I'm sorry, I can't help with that request.") {
		t.Errorf("the refusal text is lost: %v", err)
	}
}

// A compatible server's reply without a completion ID, usage or call IDs,
// with arguments as an object and as an empty string, and finish_reason
// "stop" beside tool calls.
func TestChatCompatibleQuirks(t *testing.T) {
	s := newServer(t, "chat", ok("compatible_quirks.json"))
	req := &llm.Request{Model: "qwen2.5:7b", Messages: history(), Tools: weatherTools(), Step: 3}
	m := openai.NewChat(s.client(), nil)
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != 2 {
		t.Fatalf("calls = %+v", calls)
	}
	for i, c := range calls {
		if !strings.HasPrefix(c.ID, openai.GeneratedIDPrefix) {
			t.Errorf("call %d: ID %q is not a generated one", i, c.ID)
		}
	}
	if calls[0].ID == calls[1].ID {
		t.Errorf("generated IDs collide: %s", calls[0].ID)
	}
	if string(calls[0].Arguments) != `{"city": "Oslo"}` || string(calls[1].Arguments) != `{}` {
		t.Errorf("arguments = %s, %s", calls[0].Arguments, calls[1].Arguments)
	}
	if resp.Usage != (llm.Usage{}) || resp.ID != "" || resp.Model != "qwen2.5:7b" {
		t.Errorf("response = %+v", resp)
	}
	// The same request and reply give the same IDs: a replayed run
	// matches its log.
	again, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again.Message.ToolCalls[0].ID != calls[0].ID || again.Message.ToolCalls[1].ID != calls[1].ID {
		t.Errorf("generated IDs are not stable: %s, %s", again.Message.ToolCalls[0].ID, again.Message.ToolCalls[1].ID)
	}
	// A later turn of the same run gets different IDs for the same calls.
	later := *req
	later.Step, later.Messages = 5, append(history(), llm.UserMessage("again"))
	next, err := m.Generate(context.Background(), &later)
	if err != nil {
		t.Fatal(err)
	}
	if next.Message.ToolCalls[0].ID == calls[0].ID {
		t.Errorf("a later turn reused generated ID %s", calls[0].ID)
	}
}

func TestChatErrorsKeepSDKError(t *testing.T) {
	s := newServer(t, "chat", caseReplies["context_length"])
	_, err := openai.NewChat(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: history()})
	var me *llm.Error
	var ae *sdk.Error
	if !errors.As(err, &me) || me.Kind != llm.KindContextLengthExceeded || me.Retryable || me.StatusCode != http.StatusBadRequest {
		t.Fatalf("err = %v", err)
	}
	if !errors.As(err, &ae) || ae.Code != "context_length_exceeded" {
		t.Fatalf("the SDK's error is not reachable: %v", err)
	}
	if !strings.Contains(err.Error(), "maximum context length is 128000 tokens") {
		t.Errorf("the provider's message is lost: %v", err)
	}
}

// A 401's message can echo part of the key: it stays out of the error text.
func TestChatUnauthorizedHidesMessage(t *testing.T) {
	s := newServer(t, "chat", caseReplies["unauthorized"])
	_, err := openai.NewChat(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: history()})
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindAuthentication || me.Retryable {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "sk-proj") || !strings.Contains(err.Error(), "invalid_api_key") {
		t.Errorf("error text = %q", err)
	}
}

func TestChatNoModel(t *testing.T) {
	s := newServer(t, "chat", ok("final_answer.json"))
	_, err := openai.NewChat(s.client(), nil).Generate(context.Background(), &llm.Request{Messages: history()})
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindBadRequest || s.count() != 0 {
		t.Fatalf("err = %v after %d requests", err, s.count())
	}
}

func TestChatConnectionRefusedIsRetryable(t *testing.T) {
	s := newServer(t, "chat", ok("final_answer.json"))
	c := s.client()
	s.Close()
	_, err := openai.NewChat(c, nil).Generate(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: history()})
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindUnavailable || !me.Retryable {
		t.Fatalf("err = %v", err)
	}
}

func TestChatCanceledContext(t *testing.T) {
	s := newServer(t, "chat", ok("final_answer.json"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := openai.NewChat(s.client(), nil).Generate(ctx, &llm.Request{Model: "gpt-4.1", Messages: history()})
	if !errors.Is(err, context.Canceled) || llm.IsRetryable(err) {
		t.Fatalf("err = %v", err)
	}
}

// Error bodies that are not OpenAI's shape are still classified.
func TestChatCompatibleErrorBodies(t *testing.T) {
	for _, c := range []struct {
		name, body string
		status     int
		kind       llm.ErrorKind
		mention    string
	}{
		{"ollama unknown model", `{"error":"model \"llama9\" not found, try pulling it first"}`, 404, llm.KindUnknownModel, "try pulling it first"},
		{"vllm context", `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`, 400, llm.KindContextLengthExceeded, "4096"},
		{"llama.cpp context", `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}`, 400, llm.KindContextLengthExceeded, "context size"},
		{"plain text overload", `upstream connect error or disconnect/reset before headers`, 503, llm.KindUnavailable, "503"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := rawServer(t, c.status, c.body)
			_, err := openai.NewCompatible(srv.URL, "", nil).Generate(context.Background(), &llm.Request{Model: "m", Messages: history()})
			var me *llm.Error
			if !errors.As(err, &me) || me.Kind != c.kind || me.StatusCode != c.status {
				t.Fatalf("err = %v", err)
			}
			if !strings.Contains(err.Error(), c.mention) {
				t.Errorf("error %q does not mention %q", err, c.mention)
			}
		})
	}
}

// NewCompatible builds its own client: the base URL and key it is given,
// a placeholder key when there is none, no OPENAI_* variables, no SDK
// retries.
func TestNewCompatible(t *testing.T) {
	t.Setenv("OPENAI_ORG_ID", "org-should-not-leak")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/wrong")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Leak: yes")
	s := newServer(t, "chat", caseReplies["server_error"])
	m := openai.NewCompatible(s.URL+"/v1", "", &openai.ChatOptions{Model: "llama3.2"})
	_, err := m.Generate(context.Background(), &llm.Request{Messages: history()})
	if !llm.IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable 500", err)
	}
	if s.count() != 1 {
		t.Errorf("%d requests: the client retried on its own", s.count())
	}
	h := s.headers[0]
	if s.paths[0] != "/v1/chat/completions" || h.Get("Authorization") != "Bearer unused" ||
		h.Get("OpenAI-Organization") != "" || h.Get("X-Leak") != "" {
		t.Errorf("path %s, headers %v", s.paths[0], h)
	}
}

func rawServer(t *testing.T, status int, body string) *server {
	t.Helper()
	s := &server{}
	s.Server = newRawHTTPServer(status, body)
	t.Cleanup(s.Close)
	return s
}

// Options are copied: changing the caller's values later changes nothing.
func TestChatOptionsCopied(t *testing.T) {
	s := newServer(t, "chat", ok("final_answer.json"))
	temp := 0.5
	opts := &openai.ChatOptions{Model: "gpt-4.1", Temperature: &temp, ServiceTier: "flex"}
	m := openai.NewChat(s.client(), opts)
	temp, opts.Model = 1.5, "changed"
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: history()}); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(s.last(), &got)
	if got["temperature"] != 0.5 || got["model"] != "gpt-4.1" || got["service_tier"] != "flex" {
		t.Errorf("request = %s", s.last())
	}
}

// A result without content still tells the model how the call ended.
func TestChatEmptyResultContent(t *testing.T) {
	s := newServer(t, "chat", ok("final_answer.json"))
	msgs := []llm.Message{
		llm.UserMessage("Refund A100 and A200"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
			{ID: "call_x", Name: "refund", Arguments: json.RawMessage(`{"order":"A100"}`)},
			{ID: "call_y", Name: "refund", Arguments: nil},
		}},
		llm.ToolMessage(llm.ToolResult{CallID: "call_x", Name: "refund", Status: llm.StatusOK}),
		llm.ToolMessage(llm.ToolResult{CallID: "call_y", Name: "refund", Status: llm.StatusSkipped, ErrorKind: llm.KindRunStopped}),
	}
	if _, err := openai.NewChat(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	got := chatResults(t, s.last())
	if got["call_x"] != "{}" || !strings.Contains(got["call_y"], `"kind":"run_stopped"`) {
		t.Errorf("results = %v", got)
	}
	if !strings.Contains(string(s.last()), `"arguments":"{}"`) {
		t.Errorf("a call without arguments should be sent with {}: %s", s.last())
	}
}

func TestChatBadSchema(t *testing.T) {
	s := newServer(t, "chat", ok("final_answer.json"))
	_, err := openai.NewChat(s.client(), nil).Generate(context.Background(), &llm.Request{
		Model: "gpt-4.1", Messages: history(),
		Tools: []llm.ToolDefinition{{Name: "broken", InputSchema: json.RawMessage(`["not", "an", "object"]`)}},
	})
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindBadRequest || s.count() != 0 {
		t.Fatalf("err = %v after %d requests", err, s.count())
	}
}

// Chat Completions has no place for any provider's state: the request is
// the one the history without state gives, and the response counts what
// was left out, on messages and on calls, so that the run's log says so.
func TestChatDropsProviderState(t *testing.T) {
	with := history()
	with[2].State = &llm.ProviderState{Provider: openai.ProviderResponses, Data: []byte(`{"v":1,"items":[]}`)}
	with[2].Reasoning = []llm.Reasoning{{Provider: openai.ProviderResponses, Hidden: true}}
	with[2].ToolCalls = append([]llm.ToolCall(nil), with[2].ToolCalls...)
	with[2].ToolCalls[1].State = &llm.ProviderState{Provider: "gemini", Data: []byte("sig")}
	with[5].State = &llm.ProviderState{Provider: "anthropic", Data: []byte(`[{"type":"thinking"}]`)}

	s := newServer(t, "chat", ok("final_answer.json"))
	m := openai.NewChat(s.client(), nil)
	resp, err := m.Generate(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: with, Tools: weatherTools()})
	if err != nil {
		t.Fatal(err)
	}
	if resp.DroppedState != 3 {
		t.Errorf("dropped %d, want 3", resp.DroppedState)
	}
	plain, err := m.Generate(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: history(), Tools: weatherTools()})
	if err != nil {
		t.Fatal(err)
	}
	if plain.DroppedState != 0 {
		t.Errorf("dropped %d from a history without state", plain.DroppedState)
	}
	if string(s.request(0)) != string(s.request(1)) {
		t.Errorf("state changed the request:\n%s\n%s", s.request(0), s.request(1))
	}
}
