package cli

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// bodyServer answers every request with reply and keeps the bodies.
type bodyServer struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newBodyServer(t *testing.T, reply string) *bodyServer {
	s := &bodyServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, reply)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *bodyServer) last() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) == 0 {
		return nil
	}
	return s.bodies[len(s.bodies)-1]
}

// toolloop run caches by default: Anthropic requests carry cache_control
// breakpoints (the five-minute cache, or the hour-long one with --cache-ttl
// 1h, whose writes are priced at twice the input rate), and
// --no-prompt-cache sends none.
func TestRunPromptCacheAnthropic(t *testing.T) {
	// A million tokens written to the cache, nothing else: the cost is the
	// cache-write rate of claude-sonnet-4-6 ($3 input).
	reply := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"text","text":"Hi."}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":1000000,"cache_read_input_tokens":0,"output_tokens":0}}`
	for _, tc := range []struct {
		flags    []string
		marker   string // the cache_control each breakpoint carries; "" for none
		wantCost string
	}{
		{nil, `"cache_control":{"type":"ephemeral"}`, "3.750000"},
		{[]string{"--cache-ttl", "5m"}, `"cache_control":{"type":"ephemeral"}`, "3.750000"},
		{[]string{"--cache-ttl", "1h"}, `"cache_control":{"ttl":"1h","type":"ephemeral"}`, "6.000000"},
		{[]string{"--no-prompt-cache"}, "", "3.750000"},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			s := newBodyServer(t, reply)
			args := append([]string{"run", "--no-stream", "--provider", "anthropic", "--model", "claude-sonnet-4-6", "--base-url", s.srv.URL,
				"--db", filepath.Join(t.TempDir(), "t.db"), "--log", t.TempDir()}, tc.flags...)
			code, out, errOut := callEnv(map[string]string{"ANTHROPIC_API_KEY": "sk-ant"}, append(args, "Say hi.")...)
			if code != exitOK {
				t.Fatalf("exit %d: %s%s", code, out, errOut)
			}
			body := s.last()
			n := bytes.Count(body, []byte(`"cache_control"`))
			switch {
			case tc.marker == "" && n > 0:
				t.Fatalf("--no-prompt-cache sent cache_control:\n%s", body)
			case tc.marker != "" && (n == 0 || n != bytes.Count(body, []byte(tc.marker))):
				t.Fatalf("want every breakpoint to be %s:\n%s", tc.marker, body)
			}
			if m := runLine.FindStringSubmatch(lines(out)[1]); m == nil || m[5] != tc.wantCost {
				t.Errorf("stop line %q, want cost=$%s", lines(out)[1], tc.wantCost)
			}
		})
	}
}

// OpenAI requests carry a prompt_cache_key for the run by default, and none
// with --no-prompt-cache.
func TestRunPromptCacheOpenAI(t *testing.T) {
	for _, tc := range []struct {
		provider, path, reply string
	}{
		{"openai", "/v1", `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`},
		{"openai-responses", "/v1", `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-4.1",` +
			`"output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi.","annotations":[]}]}],` +
			`"usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0}}}`},
	} {
		for _, off := range []bool{false, true} {
			name := tc.provider
			if off {
				name += "/off"
			}
			t.Run(name, func(t *testing.T) {
				s := newBodyServer(t, tc.reply)
				args := []string{"run", "--no-stream", "--provider", tc.provider, "--model", "gpt-4.1", "--base-url", s.srv.URL + tc.path,
					"--db", filepath.Join(t.TempDir(), "t.db"), "--log", t.TempDir()}
				if off {
					args = append(args, "--no-prompt-cache")
				}
				code, out, errOut := callEnv(map[string]string{"OPENAI_API_KEY": "sk-o"}, append(args, "Say hi.")...)
				if code != exitOK {
					t.Fatalf("exit %d: %s%s", code, out, errOut)
				}
				if got := bytes.Contains(s.last(), []byte(`"prompt_cache_key":"toolloop-`)); got == off {
					t.Fatalf("prompt_cache_key sent: %v, want %v:\n%s", got, !off, s.last())
				}
			})
		}
	}
}

