package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/trace"
)

// chatServer is an OpenAI-compatible server on 127.0.0.1: it answers Chat
// Completions requests with its replies in order (repeating the last) and
// keeps every request.
type chatServer struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	replies []string
	reqs    []chatRequest
	auth    []string
	// streamed says, for each request answered, whether it asked for a
	// stream.
	streamed []bool
	// streamOnly makes the server refuse requests for whole replies with
	// 400, as some compatible servers do; wholeRefused counts them.
	streamOnly   bool
	wholeRefused int
}

// chatRequest is the part of a Chat Completions request the tests read.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

func newChatServer(t *testing.T, replies ...string) *chatServer {
	t.Helper()
	s := &chatServer{t: t, replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			t.Errorf("request %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		var req chatRequest
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil {
			t.Errorf("request body: %v\n%s", err, body)
		}
		var asked struct {
			Stream bool `json:"stream"`
		}
		json.Unmarshal(body, &asked)
		s.mu.Lock()
		if s.streamOnly && !asked.Stream {
			s.wholeRefused++
			s.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error": {"message": "this server answers only streamed requests: set stream to true", "type": "invalid_request_error", "param": "stream", "code": null}}`)
			return
		}
		n := len(s.reqs)
		s.reqs = append(s.reqs, req)
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.streamed = append(s.streamed, asked.Stream)
		reply := s.replies[min(n, len(s.replies)-1)]
		s.mu.Unlock()
		if asked.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, chatChunks(t, reply))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, reply)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// chatChunks turns a Chat Completions reply into the event stream the API
// sends for it when asked to stream (stream_options.include_usage): a
// chunk with the role, the text in two pieces, each call's ID and name and
// then its arguments, the finish reason, the usage with no choices, and
// [DONE].
func chatChunks(t *testing.T, reply string) string {
	t.Helper()
	var r struct {
		ID      string `json:"id"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal([]byte(reply), &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("chatChunks: a reply that is not one Chat Completions choice (%v): %s", err, reply)
	}
	var b strings.Builder
	chunk := func(choices any, usage json.RawMessage) {
		m := map[string]any{"id": r.ID, "object": "chat.completion.chunk", "created": r.Created, "model": r.Model, "choices": choices}
		if usage != nil {
			m["usage"] = usage
		}
		j, _ := json.Marshal(m)
		fmt.Fprintf(&b, "data: %s\n\n", j)
	}
	delta := func(d map[string]any) {
		chunk([]any{map[string]any{"index": 0, "delta": d, "finish_reason": nil}}, nil)
	}
	c := r.Choices[0]
	delta(map[string]any{"role": "assistant", "content": ""})
	if text := c.Message.Content; text != nil && *text != "" {
		half := len(*text) / 2
		for half > 0 && !utf8.RuneStart((*text)[half]) {
			half--
		}
		delta(map[string]any{"content": (*text)[:half]})
		delta(map[string]any{"content": (*text)[half:]})
	}
	for i, tc := range c.Message.ToolCalls {
		delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Function.Name, "arguments": ""}}}})
		delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": tc.Function.Arguments}}}})
	}
	chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": c.FinishReason}}, nil)
	chunk([]any{}, r.Usage)
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

func (s *chatServer) requests() []chatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]chatRequest(nil), s.reqs...)
}

// chatCalls is a Chat Completions reply proposing tool calls, given as
// ID, name, arguments triples.
func chatCalls(calls ...[3]string) string {
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type tc struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	var tcs []tc
	for _, c := range calls {
		tcs = append(tcs, tc{ID: c[0], Type: "function", Function: fn{c[1], c[2]}})
	}
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "any",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls",
			"message": map[string]any{"role": "assistant", "content": nil, "tool_calls": tcs}}},
		"usage": map[string]any{"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
	})
	return string(b)
}

// chatText is a Chat Completions reply with a final answer.
func chatText(text string) string {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-2", "object": "chat.completion", "created": 2, "model": "any",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text}}},
		"usage": map[string]any{"prompt_tokens": 200, "completion_tokens": 20, "total_tokens": 220},
	})
	return string(b)
}

var runLine = regexp.MustCompile(`(?m)^status=(\S+) steps=(\d+) tool_calls=(\d+) tokens=(\d+) cost=\$(\S+)(?: writes="(?:[^"\\]|\\.)*")? run=(\S+)(?: call=(\S+))? detail=".*"$`)

// TestRunOpenAICompatible drives toolloop run against a fake
// OpenAI-compatible server: one turn with two parallel calls over the
// order tools, then the answer. The second request must carry both
// results, each under its call's ID.
func TestRunOpenAICompatible(t *testing.T) {
	srv := newChatServer(t,
		chatCalls([3]string{"call_a", "query_order", `{"order_id":"A100"}`}, [3]string{"call_b", "track_shipment", `{"order_id":"A100"}`}),
		chatText("Your keyboard (A100) is at the Leipzig hub with DHL and should arrive on 2025-06-12."))
	dir := t.TempDir()
	db, logs := filepath.Join(dir, "toolloop.db"), filepath.Join(dir, "logs")
	code, out, errOut := call("run", "--provider", "openai", "--base-url", srv.srv.URL+"/v1", "--model", "any",
		"--tools", "orders", "--db", db, "--log", logs, "Where is my order A100?")
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s\nstdout:\n%s", code, errOut, out)
	}
	// Standard error has one line per tool call, in the order they
	// finished, and nothing else.
	toolLine := regexp.MustCompile(`^toolloop: tool (query_order \(call_a\)|track_shipment \(call_b\)): ok in \d\S*s$`)
	if el := lines(errOut); len(el) != 2 || !toolLine.MatchString(el[0]) || !toolLine.MatchString(el[1]) || el[0] == el[1] {
		t.Fatalf("stderr:\n%s\nwant a line for each call", errOut)
	}
	got := lines(out)
	if len(got) != 2 || got[0] != "Your keyboard (A100) is at the Leipzig hub with DHL and should arrive on 2025-06-12." {
		t.Fatalf("want the answer, then the stop line:\n%s", out)
	}
	m := runLine.FindStringSubmatch(got[1])
	if m == nil || m[1] != "final_answer" || m[2] != "2" || m[3] != "2" || m[4] != "370" {
		t.Fatalf("stop line %q", got[1])
	}
	if m[5] != "0.000000" {
		t.Errorf("model %q has no price, so the cost is 0; got %s", "any", m[5])
	}
	runID := m[6]

	reqs := srv.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if reqs[0].Model != "any" || len(reqs[0].Tools) != 7 {
		t.Errorf("first request: model %q, %d tools; want any and the seven order tools (reverse_refund with them)", reqs[0].Model, len(reqs[0].Tools))
	}
	if r := reqs[0].Messages; len(r) != 2 || r[0].Role != "system" || r[1].Role != "user" {
		t.Errorf("first request opens with %+v, want the order desk's system prompt and the question", r)
	}
	results := map[string]int{}
	for i, msg := range reqs[1].Messages {
		if msg.Role == "tool" {
			results[msg.ToolCallID] = i
		}
	}
	if len(results) != 2 || results["call_a"] == 0 || results["call_b"] == 0 {
		t.Errorf("second request's tool results by call ID: %v, want call_a and call_b", results)
	}
	if a := srv.auth[0]; a != "Bearer unused" {
		t.Errorf("Authorization %q, want the placeholder key of a keyless compatible server", a)
	}

	// The run is in the store and its log in the directory.
	code, out, _ = call("runs", "--db", db)
	if code != exitOK || !strings.Contains(out, runID) || !strings.Contains(out, "run:openai:any") {
		t.Errorf("runs: exit %d\n%s", code, out)
	}
	code, out, errOut = call("trace", "show", runID, "--log", logs)
	if code != exitOK || !strings.Contains(out, "result call_id=call_a tool=query_order status=ok") ||
		!strings.Contains(out, "stopped status=final_answer") {
		t.Errorf("trace show: exit %d\n%s%s", code, out, errOut)
	}
	// Resuming the ended run needs no provider: its stop line comes back.
	code, out2, errOut := call("resume", runID, "--db", db)
	if code != exitOK || out2 != strings.Join(got, "\n")+"\n" {
		t.Errorf("resume of an ended run: exit %d, stderr %q\n%s\nwant\n%s", code, errOut, out2, out)
	}
}

// TestRunKeyAndPrice checks that the key from the environment reaches the
// server, and that a priced model's cost shows on the stop line.
func TestRunKeyAndPrice(t *testing.T) {
	srv := newChatServer(t, chatText("Hello."))
	db := filepath.Join(t.TempDir(), "t.db")
	env := map[string]string{"OPENAI_API_KEY": "sk-test"}
	prices := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(prices, []byte(`{"house-model": {"input_per_mtok": 1, "cached_input_per_mtok": 0.1, "output_per_mtok": 10}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := callEnv(env, "run", "--provider", "openai", "--base-url", srv.srv.URL+"/v1", "--model", "house-model",
		"--prices", prices, "--max-cost", "0.01", "--db", db, "--log", t.TempDir(), "hi")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// 200 input tokens at $1/Mtok and 20 output at $10/Mtok.
	if m := runLine.FindStringSubmatch(lines(out)[1]); m == nil || m[5] != "0.000400" {
		t.Errorf("stop line %q, want cost=$0.000400", lines(out)[1])
	}
	if srv.auth[0] != "Bearer sk-test" {
		t.Errorf("Authorization %q, want the key from OPENAI_API_KEY", srv.auth[0])
	}
}

// TestRunProviders builds each provider's client against a stand-in for
// its API: the key from the environment must arrive where the API expects
// it (Gemini falls back to GOOGLE_API_KEY). Each provider is asked to
// stream (the default), answering in its own event stream, and with
// --no-stream for the whole reply.
func TestRunProviders(t *testing.T) {
	for _, tc := range []providerCase{
		{"openai-responses", "gpt-5-mini", "/v1/responses", "Authorization", "Bearer sk-o", `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-5-mini",
			"output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi.","annotations":[]}]}],
			"usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0}}}`,
			map[string]string{"OPENAI_API_KEY": "sk-o"}, "/v1/responses",
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi.\",\"sequence_number\":1}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1,\"status\":\"completed\",\"model\":\"gpt-5-mini\"," +
				"\"output\":[{\"type\":\"message\",\"id\":\"msg_1\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi.\",\"annotations\":[]}]}]," +
				"\"usage\":{\"input_tokens\":5,\"output_tokens\":2,\"total_tokens\":7,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens_details\":{\"reasoning_tokens\":0}}}}\n\n"},
		{"anthropic", "claude-haiku-4-5", "/v1/messages", "Authorization", "Bearer sk-ant", `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5",
			"content":[{"type":"text","text":"Hi."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":2}}`,
			map[string]string{"ANTHROPIC_API_KEY": "sk-ant"}, "/v1/messages",
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-haiku-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi.\"}}\n\n" +
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
		{"gemini", "gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash:generateContent", "X-Goog-Api-Key", "g-key", `{"candidates":[{"content":{"parts":[{"text":"Hi."}],"role":"model"},"finishReason":"STOP","index":0}],
			"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2,"totalTokenCount":7},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
			map[string]string{"GOOGLE_API_KEY": "g-key"}, "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
			"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi.\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}]," +
				"\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":2,\"totalTokenCount\":7},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"r1\"}\n\n"},
	} {
		t.Run(tc.provider+"/streamed", func(t *testing.T) { tc.run(t, true) })
		t.Run(tc.provider+"/whole", func(t *testing.T) { tc.run(t, false) })
	}
}

// providerCase is a provider's stand-in API for TestRunProviders: where a
// request goes, where its key goes, and the reply to it, whole and
// streamed.
type providerCase struct {
	provider, model, path, header, key, reply string
	env                                       map[string]string
	// streamPath and stream are the streamed request's path and the
	// provider's event stream for the same reply.
	streamPath, stream string
}

// run runs toolloop run against the stand-in, streamed or with
// --no-stream.
func (tc providerCase) run(t *testing.T, streamed bool) {
	args, path := []string{"run", "--no-stream"}, tc.path
	if streamed {
		args, path = []string{"run"}, tc.streamPath
	}
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.Header.Get(tc.header))
		mu.Unlock()
		if streamed {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, tc.stream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, tc.reply)
	}))
	defer srv.Close()
	base := srv.URL
	if tc.provider == "openai-responses" {
		base += "/v1"
	}
	code, out, errOut := callEnv(tc.env, append(args, "--provider", tc.provider, "--model", tc.model, "--base-url", base,
		"--db", filepath.Join(t.TempDir(), "t.db"), "--log", t.TempDir(), "Say hi.")...)
	if code != exitOK || lines(out)[0] != "Hi." {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != path+" "+tc.key {
		t.Errorf("requests %q, want one to %s with %s %s", seen, path, tc.header, tc.key)
	}
	// Priced from the built-in table.
	if m := runLine.FindStringSubmatch(lines(out)[1]); m == nil || m[5] == "0.000000" {
		t.Errorf("stop line %q, want a cost from the built-in price", lines(out)[1])
	}
}

// TestRunErrors checks that flags and keys that cannot work give one line
// naming the fix, and exit 2, before anything is created.
func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "never.db")
	badPrices := filepath.Join(dir, "bad.json")
	os.WriteFile(badPrices, []byte(`{"m": {"input": 1}}`), 0o600)
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--provider", "openai", "--model", "gpt-4.1", "q"}, "OPENAI_API_KEY is not set"},
		{nil, []string{"--provider", "openai-responses", "--model", "gpt-5", "q"}, "--base-url"},
		{nil, []string{"--provider", "anthropic", "--model", "claude-sonnet-4-6", "q"}, "ANTHROPIC_API_KEY is not set"},
		{nil, []string{"--provider", "gemini", "--model", "gemini-2.5-flash", "q"}, "GEMINI_API_KEY is not set: export GEMINI_API_KEY=... (or GOOGLE_API_KEY)"},
		{nil, []string{"--provider", "mistral", "--model", "m", "q"}, `--provider "mistral": unknown provider; want one of openai, openai-responses, anthropic, gemini`},
		{nil, []string{"--model", "m", "q"}, "--provider is missing"},
		{nil, []string{"--provider", "openai", "q"}, "--model is missing"},
		{nil, []string{"--provider", "openai", "--model", "m"}, "want one prompt"},
		{nil, []string{"--provider", "openai", "--model", "m", "a", "b"}, "want one prompt, got 2"},
		{nil, []string{"--provider", "openai", "--model", "m", ""}, "the prompt is empty"},
		{nil, []string{"--provider", "sandbox", " \n\t"}, "the prompt is empty"},
		{nil, []string{"--provider", "openai", "--model", "m", "--deadline", "soon", "q"}, `invalid value "soon" for flag -deadline`},
		{nil, []string{"--provider", "openai", "--model", "m", "--max-steps", "-1", "q"}, "--max-steps must not be negative"},
		{nil, []string{"--provider", "openai", "--model", "m", "--bogus", "q"}, "flag provided but not defined: -bogus"},
		{nil, []string{"--provider", "openai", "--model", "m", "--tools", "weather", "q"}, `--tools "weather": unknown tool set`},
		{map[string]string{"OPENAI_API_KEY": "k"}, []string{"--provider", "openai", "--model", "my-model", "--max-cost", "1", "q"}, "--prices FILE"},
		{map[string]string{"OPENAI_API_KEY": "k"}, []string{"--provider", "openai", "--model", "gpt-4.1", "--prices", badPrices, "q"}, "--prices " + badPrices},
		{map[string]string{"OPENAI_API_KEY": "k"}, []string{"--provider", "openai", "--model", "gpt-4.1", "--exporter", "jaeger", "--db", db, "--log", dir, "q"}, "unknown exporter"},
		{map[string]string{"OPENAI_API_KEY": "k"}, []string{"--provider", "openai", "--model", "gpt-4.1", "q"}, "no data directory"},
	} {
		code, out, errOut := callEnv(tc.env, append([]string{"run"}, tc.args...)...)
		if code != exitUsage || out != "" || len(lines(errOut)) != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("run %v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "never.db")); err == nil {
		// The exporter check comes after the store is opened; the store
		// itself is harmless, but nothing ran.
		code, out, _ := call("runs", "--db", db)
		if code != exitOK || !strings.Contains(out, "no runs") {
			t.Errorf("a failed run left a run behind:\n%s", out)
		}
	}
	code, out, _ := call("help", "run")
	for _, want := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "--mcp 'CMD ARGS'", "--max-cost USD", "--prices FILE"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("help run lacks %q", want)
		}
	}
}

// TestRunConfirmWrites pauses a real-provider run for confirmation: the
// stop line names the call, the next steps carry the provider flags, and
// resume without them says which are needed.
func TestRunConfirmWrites(t *testing.T) {
	srv := newChatServer(t,
		chatCalls([3]string{"call_r", "refund_order", `{"order_id":"A103","reason":"broken"}`}),
		chatText("Refunded."))
	dir := t.TempDir()
	db, logs := filepath.Join(dir, "t.db"), filepath.Join(dir, "logs")
	base := srv.srv.URL + "/v1"
	code, out, errOut := call("run", "--provider", "openai", "--base-url", base, "--model", "any", "--tools", "orders",
		"--confirm-writes", "--db", db, "--log", logs, "Refund A103, it arrived broken.")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got := lines(out)
	m := runLine.FindStringSubmatch(got[0])
	if m == nil || m[1] != "confirmation_required" || m[7] != "call_r" {
		t.Fatalf("stop line %q", got[0])
	}
	runID := m[6]
	flags := " --provider openai --model any --base-url " + base + " --tools orders --confirm-writes --taint-policy default"
	wantResume := "toolloop resume " + runID + " --db " + db + flags
	if len(got) != 7 || got[2] != "toolloop approve "+runID+" call_r --by NAME --db "+db || got[3] != wantResume || got[6] != wantResume {
		t.Errorf("next steps:\n%s\nwant resume line %q", out, wantResume)
	}
	if code, _, errOut := call("approve", runID, "call_r", "--by", "dana", "--db", db); code != exitOK {
		t.Fatalf("approve: exit %d %s", code, errOut)
	}
	// Without the flags, or with others, resume names the ones it needs.
	for _, args := range [][]string{
		{"resume", runID, "--db", db},
		{"resume", runID, "--db", db, "--provider", "openai", "--model", "other", "--base-url", base, "--tools", "orders", "--confirm-writes"},
		{"resume", runID, "--db", db, "--provider", "openai", "--model", "any", "--base-url", base, "--tools", "orders"},
	} {
		code, out, errOut := call(args...)
		if code != exitUsage || out != "" || len(lines(errOut)) != 1 || !strings.Contains(errOut, wantResume) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", args, code, errOut, wantResume)
		}
	}
	code, out, errOut = call(append(strings.Fields(wantResume)[1:], "--log", logs)...)
	if code != exitOK {
		t.Fatalf("resume: exit %d: %s", code, errOut)
	}
	if got := lines(out); len(got) != 2 || got[0] != "Refunded." || !strings.HasPrefix(got[1], "status=final_answer steps=2 tool_calls=1 ") {
		t.Errorf("resume:\n%s", out)
	}
	// The refund was applied once, to the book in the store.
	reqs := srv.requests()
	last := reqs[len(reqs)-1].Messages
	if r := last[len(last)-1]; r.Role != "tool" || r.ToolCallID != "call_r" || !strings.Contains(fmt.Sprint(r.Content), "R-A103-1") {
		t.Errorf("the model was not sent the refund: %+v", r)
	}
	// The whole run, resumed part included, is in its log.
	events, _, err := trace.Open(runID, logs)
	if err != nil || events[0].Kind != loop.Started || events[len(events)-1].Kind != loop.Stopped || events[len(events)-1].Status != loop.FinalAnswer {
		t.Errorf("log after resume: %d events, %v", len(events), err)
	}
}

func TestSplitCommand(t *testing.T) {
	for in, want := range map[string][]string{
		`npx -y @modelcontextprotocol/server-everything`: {"npx", "-y", "@modelcontextprotocol/server-everything"},
		`srv --root '/my files' "a \"b\"" c\ d`:          {"srv", "--root", "/my files", `a "b"`, "c d"},
		`  x  `:                                          {"x"},
		`a ''`:                                           {"a", ""},
		`srv $HOME`:                                      {"srv", "$HOME"},
	} {
		got, err := splitCommand(in)
		if err != nil || strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Errorf("splitCommand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`a 'b`, `a "b`, `a\`, `srv | tee log`, `srv > log`, `srv; rm x`} {
		if _, err := splitCommand(bad); err == nil {
			t.Errorf("splitCommand(%q) accepted", bad)
		}
	}
}

