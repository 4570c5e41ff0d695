package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// wireRecorder is a provider that records what each request asked for and
// refuses it, so that a test can read the wire without a conversation.
type wireRecorder struct {
	mu      sync.Mutex
	bodies  []string
	headers []http.Header
	srv     *httptest.Server
}

func newWireRecorder(t *testing.T) *wireRecorder {
	w := &wireRecorder{}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.bodies = append(w.bodies, string(body))
		w.headers = append(w.headers, r.Header.Clone())
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusBadRequest)
		io.WriteString(rw, `{"error":{"type":"invalid_request_error","message":"recorded","code":"recorded"}}`)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// The reasoning flags reach each provider's request as that provider
// spells them, and flags a provider has no use for are refused, not
// dropped.
func TestReasoningFlags(t *testing.T) {
	env := map[string]string{"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k", "GEMINI_API_KEY": "k"}
	for _, tc := range []struct {
		name  string
		args  []string
		want  []string // in the request body
		beta  string   // in the anthropic-beta header
		usage string   // a usage error naming this instead
	}{
		{name: "anthropic budget", args: []string{"--provider", "anthropic", "--thinking-budget", "2048"},
			want: []string{`"thinking":{"budget_tokens":2048,"type":"enabled"}`}, beta: "interleaved-thinking"},
		{name: "anthropic adaptive", args: []string{"--provider", "anthropic", "--adaptive-thinking"},
			want: []string{`"thinking":{"type":"adaptive"}`}},
		{name: "responses effort and summary", args: []string{"--provider", "openai-responses", "--reasoning-effort", "high", "--show-reasoning"},
			want: []string{`"effort":"high"`, `"summary":"auto"`, `"reasoning.encrypted_content"`}},
		{name: "chat effort", args: []string{"--provider", "openai", "--reasoning-effort", "low"},
			want: []string{`"reasoning_effort":"low"`}},
		{name: "gemini level and thoughts", args: []string{"--provider", "gemini", "--reasoning-effort", "low", "--show-reasoning"},
			want: []string{`"thinkingLevel":"LOW"`, `"includeThoughts":true`}},
		{name: "anthropic budget too small", args: []string{"--provider", "anthropic", "--thinking-budget", "10"}, usage: "--thinking-budget 10"},
		{name: "anthropic effort", args: []string{"--provider", "anthropic", "--reasoning-effort", "high"}, usage: "--reasoning-effort"},
		{name: "openai budget", args: []string{"--provider", "openai", "--thinking-budget", "2048"}, usage: "--reasoning-effort instead"},
		{name: "chat summaries", args: []string{"--provider", "openai", "--show-reasoning"}, usage: "openai-responses"},
		{name: "gemini level and budget", args: []string{"--provider", "gemini", "--reasoning-effort", "low", "--thinking-budget", "100"}, usage: "ThinkingLevel"},
		{name: "sandbox", args: []string{"--provider", "sandbox", "--tools", "orders", "--thinking-budget", "2048"}, usage: "does not think"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newWireRecorder(t)
			args := append([]string{"run", "--model", "m", "--base-url", rec.srv.URL, "--db", filepath.Join(t.TempDir(), "t.db"),
				"--log", t.TempDir(), "--max-steps", "1"}, tc.args...)
			code, out, errOut := callEnv(env, append(args, "hello")...)
			if tc.usage != "" {
				if code != exitUsage || !strings.Contains(errOut, tc.usage) || len(rec.bodies) != 0 {
					t.Fatalf("exit %d, %d requests, stderr %q; want a usage error naming %q and no request", code, len(rec.bodies), errOut, tc.usage)
				}
				return
			}
			if len(rec.bodies) == 0 {
				t.Fatalf("no request reached the provider: exit %d\n%s%s", code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(rec.bodies[0], w) {
					t.Errorf("the request lacks %s:\n%s", w, rec.bodies[0])
				}
			}
			if tc.beta != "" && !strings.Contains(rec.headers[0].Get("anthropic-beta"), tc.beta) {
				t.Errorf("anthropic-beta %q lacks %s", rec.headers[0].Get("anthropic-beta"), tc.beta)
			}
		})
	}
}
