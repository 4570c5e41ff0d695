package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// bindingTools are fetch_page and read_appendix, each returning about
// 2,000 tokens a call; the test excludes read_appendix from clearing, so
// that clearing alone cannot keep the history inside the window and the
// run compacts too.
func bindingTools(t *testing.T) *tool.Registry {
	type pageIn struct {
		Page int `json:"page"`
	}
	type pageOut struct {
		Text string `json:"text"`
	}
	page := func(name string) *tool.Tool {
		return tool.MustNew(tool.Spec[pageIn]{Name: name, Description: "returns one page"},
			func(ctx context.Context, in pageIn) (pageOut, error) {
				var b strings.Builder
				for b.Len() < 8000 {
					fmt.Fprintf(&b, "%s %d, line %d: the quarterly figures went up again. ", name, in.Page, b.Len()/60)
				}
				return pageOut{Text: b.String()}, nil
			})
	}
	reg, err := tool.NewRegistry(page("fetch_page"), page("read_appendix"))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// managedThinkingRun runs ten turns with thinking on and context
// management that clears old results and compacts, against the fake API
// that checks preserved thinking's prefixes.
func managedThinkingRun(t *testing.T, stream bool) (*loop.Result, *cacheAPI) {
	t.Helper()
	const turns = 10
	api := newCacheAPI(t, turns)
	api.thinking = true
	api.tools = []string{"fetch_page", "read_appendix"}
	res, err := loop.Run(context.Background(), loop.Config{
		Model:     New(api.client(), &Options{AdaptiveThinking: true, PromptCaching: true}),
		ModelName: "claude-sonnet-4-6",
		Tools:     bindingTools(t),
		Stream:    stream,
		Budgets:   loop.Budgets{MaxSteps: turns + 2, MaxToolCalls: turns + 2},
		Context: &loop.ContextPolicy{Window: 8000, KeepToolResults: 1, ExcludeTools: []string{"read_appendix"},
			Compact: true},
	}, []llm.Message{
		llm.SystemMessage("You read reports page by page. Call fetch_page and read_appendix in turn."),
		llm.UserMessage("Read the report and its appendix, then say so."),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res, api
}

// A run with thinking on whose context management clears old tool results
// and compacts edits the history under thinking blocks it still sends
// back, which a model with preserved thinking refuses with a 400 by
// default. The adapter sees from the prefixes it recorded that the history
// changed and asks the API to drop those blocks (and only then: the
// requests before the first edit do not ask); the run ends with its
// answer, and the turns made without their earlier reasoning say so.
func TestManagedRunKeepsGoingWithPreservedThinking(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			res, api := managedThinkingRun(t, stream)
			if res.Status != loop.FinalAnswer {
				t.Fatalf("status %s (%s), want final_answer", res.Status, res.Detail)
			}
			var cleared, summarized, droppedTurns int
			firstEdit := -1 // the number of model requests before the first edit
			requests := 0
			for _, ev := range res.Events {
				switch ev.Kind {
				case loop.ContextEdited:
					cleared += len(ev.Edit.Cleared)
					if firstEdit < 0 {
						firstEdit = requests
					}
				case loop.ContextSummarized:
					summarized++
					requests++
					if firstEdit < 0 {
						firstEdit = requests
					}
				case loop.ModelResponded:
					requests++
					if ev.Response.DroppedReasoning > 0 {
						droppedTurns++
					}
				}
			}
			if cleared == 0 || summarized == 0 {
				t.Fatalf("the run cleared %d results and compacted %d times; the test needs both", cleared, summarized)
			}
			if api.dropped == 0 || droppedTurns == 0 {
				t.Fatalf("the API dropped %d thinking blocks, %d turns report drops; want some of each", api.dropped, droppedTurns)
			}
			t.Logf("%d results cleared, %d compaction(s), %d thinking block(s) dropped by the API in %d turn(s)",
				cleared, summarized, api.dropped, droppedTurns)
			reqs := api.requests()
			asked := false
			for i, body := range reqs {
				if bytes.Contains(body, []byte("is being compacted to fit")) {
					continue // the summary request sends no thinking back
				}
				asks := bytes.Contains(body, []byte(`"prefix_mismatch_behavior":"drop_block"`))
				if i < firstEdit && asks {
					t.Errorf("request %d, before any edit, asks to drop thinking:\n%.300s", i+1, body)
				}
				// Once the history changed under thinking it stays
				// changed: every later request asks the same, so that
				// the requests stay alike for the prompt cache.
				if asked && !asks {
					t.Errorf("request %d no longer asks to drop thinking, although an earlier one did", i+1)
				}
				asked = asked || asks
			}
			if last := reqs[len(reqs)-1]; !bytes.Contains(last, []byte(`"block_binding":{"prefix_mismatch_behavior":"drop_block"}`)) ||
				!bytes.Contains(last, []byte(`"type":"adaptive"`)) {
				t.Errorf("the last request does not ask to drop thinking on its adaptive thinking:\n%.400s", last)
			}
		})
	}
}