func TestPrices(t *testing.T) {
	p, err := loadPrices("")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"gpt-4.1", "gpt-4.1-2025-04-14", "claude-sonnet-4-5-20250929", "models/gemini-2.5-flash"} {
		if _, ok := priceFor(p, m); !ok {
			t.Errorf("no price for %s", m)
		}
	}
	if _, ok := priceFor(p, "gpt-4.1-turbo"); ok {
		t.Error("a model that is no snapshot got a price")
	}
	for name, price := range builtinPrices() {
		if price.InputPerMTok <= 0 || price.OutputPerMTok < price.InputPerMTok || price.CachedInputPerMTok > price.InputPerMTok || price.CachedInputPerMTok <= 0 {
			t.Errorf("%s: implausible price %+v", name, price)
		}
		// Anthropic charges 1.25x input for 5-minute cache writes; the
		// others charge writes as input (the zero rate).
		want := 0.0
		if strings.HasPrefix(name, "claude-") {
			want = price.InputPerMTok * 1.25
		}
		if math.Abs(price.CacheWriteInputPerMTok-want) > 1e-9 {
			t.Errorf("%s: cache-write rate %v, want %v", name, price.CacheWriteInputPerMTok, want)
		}
	}
	// A Sonnet turn that writes 100k tokens to the cache costs the write
	// premium on top of plain input.
	sonnet, _ := priceFor(p, "claude-sonnet-4-5-20250929")
	if got, want := sonnet.Cost(llm.Usage{InputTokens: 100_000, CacheWriteTokens: 100_000}), 0.375; math.Abs(got-want) > 1e-9 {
		t.Errorf("sonnet cache writes cost %v, want %v", got, want)
	}
	file := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(file, []byte(`{"gpt-4.1": {"input_per_mtok": 3, "output_per_mtok": 9}, "mine": {"input_per_mtok": 0.5, "cached_input_per_mtok": 0, "output_per_mtok": 1},
		"cachey": {"input_per_mtok": 2, "cached_input_per_mtok": 0.2, "cache_write_input_per_mtok": 4, "output_per_mtok": 8}}`), 0o600)
	p, err = loadPrices(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := p["gpt-4.1"]; got != (loop.Price{InputPerMTok: 3, CachedInputPerMTok: 3, OutputPerMTok: 9}) {
		t.Errorf("override: %+v", got)
	}
	if got := p["mine"]; got != (loop.Price{InputPerMTok: 0.5, OutputPerMTok: 1}) {
		t.Errorf("added: %+v", got)
	}
	if got := p["cachey"]; got != (loop.Price{InputPerMTok: 2, CachedInputPerMTok: 0.2, CacheWriteInputPerMTok: 4, OutputPerMTok: 8}) {
		t.Errorf("with a cache-write rate: %+v", got)
	}
	// 1M tokens: 500k plain ($1), 200k read ($0.04), 300k written ($1.2).
	if got := p["cachey"].Cost(llm.Usage{InputTokens: 1_000_000, CachedInputTokens: 200_000, CacheWriteTokens: 300_000}); math.Abs(got-2.24) > 1e-9 {
		t.Errorf("cachey cost %v, want 2.24", got)
	}
	for _, bad := range []string{`[]`, `{"m": {"output_per_mtok": 1}}`, `{"m": {"input_per_mtok": -1, "output_per_mtok": 1}}`, `{"m": {"input_per_mtok": 1, "output_per_mtok": 1, "extra": 2}}`,
		`{"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cache_write_input_per_mtok": -1}}`} {
		os.WriteFile(file, []byte(bad), 0o600)
		if _, err := loadPrices(file); err == nil {
			t.Errorf("prices %s accepted", bad)
		}
	}
	if _, err := loadPrices(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("a missing prices file was accepted")
	}
}

