package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// --server-clear-tool-uses N has Anthropic's requests carry its context
// editing (clear_tool_uses past N input tokens) with the beta header;
// without it they carry none.
func TestRunServerClearToolUses(t *testing.T) {
	reply := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"text","text":"Hi."}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":2}}`
	for _, on := range []bool{true, false} {
		s := newBodyServer(t, reply)
		args := []string{"run", "--no-stream", "--provider", "anthropic", "--model", "claude-sonnet-4-6", "--base-url", s.srv.URL,
			"--db", filepath.Join(t.TempDir(), "t.db"), "--log", t.TempDir()}
		if on {
			args = append(args, "--server-clear-tool-uses", "50000")
		}
		code, out, errOut := callEnv(map[string]string{"ANTHROPIC_API_KEY": "sk-ant"}, append(args, "Say hi.")...)
		if code != exitOK {
			t.Fatalf("exit %d: %s%s", code, out, errOut)
		}
		var req struct {
			ContextManagement *struct {
				Edits []struct {
					Type    string `json:"type"`
					Trigger struct {
						Type  string `json:"type"`
						Value int64  `json:"value"`
					} `json:"trigger"`
				} `json:"edits"`
			} `json:"context_management"`
		}
		if err := json.Unmarshal(s.last(), &req); err != nil {
			t.Fatal(err)
		}
		cm := req.ContextManagement
		switch {
		case !on && cm != nil:
			t.Fatalf("without the flag the request carries context_management:\n%s", s.last())
		case on && (cm == nil || len(cm.Edits) != 1 || cm.Edits[0].Type != "clear_tool_uses_20250919" ||
			cm.Edits[0].Trigger.Type != "input_tokens" || cm.Edits[0].Trigger.Value != 50000):
			t.Fatalf("want clear_tool_uses_20250919 past 50000 input tokens:\n%s", s.last())
		}
	}
}

// The flag for another provider, or a negative trigger, is a usage error
// naming it, before any request.
func TestRunServerClearToolUsesErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--provider", "anthropic", "--server-clear-tool-uses", "-1"}, "--server-clear-tool-uses is -1"},
		{[]string{"--provider", "openai", "--base-url", "http://127.0.0.1:1/v1", "--server-clear-tool-uses", "50000"}, "only Anthropic's API clears"},
	} {
		args := append([]string{"run", "--model", "m", "--db", filepath.Join(t.TempDir(), "t.db"), "--log", t.TempDir()}, tc.args...)
		code, _, errOut := callEnv(map[string]string{"ANTHROPIC_API_KEY": "k"}, append(args, "q")...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %q", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
}
