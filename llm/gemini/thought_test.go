package gemini_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/gemini"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// TestAPILoopParallelThenSequentialCalls runs the loop against the fake
// API: a step of two parallel calls, a step of one call, then the answer
// with a thought summary. Every request passes the API's validation, each
// step's first call is replayed with exactly the bytes issued for it and
// the second parallel call with none, and the thought summary is the
// answer's reasoning, not its text.
func TestAPILoopParallelThenSequentialCalls(t *testing.T) {
	api := newFakeAPI(t,
		apiStep{thought: "**Planning** two lookups at once.", calls: []apiCall{
			{"get_weather", `{"city":"Oslo"}`}, {"get_time", `{"zone":"Europe/Oslo"}`}}},
		apiStep{calls: []apiCall{{"get_weather", `{"city":"Bergen"}`}}},
		apiStep{thought: "**Comparing** both cities.", text: "Both are at 12 °C; it is 14:05 in Oslo."},
	)
	res, err := loop.Run(context.Background(), loop.Config{
		Model:     api.model(t, &gemini.Options{IncludeThoughts: true}),
		ModelName: "gemini-3-flash-preview",
		Tools:     weatherTools(t),
		Budgets:   loop.Budgets{MaxSteps: 5},
	}, []llm.Message{llm.UserMessage("Weather in Oslo and Bergen, and the time in Oslo?")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != loop.FinalAnswer || res.Answer() != "Both are at 12 °C; it is 14:05 in Oslo." || res.ToolCalls != 3 {
		t.Fatalf("status %s, answer %q, %d calls", res.Status, res.Answer(), res.ToolCalls)
	}
	bodies, errs := api.requests()
	if len(bodies) != 3 || errs[0]+errs[1]+errs[2] != "" {
		t.Fatalf("%d requests, errors %q", len(bodies), errs)
	}
	names, first, others := firstCallSignatures(t, bodies[2])
	if !reflect.DeepEqual(names, []string{"get_weather", "get_weather"}) ||
		!bytes.Equal(first[0], signatureBytes(0, "call")) || !bytes.Equal(first[1], signatureBytes(1, "call")) {
		t.Fatalf("the third request replays %v with signatures %q, %q; want the bytes issued", names, first[0], first[1])
	}
	if len(others) != 1 || len(others[0]) != 0 {
		t.Fatalf("the second parallel call was replayed with signature %q, want none", others)
	}

	final := res.Messages[len(res.Messages)-1]
	if strings.Contains(final.Text, "Comparing") {
		t.Fatalf("the thought summary leaked into the answer: %q", final.Text)
	}
	if want := []llm.Reasoning{{Provider: gemini.Provider, Text: "**Comparing** both cities."}}; !reflect.DeepEqual(final.Reasoning, want) {
		t.Fatalf("reasoning = %+v, want %+v", final.Reasoning, want)
	}
	// The thought summary of the first step is not sent back: it carries
	// no signature, and Gemini reads nothing from it.
	mustNotContain(t, bodies[2], "Planning", "an unsigned thought summary")
}

// TestAPIResumeOnAnotherAdapter pauses a durable run for a person's
// confirmation after a model step, then resumes it with a new adapter on a
// new client, as another process or worker would: the request after the
// resume replays both steps' calls with exactly the signature bytes Gemini
// issued, taken from the run's log, and the log's events give them back
// byte for byte.
func TestAPIResumeOnAnotherAdapter(t *testing.T) {
	api := newFakeAPI(t,
		apiStep{calls: []apiCall{{"get_weather", `{"city":"Oslo"}`}}},
		apiStep{calls: []apiCall{{"refund_order", `{"order_id":"A100"}`}}},
		apiStep{text: "Order A100 is refunded."},
	)
	type refundIn struct {
		OrderID string `json:"order_id"`
	}
	refund := tool.MustNew(tool.Spec[refundIn]{Name: "refund_order", Description: "refund an order", Effect: tool.Write},
		func(ctx context.Context, in refundIn) (map[string]any, error) {
			return map[string]any{"refunded": in.OrderID}, nil
		})
	tools := weatherTools(t)
	reg, err := tool.NewRegistry(append(tools.Tools(), refund)...)
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory()
	cfg := func(m llm.Model) loop.Config {
		return loop.Config{
			Model: m, ModelName: "gemini-3-flash-preview", Tools: reg,
			Policy: policy.ConfirmWrites(), Store: st,
			NewRunID: func() string { return "run-1" },
		}
	}
	ctx := context.Background()
	first, err := loop.NewRunner(cfg(api.model(t, nil)))
	if err != nil {
		t.Fatal(err)
	}
	paused, err := first.Run(ctx, []llm.Message{llm.UserMessage("Refund order A100 if it is warm in Oslo.")})
	if !errors.Is(err, loop.ConfirmationRequired) || len(paused.Pending) != 1 {
		t.Fatalf("run: %v, %+v", err, paused)
	}
	if err := loop.Decide(ctx, st, "run-1", loop.Confirmation{CallID: paused.Pending[0].CallID, Approved: true, By: "bob"}, time.Now()); err != nil {
		t.Fatal(err)
	}

	second, err := loop.NewRunner(cfg(api.model(t, nil))) // a new adapter, a new client
	if err != nil {
		t.Fatal(err)
	}
	res, err := second.Resume(ctx, "run-1")
	if err != nil || res.Status != loop.FinalAnswer || res.Answer() != "Order A100 is refunded." {
		t.Fatalf("resume: %v, %+v", err, res)
	}
	bodies, errs := api.requests()
	if len(bodies) != 3 || errs[2] != "" {
		t.Fatalf("%d requests, errors %q", len(bodies), errs)
	}
	names, sigs, _ := firstCallSignatures(t, bodies[2])
	if !reflect.DeepEqual(names, []string{"get_weather", "refund_order"}) ||
		!bytes.Equal(sigs[0], signatureBytes(0, "call")) || !bytes.Equal(sigs[1], signatureBytes(1, "call")) {
		t.Fatalf("after the resume, calls %v carry signatures %q, %q; want the bytes issued, %q and %q",
			names, sigs[0], sigs[1], signatureBytes(0, "call"), signatureBytes(1, "call"))
	}

	events, err := loop.LoadEvents(ctx, st, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	var logged [][]byte
	for _, ev := range events {
		if ev.Kind == loop.ModelResponded {
			for _, c := range ev.Response.Message.ToolCalls {
				if c.State == nil || c.State.Provider != gemini.Provider {
					t.Fatalf("logged call %+v has no Gemini state", c)
				}
				logged = append(logged, c.State.Data)
			}
		}
	}
	if len(logged) != 2 || !bytes.Equal(logged[0], signatureBytes(0, "call")) || !bytes.Equal(logged[1], signatureBytes(1, "call")) {
		t.Fatalf("the log holds signatures %q", logged)
	}
}

// TestAPIRejectsMissingOrAlteredSignature replays a Gemini 3 call in the
// current turn without its state, with the state altered, and with the
// state intact: the API refuses the first two with its own error text (a
// bad_request the adapter passes on), and accepts the last. A call without
// state gets the placeholder unless NoSignatureFallback is set, and the
// placeholder counts as dropped state.
func TestAPIRejectsMissingOrAlteredSignature(t *testing.T) {
	script := []apiStep{{calls: []apiCall{{"get_weather", `{"city":"Oslo"}`}}}}
	for i := 0; i < 4; i++ {
		script = append(script, apiStep{text: "It is 12 °C in Oslo."})
	}
	api := newFakeAPI(t, script...)
	ctx := context.Background()
	req := callRequest(1)
	req.Model = "gemini-3-flash-preview"
	resp, err := api.model(t, nil).Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	call := resp.Message.ToolCalls[0]
	if call.State == nil || call.State.Provider != gemini.Provider || !bytes.Equal(call.State.Data, signatureBytes(0, "call")) {
		t.Fatalf("call state = %+v, want Gemini's signature as sent", call.State)
	}
	replay := func(opts *gemini.Options, state *llm.ProviderState) (*llm.Response, error) {
		msg := resp.Message
		msg.ToolCalls = []llm.ToolCall{call}
		msg.ToolCalls[0].State = state
		history := append(append([]llm.Message(nil), req.Messages...), msg, llm.ToolMessage(llm.ToolResult{
			CallID: call.ID, Name: call.Name, Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":12}`)}))
		o := gemini.Options{Model: "gemini-3-flash-preview"}
		if opts != nil {
			o = *opts
		}
		return api.model(t, &o).Generate(ctx, &llm.Request{Messages: history, Tools: req.Tools, Step: 2})
	}

	_, err = replay(&gemini.Options{Model: "gemini-3-flash-preview", NoSignatureFallback: true}, nil)
	assertKind(t, err, llm.KindBadRequest, false)
	if want := "Function call is missing a thought_signature in functionCall parts"; !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "default_api:get_weather` , position 2") {
		t.Fatalf("error %q, want the API's %q naming the call", err, want)
	}

	altered := append([]byte(nil), call.State.Data...)
	altered[len(altered)-1] ^= 1
	_, err = replay(nil, &llm.ProviderState{Provider: gemini.Provider, Data: altered})
	assertKind(t, err, llm.KindBadRequest, false)
	if !strings.Contains(err.Error(), corruptedSignature) {
		t.Fatalf("error %q, want the API's %q", err, corruptedSignature)
	}

	got, err := replay(nil, nil)
	if err != nil || got.DroppedState != 1 {
		t.Fatalf("a call without state: %v, dropped %v; want the placeholder accepted and counted", err, got)
	}
	bodies, _ := api.requests()
	if _, sigs, _ := firstCallSignatures(t, bodies[len(bodies)-1]); string(sigs[0]) != "skip_thought_signature_validator" {
		t.Fatalf("a call without state was sent with %q", sigs[0])
	}

	got, err = replay(nil, call.State)
	if err != nil || got.DroppedState != 0 {
		t.Fatalf("the intact state: %v, dropped %v", err, got)
	}
}

// TestForeignStateDropped sends a history switched from other providers to
// Gemini: their state (on a message and on a call) never reaches Gemini and
// is counted in DroppedState, together with the placeholder signature the
// step needs on Gemini 3 (none on Gemini 2.5), while Gemini's own state on
// a later step is sent.
func TestForeignStateDropped(t *testing.T) {
	foreignMsg := []byte("anthropic-thinking-signature-MSG")
	foreignCall := []byte("openai-encrypted-reasoning-CALL")
	ownSig := []byte{0x0a, 0xff, 0x00, 0x80, 'g', 'e', 'm'}
	history := []llm.Message{
		llm.UserMessage("Weather in Oslo and Bergen?"),
		{Role: llm.RoleAssistant, Text: "Checking Oslo.",
			Reasoning: []llm.Reasoning{{Provider: "anthropic", Text: "ANTHROPIC-THOUGHT"}},
			State:     &llm.ProviderState{Provider: "anthropic", Data: foreignMsg},
			ToolCalls: []llm.ToolCall{{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`),
				State: &llm.ProviderState{Provider: "openai-responses", Data: foreignCall}}}},
		llm.ToolMessage(llm.ToolResult{CallID: "c1", Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":12}`)}),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c2", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Bergen"}`),
			State: &llm.ProviderState{Provider: gemini.Provider, Data: ownSig}}}},
		llm.ToolMessage(llm.ToolResult{CallID: "c2", Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":11}`)}),
	}
	for _, c := range []struct {
		model       string
		placeholder string
		dropped     int
	}{
		{"gemini-3-flash-preview", "skip_thought_signature_validator", 3},
		{"gemini-2.5-flash", "", 2},
	} {
		t.Run(c.model, func(t *testing.T) {
			s := newServer(t, ok("final_answer.json"))
			resp, err := s.model(t, nil).Generate(context.Background(), &llm.Request{Model: c.model, Messages: history})
			if err != nil {
				t.Fatal(err)
			}
			if resp.DroppedState != c.dropped {
				t.Fatalf("DroppedState = %d, want %d", resp.DroppedState, c.dropped)
			}
			body := s.last()
			for _, b := range [][]byte{foreignMsg, foreignCall} {
				mustNotContain(t, body, string(b), "another provider's state")
				mustNotContain(t, body, base64.StdEncoding.EncodeToString(b), "another provider's state")
			}
			mustNotContain(t, body, "ANTHROPIC-THOUGHT", "another provider's reasoning")
			_, sigs, _ := firstCallSignatures(t, body)
			if string(sigs[0]) != c.placeholder || !bytes.Equal(sigs[1], ownSig) {
				t.Fatalf("signatures sent %q, %q; want %q and Gemini's own", sigs[0], sigs[1], c.placeholder)
			}
		})
	}
}

// TestThoughtsAreReasoning maps a reply with a thought summary and a
// signed answer: the summary is Reasoning, not Text; the answer's
// signature is message state that survives JSON (a log) and goes back on
// the answer's part in the next request. Edited text no longer fits the
// state: it is sent without the signature, which counts as dropped.
func TestThoughtsAreReasoning(t *testing.T) {
	s := newServer(t, ok("thought_summary.json"), ok("final_answer.json"))
	m := s.model(t, &gemini.Options{Model: "gemini-3-flash-preview", IncludeThoughts: true})
	req := callRequest(1)
	req.Model = ""
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Message
	if msg.Text != "It is 12 °C in Oslo." || strings.Contains(msg.Text, "Checking") {
		t.Fatalf("text = %q, want the answer alone", msg.Text)
	}
	wantThought := "**Checking the forecast**\n\nThe user wants Oslo's weather; the tool result says 12 °C."
	if !reflect.DeepEqual(msg.Reasoning, []llm.Reasoning{{Provider: gemini.Provider, Text: wantThought}}) {
		t.Fatalf("reasoning = %+v", msg.Reasoning)
	}
	if msg.State == nil || msg.State.Provider != gemini.Provider {
		t.Fatalf("the answer's signature was not kept: state %+v", msg.State)
	}
	logged, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	var back llm.Message
	if err := json.Unmarshal(logged, &back); err != nil {
		t.Fatal(err)
	}
	wantSig, _ := base64.StdEncoding.DecodeString("CiQBVKhc7mZpbmFsLXRleHQtc2lnbmF0dXJlLWV4YW1wbGU=")
	send := func(answer llm.Message) (*llm.Response, []wirePart) {
		t.Helper()
		history := append(append([]llm.Message(nil), req.Messages...), answer, llm.UserMessage("And tomorrow?"))
		resp, err := m.Generate(context.Background(), &llm.Request{Messages: history, Step: 2})
		if err != nil {
			t.Fatal(err)
		}
		return resp, decodeRequest(t, s.last()).Contents[1].Parts
	}
	resp2, parts := send(back)
	// The unsigned thought summary stays out; the answer keeps its signature.
	if len(parts) != 1 || parts[0].Text != msg.Text || !bytes.Equal(parts[0].ThoughtSignature, wantSig) || resp2.DroppedState != 0 {
		t.Fatalf("replayed parts %+v, dropped %d; want the answer with its signature", parts, resp2.DroppedState)
	}

	edited := back
	edited.Text = "It is warm in Oslo."
	resp3, parts := send(edited)
	if len(parts) != 1 || parts[0].Text != edited.Text || len(parts[0].ThoughtSignature) != 0 || resp3.DroppedState != 1 {
		t.Fatalf("edited answer replayed as %+v, dropped %d; want no signature, one dropped", parts, resp3.DroppedState)
	}
}

// TestMessageStateKeepsPartLayout replays a reply whose signatures sit on a
// thought part, on the second of two text parts and on the first of two
// calls: the next request has the same parts, in the same order, with the
// same signatures, and no unsigned thought.
func TestMessageStateKeepsPartLayout(t *testing.T) {
	s := newServer(t, ok("signed_parts.json"), ok("final_answer.json"))
	m := s.model(t, &gemini.Options{Model: "gemini-3-flash-preview", IncludeThoughts: true})
	req := callRequest(1)
	req.Model = ""
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Message
	if msg.Text != "Let me check both." || len(msg.ToolCalls) != 2 || len(msg.Reasoning) != 2 {
		t.Fatalf("message = %+v", msg)
	}
	history := append(append([]llm.Message(nil), req.Messages...), msg)
	for _, c := range msg.ToolCalls {
		history = append(history, llm.ToolMessage(llm.ToolResult{CallID: c.ID, Name: c.Name, Status: llm.StatusOK, Content: json.RawMessage(`{}`)}))
	}
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: history, Tools: req.Tools, Step: 2}); err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Contents []struct {
			Parts []json.RawMessage `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(s.last(), &sent); err != nil {
		t.Fatal(err)
	}
	var want struct {
		Candidates []struct {
			Content struct {
				Parts []json.RawMessage `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal(fixture(t, "signed_parts.json"), &want); err != nil {
		t.Fatal(err)
	}
	received := want.Candidates[0].Content.Parts
	// The second part is an unsigned thought summary: it is not sent back.
	expected := append(append([]json.RawMessage(nil), received[:1]...), received[2:]...)
	got := sent.Contents[1].Parts
	if len(got) != len(expected) {
		t.Fatalf("replayed %d parts, want %d: %s", len(got), len(expected), s.last())
	}
	for i := range got {
		// Gemini gave no call IDs; the adapter's generated ones go back.
		var g map[string]any
		if err := json.Unmarshal(got[i], &g); err != nil {
			t.Fatal(err)
		}
		if fc, ok := g["functionCall"].(map[string]any); ok {
			delete(fc, "id")
		}
		gb, _ := json.Marshal(g)
		assertJSON(t, gb, expected[i])
	}
}