// TestRunSandbox runs the order desk's rule-based model: no key, no
// server, a refund recorded in the store's book.
func TestRunSandbox(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.db")
	code, out, errOut := call("run", "--provider", "sandbox", "--tools", "orders", "--db", db, "--log", dir, "refund A103 please")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "refund_order (desk_1_1): done") || !strings.Contains(out, "status=final_answer steps=2 tool_calls=1") {
		t.Fatalf("output:\n%s", out)
	}
	code, out, _ = call("run", "--provider", "sandbox", "--tools", "orders", "--db", db, "--log", dir, "refund A103 please")
	if code != exitOK || !strings.Contains(out, "done") {
		t.Fatalf("the same refund again, replayed from the ledger: exit %d\n%s", code, out)
	}
}

// TestTemporalNeedsItsBuild: the worker command and --temporal name the
// build that has them.
func TestTemporalNeedsItsBuild(t *testing.T) {
	for _, args := range [][]string{
		{"worker", "--temporal", "127.0.0.1:7233"},
		{"run", "--temporal=127.0.0.1:7233", "--model", "m", "hi"},
		{"demo", "-temporal", "x"},
	} {
		code, _, errOut := call(args...)
		if code != exitUsage || !strings.Contains(errOut, "go run ./temporal/cmd/toolloop") {
			t.Fatalf("%v: exit %d, %s", args, code, errOut)
		}
	}
	if code, _, errOut := call("run", "--provider", "sandbox", "--", "--temporal"); code != exitUsage || strings.Contains(errOut, "Temporal") {
		t.Fatalf("--temporal after --: exit %d, %s", code, errOut)
	}
}