// A --cache-ttl that is not Anthropic's, or that cannot apply, is a usage
// error naming the flag, before any request.
func TestRunCacheTTLErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--provider", "anthropic", "--cache-ttl", "10m"}, `--cache-ttl "10m": want 5m or 1h`},
		{[]string{"--provider", "openai", "--base-url", "http://127.0.0.1:1/v1", "--cache-ttl", "1h"}, "--cache-ttl: only Anthropic's prompt cache takes a lifetime"},
		{[]string{"--provider", "anthropic", "--cache-ttl", "1h", "--no-prompt-cache"}, "--cache-ttl and --no-prompt-cache"},
	} {
		args := append([]string{"run", "--model", "m", "--db", filepath.Join(t.TempDir(), "t.db"), "--log", t.TempDir()}, tc.args...)
		code, _, errOut := callEnv(map[string]string{"ANTHROPIC_API_KEY": "k"}, append(args, "q")...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %q", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
}

// Gemini's cached tokens are priced below its input rate, as its implicit
// cache bills them.
func TestGeminiCachedPrice(t *testing.T) {
	for _, m := range []string{"gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"} {
		p, ok := priceFor(builtinPrices(), m)
		if !ok || p.CachedInputPerMTok != p.InputPerMTok/4 {
			t.Errorf("%s: cached input $%v/MTok, input $%v/MTok; want a quarter of the input rate", m, p.CachedInputPerMTok, p.InputPerMTok)
		}
	}
}

// A run started with the five-minute cache is refused a resume with
// --cache-ttl 1h: its cost is counted at the price its log recorded (cache
// writes at 1.25 times the input rate), and the hour-long cache bills
// twice the input rate, so the budgets would count less than the bill.
// Resumed without the flag it goes on at the recorded price. Before, the
// resume went ahead and counted $3.75 for a write billed $6.
func TestResumeCacheTTLPriced(t *testing.T) {
	replies := []string{
		`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[` +
			`{"type":"tool_use","id":"toolu_r","name":"refund_order","input":{"order_id":"A103","reason":"broken"}}],` +
			`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}`,
		// A million tokens written to the cache, nothing else.
		`{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"text","text":"Refunded."}],` +
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":1000000,"cache_read_input_tokens":0,"output_tokens":0}}`,
	}
	var mu sync.Mutex
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		requests++
		reply := replies[min(requests, len(replies))-1]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, reply)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	db, logs := filepath.Join(dir, "t.db"), filepath.Join(dir, "logs")
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-ant"}
	flags := []string{"--provider", "anthropic", "--model", "claude-sonnet-4-6", "--base-url", srv.URL, "--tools", "orders", "--confirm-writes", "--db", db, "--log", logs}
	code, out, errOut := callEnv(env, append(append([]string{"run", "--no-stream"}, flags...), "Refund A103, it arrived broken.")...)
	m := runLine.FindStringSubmatch(lines(out)[0])
	if code != exitOK || m == nil || m[1] != "confirmation_required" {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	runID := m[6]
	if code, _, errOut := call("approve", runID, "toolu_r", "--by", "dana", "--db", db); code != exitOK {
		t.Fatalf("approve: exit %d %s", code, errOut)
	}
	resume := append([]string{"resume", runID, "--no-stream"}, flags...)
	code, out, errOut = callEnv(env, append(resume, "--cache-ttl", "1h")...)
	if code != exitUsage || out != "" || !strings.Contains(errOut, "(writes at $3.75 per million tokens); --cache-ttl 1h bills writes at $6,") {
		t.Fatalf("resume --cache-ttl 1h: exit %d, stdout %q, stderr %q; want exit 2 naming the five-minute price", code, out, errOut)
	}
	mu.Lock()
	sent := requests
	mu.Unlock()
	if sent != 1 {
		t.Fatalf("the refused resume sent a request (%d in all)", sent)
	}
	code, out, errOut = callEnv(env, resume...)
	if m := runLine.FindStringSubmatch(out); code != exitOK || m == nil || m[5] != "3.750000" {
		t.Errorf("resume: exit %d, %q %s; want cost=$3.750000 (a million tokens written at 1.25 times the $3 input rate)", code, out, errOut)
	}
}

// --cache-ttl 1h prices a cache write at no less than twice the input
// rate, and never below the rate a --prices file gives: a provider or
// proxy that bills its writes at more keeps its price. Before, the file's
// $9 was replaced by $6, and the budgets counted less than the bill.
func TestCacheTTLKeepsHigherWritePrice(t *testing.T) {
	reply := `{"id":"msg_1","type":"message","role":"assistant","model":"my-claude","content":[{"type":"text","text":"Hi."}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":1000000,"cache_read_input_tokens":0,"output_tokens":0}}`
	dir := t.TempDir()
	prices := filepath.Join(dir, "prices.json")
	if err := os.WriteFile(prices, []byte(`{"my-claude": {"input_per_mtok": 3, "cache_write_input_per_mtok": 9, "output_per_mtok": 15}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newBodyServer(t, reply)
	code, out, errOut := callEnv(map[string]string{"ANTHROPIC_API_KEY": "sk-ant"}, "run", "--no-stream", "--provider", "anthropic", "--model", "my-claude",
		"--base-url", s.srv.URL, "--prices", prices, "--cache-ttl", "1h", "--db", filepath.Join(dir, "t.db"), "--log", dir, "Say hi.")
	if code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if m := runLine.FindStringSubmatch(lines(out)[1]); m == nil || m[5] != "9.000000" {
		t.Errorf("stop line %q, want cost=$9.000000 (the file's write price)", lines(out)[1])
	}
}