// TestThinkingOptions checks the thinkingConfig each option sends, and
// that options Gemini would refuse fail before anything is sent, naming
// the option.
func TestThinkingOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		opts gemini.Options
		want string
	}{
		{"none", gemini.Options{}, ``},
		{"level", gemini.Options{ThinkingLevel: "High", IncludeThoughts: true}, `{"thinkingLevel":"HIGH","includeThoughts":true}`},
		{"minimal", gemini.Options{ThinkingLevel: "minimal"}, `{"thinkingLevel":"MINIMAL"}`},
		{"budget", gemini.Options{ThinkingBudget: genai.Ptr[int32](1024)}, `{"thinkingBudget":1024}`},
		{"off", gemini.Options{ThinkingBudget: genai.Ptr[int32](0)}, `{"thinkingBudget":0}`},
		{"dynamic", gemini.Options{ThinkingBudget: genai.Ptr[int32](-1), IncludeThoughts: true}, `{"thinkingBudget":-1,"includeThoughts":true}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, ok("final_answer.json"))
			c.opts.Model = "gemini-3-flash-preview"
			if _, err := s.model(t, &c.opts).Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}}); err != nil {
				t.Fatal(err)
			}
			var body struct {
				GenerationConfig struct {
					ThinkingConfig json.RawMessage `json:"thinkingConfig"`
				} `json:"generationConfig"`
			}
			if err := json.Unmarshal(s.last(), &body); err != nil {
				t.Fatal(err)
			}
			got := body.GenerationConfig.ThinkingConfig
			if c.want == "" {
				if got != nil {
					t.Fatalf("thinkingConfig = %s, want none", got)
				}
				return
			}
			assertJSON(t, got, []byte(c.want))
		})
	}
	for _, c := range []struct {
		name    string
		opts    gemini.Options
		mention string
	}{
		{"unknown level", gemini.Options{ThinkingLevel: "extreme"}, `"extreme"`},
		{"level and budget", gemini.Options{ThinkingLevel: "low", ThinkingBudget: genai.Ptr[int32](512)}, "both set"},
		{"negative budget", gemini.Options{ThinkingBudget: genai.Ptr[int32](-5)}, "-5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, ok("final_answer.json"))
			c.opts.Model = "gemini-3-flash-preview"
			_, err := s.model(t, &c.opts).Generate(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}})
			assertKind(t, err, llm.KindBadRequest, false)
			if !strings.Contains(err.Error(), c.mention) || !strings.Contains(err.Error(), "Options.Thinking") {
				t.Fatalf("error %q should name the option and %s", err, c.mention)
			}
			if b := s.last(); b != nil {
				t.Fatalf("a request was sent: %s", b)
			}
		})
	}
}

// TestHiddenReasoning: a reply that spent thinking tokens without showing
// any thought says so in Reasoning, for people; Text and the calls are
// unchanged.
func TestHiddenReasoning(t *testing.T) {
	s := newServer(t, ok("single_call.json"))
	resp, err := s.model(t, nil).Generate(context.Background(), callRequest(1))
	if err != nil {
		t.Fatal(err)
	}
	if want := []llm.Reasoning{{Provider: gemini.Provider, Hidden: true}}; !reflect.DeepEqual(resp.Message.Reasoning, want) {
		t.Fatalf("reasoning = %+v, want %+v", resp.Message.Reasoning, want)
	}
}

// TestCorruptMessageStateIsAnError: Gemini state on a message that is not
// the adapter's encoding is refused with an error naming the message,
// before anything is sent.
func TestCorruptMessageStateIsAnError(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	history := []llm.Message{
		llm.UserMessage("hi"),
		{Role: llm.RoleAssistant, Text: "hello", State: &llm.ProviderState{Provider: gemini.Provider, Data: []byte("not json")}},
		llm.UserMessage("again"),
	}
	_, err := s.model(t, &gemini.Options{Model: "gemini-3-flash-preview"}).Generate(context.Background(), &llm.Request{Messages: history})
	assertKind(t, err, llm.KindBadRequest, false)
	if !strings.Contains(err.Error(), "message 1") {
		t.Fatalf("error %q should name the message", err)
	}
	if b := s.last(); b != nil {
		t.Fatalf("a request was sent: %s", b)
	}
}