// --model-timeout reaches the runner's configuration.
func TestModelTimeoutFlag(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	src := addSourceFlags(fs)
	if err := fs.Parse([]string{"--model-timeout", "3s"}); err != nil {
		t.Fatal(err)
	}
	if got := runConfig(src, true, nil, nil, nil, nil).ModelTimeout; got != 3*time.Second {
		t.Fatalf("ModelTimeout = %v, want 3s", got)
	}
}

// An answer cut off at the model's output token limit is printed, but with
// a warning on standard error, and the stop line's detail says so.
func TestRunTruncatedAnswerWarns(t *testing.T) {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-3", "object": "chat.completion", "created": 3, "model": "any",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "length",
			"message": map[string]any{"role": "assistant", "content": "Your keyboard (A100) is at the Leipzig"}}},
		"usage": map[string]any{"prompt_tokens": 200, "completion_tokens": 16, "total_tokens": 216},
	})
	srv := newChatServer(t, string(b))
	dir := t.TempDir()
	code, out, errOut := call("run", "--provider", "openai", "--base-url", srv.srv.URL+"/v1", "--model", "any",
		"--db", filepath.Join(dir, "toolloop.db"), "--log", filepath.Join(dir, "logs"), "Where is my order A100?")
	if code != exitOK || !strings.Contains(out, "Your keyboard (A100) is at the Leipzig\n") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if errOut != "toolloop: warning: the answer is truncated: the model hit its output token limit\n" {
		t.Errorf("stderr = %q, want the truncation warning", errOut)
	}
	if !strings.Contains(out, loop.TruncatedDetail) {
		t.Errorf("the stop line does not say the answer is truncated:\n%s", out)
	}
}

