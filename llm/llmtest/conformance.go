package llmtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
)

// Case names one provider reply the conformance suite asks an adapter to
// handle. For each case the harness serves the provider's real wire reply
// (from its published API reference) with the values listed.
type Case string

// The conformance cases and the values their wire replies must carry.
const (
	// CaseFinalAnswer: a text answer "It is 12 °C in Oslo." with no tool
	// calls, finish reason "stop" (or the provider's equivalent), usage 100
	// input / 20 output tokens, of which 30 cached input and 5 reasoning
	// tokens where the provider reports them, and a response ID.
	CaseFinalAnswer Case = "final_answer"
	// CaseSingleCall: one tool call, ID "call_1" (where the provider gives
	// IDs), tool "get_weather", arguments {"city":"Oslo"}.
	CaseSingleCall Case = "single_call"
	// CaseParallelCalls: two tool calls in one reply: "call_1" get_weather
	// {"city":"Oslo"} and "call_2" get_time {"zone":"Europe/Oslo"}.
	CaseParallelCalls Case = "parallel_calls"
	// CaseInvalidArguments: one tool call "call_1" get_weather whose
	// arguments string is not valid JSON: {"city": (cut off). Providers
	// that send arguments as structured JSON skip this case.
	CaseInvalidArguments Case = "invalid_arguments"
	// CaseRateLimited: HTTP 429 with a retry-after header of 2 seconds.
	CaseRateLimited Case = "rate_limited"
	// CaseServerError: HTTP 500.
	CaseServerError Case = "server_error"
	// CaseUnauthorized: HTTP 401 (a bad API key).
	CaseUnauthorized Case = "unauthorized"
	// CaseContextLength: the provider's error for a prompt longer than the
	// model's context window.
	CaseContextLength Case = "context_length"
	// CaseTruncated: a text answer with no tool calls, cut off at the
	// output token limit (finish reason "length", stop reason
	// "max_tokens", MAX_TOKENS, or the provider's equivalent). The adapter
	// keeps the text and sets Response.Truncated.
	CaseTruncated Case = "truncated"
	// CaseReasoningCall: one tool call get_weather {"city":"Oslo"} that
	// carries the provider's opaque reasoning state, whose value is
	// ReasoningToken: Anthropic's thinking block signature, the Responses
	// API's reasoning item encrypted_content, Gemini's thoughtSignature on
	// the functionCall part. The adapter keeps it as provider state (on
	// the message or the call), and sends it back unchanged with the next
	// request, also after the message went through JSON (a log, a store)
	// and to a new adapter (a resume in another process).
	// Providers with no such state (Chat Completions) skip this case.
	CaseReasoningCall Case = "reasoning_call"
	// CaseStreamWithoutFinishReason: a streamed reply, served as the
	// provider's event stream, that ends the way some compatible servers
	// end every turn (OpenRouter and Novita for Chat Completions: a usage
	// chunk, then "data: [DONE]") without ever giving a finish reason. It
	// carries one tool call get_weather {"city":"Oslo"}. The turn is
	// complete: Stream must finish it, with the finish reason Generate
	// gives a whole reply without one. Providers whose streams always end
	// with their own end event skip this case.
	CaseStreamWithoutFinishReason Case = "stream_without_finish_reason"
)

// ReasoningToken is the opaque reasoning value CaseReasoningCall's wire
// reply carries: base64 with '+', '/' and '=' where an encoder could
// rewrite them, so that only a byte-exact round trip passes.
const ReasoningToken = "Q29uZm9ybWFuY2Ur/3Rva2VuPz4+"

// foreignState is another provider's state, which an adapter must leave
// out of its requests (and count in Response.DroppedState).
const foreignState = "FOREIGN-STATE-Zm9yZWlnbg"

