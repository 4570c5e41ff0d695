package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
)

// With ServerClearToolUses, every request (a turn and a count) carries
// context_management with the clear_tool_uses edit, as the API's beta
// takes it, and the beta header; without it, neither.
func TestServerClearToolUses(t *testing.T) {
	opts := &Options{ServerClearToolUses: &ServerClearToolUses{TriggerTokens: 30000, Keep: 2, ClearAtLeast: 5000, ExcludeTools: []string{"memory"}}}
	s := newServer(t, ok("final_answer.json"), ok("count_tokens.json"))
	m := New(s.client(), opts)
	opts.ServerClearToolUses.ExcludeTools[0] = "changed" // New copied it
	if _, err := m.Generate(context.Background(), countRequest()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CountTokens(context.Background(), countRequest()); err != nil {
		t.Fatal(err)
	}
	want := `{"edits":[{"type":"clear_tool_uses_20250919","clear_at_least":{"type":"input_tokens","value":5000},` +
		`"exclude_tools":["memory"],"keep":{"type":"tool_uses","value":2},"trigger":{"type":"input_tokens","value":30000}}]}`
	for i, body := range s.requests() {
		var req struct {
			ContextManagement json.RawMessage `json:"context_management"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, req.ContextManagement, want) {
			t.Errorf("request %d (%s): context_management = %s, want %s", i, s.paths[i], req.ContextManagement, want)
		}
		if got := s.headers[i].Get("anthropic-beta"); !strings.Contains(got, "context-management-2025-06-27") {
			t.Errorf("request %d: anthropic-beta = %q, want context-management-2025-06-27", i, got)
		}
	}

	plain := newServer(t, ok("final_answer.json"))
	if _, err := New(plain.client(), nil).Generate(context.Background(), countRequest()); err != nil {
		t.Fatal(err)
	}
	if b := plain.last(); strings.Contains(string(b), "context_management") || plain.headers[0].Get("anthropic-beta") != "" {
		t.Errorf("a request without the option carries context management: %s", b)
	}
}

// Settings the API would refuse are refused before anything is sent.
func TestServerClearToolUsesInvalid(t *testing.T) {
	s := newServer(t, ok("final_answer.json"))
	_, err := New(s.client(), &Options{ServerClearToolUses: &ServerClearToolUses{Keep: -1}}).Generate(context.Background(), countRequest())
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindBadRequest || !strings.Contains(err.Error(), "ServerClearToolUses") || len(s.requests()) != 0 {
		t.Fatalf("err = %v after %d requests; want a bad request naming ServerClearToolUses, nothing sent", err, len(s.requests()))
	}
}

func jsonEqual(t *testing.T, a json.RawMessage, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