// --max-response-bytes reaches the adapter: a whole (unstreamed) reply
// over it fails the run.
func TestMaxResponseBytesFlag(t *testing.T) {
	srv := newChatServer(t, chatText("Your keyboard (A100) is at the Leipzig hub with DHL and should arrive on 2025-06-12."))
	dir := t.TempDir()
	code, out, _ := call("run", "--no-stream", "--provider", "openai", "--base-url", srv.srv.URL+"/v1", "--model", "any", "--max-response-bytes", "100",
		"--db", filepath.Join(dir, "toolloop.db"), "--log", filepath.Join(dir, "logs"), "Where is my order A100?")
	if code == exitOK || !strings.Contains(out, "status=model_error") || !strings.Contains(out, "the 100 bytes cap on a model response") {
		t.Fatalf("exit %d, stdout:\n%s", code, out)
	}
}

// --max-stream-bytes reaches the adapter: a streamed reply over it fails
// the run, and --max-response-bytes does not cap a stream.
func TestMaxStreamBytesFlag(t *testing.T) {
	srv := newChatServer(t, chatText("Your keyboard (A100) is at the Leipzig hub with DHL and should arrive on 2025-06-12."))
	dir := t.TempDir()
	run := func(flags ...string) (int, string) {
		args := append([]string{"run", "--provider", "openai", "--base-url", srv.srv.URL + "/v1", "--model", "any"}, flags...)
		code, out, _ := call(append(args, "--db", filepath.Join(dir, "toolloop.db"), "--log", filepath.Join(dir, "logs"), "Where is my order A100?")...)
		return code, out
	}
	if code, out := run("--max-stream-bytes", "300"); code == exitOK || !strings.Contains(out, "status=model_error") ||
		!strings.Contains(out, "the 300 bytes cap on a streamed model response (MaxStreamBytes)") {
		t.Fatalf("--max-stream-bytes 300: exit %d, stdout:\n%s", code, out)
	}
	if code, out := run("--max-response-bytes", "100"); code != exitOK {
		t.Fatalf("--max-response-bytes 100 on a streamed reply: exit %d, stdout:\n%s", code, out)
	}
}

