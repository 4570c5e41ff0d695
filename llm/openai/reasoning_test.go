package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/openai"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// outputItems reads the output items of a reply in testdata/responses.
func outputItems(t *testing.T, file string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "responses", file))
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Output []map[string]any `json:"output"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Output
}

// sentItem is an input item of a request as the tests compare it.
type sentItem struct {
	Type, ID, CallID, Encrypted, Phase string
}

// sentItems reads the input items of a request body that are not user or
// system messages or function call outputs: what the request sends back of
// the model's replies.
func sentItems(t *testing.T, body []byte) []sentItem {
	t.Helper()
	var req struct {
		Input []struct {
			Type      string  `json:"type"`
			Role      string  `json:"role"`
			ID        string  `json:"id"`
			CallID    string  `json:"call_id"`
			Encrypted *string `json:"encrypted_content"`
			Phase     string  `json:"phase"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("request body: %v\n%s", err, body)
	}
	var out []sentItem
	for _, it := range req.Input {
		if it.Type == "function_call_output" || it.Role == "user" || it.Role == "system" {
			continue
		}
		typ := it.Type
		if typ == "" {
			typ = "message"
		}
		s := sentItem{Type: typ, ID: it.ID, CallID: it.CallID, Phase: it.Phase}
		if it.Encrypted != nil {
			s.Encrypted = *it.Encrypted
		}
		out = append(out, s)
	}
	return out
}

// replyItems are the items of a reply as a request must send them back:
// every one, in order, reasoning items with their encrypted content.
func replyItems(t *testing.T, file string) []sentItem {
	t.Helper()
	var out []sentItem
	for _, it := range outputItems(t, file) {
		s := sentItem{Type: it["type"].(string), ID: it["id"].(string)}
		s.CallID, _ = it["call_id"].(string)
		s.Encrypted, _ = it["encrypted_content"].(string)
		s.Phase, _ = it["phase"].(string)
		out = append(out, s)
	}
	return out
}

// postJSON sends a raw Responses request body to s and returns the status
// and the error message, if any.
func postJSON(t *testing.T, s *apiServer, body any) (int, string) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client().Post(s.URL+"/responses", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error.Message
}

