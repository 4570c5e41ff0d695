package trace

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
)

// TestMissCauseRewritten: a request that changes an earlier message, or
// drops some, with no context edit between, is named as a rewritten or
// cut history, by the message that changed. The loop never does this
// (its history only grows, but for its edits), so a log cannot show it.
func TestMissCauseRewritten(t *testing.T) {
	prev := []llm.Message{llm.SystemMessage("be brief"), llm.UserMessage("go"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "fetch", Arguments: json.RawMessage(`{}`)}}},
		{Role: llm.RoleTool, Result: &llm.ToolResult{CallID: "c1", Name: "fetch", Status: llm.StatusOK, Content: json.RawMessage(`1`)}}}
	changed := func(i int, m llm.Message) []llm.Message {
		out := append([]llm.Message(nil), prev...)
		out[i] = m
		return out
	}
	for _, tc := range []struct {
		req  []llm.Message
		want string
	}{
		{changed(0, llm.SystemMessage("be very brief")), "the system prompt (message 1 of the request) is not what the previous request sent"},
		{changed(3, llm.Message{Role: llm.RoleTool, Result: &llm.ToolResult{CallID: "c1", Name: "fetch", Status: llm.StatusOK, Content: json.RawMessage(`2`)}}),
			"the result of call c1 (fetch) (message 4 of the request)"},
		{changed(2, llm.UserMessage("hm")), "the assistant turn with call(s) c1 (message 3 of the request)"},
		{prev[:2], "the request has 2 message(s) where the previous one had 4, and no context edit of the run removed them"},
	} {
		d := firstChanged(prev, tc.req)
		seq, cause := missCause(nil, prev, tc.req, d, 0)
		if seq != 0 || !strings.Contains(cause, tc.want) {
			t.Errorf("changed at %d: edit %d, cause %q; want %q", d, seq, cause, tc.want)
		}
	}
	if d := firstChanged(prev, append(prev, llm.UserMessage("more"))); d != -1 {
		t.Errorf("a request that extends the previous one changes message %d", d)
	}
}
