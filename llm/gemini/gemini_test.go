package gemini_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/gemini"
)

// wireHistory exercises every mapping rule: two system messages (one in
// the middle), an assistant turn with text and three calls (one whose
// stored arguments are not JSON), an ok, an error and a skipped result,
// and a user message after the results.
func wireHistory() *llm.Request {
	return &llm.Request{
		Messages: []llm.Message{
			llm.SystemMessage("You answer weather questions."),
			llm.UserMessage("Weather in Oslo and Bergen? And the time in Oslo?"),
			{Role: llm.RoleAssistant, Text: "Let me check.", ToolCalls: []llm.ToolCall{
				{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)},
				{ID: "call_b", Name: "get_weather", Arguments: json.RawMessage(`{"city":`)},
				{ID: "call_c", Name: "get_time", Arguments: json.RawMessage(`{"zone":"Europe/Oslo"}`)},
			}},
			llm.ToolMessage(llm.ToolResult{CallID: "call_a", Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":8}`)}),
			llm.ToolMessage(llm.ToolResult{CallID: "call_b", Name: "get_weather", Status: llm.StatusError, ErrorKind: llm.KindInvalidArguments,
				Content: llm.ErrorContent(llm.KindInvalidArguments, "arguments are not valid JSON")}),
			llm.ToolMessage(llm.ToolResult{CallID: "call_c", Name: "get_time", Status: llm.StatusSkipped, ErrorKind: llm.KindRunStopped,
				Content: llm.ErrorContent(llm.KindRunStopped, "not run: the run stopped")}),
			llm.SystemMessage("Answer in one sentence."),
			llm.UserMessage("Bergen is spelled B-e-r-g-e-n."),
		},
		Tools: []llm.ToolDefinition{
			{Name: "get_weather", Description: "current weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
			{Name: "get_time", Description: "local time", InputSchema: json.RawMessage(`{"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}`)},
		},
		Step: 2,
	}
}

func TestRequestWire(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	temp := float32(0.2)
	m := s.model(t, &gemini.Options{
		Model:           "gemini-2.5-flash",
		MaxOutputTokens: 512,
		Temperature:     &temp,
		ToolMode:        genai.FunctionCallingConfigModeAuto,
	})
	if _, err := m.Generate(context.Background(), wireHistory()); err != nil {
		t.Fatal(err)
	}
	_, paths := s.requests()
	if len(paths) != 1 || paths[0] != "/v1beta/models/gemini-2.5-flash:generateContent" {
		t.Fatalf("paths = %v, want Options.Model in the path", paths)
	}
	assertJSON(t, s.last(), fixture(t, "request_wire.json"))
}

func TestRequestResultsShareOneContent(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	if _, err := s.model(t, &gemini.Options{Model: "gemini-2.5-flash"}).Generate(context.Background(), wireHistory()); err != nil {
		t.Fatal(err)
	}
	req := decodeRequest(t, s.last())
	var roles []string
	for _, c := range req.Contents {
		roles = append(roles, c.Role)
	}
	if want := []string{"user", "model", "user", "user"}; !reflect.DeepEqual(roles, want) {
		t.Fatalf("content roles = %v, want %v", roles, want)
	}
	// Each functionResponse names the call it answers, by ID and name.
	calls := map[string]string{}
	for _, p := range req.Contents[1].Parts {
		if p.FunctionCall != nil {
			calls[p.FunctionCall.ID] = p.FunctionCall.Name
		}
	}
	results := req.Contents[2].Parts
	if len(results) != 3 {
		t.Fatalf("the turn's results went in %d parts of one content, want 3", len(results))
	}
	for _, p := range results {
		fr := p.FunctionResponse
		if fr == nil || calls[fr.ID] != fr.Name {
			t.Fatalf("result %+v does not name a call of the previous turn %v", fr, calls)
		}
	}
}

func TestRequestModelOverridesOption(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	m := s.model(t, &gemini.Options{Model: "gemini-2.5-flash"})
	req := wireHistory()
	req.Model = "gemini-2.5-pro"
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, paths := s.requests(); paths[0] != "/v1beta/models/gemini-2.5-pro:generateContent" {
		t.Fatalf("path = %s, want the request's model", paths[0])
	}
}

func TestRequestNeedsAModel(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	_, err := s.model(t, nil).Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}})
	assertKind(t, err, llm.KindBadRequest, false)
	if b := s.last(); b != nil {
		t.Fatalf("a request was sent: %s", b)
	}
}