// The test server holds requests to OpenAI's rules for reasoning items, so
// that the adapter's tests against it mean something: the reply's items
// sent back in order pass, and each way of getting them wrong gets the
// API's own error.
func TestAPIServerChecksLikeOpenAI(t *testing.T) {
	out := outputItems(t, "reasoning_calls.json")
	rs1, msg, fc1, rs2, fc2 := out[0], out[1], out[2], out[3], out[4]
	user := map[string]any{"role": "user", "content": "Weather and time in Oslo?"}
	reasoning := func(item map[string]any, enc any) map[string]any {
		r := map[string]any{"type": "reasoning", "id": item["id"], "summary": []any{}}
		if enc != nil {
			r["encrypted_content"] = enc
		}
		return r
	}
	message := map[string]any{"type": "message", "id": msg["id"], "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": "Checking Oslo's weather and clock.", "annotations": []any{}}}}
	call := func(item map[string]any, withID bool) map[string]any {
		c := map[string]any{"type": "function_call", "call_id": item["call_id"], "name": item["name"], "arguments": item["arguments"]}
		if withID {
			c["id"] = item["id"]
		}
		return c
	}
	results := []any{
		map[string]any{"type": "function_call_output", "call_id": "call_rA1", "output": `{"temp_c":12}`},
		map[string]any{"type": "function_call_output", "call_id": "call_rA2", "output": `{"time":"14:05"}`},
	}
	altered := []byte(rs1["encrypted_content"].(string))
	altered[20] ^= 1
	for _, tc := range []struct {
		name   string
		input  []any
		status int
		msg    string
	}{
		{"the reply's items in order", []any{user, reasoning(rs1, rs1["encrypted_content"]), message, call(fc1, true),
			reasoning(rs2, rs2["encrypted_content"]), call(fc2, true)}, http.StatusOK, ""},
		{"no reasoning and no item IDs", []any{user, map[string]any{"role": "assistant", "content": "Checking Oslo's weather and clock."},
			call(fc1, false), call(fc2, false)}, http.StatusOK, ""},
		{"a function call without its reasoning item", []any{user, call(fc1, true), call(fc2, false)}, http.StatusBadRequest,
			"Item '" + fc1["id"].(string) + "' of type 'function_call' was provided without its required 'reasoning' item: '" + rs1["id"].(string) + "'."},
		{"a message without its reasoning item", []any{user, message, call(fc1, false)}, http.StatusBadRequest,
			"Item '" + msg["id"].(string) + "' of type 'message' was provided without its required 'reasoning' item: '" + rs1["id"].(string) + "'."},
		{"a reasoning item after its function call", []any{user, reasoning(rs1, rs1["encrypted_content"]), message, call(fc1, true),
			call(fc2, true), reasoning(rs2, rs2["encrypted_content"])}, http.StatusBadRequest,
			"Item '" + fc2["id"].(string) + "' of type 'function_call' was provided without its required 'reasoning' item: '" + rs2["id"].(string) + "'."},
		{"the reasoning items first", []any{user, reasoning(rs1, rs1["encrypted_content"]), reasoning(rs2, rs2["encrypted_content"]),
			message, call(fc1, true), call(fc2, true)}, http.StatusBadRequest,
			"Item '" + rs1["id"].(string) + "' of type 'reasoning' was provided without its required following item."},
		{"altered encrypted content", []any{user, reasoning(rs1, string(altered)), message, call(fc1, true),
			reasoning(rs2, rs2["encrypted_content"]), call(fc2, true)}, http.StatusBadRequest,
			"The encrypted content for item " + rs1["id"].(string) + " could not be verified. Reason: Encrypted content could not be decrypted or parsed."},
		{"a reasoning item without its summary", []any{user, map[string]any{"type": "reasoning", "id": rs1["id"], "encrypted_content": rs1["encrypted_content"]},
			message, call(fc1, true), reasoning(rs2, rs2["encrypted_content"]), call(fc2, true)}, http.StatusBadRequest,
			"Missing required parameter: 'input[1].summary'."},
		{"a reasoning item without encrypted content", []any{user, reasoning(rs1, nil), message, call(fc1, true),
			reasoning(rs2, rs2["encrypted_content"]), call(fc2, true)}, http.StatusNotFound,
			"Item with id '" + rs1["id"].(string) + "' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newAPIServer(t, "reasoning_calls.json", "reasoning_answer.json")
			first := map[string]any{"model": "gpt-5-mini", "store": false, "input": []any{user}, "include": []string{"reasoning.encrypted_content"}}
			if status, msg := postJSON(t, s, first); status != http.StatusOK {
				t.Fatalf("first request: %d %s", status, msg)
			}
			req := map[string]any{"model": "gpt-5-mini", "store": false, "input": append(tc.input, results...)}
			status, msg := postJSON(t, s, req)
			if status != tc.status || msg != tc.msg {
				t.Errorf("got %d %q, want %d %q", status, msg, tc.status, tc.msg)
			}
		})
	}
}

// A reply's reasoning is shown in Message.Reasoning (its summary, or
// hidden) and kept in Message.State; the request asks for the encrypted
// content and the summary.
func TestResponsesReasoningFromReply(t *testing.T) {
	s := newAPIServer(t, "reasoning_calls.json")
	m := openai.NewResponses(s.client(), &openai.ResponsesOptions{ReasoningEffort: "medium", ReasoningSummary: "auto"})
	resp, err := m.Generate(context.Background(), &llm.Request{Model: "gpt-5-mini", Messages: []llm.Message{llm.UserMessage("Weather and time in Oslo?")}, Tools: weatherTools()})
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Include   []string          `json:"include"`
		Reasoning map[string]string `json:"reasoning"`
	}
	json.Unmarshal(s.request(0), &req)
	if !reflect.DeepEqual(req.Include, []string{"reasoning.encrypted_content"}) || req.Reasoning["summary"] != "auto" || req.Reasoning["effort"] != "medium" {
		t.Errorf("request include %v, reasoning %v", req.Include, req.Reasoning)
	}
	msg := resp.Message
	want := []llm.Reasoning{
		{Provider: openai.ProviderResponses, Text: "**Planning the lookups**\n\nThe user wants weather and time in Oslo; I'll call both tools."},
		{Provider: openai.ProviderResponses, Hidden: true},
	}
	if !reflect.DeepEqual(msg.Reasoning, want) {
		t.Errorf("reasoning = %+v", msg.Reasoning)
	}
	if msg.State == nil || msg.State.Provider != openai.ProviderResponses || len(msg.State.Data) == 0 {
		t.Fatalf("state = %+v", msg.State)
	}
	if msg.Text != "Checking Oslo's weather and clock." || len(msg.ToolCalls) != 2 || msg.ToolCalls[0].ID != "call_rA1" || msg.ToolCalls[1].ID != "call_rA2" {
		t.Errorf("text %q, calls %+v", msg.Text, msg.ToolCalls)
	}
	if want := (llm.Usage{InputTokens: 90, OutputTokens: 240, ReasoningTokens: 192}); resp.Usage != want || resp.DroppedState != 0 {
		t.Errorf("usage %+v, dropped %d", resp.Usage, resp.DroppedState)
	}
}