// Without the adapter's fix the same run is refused: the fake's 400 is
// classified as a bad request that names the cause.
func TestPrefixMismatchErrorNamesTheCause(t *testing.T) {
	api := newCacheAPI(t, 5)
	api.thinking = true
	m := New(api.client(), &Options{AdaptiveThinking: true})
	first, err := m.Generate(context.Background(), &llm.Request{Model: "claude-sonnet-4-6",
		Messages: []llm.Message{llm.SystemMessage("Be brief."), llm.UserMessage("Read page 1.")}})
	if err != nil {
		t.Fatal(err)
	}
	// The opening user message changes under the thinking block, in a way
	// the adapter cannot see: its recorded prefix is taken out.
	msg := first.Message
	var st turnState
	if err := json.Unmarshal(msg.State.Data, &st); err != nil {
		t.Fatal(err)
	}
	st.Prefix = ""
	msg.State = &llm.ProviderState{Provider: provider, Data: mustJSON(t, st)}
	call := msg.ToolCalls[0]
	_, err = m.Generate(context.Background(), &llm.Request{Model: "claude-sonnet-4-6", Messages: []llm.Message{
		llm.SystemMessage("Be brief."), llm.UserMessage("Read page 1, please."), msg,
		llm.ToolMessage(llm.ToolResult{CallID: call.ID, Name: call.Name, Status: llm.StatusOK, Content: json.RawMessage(`{"text":"p1"}`)}),
	}})
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindBadRequest || le.Retryable {
		t.Fatalf("err = %v, want a bad request, not retryable", err)
	}
	if !errors.Is(err, ErrThinkingPrefixMismatch) {
		t.Fatalf("err = %v, does not match ErrThinkingPrefixMismatch", err)
	}
	if !strings.Contains(err.Error(), "messages.1.content.0") || !strings.Contains(err.Error(), "changed since the model wrote it") {
		t.Fatalf("err = %v, want the block's path and the cause", err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The adapter asks to drop thinking exactly when the history before a
// thinking block it sends back differs from the request the block came
// from: not for an unchanged history, a history without thinking, or a
// state recorded before prefixes were; yes for a cleared result, a
// changed system prompt, a changed tool list, a turn left out.
func TestPrefixChanged(t *testing.T) {
	tools := []llm.ToolDefinition{{Name: "fetch_page", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	// thinking returns the assistant turn the API would have answered
	// to tools and before, with its thinking bound to them.
	thinking := func(id string, tools []llm.ToolDefinition, before []llm.Message) llm.Message {
		prefix := (&requestBinding{req: &llm.Request{Tools: tools, Messages: before}}).replyPrefix()
		st := turnState{V: stateVersion, Prefix: prefix, Blocks: []stateBlock{
			{Type: blockThinking, Thinking: "next page", Signature: "sig-" + id}, {Type: blockToolUse, ID: id}}}
		return llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: "fetch_page", Arguments: json.RawMessage(`{}`)}},
			State: &llm.ProviderState{Provider: provider, Data: mustJSON(t, st)}}
	}
	result := func(id, content string) llm.Message {
		return llm.ToolMessage(llm.ToolResult{CallID: id, Name: "fetch_page", Status: llm.StatusOK, Content: json.RawMessage(content)})
	}
	h := []llm.Message{llm.SystemMessage("Read."), llm.UserMessage("Go.")}
	h = append(h, thinking("a", tools, h))
	h = append(h, result("a", `{"text":"page 1"}`))
	h = append(h, thinking("b", tools, h))
	h = append(h, result("b", `{"text":"page 2"}`))

	edit := func(f func(h []llm.Message) []llm.Message) []llm.Message { return f(slices.Clone(h)) }
	unbound := edit(func(h []llm.Message) []llm.Message {
		for i := range h {
			if h[i].State != nil {
				var st turnState
				json.Unmarshal(h[i].State.Data, &st)
				st.Prefix = ""
				h[i].State = &llm.ProviderState{Provider: provider, Data: mustJSON(t, st)}
			}
		}
		h[3] = result("a", `{"cleared":"gone"}`)
		return h
	})
	for _, c := range []struct {
		name  string
		tools []llm.ToolDefinition
		msgs  []llm.Message
		want  bool
	}{
		{"unchanged", tools, h, false},
		{"no thinking", tools, []llm.Message{llm.UserMessage("Go."), {Role: llm.RoleAssistant, Text: "Done."}}, false},
		{"recorded before prefixes", tools, unbound, false},
		{"result cleared", tools, edit(func(h []llm.Message) []llm.Message { h[3] = result("a", `{"cleared":"gone"}`); return h }), true},
		{"system changed", tools, edit(func(h []llm.Message) []llm.Message { h[0] = llm.SystemMessage("Read fast."); return h }), true},
		{"tools changed", append(slices.Clone(tools), llm.ToolDefinition{Name: "more", InputSchema: json.RawMessage(`{"type":"object"}`)}), h, true},
		{"summarized", tools, edit(func(h []llm.Message) []llm.Message {
			return append([]llm.Message{h[0], h[1], llm.UserMessage("A summary: page 1 read.")}, h[4:]...)
		}), true},
		{"last result cleared: nothing after it", tools, edit(func(h []llm.Message) []llm.Message { h[5] = result("b", `{"cleared":"gone"}`); return h }), false},
	} {
		b := &requestBinding{req: &llm.Request{Tools: c.tools, Messages: c.msgs}}
		if got := b.prefixChanged(); got != c.want {
			t.Errorf("%s: prefixChanged = %v, want %v", c.name, got, c.want)
		}
	}
}

// What digesting a request's history costs next to building and encoding
// the request itself: a 40-turn history of 2,000-token results, each turn
// with its thinking.
//
//	go test ./llm/anthropic -run '^$' -bench 'BenchmarkRequestBinding|BenchmarkRequestEncoding' -benchmem
func BenchmarkRequestBinding(b *testing.B) {
	req := longThinkingRequest(b)
	b.ResetTimer()
	for b.Loop() {
		bind := &requestBinding{req: req}
		if bind.prefixChanged() {
			b.Fatal("an unedited history changed")
		}
		_ = bind.replyPrefix()
	}
}

// BenchmarkRequestEncoding is the request's own cost, for comparison.
func BenchmarkRequestEncoding(b *testing.B) {
	req := longThinkingRequest(b)
	m := New(anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithAPIKey("test")), &Options{AdaptiveThinking: true, PromptCaching: true})
	b.ResetTimer()
	for b.Loop() {
		p, err := m.params(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(p); err != nil {
			b.Fatal(err)
		}
	}
}

func longThinkingRequest(b *testing.B) *llm.Request {
	tools := []llm.ToolDefinition{{Name: "fetch_page", InputSchema: json.RawMessage(`{"type":"object","properties":{"page":{"type":"integer"}}}`)}}
	h := []llm.Message{llm.SystemMessage("You read reports page by page."), llm.UserMessage("Read the report.")}
	page := strings.Repeat("Page n, line m: the quarterly figures went up again. ", 150)
	for i := range 40 {
		id := fmt.Sprintf("toolu_%03d", i)
		prefix := (&requestBinding{req: &llm.Request{Tools: tools, Messages: h}}).replyPrefix()
		st := turnState{V: stateVersion, Prefix: prefix, Blocks: []stateBlock{
			{Type: blockThinking, Thinking: "Page next.", Signature: strings.Repeat("s", 300)}, {Type: blockToolUse, ID: id}}}
		data, _ := json.Marshal(st)
		h = append(h, llm.Message{Role: llm.RoleAssistant, Reasoning: []llm.Reasoning{{Provider: provider, Text: "Page next."}},
			ToolCalls: []llm.ToolCall{{ID: id, Name: "fetch_page", Arguments: json.RawMessage(`{"page":1}`)}},
			State:     &llm.ProviderState{Provider: provider, Data: data}},
			llm.ToolMessage(llm.ToolResult{CallID: id, Name: "fetch_page", Status: llm.StatusOK, Content: mustJSONb(map[string]string{"text": page})}))
	}
	return &llm.Request{Model: "claude-sonnet-4-6", Tools: tools, Messages: h}
}

func mustJSONb(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// The prefix digest reads the fields of llm's types one by one: a field
// added to one of them must be added to the digest too (or said not to
// reach the wire), or an edit to it would go unseen.
func TestPrefixDigestKnowsEveryField(t *testing.T) {
	for _, c := range []struct {
		v    any
		want int
	}{
		{llm.Message{}, 6}, {llm.ToolCall{}, 4}, {llm.ToolResult{}, 5}, {llm.ToolDefinition{}, 3}, {llm.ProviderState{}, 2},
	} {
		if n := reflect.TypeOf(c.v).NumField(); n != c.want {
			t.Errorf("%T has %d fields, the prefix digest knows %d: update prefixDigest (binding.go)", c.v, n, c.want)
		}
	}
}

// A reply's input_transformations, in the JSON body or in a stream's
// message_start, count as DroppedReasoning: the thinking_dropped entries,
// whatever their reason, and not a block let through
// (thinking_mismatch_allowed).
func TestDroppedReasoningFromInputTransformations(t *testing.T) {
	const transformations = `"input_transformations":[` +
		`{"type":"thinking_dropped","path":"messages.1.content.0","reason":"prefix_binding_mismatch"},` +
		`{"type":"thinking_dropped","path":"messages.3.content.0","reason":"prefix_binding_mismatch"},` +
		`{"type":"thinking_mismatch_allowed","path":"messages.5.content.0","reason":"prefix_binding_mismatch"}],`
	sse := bytes.Replace(readFixture(t, "stream_thinking_calls.sse"),
		[]byte(`"message":{"id":"msg_01Th1nKq7Zp3Lm8Vw2Rx5Ncd",`), []byte(`"message":{`+transformations+`"id":"msg_01Th1nKq7Zp3Lm8Vw2Rx5Ncd",`), 1)
	body := bytes.Replace(readFixture(t, "thinking_calls.json"), []byte(`"id": "msg_01Th1nKq7Zp3Lm8Vw2Rx5Ncd",`),
		[]byte(transformations+`"id": "msg_01Th1nKq7Zp3Lm8Vw2Rx5Ncd",`), 1)
	if bytes.Equal(sse, readFixture(t, "stream_thinking_calls.sse")) || bytes.Equal(body, readFixture(t, "thinking_calls.json")) {
		t.Fatal("the fixtures changed: the test no longer adds input_transformations")
	}
	req := &llm.Request{Model: "claude-sonnet-4-6", Messages: []llm.Message{llm.UserMessage("Refund order A100.")}}
	streamed, err := llm.Collect(New(newSSEServer(t, sse, 3, 0).client(), nil).Stream(context.Background(), req))
	if err != nil {
		t.Fatal(err)
	}
	js := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(js.Close)
	generated, err := New(anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(js.URL),
		option.WithAPIKey("test"), option.WithMaxRetries(0)), nil).Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if streamed.DroppedReasoning != 2 || generated.DroppedReasoning != 2 {
		t.Fatalf("DroppedReasoning streamed %d, generated %d; want 2 each", streamed.DroppedReasoning, generated.DroppedReasoning)
	}
}