func TestRequestInvalidSchema(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	req := &llm.Request{Model: "gemini-2.5-flash", Messages: []llm.Message{llm.UserMessage("hi")},
		Tools: []llm.ToolDefinition{{Name: "broken", InputSchema: json.RawMessage(`{"type":`)}}}
	_, err := s.model(t, nil).Generate(context.Background(), req)
	assertKind(t, err, llm.KindBadRequest, false)
	if !strings.Contains(err.Error(), "broken") {
		t.Fatalf("error %q should name the tool", err)
	}
}

func TestOptionsConfigureRunsLast(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	m := s.model(t, &gemini.Options{
		Model:           "gemini-2.5-flash",
		MaxOutputTokens: 100,
		StopSequences:   []string{"END"},
		ThinkingBudget:  genai.Ptr[int32](0),
		Configure: func(c *genai.GenerateContentConfig) {
			c.MaxOutputTokens = 64
			c.CachedContent = "cachedContents/abc"
		},
	})
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	var body struct {
		CachedContent    string `json:"cachedContent"`
		GenerationConfig struct {
			MaxOutputTokens int            `json:"maxOutputTokens"`
			StopSequences   []string       `json:"stopSequences"`
			ThinkingConfig  map[string]any `json:"thinkingConfig"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(s.last(), &body); err != nil {
		t.Fatal(err)
	}
	g := body.GenerationConfig
	if body.CachedContent != "cachedContents/abc" || g.MaxOutputTokens != 64 || !reflect.DeepEqual(g.StopSequences, []string{"END"}) ||
		g.ThinkingConfig["thinkingBudget"] != float64(0) {
		t.Fatalf("request = %s", s.last())
	}
}

func TestResponseKeepsGeminiCallID(t *testing.T) {
	s := newServer(t, ok("single_call.json"))
	resp, err := s.model(t, nil).Generate(context.Background(), callRequest(1))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != 1 || calls[0].ID != "call_1" || calls[0].Name != "get_weather" || string(calls[0].Arguments) != `{"city":"Oslo"}` {
		t.Fatalf("calls = %+v", calls)
	}
	if resp.ID != "u58daPHnNtPUz7IPn9aD0Ac" || resp.Model != "gemini-3-flash-preview" || resp.FinishReason != "STOP" {
		t.Fatalf("response = %+v", resp)
	}
}

func TestResponseGeneratedIDs(t *testing.T) {
	s := newServer(t, ok("parallel_calls.json"))
	m := s.model(t, nil)
	gen := func(step int) []llm.ToolCall {
		t.Helper()
		resp, err := m.Generate(context.Background(), callRequest(step))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Message.ToolCalls
	}
	first, again, later := gen(1), gen(1), gen(2)
	if len(first) != 2 {
		t.Fatalf("calls = %+v", first)
	}
	for _, c := range first {
		if !strings.HasPrefix(c.ID, "toolloop_") || len(c.ID) != len("toolloop_")+16 {
			t.Fatalf("generated ID %q, want toolloop_ and 16 hex digits", c.ID)
		}
	}
	if first[0].ID == first[1].ID {
		t.Fatalf("two calls of one response share ID %q", first[0].ID)
	}
	if first[0].ID != again[0].ID || first[1].ID != again[1].ID {
		t.Fatalf("IDs are not stable: %s,%s then %s,%s", first[0].ID, first[1].ID, again[0].ID, again[1].ID)
	}
	if later[0].ID == first[0].ID || later[1].ID == first[1].ID {
		t.Fatalf("the same reply at another step reused IDs %s, %s", later[0].ID, later[1].ID)
	}
}

func TestResponseUsage(t *testing.T) {
	for _, c := range []struct {
		file string
		want llm.Usage
	}{
		// candidates 15 + thoughts 5 billed as output.
		{"final_answer.json", llm.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 30, ReasoningTokens: 5}},
		{"thought_summary.json", llm.Usage{InputTokens: 120, OutputTokens: 67, ReasoningTokens: 58}},
		{"parallel_calls.json", llm.Usage{InputTokens: 74, OutputTokens: 31}},
	} {
		t.Run(c.file, func(t *testing.T) {
			s := newServer(t, ok(c.file))
			resp, err := s.model(t, nil).Generate(context.Background(), callRequest(1))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != c.want {
				t.Fatalf("usage = %+v, want %+v", resp.Usage, c.want)
			}
		})
	}
}

func TestResponseSkipsThoughts(t *testing.T) {
	s := newServer(t, ok("thought_summary.json"))
	resp, err := s.model(t, nil).Generate(context.Background(), callRequest(1))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Text != "It is 12 °C in Oslo." {
		t.Fatalf("text = %q, want the answer without the thought summary", resp.Message.Text)
	}
}

func TestResponseRefusals(t *testing.T) {
	for _, c := range []struct{ file, mention string }{
		{"safety.json", "SAFETY"},
		{"prompt_blocked.json", "PROHIBITED_CONTENT"},
	} {
		t.Run(c.file, func(t *testing.T) {
			s := newServer(t, ok(c.file))
			_, err := s.model(t, nil).Generate(context.Background(), callRequest(1))
			assertKind(t, err, llm.KindRefusal, false)
			if !strings.Contains(err.Error(), c.mention) {
				t.Fatalf("error %q should name %s", err, c.mention)
			}
		})
	}
}

func TestResponseMalformedCallIsRetryable(t *testing.T) {
	s := newServer(t, ok("malformed_call.json"))
	_, err := s.model(t, nil).Generate(context.Background(), callRequest(1))
	assertKind(t, err, llm.KindBadRequest, true)
	if !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("error = %v", err)
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		name       string
		rp         reply
		kind       llm.ErrorKind
		retryable  bool
		retryAfter time.Duration
	}{
		{"rate limited", reply{http.StatusTooManyRequests, "rate_limited.json"}, llm.KindRateLimited, true, 2 * time.Second},
		{"internal", reply{http.StatusInternalServerError, "server_error.json"}, llm.KindUnavailable, true, 0},
		{"overloaded", reply{http.StatusServiceUnavailable, "overloaded.json"}, llm.KindUnavailable, true, 0},
		{"unauthenticated", reply{http.StatusUnauthorized, "unauthorized.json"}, llm.KindAuthentication, false, 0},
		// Gemini answers a bad API key with 400, not 401.
		{"bad API key", reply{http.StatusBadRequest, "api_key_invalid.json"}, llm.KindAuthentication, false, 0},
		{"unknown model", reply{http.StatusNotFound, "model_not_found.json"}, llm.KindUnknownModel, false, 0},
		{"context length", reply{http.StatusBadRequest, "context_length.json"}, llm.KindContextLengthExceeded, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, c.rp)
			_, err := s.model(t, nil).Generate(context.Background(), callRequest(1))
			me := assertKind(t, err, c.kind, c.retryable)
			if me.StatusCode != c.rp.status || me.RetryAfter != c.retryAfter {
				t.Fatalf("status %d, RetryAfter %v; want %d, %v", me.StatusCode, me.RetryAfter, c.rp.status, c.retryAfter)
			}
			var apiErr genai.APIError
			if !errors.As(err, &apiErr) || apiErr.Code != c.rp.status {
				t.Fatalf("the SDK's APIError is not kept as the cause: %v", err)
			}
		})
	}
}

func TestTransportErrorIsRetryable(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	m := s.model(t, nil)
	s.srv.Close()
	_, err := m.Generate(context.Background(), callRequest(1))
	assertKind(t, err, llm.KindUnavailable, true)
}

func TestCanceledContextIsNotAModelError(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.model(t, nil).Generate(ctx, callRequest(1))
	var me *llm.Error
	if !errors.Is(err, context.Canceled) || errors.As(err, &me) {
		t.Fatalf("err = %v, want the context's cancellation", err)
	}
}

func TestThoughtSignatureReplayed(t *testing.T) {
	s := newServer(t, ok("single_call.json"), ok("final_answer.json"))
	m := s.model(t, &gemini.Options{Model: "gemini-3-flash-preview"})
	req := callRequest(1)
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	history := append(req.Messages, resp.Message, llm.ToolMessage(llm.ToolResult{
		CallID: "call_1", Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":12}`)}))
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: history, Tools: req.Tools, Step: 2}); err != nil {
		t.Fatal(err)
	}
	want, _ := base64.StdEncoding.DecodeString("CiQBVKhc7hTmEbDJpZ4aQ7fXl0nOzLhY0x1c3VmHc2lnbmF0dXJl")
	part := decodeRequest(t, s.last()).Contents[1].Parts[0]
	if part.FunctionCall == nil || part.FunctionCall.ID != "call_1" || !bytes.Equal(part.ThoughtSignature, want) {
		t.Fatalf("replayed call %+v carries signature %q, want Gemini's", part.FunctionCall, part.ThoughtSignature)
	}
}

