package cli

import (
	"path/filepath"
	"testing"
)

// A run is priced by the cache writes the provider reports: writes to the
// hour-long cache cost 2x the input rate even when this command was not
// told the TTL (as a Temporal client is not: the worker chose it), the
// 5-minute cache's 1.25x.
func TestRunPricesHourLongWritesAsReported(t *testing.T) {
	for _, tc := range []struct {
		name, creation, wantCost string
	}{
		// A million tokens written, all to the hour-long cache: $6 at
		// claude-sonnet-4-6's $3 input.
		{"1h", `{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":1000000}`, "6.000000"},
		{"5m", `{"ephemeral_5m_input_tokens":1000000,"ephemeral_1h_input_tokens":0}`, "3.750000"},
		{"half and half", `{"ephemeral_5m_input_tokens":500000,"ephemeral_1h_input_tokens":500000}`, "4.875000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"text","text":"Hi."}],` +
				`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":1000000,` +
				`"cache_creation":` + tc.creation + `,"cache_read_input_tokens":0,"output_tokens":0}}`
			s := newBodyServer(t, reply)
			args := []string{"run", "--no-stream", "--provider", "anthropic", "--model", "claude-sonnet-4-6", "--base-url", s.srv.URL,
				"--db", filepath.Join(t.TempDir(), "t.db"), "--log", t.TempDir(), "Say hi."}
			code, out, errOut := callEnv(map[string]string{"ANTHROPIC_API_KEY": "sk-ant"}, args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s%s", code, out, errOut)
			}
			if m := runLine.FindStringSubmatch(lines(out)[1]); m == nil || m[5] != tc.wantCost {
				t.Errorf("stop line %q, want cost=$%s", lines(out)[1], tc.wantCost)
			}
		})
	}
}