// What the request asks for: the encrypted content when the model is known
// to reason (an effort or a summary is set) or KeepReasoning says so, and
// never when KeepReasoning is false.
func TestResponsesReasoningOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    *openai.ResponsesOptions
		include bool
		summary string
	}{
		{"no options", nil, false, ""},
		{"effort", &openai.ResponsesOptions{ReasoningEffort: "low"}, true, ""},
		{"summary", &openai.ResponsesOptions{ReasoningSummary: "detailed"}, true, "detailed"},
		{"kept without effort", &openai.ResponsesOptions{KeepReasoning: new(true)}, true, ""},
		{"not kept with effort", &openai.ResponsesOptions{ReasoningEffort: "high", ReasoningSummary: "concise", KeepReasoning: new(false)}, false, "concise"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, "responses", ok("final_answer.json"))
			if _, err := openai.NewResponses(s.client(), tc.opts).Generate(context.Background(), &llm.Request{Model: "gpt-5-mini", Messages: history()}); err != nil {
				t.Fatal(err)
			}
			var req struct {
				Include   []string          `json:"include"`
				Reasoning map[string]string `json:"reasoning"`
			}
			json.Unmarshal(s.last(), &req)
			if got := len(req.Include) == 1 && req.Include[0] == "reasoning.encrypted_content"; got != tc.include || len(req.Include) > 1 {
				t.Errorf("include = %v", req.Include)
			}
			if req.Reasoning["summary"] != tc.summary {
				t.Errorf("reasoning = %v", req.Reasoning)
			}
		})
	}
}