func TestThoughtSignatureOnlyOnFirstParallelCall(t *testing.T) {
	s := newServer(t, ok("parallel_calls.json"), ok("final_answer.json"))
	m := s.model(t, &gemini.Options{Model: "gemini-3-flash-preview"})
	req := callRequest(1)
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	history := append(req.Messages, resp.Message)
	for _, c := range resp.Message.ToolCalls {
		history = append(history, llm.ToolMessage(llm.ToolResult{CallID: c.ID, Name: c.Name, Status: llm.StatusOK, Content: json.RawMessage(`{}`)}))
	}
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: history, Tools: req.Tools, Step: 2}); err != nil {
		t.Fatal(err)
	}
	parts := decodeRequest(t, s.last()).Contents[1].Parts
	if len(parts) != 2 || len(parts[0].ThoughtSignature) == 0 || len(parts[1].ThoughtSignature) != 0 {
		t.Fatalf("signatures = %q, %q; want Gemini's on the first call only", parts[0].ThoughtSignature, parts[1].ThoughtSignature)
	}
	if string(parts[0].ThoughtSignature) == "skip_thought_signature_validator" {
		t.Fatal("the placeholder replaced a known signature")
	}
}

func TestThoughtSignatureFallback(t *testing.T) {
	for _, c := range []struct {
		model      string
		noFallback bool
		want       string
	}{
		{"gemini-3-flash-preview", false, "skip_thought_signature_validator"},
		{"models/gemini-3.1-pro-preview", false, "skip_thought_signature_validator"},
		{"gemini-flash-latest", false, "skip_thought_signature_validator"},
		{"gemini-3-flash-preview", true, ""},
		{"gemini-2.5-flash", false, ""},
		{"gemma-3-27b-it", false, ""},
	} {
		t.Run(c.model, func(t *testing.T) {
			s := newServer(t, ok("final_answer.json"))
			m := s.model(t, &gemini.Options{NoSignatureFallback: c.noFallback})
			req := wireHistory()
			req.Model = c.model
			// The unsigned step is in the current turn: the user's last
			// text message comes before it.
			req.Messages = req.Messages[:len(req.Messages)-2]
			resp, err := m.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			// A placeholder stands in for reasoning the model no longer has.
			want := 0
			if c.want != "" {
				want = 1
			}
			if resp.DroppedState != want {
				t.Fatalf("DroppedState = %d, want %d", resp.DroppedState, want)
			}
			parts := decodeRequest(t, s.last()).Contents[1].Parts
			// parts[0] is the turn's text; the placeholder goes on its first call only.
			if got := string(parts[1].ThoughtSignature); got != c.want {
				t.Fatalf("first call's signature = %q, want %q", got, c.want)
			}
			for _, p := range append(parts[:1:1], parts[2:]...) {
				if len(p.ThoughtSignature) != 0 {
					t.Fatalf("part %+v has a signature", p)
				}
			}
		})
	}
}