// Flags a run cannot use are refused as the command line is read: exit 2,
// nothing on standard output, one line naming the flag and what it takes.
// None of these gets as far as a store or a server.
func TestRunRefusesBadFlagValues(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "never.db")
	fifo := filepath.Join(dir, "prices.fifo")
	hasFIFO := mkfifo(fifo) == nil
	huge := filepath.Join(dir, "huge.json")
	os.WriteFile(huge, []byte(`{"m": {"input_per_mtok": 1, "output_per_mtok": 1}}`+strings.Repeat(" ", 1<<20)), 0o600)
	priceFile := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o600)
		return p
	}
	base := []string{"run", "--provider", "openai", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--db", db, "--log", dir}
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--model-timeout", "-1s"}, []string{"-model-timeout", "must not be negative"}},
		{[]string{"--deadline", "-5m"}, []string{"-deadline", "must not be negative"}},
		{[]string{"--tool-timeout", "-1ms"}, []string{"-tool-timeout", "must not be negative"}},
		{[]string{"--slow-writes", "-1s"}, []string{"-slow-writes", "must not be negative"}},
		{[]string{"--max-response-bytes", "-2"}, []string{"-max-response-bytes", "-1 for no cap"}},
		{[]string{"--max-stream-bytes", "-5"}, []string{"-max-stream-bytes", "-1 for no cap"}},
		{[]string{"--reasoning-effort", "extreme"}, []string{"-reasoning-effort", "minimal, low, medium, high"}},
		{[]string{"--base-url", "not a url"}, []string{"-base-url", "http"}},
		{[]string{"--base-url", "localhost:11434/v1"}, []string{"-base-url", "http"}},
		{[]string{"--base-url", "ftp://host/v1"}, []string{"-base-url", "http or https"}},
		{[]string{"--base-url", "http:///v1"}, []string{"-base-url", "no host"}},
		{[]string{"--max-cost", "NaN"}, []string{"--max-cost", "finite"}},
		{[]string{"--max-cost", "+Inf"}, []string{"--max-cost", "finite"}},
		{[]string{"--prices", "/dev/zero"}, []string{"--prices /dev/zero", "not a regular file (a character device)"}},
		{[]string{"--prices", dir}, []string{"--prices " + dir, "a directory"}},
		{[]string{"--prices", huge}, []string{"--prices " + huge, "more than the 1048576 bytes"}},
		{[]string{"--prices", priceFile("inf.json", `{"m": {"input_per_mtok": 1e308, "output_per_mtok": 1e308}}`)}, []string{"--prices", "input_per_mtok 1e+308 is out of range", "0 to 1e+06"}},
		{[]string{"--prices", priceFile("neg.json", `{"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cached_input_per_mtok": -0.1}}`)}, []string{"--prices", "cached_input_per_mtok -0.1 is out of range"}},
		{[]string{"--prices", priceFile("big.json", `{"m": {"input_per_mtok": 1, "output_per_mtok": 1000001}}`)}, []string{"--prices", "output_per_mtok 1.000001e+06 is out of range"}},
	}
	if hasFIFO {
		cases = append(cases, struct {
			args []string
			want []string
		}{[]string{"--prices", fifo}, []string{"--prices " + fifo, "a FIFO"}})
	}
	for _, tc := range cases {
		done := make(chan struct{})
		var code int
		var out, errOut string
		go func() {
			defer close(done)
			code, out, errOut = call(append(append(slices.Clone(base), tc.args...), "q")...)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: still running after 10s", tc.args)
		}
		ok := code == exitUsage && out == "" && len(lines(errOut)) == 1
		for _, w := range tc.want {
			ok = ok && strings.Contains(errOut, w)
		}
		if !ok {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("a refused command line made a store")
	}
	// The values the flags document are taken.
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	src, bf := addSourceFlags(fs), addBudgetFlags(fs)
	err := fs.Parse([]string{"--model-timeout", "0", "--max-response-bytes", "-1", "--max-stream-bytes", "0", "--reasoning-effort", "minimal",
		"--base-url", "https://user:pw@proxy.example:8443/v1?x=1", "--deadline", "90s", "--slow-writes", "1ms"})
	if err != nil || src.maxResponseBytes != -1 || src.reasoningEffort != "minimal" || bf.deadline != 90*time.Second || src.slowWrites != time.Millisecond {
		t.Errorf("good values: %v, %+v", err, src)
	}
}