// A tool loop with a reasoning model: the second request sends the first
// reply's items back in their order, reasoning items with their encrypted
// content byte for byte and the others with their item IDs, and a server
// that checks them as OpenAI does accepts it. Without the encrypted
// content (not asked for) the reply's items go back without IDs, which
// the server accepts too.
func TestResponsesReasoningLoop(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *openai.ResponsesOptions
		keep bool
	}{
		{"kept", &openai.ResponsesOptions{ReasoningEffort: "medium"}, true},
		{"not asked for", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newAPIServer(t, "reasoning_calls.json", "reasoning_answer.json")
			res, err := loop.Run(context.Background(), loop.Config{
				Model:     openai.NewResponses(s.client(), tc.opts),
				ModelName: "gpt-5-mini",
				Tools:     weatherRegistry(t),
				Budgets:   loop.Budgets{MaxSteps: 4},
			}, []llm.Message{llm.UserMessage("Weather and time in Oslo?")})
			if err != nil {
				t.Fatalf("%v (%s)", err, res.Detail)
			}
			if res.Answer() != "It is 12 °C in Oslo, and the time there is 14:05." || res.Steps != 2 {
				t.Fatalf("answer %q after %d steps", res.Answer(), res.Steps)
			}
			if want := (llm.Usage{InputTokens: 500, OutputTokens: 336, CachedInputTokens: 256, ReasoningTokens: 256}); res.Usage != want {
				t.Errorf("usage = %+v, want %+v", res.Usage, want)
			}
			got := sentItems(t, s.request(1))
			want := replyItems(t, "reasoning_calls.json")
			if !tc.keep {
				want = []sentItem{{Type: "message"}, {Type: "function_call", CallID: "call_rA1"}, {Type: "function_call", CallID: "call_rA2"}}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the second request sent back\n%+v\nwant\n%+v", got, want)
			}
			if !tc.keep {
				return
			}
			// The conversation goes on: the answer's items go back too,
			// its message with the text of each of its two parts.
			msgs := append(res.Messages, llm.UserMessage("Thanks. And tomorrow?"))
			if _, err := openai.NewResponses(s.client(), tc.opts).Generate(context.Background(), &llm.Request{Model: "gpt-5-mini", Messages: msgs}); err != nil {
				t.Fatal(err)
			}
			got = sentItems(t, s.request(2))
			want = append(replyItems(t, "reasoning_calls.json"), replyItems(t, "reasoning_answer.json")...)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the third request sent back\n%+v\nwant\n%+v", got, want)
			}
			var req struct {
				Input []struct {
					ID      string `json:"id"`
					Content []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"content"`
				} `json:"input"`
			}
			json.Unmarshal(s.request(2), &req)
			var parts []string
			for _, it := range req.Input {
				if it.ID == want[len(want)-1].ID {
					for _, c := range it.Content {
						parts = append(parts, c.Type+":"+c.Text)
					}
				}
			}
			if want := []string{"output_text:It is 12 °C in Oslo, ", "output_text:and the time there is 14:05."}; !reflect.DeepEqual(parts, want) {
				t.Errorf("the answer went back as %q, want %q", parts, want)
			}
		})
	}
}

// A durable run pauses for a confirmation after a reasoning model's tool
// calls, and is resumed by a new runner with a new client and adapter: the
// reasoning is in the run's log, so the request after the resume carries
// the reasoning items byte for byte and the server accepts it. The log's
// events give back the state and the reasoning exactly.
func TestResponsesReasoningAcrossResume(t *testing.T) {
	type weatherIn struct {
		City string `json:"city"`
	}
	type timeIn struct {
		Zone string `json:"zone"`
	}
	weather := tool.MustNew(tool.Spec[weatherIn]{Name: "get_weather", Description: "current weather", Effect: tool.Write},
		func(ctx context.Context, in weatherIn) (map[string]any, error) {
			return map[string]any{"city": in.City, "temp_c": 12}, nil
		})
	clock := tool.MustNew(tool.Spec[timeIn]{Name: "get_time", Description: "local time"},
		func(ctx context.Context, in timeIn) (map[string]any, error) {
			return map[string]any{"zone": in.Zone, "time": "14:05"}, nil
		})
	tools, err := tool.NewRegistry(weather, clock)
	if err != nil {
		t.Fatal(err)
	}
	s := newAPIServer(t, "reasoning_calls.json", "reasoning_answer.json")
	st := store.NewMemory()
	config := func() loop.Config {
		return loop.Config{
			Model:     openai.NewResponses(s.client(), &openai.ResponsesOptions{ReasoningEffort: "medium", ReasoningSummary: "auto"}),
			ModelName: "gpt-5-mini",
			Tools:     tools,
			Policy:    policy.ConfirmWrites(),
			Store:     st,
			NewRunID:  func() string { return "run-reasoning" },
		}
	}
	ctx := context.Background()
	first, err := loop.NewRunner(config())
	if err != nil {
		t.Fatal(err)
	}
	paused, err := first.Run(ctx, []llm.Message{llm.UserMessage("Weather and time in Oslo?")})
	if !errors.Is(err, loop.ConfirmationRequired) || len(paused.Pending) != 1 || paused.Pending[0].CallID != "call_rA1" {
		t.Fatalf("status %s, pending %+v, err %v", paused.Status, paused.Pending, err)
	}
	events, err := loop.LoadEvents(ctx, st, "run-reasoning")
	if err != nil {
		t.Fatal(err)
	}
	var kept, loaded *llm.Message
	for i := range paused.Events {
		if paused.Events[i].Kind == loop.ModelResponded {
			kept = &paused.Events[i].Response.Message
		}
	}
	for i := range events {
		if events[i].Kind == loop.ModelResponded {
			loaded = &events[i].Response.Message
		}
	}
	if kept == nil || loaded == nil || kept.State == nil || loaded.State == nil {
		t.Fatalf("no model reply with state in the log: %+v / %+v", kept, loaded)
	}
	if loaded.State.Provider != kept.State.Provider || !bytes.Equal(loaded.State.Data, kept.State.Data) || !reflect.DeepEqual(loaded.Reasoning, kept.Reasoning) {
		t.Errorf("the log changed the reply's state or reasoning:\n%+v %s\n%+v %s", kept.Reasoning, kept.State.Data, loaded.Reasoning, loaded.State.Data)
	}

	if err := loop.Decide(ctx, st, "run-reasoning", loop.Confirmation{CallID: "call_rA1", Approved: true, By: "alice"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	second, err := loop.NewRunner(config())
	if err != nil {
		t.Fatal(err)
	}
	res, err := second.Resume(ctx, "run-reasoning")
	if err != nil {
		t.Fatalf("%v (%s)", err, res.Detail)
	}
	if res.Status != loop.FinalAnswer || res.Answer() != "It is 12 °C in Oslo, and the time there is 14:05." || s.count() != 2 {
		t.Fatalf("status %s, answer %q, %d requests", res.Status, res.Answer(), s.count())
	}
	if got, want := sentItems(t, s.request(1)), replyItems(t, "reasoning_calls.json"); !reflect.DeepEqual(got, want) {
		t.Errorf("the request after the resume sent back\n%+v\nwant\n%+v", got, want)
	}
	results := responsesResults(t, s.request(1))
	if !strings.Contains(results["call_rA1"], `"temp_c":12`) || !strings.Contains(results["call_rA2"], `"time":"14:05"`) {
		t.Errorf("results = %v", results)
	}
}

// State another provider made is left out and counted, and so is this
// adapter's own state once its message was edited: the message goes back
// without item IDs, and the server accepts the request.
func TestResponsesDropsStateItCannotSend(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*llm.Message)
	}{
		{"text shortened", func(m *llm.Message) { m.Text = "Checking Oslo." }},
		{"text lengthened", func(m *llm.Message) { m.Text += " And Bergen." }},
		{"a call added", func(m *llm.Message) {
			m.ToolCalls = append(m.ToolCalls[:2:2], llm.ToolCall{ID: "call_x", Name: "get_time", Arguments: json.RawMessage(`{"zone":"UTC"}`)})
		}},
		{"a call replaced", func(m *llm.Message) {
			m.ToolCalls = []llm.ToolCall{m.ToolCalls[0], {ID: "call_x", Name: "get_time", Arguments: json.RawMessage(`{"zone":"UTC"}`)}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newAPIServer(t, "reasoning_calls.json", "reasoning_answer.json")
			m := openai.NewResponses(s.client(), &openai.ResponsesOptions{ReasoningEffort: "medium"})
			ctx := context.Background()
			msgs := []llm.Message{
				llm.UserMessage("Weather in Bergen?"),
				{Role: llm.RoleAssistant, Text: "Looking it up.", State: &llm.ProviderState{Provider: "anthropic", Data: []byte(`[{"type":"thinking","signature":"EqQB"}]`)},
					ToolCalls: []llm.ToolCall{{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Bergen"}`),
						State: &llm.ProviderState{Provider: "gemini", Data: []byte("sig")}}}},
				llm.ToolMessage(llm.ToolResult{CallID: "toolu_1", Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":9}`)}),
				llm.UserMessage("And Oslo, with the time?"),
			}
			first, err := m.Generate(ctx, &llm.Request{Model: "gpt-5-mini", Messages: msgs, Tools: weatherTools(), Step: 1})
			if err != nil {
				t.Fatal(err)
			}
			if first.DroppedState != 2 {
				t.Errorf("dropped %d, want 2 (a message's and a call's)", first.DroppedState)
			}
			if got, want := sentItems(t, s.request(0)), []sentItem{{Type: "message"}, {Type: "function_call", CallID: "toolu_1"}}; !reflect.DeepEqual(got, want) {
				t.Errorf("sent %+v, want %+v", got, want)
			}
			edited := first.Message
			tc.edit(&edited)
			msgs = append(msgs, edited)
			for _, c := range edited.ToolCalls {
				msgs = append(msgs, llm.ToolMessage(llm.ToolResult{CallID: c.ID, Name: c.Name, Status: llm.StatusOK, Content: json.RawMessage(`{}`)}))
			}
			second, err := m.Generate(ctx, &llm.Request{Model: "gpt-5-mini", Messages: msgs, Tools: weatherTools(), Step: 2})
			if err != nil {
				t.Fatal(err)
			}
			if second.DroppedState != 3 {
				t.Errorf("dropped %d, want 3", second.DroppedState)
			}
			for _, it := range sentItems(t, s.request(1)) {
				if it.ID != "" || it.Type == "reasoning" {
					t.Errorf("sent %+v from state that had to be left out", it)
				}
			}
		})
	}
}

