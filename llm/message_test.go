package llm_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
)

func TestConstructors(t *testing.T) {
	if m := llm.UserMessage("hi"); m.Role != llm.RoleUser || m.Text != "hi" {
		t.Errorf("UserMessage = %+v", m)
	}
	if m := llm.SystemMessage("rules"); m.Role != llm.RoleSystem || m.Text != "rules" {
		t.Errorf("SystemMessage = %+v", m)
	}
	r := llm.ToolResult{CallID: "c1", Name: "get_order", Status: llm.StatusOK, Content: json.RawMessage(`{"id":1}`)}
	m := llm.ToolMessage(r)
	if m.Role != llm.RoleTool || m.Result == nil || m.Result.CallID != "c1" {
		t.Fatalf("ToolMessage = %+v", m)
	}
	// The message holds its own copy of the result struct.
	r.CallID = "changed"
	if m.Result.CallID != "c1" {
		t.Errorf("ToolMessage shares the caller's result: CallID = %q", m.Result.CallID)
	}
}

func TestErrorContent(t *testing.T) {
	raw := llm.ErrorContent(llm.KindNotFound, `no order "A1"`)
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("ErrorContent is not JSON: %v (%s)", err, raw)
	}
	want := map[string]any{"error": `no order "A1"`, "kind": "not_found"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ErrorContent = %v, want %v", got, want)
	}
}

// A message survives a JSON round trip with its call IDs and raw arguments
// intact (stores and replay fixtures depend on this).
func TestMessageJSONRoundTrip(t *testing.T) {
	msgs := []llm.Message{
		llm.UserMessage("where is A100?"),
		{Role: llm.RoleAssistant, Text: "checking", ToolCalls: []llm.ToolCall{
			{ID: "call_1", Name: "get_order", Arguments: json.RawMessage(`{"order_id":"A100"}`)},
		}},
		llm.ToolMessage(llm.ToolResult{
			CallID: "call_1", Name: "get_order", Status: llm.StatusError, ErrorKind: llm.KindNotFound,
			Content: llm.ErrorContent(llm.KindNotFound, "no such order"),
		}),
	}
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var back []llm.Message
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, msgs) {
		t.Errorf("round trip changed the messages:\n got %+v\nwant %+v", back, msgs)
	}
	if err := llm.CheckHistory(back); err != nil {
		t.Errorf("round-tripped history is invalid: %v", err)
	}
}

func TestToolCallJSONKeepsInvalidArguments(t *testing.T) {
	for _, args := range []string{`{"city":"Oslo"}`, `{"city":`, `not json at all`, ``} {
		in := llm.ToolCall{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(args)}
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		var out llm.ToolCall
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%q: %v (%s)", args, err, b)
		}
		if out.ID != in.ID || out.Name != in.Name || string(out.Arguments) != args {
			t.Fatalf("%q came back as %+v (%s)", args, out, b)
		}
	}
}

// Whatever bytes a model sends as arguments, an encoded call gives them
// back exactly, also inside the documents that wrap it (a log event, a
// workflow payload): white space, characters encoding/json escapes, bytes
// that are not UTF-8, and nesting close to encoding/json's limit of 10000
// levels, which a wrapped document would pass.
func TestToolCallJSONIsExact(t *testing.T) {
	nested := func(depth int) string {
		return strings.Repeat(`{"a":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1)
	}
	for _, args := range []string{
		`{"a":1}`, `{ "a" : 1 }`, " {\"a\":1}\n", `{"q":"Q&A <b>"}`, "{\"s\":\"\u2028\"}", `null`, `"text"`,
		"{\"a\":\"\xff\"}", "\xff{", `{"a":"\"}"}`, nested(1000), nested(1001), nested(9998), nested(10000),
	} {
		in := llm.ToolCall{ID: "c1", Name: "t", Arguments: json.RawMessage(args)}
		// Wrapped a few levels deep, as a log event wraps a call.
		wrapped := map[string]any{"response": map[string]any{"message": map[string]any{"tool_calls": []llm.ToolCall{in}}}}
		b, err := json.Marshal(wrapped)
		if err != nil {
			t.Fatalf("%.40q: %v", args, err)
		}
		var out struct {
			Response struct {
				Message struct {
					ToolCalls []llm.ToolCall `json:"tool_calls"`
				} `json:"message"`
			} `json:"response"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%.40q: %v", args, err)
		}
		if calls := out.Response.Message.ToolCalls; len(calls) != 1 || string(calls[0].Arguments) != args {
			var got string
			if len(calls) == 1 {
				got = string(calls[0].Arguments)
			}
			t.Fatalf("%.40q came back as %d calls, the first %.60q", args, len(calls), got)
		}
	}
	// Ordinary arguments stay readable in the log: embedded, not quoted.
	b, err := json.Marshal(llm.ToolCall{ID: "c1", Name: "t", Arguments: json.RawMessage(`{"id":"A1"}`)})
	if err != nil || string(b) != `{"id":"c1","name":"t","arguments":{"id":"A1"}}` {
		t.Fatalf("encoded as %s (%v)", b, err)
	}
}

// Provider state survives a JSON round trip byte for byte, on a message
// and on a tool call, whatever bytes it holds.
func TestProviderStateRoundTrip(t *testing.T) {
	odd := []byte{0, 0xff, '<', '>', '&', '"', '\\', 0xe2, 0x80, 0xa8}
	m := llm.Message{Role: llm.RoleAssistant, Text: "checking",
		Reasoning: []llm.Reasoning{{Provider: "anthropic", Text: "I should look it up"}, {Provider: "anthropic", Hidden: true}},
		State:     &llm.ProviderState{Provider: "anthropic", Data: odd},
		ToolCalls: []llm.ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"a":1}`), State: &llm.ProviderState{Provider: "gemini", Data: []byte("sig\x00")}}},
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back llm.Message
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, back) {
		t.Fatalf("round trip changed the message:\n%+v\n%+v", m, back)
	}
	if got := back.State.StateOf("anthropic"); !bytes.Equal(got, odd) || back.State.StateOf("gemini") != nil || (*llm.ProviderState)(nil).StateOf("x") != nil {
		t.Errorf("StateOf: %q", got)
	}
}