// A run ID that cannot name a log file, or would forge a line in what the
// commands print, is refused by every command that takes one, before it
// opens anything: exit 2, one line naming the flag or argument.
func TestRunIDsAreChecked(t *testing.T) {
	dir := t.TempDir()
	db, logs := filepath.Join(dir, "t.db"), filepath.Join(dir, "logs")
	// A store with one run, so that only the ID can be what is wrong.
	if code, _, errOut := call("run", "--provider", "sandbox", "--tools", "orders", "--db", db, "--log", logs, "--id", "good-1", "where is A100"); code != exitOK {
		t.Fatalf("setup run: exit %d: %s", code, errOut)
	}
	for _, id := range []string{"../../x", "a/b", strings.Repeat("x", 5000), "with space", "two\nlines", "nul\x00", "", ".", "..", ".hidden"} {
		for _, args := range [][]string{
			{"run", "--provider", "sandbox", "--tools", "orders", "--db", db, "--log", logs, "--id", id, "where is A100"},
			{"resume", id, "--db", db},
			{"approve", id, "call_1", "--by", "dana", "--db", db},
			{"deny", id, "call_1", "--by", "dana", "--db", db},
			{"trace", "show", id, "--db", db},
			{"trace", "diagnose", id, "--log", logs},
		} {
			if id == "" && args[0] == "run" {
				continue // --id "" is the default: a random ID
			}
			if strings.Contains(id, "/") && args[0] == "trace" {
				continue // a path: trace reads log files by name
			}
			what := "RUN_ID"
			if args[0] == "run" {
				what = "--id"
			}
			code, out, errOut := call(args...)
			if code != exitUsage || out != "" || len(lines(errOut)) != 1 || !strings.Contains(errOut, what+": ") || !strings.Contains(errOut, "letters, digits") {
				t.Errorf("%s %.40q: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %s", args[0], id, code, out, errOut, what)
			}
		}
	}
	entries, _ := os.ReadDir(logs)
	if len(entries) != 1 || entries[0].Name() != "good-1.jsonl" {
		t.Errorf("logs: %v, want only good-1.jsonl", entries)
	}
	if code, out, _ := call("runs", "--db", db); code != exitOK || len(lines(out)) != 2 {
		t.Errorf("runs: exit %d, want the one run:\n%s", code, out)
	}
}