// Encrypted content that changed on its way (here: one byte of the state)
// is refused by the API; the error is a bad request that names it, not
// one to retry.
func TestResponsesAlteredReasoningRefused(t *testing.T) {
	s := newAPIServer(t, "reasoning_calls.json", "reasoning_answer.json")
	m := openai.NewResponses(s.client(), &openai.ResponsesOptions{ReasoningEffort: "medium"})
	ctx := context.Background()
	msgs := []llm.Message{llm.UserMessage("Weather and time in Oslo?")}
	first, err := m.Generate(ctx, &llm.Request{Model: "gpt-5-mini", Messages: msgs, Step: 1})
	if err != nil {
		t.Fatal(err)
	}
	enc := outputItems(t, "reasoning_calls.json")[0]["encrypted_content"].(string)
	altered := strings.Replace(enc, "K1vQ", "K1vR", 1)
	reply := first.Message
	reply.State = &llm.ProviderState{Provider: reply.State.Provider, Data: bytes.Replace(reply.State.Data, []byte(enc), []byte(altered), 1)}
	if bytes.Equal(reply.State.Data, first.Message.State.Data) {
		t.Fatal("the state does not hold the encrypted content as it came")
	}
	msgs = append(msgs, reply,
		llm.ToolMessage(llm.ToolResult{CallID: "call_rA1", Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{}`)}),
		llm.ToolMessage(llm.ToolResult{CallID: "call_rA2", Name: "get_time", Status: llm.StatusOK, Content: json.RawMessage(`{}`)}))
	_, err = m.Generate(ctx, &llm.Request{Model: "gpt-5-mini", Messages: msgs, Step: 2})
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindBadRequest || me.Retryable || !strings.Contains(err.Error(), "could not be verified") {
		t.Fatalf("err = %v", err)
	}
}

// A reply cut off while the model was reasoning: the reasoning items with
// no item after them are shown but not kept, since the API refuses a
// reasoning item without its following item. What came before them is
// kept and accepted.
func TestResponsesReasoningCutOff(t *testing.T) {
	t.Run("nothing but reasoning", func(t *testing.T) {
		s := newAPIServer(t, "reasoning_cut.json")
		resp, err := openai.NewResponses(s.client(), &openai.ResponsesOptions{ReasoningEffort: "high"}).Generate(context.Background(),
			&llm.Request{Model: "gpt-5-mini", Messages: []llm.Message{llm.UserMessage("Plan a week in Norway.")}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Message.State != nil || len(resp.Message.Reasoning) != 1 || !resp.Message.Reasoning[0].Hidden || !resp.Truncated {
			t.Errorf("state %+v, reasoning %+v, truncated %v", resp.Message.State, resp.Message.Reasoning, resp.Truncated)
		}
	})
	t.Run("reasoning after a call", func(t *testing.T) {
		// The calls reply without its last function call: it ends in a
		// reasoning item.
		b, err := os.ReadFile(filepath.Join("testdata", "responses", "reasoning_calls.json"))
		if err != nil {
			t.Fatal(err)
		}
		var reply map[string]any
		json.Unmarshal(b, &reply)
		reply["output"] = reply["output"].([]any)[:4]
		reply["status"] = "incomplete"
		reply["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
		cut, _ := json.Marshal(reply)
		answer, _ := os.ReadFile(filepath.Join("testdata", "responses", "reasoning_answer.json"))
		s := newAPIServerWith(t, cut, answer)
		m := openai.NewResponses(s.client(), &openai.ResponsesOptions{ReasoningEffort: "high"})
		msgs := []llm.Message{llm.UserMessage("Weather and time in Oslo?")}
		first, err := m.Generate(context.Background(), &llm.Request{Model: "gpt-5-mini", Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		if len(first.Message.Reasoning) != 2 || first.Message.State == nil || len(first.Message.ToolCalls) != 1 {
			t.Fatalf("reasoning %+v, state %v, calls %+v", first.Message.Reasoning, first.Message.State, first.Message.ToolCalls)
		}
		msgs = append(msgs, first.Message,
			llm.ToolMessage(llm.ToolResult{CallID: "call_rA1", Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{}`)}))
		if _, err := m.Generate(context.Background(), &llm.Request{Model: "gpt-5-mini", Messages: msgs}); err != nil {
			t.Fatal(err)
		}
		if got, want := sentItems(t, s.request(1)), replyItems(t, "reasoning_calls.json")[:3]; !reflect.DeepEqual(got, want) {
			t.Errorf("sent %+v, want %+v", got, want)
		}
	})
}

// Reasoning items without encrypted content (a request that did not ask
// for it) are shown as hidden and give no state: the reply goes back as a
// plain message and calls.
func TestResponsesReasoningWithoutEncryptedContent(t *testing.T) {
	s := newServer(t, "responses", ok("parallel_calls.json"))
	resp, err := openai.NewResponses(s.client(), nil).Generate(context.Background(), &llm.Request{Model: "gpt-5-mini", Messages: history()})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.State != nil || !reflect.DeepEqual(resp.Message.Reasoning, []llm.Reasoning{{Provider: openai.ProviderResponses, Hidden: true}}) {
		t.Errorf("state %+v, reasoning %+v", resp.Message.State, resp.Message.Reasoning)
	}
}