// Harness connects the conformance suite to one adapter.
type Harness struct {
	// NewModel returns the adapter under test, talking through the real
	// SDK to a test server that answers every request with the wire reply
	// for c, and a function returning the body of the last request the
	// server received. It returns skip=true for a case the provider cannot
	// produce (see the case's comment).
	NewModel func(t *testing.T, c Case) (m llm.Model, lastRequest func() []byte, skip bool)
	// Results extracts, from a request body the adapter sent, each tool
	// result it carried: call ID -> result content as sent (text or JSON).
	// It lets the suite check that results are linked by ID.
	Results func(t *testing.T, body []byte) map[string]string
	// RetriesOnItsOwn is true when the SDK client itself retries 429/5xx
	// (the suite then only checks the final classification).
	RetriesOnItsOwn bool
}

// RunConformance checks that an adapter maps the provider's replies onto
// llm types the way the loop needs: text, tool calls with their IDs and raw
// arguments, usage, finish reasons, error kinds; and that it sends tool
// results linked by call ID.
func RunConformance(t *testing.T, h Harness) {
	ctx := context.Background()
	req := conformanceRequest()

	get := func(t *testing.T, c Case) (*llm.Response, func() []byte, error) {
		t.Helper()
		m, last, skip := h.NewModel(t, c)
		if skip {
			t.Skipf("the provider cannot produce case %s", c)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		resp, err := m.Generate(cctx, req)
		return resp, last, err
	}

	t.Run(string(CaseFinalAnswer), func(t *testing.T) {
		resp, last, err := get(t, CaseFinalAnswer)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Message.Role != llm.RoleAssistant || resp.Message.Text != "It is 12 °C in Oslo." || len(resp.Message.ToolCalls) != 0 {
			t.Fatalf("message = %+v", resp.Message)
		}
		if resp.Usage.InputTokens != 100 || resp.Usage.OutputTokens != 20 {
			t.Fatalf("usage = %+v, want 100 in / 20 out", resp.Usage)
		}
		if resp.ID == "" || resp.FinishReason == "" {
			t.Fatalf("response ID %q, finish reason %q: both must be mapped", resp.ID, resp.FinishReason)
		}
		if resp.Truncated {
			t.Fatalf("a whole answer (finish reason %q) is marked truncated", resp.FinishReason)
		}
		// The request carried the history's tool results, each linked by
		// its call ID, the error result included.
		got := h.Results(t, last())
		for _, id := range []string{"call_a", "call_b"} {
			if _, ok := got[id]; !ok {
				t.Fatalf("request carried results for %v, want call_a and call_b", keys(got))
			}
		}
		if !strings.Contains(got["call_a"], "8") || !strings.Contains(got["call_b"], "not_found") {
			t.Fatalf("results sent = %v", got)
		}
	})

	t.Run(string(CaseTruncated), func(t *testing.T) {
		resp, _, err := get(t, CaseTruncated)
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Truncated || strings.TrimSpace(resp.Message.Text) == "" || len(resp.Message.ToolCalls) != 0 {
			t.Fatalf("finish reason %q, Truncated %v, message %+v: want the cut-off text, marked truncated",
				resp.FinishReason, resp.Truncated, resp.Message)
		}
	})

	t.Run(string(CaseSingleCall), func(t *testing.T) {
		resp, _, err := get(t, CaseSingleCall)
		if err != nil {
			t.Fatal(err)
		}
		calls := resp.Message.ToolCalls
		if len(calls) != 1 || calls[0].ID == "" || calls[0].Name != "get_weather" || !jsonEq(calls[0].Arguments, `{"city":"Oslo"}`) {
			t.Fatalf("tool calls = %+v", calls)
		}
	})

	t.Run(string(CaseParallelCalls), func(t *testing.T) {
		resp, _, err := get(t, CaseParallelCalls)
		if err != nil {
			t.Fatal(err)
		}
		calls := resp.Message.ToolCalls
		if len(calls) != 2 || calls[0].Name != "get_weather" || calls[1].Name != "get_time" ||
			calls[0].ID == "" || calls[0].ID == calls[1].ID ||
			!jsonEq(calls[0].Arguments, `{"city":"Oslo"}`) || !jsonEq(calls[1].Arguments, `{"zone":"Europe/Oslo"}`) {
			t.Fatalf("tool calls = %+v", calls)
		}
	})

	t.Run(string(CaseInvalidArguments), func(t *testing.T) {
		resp, _, err := get(t, CaseInvalidArguments)
		if err != nil {
			t.Fatalf("invalid argument JSON must reach the loop as a call, not fail the request: %v", err)
		}
		calls := resp.Message.ToolCalls
		if len(calls) != 1 || calls[0].Name != "get_weather" || json.Valid(calls[0].Arguments) {
			t.Fatalf("tool calls = %+v; the raw, invalid arguments must be kept", calls)
		}
	})

	t.Run(string(CaseReasoningCall), func(t *testing.T) {
		m, _, skip := h.NewModel(t, CaseReasoningCall)
		if skip {
			t.Skipf("the provider keeps no reasoning state")
		}
		resp, err := m.Generate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		calls := resp.Message.ToolCalls
		if len(calls) != 1 || calls[0].Name != "get_weather" {
			t.Fatalf("tool calls = %+v", calls)
		}
		state := resp.Message.State
		if state == nil {
			state = calls[0].State
		}
		if state == nil || state.Provider == "" || len(state.Data) == 0 {
			t.Fatalf("the reply's reasoning state was not kept: message state %+v, call state %+v", resp.Message.State, calls[0].State)
		}
		// As a log or a store gives it back.
		b, err := json.Marshal(resp.Message)
		if err != nil {
			t.Fatal(err)
		}
		var kept llm.Message
		if err := json.Unmarshal(b, &kept); err != nil {
			t.Fatal(err)
		}
		next := *req
		next.Messages = append(append([]llm.Message(nil), req.Messages...), kept,
			llm.ToolMessage(llm.ToolResult{CallID: calls[0].ID, Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":12}`)}))
		next.Step = req.Step + 1
		// A new adapter, as after a resume in another process or on
		// another worker: the state must come from the message alone.
		m2, last2, _ := h.NewModel(t, CaseReasoningCall)
		if _, err := m2.Generate(ctx, &next); err != nil {
			t.Fatal(err)
		}
		if body := last2(); !strings.Contains(string(body), ReasoningToken) {
			t.Fatalf("the next request does not carry the reasoning state %s back unchanged:\n%s", ReasoningToken, body)
		}
	})

	t.Run("foreign_state", func(t *testing.T) {
		// A history from another provider: its state stays out of the
		// request, and the response says how much was left out.
		m, last, skip := h.NewModel(t, CaseFinalAnswer)
		if skip {
			t.Skip()
		}
		foreign := &llm.ProviderState{Provider: "another-provider", Data: []byte(foreignState)}
		withForeign := *req
		withForeign.Messages = append([]llm.Message(nil), req.Messages...)
		asst := withForeign.Messages[2]
		asst.State = foreign
		asst.ToolCalls = append([]llm.ToolCall(nil), asst.ToolCalls...)
		asst.ToolCalls[0].State = foreign
		withForeign.Messages[2] = asst
		resp, err := m.Generate(ctx, &withForeign)
		if err != nil {
			t.Fatal(err)
		}
		if resp.DroppedState < 2 {
			t.Fatalf("DroppedState = %d, want the 2 pieces of another provider's state counted", resp.DroppedState)
		}
		body := string(last())
		if strings.Contains(body, foreignState) || strings.Contains(body, base64.StdEncoding.EncodeToString([]byte(foreignState))) {
			t.Fatalf("another provider's state reached the request:\n%s", body)
		}
	})

	t.Run("stream_answered_with_json", func(t *testing.T) {
		// A server or proxy that ignores "stream": true answers a
		// streamed request with the whole reply as JSON (each case's
		// reply is served that way): the turn is what Generate returns
		// for it, marked NotStreamed so that the log says so.
		for _, c := range []Case{CaseFinalAnswer, CaseSingleCall, CaseParallelCalls, CaseTruncated, CaseReasoningCall} {
			m, _, skip := h.NewModel(t, c)
			if skip {
				continue
			}
			if _, ok := m.(llm.StreamingModel); !ok {
				t.Skip("the adapter does not stream")
			}
			want, err := m.Generate(ctx, req)
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			m2, _, _ := h.NewModel(t, c)
			got, err := llm.Collect(m2.(llm.StreamingModel).Stream(ctx, req))
			if err != nil {
				t.Fatalf("%s: a streamed request answered with JSON: %v", c, err)
			}
			if !got.NotStreamed {
				t.Errorf("%s: the turn is not marked NotStreamed", c)
			}
			want.NotStreamed = true
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: streamed %+v\nwant what Generate returns, marked NotStreamed: %+v", c, got, want)
			}
		}
	})

	t.Run(string(CaseStreamWithoutFinishReason), func(t *testing.T) {
		m, _, skip := h.NewModel(t, CaseStreamWithoutFinishReason)
		if skip {
			t.Skip("the provider's streams always end with their own end event")
		}
		sm, ok := m.(llm.StreamingModel)
		if !ok {
			t.Fatal("the case needs a streaming model")
		}
		resp, err := llm.Collect(sm.Stream(ctx, req))
		if err != nil {
			t.Fatalf("a stream that ended without a finish reason: %v", err)
		}
		calls := resp.Message.ToolCalls
		if len(calls) != 1 || calls[0].Name != "get_weather" || !jsonEq(calls[0].Arguments, `{"city":"Oslo"}`) {
			t.Fatalf("tool calls = %+v", calls)
		}
		if resp.FinishReason == "" {
			t.Fatalf("finish reason %q: the turn must be finished", resp.FinishReason)
		}
	})

	for _, c := range []struct {
		c         Case
		retryable bool
		mention   string
	}{
		{CaseRateLimited, true, ""},
		{CaseServerError, true, ""},
		{CaseUnauthorized, false, "auth"},
		{CaseContextLength, false, "context"},
	} {
		t.Run(string(c.c), func(t *testing.T) {
			_, _, err := get(t, c.c)
			var me *llm.Error
			if !errors.As(err, &me) {
				t.Fatalf("error %v is not an *llm.Error", err)
			}
			if me.Retryable != c.retryable {
				t.Fatalf("retryable = %v, want %v (%v)", me.Retryable, c.retryable, err)
			}
			if c.c == CaseRateLimited && !h.RetriesOnItsOwn && me.RetryAfter != 2*time.Second {
				t.Fatalf("RetryAfter = %v, want the server's 2s", me.RetryAfter)
			}
			if c.mention != "" && !strings.Contains(strings.ToLower(err.Error()), c.mention) {
				t.Fatalf("error %q should name the cause (%q)", err, c.mention)
			}
		})
	}
}

// conformanceRequest is a history with a finished tool round: an
// assistant turn with two calls, one ok result and one error result.
func conformanceRequest() *llm.Request {
	return &llm.Request{
		Model: "test-model",
		Messages: []llm.Message{
			llm.SystemMessage("You answer weather questions."),
			llm.UserMessage("Weather in Oslo and Bergen?"),
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)},
				{ID: "call_b", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Bergen"}`)},
			}},
			llm.ToolMessage(llm.ToolResult{CallID: "call_a", Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":8}`)}),
			llm.ToolMessage(llm.ToolResult{CallID: "call_b", Name: "get_weather", Status: llm.StatusError, ErrorKind: llm.KindNotFound,
				Content: llm.ErrorContent(llm.KindNotFound, "no station in Bergen")}),
		},
		Tools: []llm.ToolDefinition{
			{Name: "get_weather", Description: "current weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
			{Name: "get_time", Description: "local time", InputSchema: json.RawMessage(`{"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}`)},
		},
		Step: 2,
	}
}

func jsonEq(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

func keys(m map[string]string) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	return k
}
