package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// toolloop run manages the context by default for a model whose window
// is built in, and records the policy in the run's started event;
// --context-window and --keep-tool-results tune it, and
// --no-context-management turns it off.
func TestRunContextFlags(t *testing.T) {
	reply := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"text","text":"Hi."}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":2}}`
	for _, tc := range []struct {
		flags []string
		want  string // the started event's context; "" for none
	}{
		{nil, `"context":{"window":200000,"margin":20000,"low_water":100000,"keep_tool_results":3,"count_tokens":true,"clear_reasoning":true}`},
		{[]string{"--context-window", "60000", "--keep-tool-results", "5"}, `"context":{"window":60000,"margin":6000,"low_water":30000,"keep_tool_results":5,"count_tokens":true,"clear_reasoning":true}`},
		{[]string{"--no-context-management"}, ""},
		{[]string{"--compact"}, `"context":{"window":200000,"margin":20000,"low_water":100000,"keep_tool_results":3,"compact":true,"count_tokens":true,"clear_reasoning":true}`},
		{[]string{"--no-count-tokens", "--keep-reasoning"}, `"context":{"window":200000,"margin":20000,"low_water":100000,"keep_tool_results":3}`},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			s := newBodyServer(t, reply)
			logs := t.TempDir()
			args := append([]string{"run", "--no-stream", "--provider", "anthropic", "--model", "claude-sonnet-4-6", "--base-url", s.srv.URL,
				"--db", filepath.Join(t.TempDir(), "t.db"), "--log", logs}, tc.flags...)
			code, out, errOut := callEnv(map[string]string{"ANTHROPIC_API_KEY": "sk-ant"}, append(args, "Say hi.")...)
			if code != exitOK {
				t.Fatalf("exit %d: %s%s", code, out, errOut)
			}
			files, _ := filepath.Glob(filepath.Join(logs, "*.jsonl"))
			if len(files) != 1 {
				t.Fatalf("%d run logs", len(files))
			}
			b, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			started, _, _ := strings.Cut(string(b), "\n")
			if got := strings.Contains(started, `"context":`); tc.want == "" && got || tc.want != "" && !strings.Contains(started, tc.want) {
				t.Fatalf("started event %s; want %q", started, tc.want)
			}
		})
	}
}

// Context flags that contradict each other or make no sense are usage
// errors naming the flag, before any request.
func TestRunContextFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--context-window", "-5"}, "--context-window is -5"},
		{[]string{"--no-context-management", "--context-window", "60000"}, "give one or the other"},
		{[]string{"--no-context-management", "--compact"}, "give one or the other"},
		{[]string{"--no-context-management", "--no-count-tokens"}, "give one or the other"},
		{[]string{"--no-context-management", "--keep-reasoning"}, "give one or the other"},
		{[]string{"--context-window", "10"}, "smaller than any model's"},
	} {
		args := append([]string{"run", "--provider", "anthropic", "--model", "claude-sonnet-4-6", "--base-url", "http://127.0.0.1:1",
			"--db", filepath.Join(t.TempDir(), "t.db")}, tc.flags...)
		code, out, errOut := callEnv(map[string]string{"ANTHROPIC_API_KEY": "sk-ant"}, append(args, "Say hi.")...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %s%s; want exit %d naming %q", tc.flags, code, out, errOut, exitUsage, tc.want)
		}
	}
}
