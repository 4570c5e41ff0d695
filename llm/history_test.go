package llm_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
)

func call(id, name string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: []byte(`{}`)}
}

func assistant(calls ...llm.ToolCall) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, ToolCalls: calls}
}

func result(id, name string) llm.Message {
	return llm.ToolMessage(llm.ToolResult{CallID: id, Name: name, Status: llm.StatusOK, Content: []byte(`{}`)})
}

func TestCheckHistory(t *testing.T) {
	tests := []struct {
		name    string
		msgs    []llm.Message
		wantErr string // substring; empty means valid
	}{
		{
			name: "empty history",
			msgs: nil,
		},
		{
			name: "text only",
			msgs: []llm.Message{
				llm.SystemMessage("be brief"),
				llm.UserMessage("hi"),
				{Role: llm.RoleAssistant, Text: "hello"},
			},
		},
		{
			name: "valid two turns",
			msgs: []llm.Message{
				llm.UserMessage("where is my order?"),
				assistant(call("c1", "get_order"), call("c2", "get_customer")),
				result("c1", "get_order"),
				result("c2", "get_customer"),
				assistant(call("c3", "track")),
				result("c3", "track"),
				{Role: llm.RoleAssistant, Text: "on its way"},
			},
		},
		{
			name: "results out of order matched by ID",
			msgs: []llm.Message{
				llm.UserMessage("q"),
				assistant(call("a", "x"), call("b", "y"), call("c", "z")),
				result("c", "z"),
				result("a", "x"),
				result("b", "y"),
			},
		},
		{
			name: "missing result",
			msgs: []llm.Message{
				llm.UserMessage("q"),
				assistant(call("c1", "get_order"), call("c2", "get_customer")),
				result("c1", "get_order"),
			},
			wantErr: `"c2"`,
		},
		{
			name: "missing result in an earlier turn",
			msgs: []llm.Message{
				assistant(call("c1", "get_order")),
				assistant(call("c2", "get_order")),
				result("c2", "get_order"),
			},
			wantErr: `"c1"`,
		},
		{
			name: "duplicate result",
			msgs: []llm.Message{
				assistant(call("c1", "get_order")),
				result("c1", "get_order"),
				result("c1", "get_order"),
			},
			wantErr: "second result",
		},
		{
			name: "result for unknown call",
			msgs: []llm.Message{
				assistant(call("c1", "get_order")),
				result("c1", "get_order"),
				result("ghost", "get_order"),
			},
			wantErr: `unknown call "ghost"`,
		},
		{
			name: "result before its call",
			msgs: []llm.Message{
				result("c1", "get_order"),
				assistant(call("c1", "get_order")),
			},
			wantErr: `unknown call "c1"`,
		},
		{
			name: "empty call ID",
			msgs: []llm.Message{
				assistant(call("", "get_order")),
				result("", "get_order"),
			},
			wantErr: "empty ID",
		},
		{
			name: "duplicate call ID in one turn",
			msgs: []llm.Message{
				assistant(call("c1", "a"), call("c1", "b")),
				result("c1", "a"),
			},
			wantErr: "used twice",
		},
		{
			name: "duplicate call ID across turns",
			msgs: []llm.Message{
				assistant(call("c1", "get_order")),
				result("c1", "get_order"),
				assistant(call("c1", "get_order")),
				result("c1", "get_order"),
			},
			wantErr: "used twice",
		},
		{
			name: "tool message without result",
			msgs: []llm.Message{
				assistant(call("c1", "get_order")),
				{Role: llm.RoleTool},
			},
			wantErr: "without a result",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := llm.CheckHistory(tt.msgs)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckHistory() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckHistory() = nil, want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckHistory() = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// With several unanswered calls, the error names the earliest one, every
// time: a history check that reports a different call from run to run makes
// logs and tests flaky.
func TestCheckHistoryMissingResultIsDeterministic(t *testing.T) {
	msgs := []llm.Message{assistant(call("c1", "a"), call("c2", "b"), call("c3", "c"), call("c4", "d"), call("c5", "e"))}
	for i := 0; i < 50; i++ {
		err := llm.CheckHistory(msgs)
		if err == nil || !strings.Contains(err.Error(), `"c1"`) {
			t.Fatalf("CheckHistory() = %v, want the first unanswered call c1", err)
		}
	}
}

// The error points at the offending message so a log reader can find it.
func TestCheckHistoryNamesMessageIndex(t *testing.T) {
	msgs := []llm.Message{
		llm.UserMessage("q"),
		assistant(call("c1", "a")),
		result("c1", "a"),
		result("c1", "a"),
	}
	err := llm.CheckHistory(msgs)
	if err == nil || !strings.Contains(err.Error(), "message 3") {
		t.Fatalf("CheckHistory() = %v, want it to name message 3", err)
	}
}

func TestCheckUserMessages(t *testing.T) {
	ok := []llm.Message{llm.SystemMessage(""), llm.UserMessage("hi"), {Role: llm.RoleAssistant}, llm.UserMessage(" x ")}
	if err := llm.CheckUserMessages(ok); err != nil {
		t.Errorf("CheckUserMessages(%v) = %v", ok, err)
	}
	for i, text := range []string{"", " ", "\t\n"} {
		msgs := append(slices.Clone(ok), llm.UserMessage(text))
		err := llm.CheckUserMessages(msgs)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("message %d: the user message is empty", len(ok))) {
			t.Errorf("case %d (%q): %v, want an error naming message %d", i, text, err, len(ok))
		}
	}
}