// A step of an earlier turn, before the user's last text message, gets
// no placeholder: Gemini does not validate it, and nothing is dropped.
func TestThoughtSignatureFallbackOnlyInTheCurrentTurn(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	req := wireHistory()
	req.Model = "gemini-3-flash-preview"
	resp, err := s.model(t, nil).Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.DroppedState != 0 {
		t.Fatalf("DroppedState = %d, want 0", resp.DroppedState)
	}
	for _, p := range decodeRequest(t, s.last()).Contents[1].Parts {
		if len(p.ThoughtSignature) != 0 {
			t.Fatalf("part %+v of an earlier turn has a signature", p)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	s := newServer(t, ok("parallel_calls.json"))
	m := s.model(t, &gemini.Options{Model: "gemini-3-flash-preview"})
	done := make(chan error)
	for i := range 8 {
		go func() {
			resp, err := m.Generate(context.Background(), callRequest(i+1))
			if err == nil {
				history := append(callRequest(i+1).Messages, resp.Message)
				_, err = m.Generate(context.Background(), &llm.Request{Messages: history, Step: i + 2})
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// callRequest is a one-question request offering both tools.
func callRequest(step int) *llm.Request {
	r := wireHistory()
	r.Model = "test-model"
	r.Messages = []llm.Message{llm.UserMessage("Weather and time in Oslo?")}
	r.Step = step
	return r
}

func assertKind(t *testing.T, err error, kind llm.ErrorKind, retryable bool) *llm.Error {
	t.Helper()
	var me *llm.Error
	if !errors.As(err, &me) {
		t.Fatalf("error %v is not an *llm.Error", err)
	}
	if me.Kind != kind || me.Retryable != retryable {
		t.Fatalf("error %v: kind %s retryable %v, want %s %v", err, me.Kind, me.Retryable, kind, retryable)
	}
	return me
}

// assertJSON compares two JSON documents by value.
func assertJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Fatalf("request body:\n%s\nwant:\n%s", gi, wi)
	}
}

// An error body without a code is classified by its status name.
func TestErrorWithoutCode(t *testing.T) {
	s := newServer(t, reply{http.StatusTooManyRequests, "no_code.json"})
	_, err := s.model(t, nil).Generate(context.Background(), callRequest(1))
	if me := assertKind(t, err, llm.KindRateLimited, true); me.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status = %d", me.StatusCode)
	}
}