// Resume streams as the run did: a run started streamed against a server
// that answers only streamed requests, paused for a confirmation, goes on
// there with no flag for it; --no-stream overrides the recorded choice
// (and that server refuses it), and a run started with --no-stream
// resumes with whole turns unless --stream says otherwise.
func TestResumeStreamsAsTheRunDid(t *testing.T) {
	dir := t.TempDir()
	db, logs := filepath.Join(dir, "t.db"), filepath.Join(dir, "logs")
	// pause starts a run that pauses before a refund and approves the
	// refund; it returns the resume command the run printed.
	pause := func(srv *chatServer, id string, flags ...string) []string {
		t.Helper()
		args := append([]string{"run", "--provider", "openai", "--base-url", srv.srv.URL + "/v1", "--model", "any", "--tools", "orders",
			"--confirm-writes", "--db", db, "--log", logs, "--id", id}, flags...)
		code, out, errOut := call(append(args, "Refund A103, it arrived broken.")...)
		if code != exitOK || !strings.Contains(out, "status=confirmation_required") {
			t.Fatalf("run %s: exit %d\n%s%s", id, code, out, errOut)
		}
		if code, _, errOut := call("approve", id, "call_r", "--by", "dana", "--db", db); code != exitOK {
			t.Fatalf("approve %s: exit %d %s", id, code, errOut)
		}
		for _, l := range lines(out) {
			if strings.HasPrefix(l, "toolloop resume ") {
				return append(strings.Fields(l)[1:], "--log", logs)
			}
		}
		t.Fatalf("run %s printed no resume command:\n%s", id, out)
		return nil
	}
	replies := []string{chatCalls([3]string{"call_r", "refund_order", `{"order_id":"A103","reason":"broken"}`}), chatText("Refunded.")}

	streamOnly := newChatServer(t, replies...)
	streamOnly.streamOnly = true
	resume := pause(streamOnly, "streamed-1")
	if slices.Contains(resume, "--no-stream") {
		t.Errorf("a streamed run's resume command asks for whole turns: %q", resume)
	}
	code, out, errOut := call(resume...)
	if code != exitOK || !strings.Contains(out, "Refunded.\nstatus=final_answer steps=2 tool_calls=1 ") {
		t.Fatalf("resume without flags: exit %d\n%s%s", code, out, errOut)
	}
	if streamOnly.wholeRefused != 0 || !slices.Equal(streamOnly.streamed, []bool{true, true}) {
		t.Errorf("requests streamed: %v, %d refused; want two streamed", streamOnly.streamed, streamOnly.wholeRefused)
	}

	streamOnly = newChatServer(t, replies...)
	streamOnly.streamOnly = true
	resume = pause(streamOnly, "streamed-2")
	code, out, _ = call(append(resume, "--no-stream")...)
	if code != exitFail || !strings.Contains(out, "status=model_error") || streamOnly.wholeRefused == 0 {
		t.Fatalf("resume --no-stream on a stream-only server: exit %d, %d whole requests refused\n%s", code, streamOnly.wholeRefused, out)
	}
	if code, _, errOut := call(append(resume, "--stream", "--no-stream")...); code != exitUsage || !strings.Contains(errOut, "--stream and --no-stream") {
		t.Errorf("--stream --no-stream: exit %d %s", code, errOut)
	}

	whole := newChatServer(t, replies...)
	resume = pause(whole, "whole-1", "--no-stream")
	if !slices.Contains(resume, "--no-stream") {
		t.Errorf("a --no-stream run's resume command lacks --no-stream: %q", resume)
	}
	noFlag := slices.DeleteFunc(slices.Clone(resume), func(a string) bool { return a == "--no-stream" })
	if code, out, errOut := call(noFlag...); code != exitOK || !strings.Contains(out, "status=final_answer") {
		t.Fatalf("resume of a --no-stream run: exit %d\n%s%s", code, out, errOut)
	}
	if want := []bool{false, false}; !slices.Equal(whole.streamed, want) {
		t.Errorf("requests streamed: %v, want %v", whole.streamed, want)
	}
	whole = newChatServer(t, replies...)
	resume = pause(whole, "whole-2", "--no-stream")
	noFlag = slices.DeleteFunc(slices.Clone(resume), func(a string) bool { return a == "--no-stream" })
	if code, out, errOut := call(append(noFlag, "--stream")...); code != exitOK || !strings.Contains(out, "status=final_answer") {
		t.Fatalf("resume --stream of a --no-stream run: exit %d\n%s%s", code, out, errOut)
	}
	if want := []bool{false, true}; !slices.Equal(whole.streamed, want) {
		t.Errorf("requests streamed: %v, want %v", whole.streamed, want)
	}
}
