package openai_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
)

// reply is one canned HTTP answer: a status, headers, and a body read from
// testdata/<api>/<file>.
type reply struct {
	status int
	header map[string]string
	file   string
}

func ok(file string) reply { return reply{status: http.StatusOK, file: file} }

// caseReplies maps each conformance case to the wire reply that produces it.
var caseReplies = map[llmtest.Case]reply{
	llmtest.CaseFinalAnswer:      ok("final_answer.json"),
	llmtest.CaseSingleCall:       ok("single_call.json"),
	llmtest.CaseParallelCalls:    ok("parallel_calls.json"),
	llmtest.CaseInvalidArguments: ok("invalid_arguments.json"),
	llmtest.CaseRateLimited: {status: http.StatusTooManyRequests, file: "rate_limited.json", header: map[string]string{
		"Retry-After": "2", "X-Ratelimit-Limit-Tokens": "30000", "X-Ratelimit-Remaining-Tokens": "590", "X-Ratelimit-Reset-Tokens": "2s",
	}},
	llmtest.CaseServerError:   {status: http.StatusInternalServerError, file: "server_error.json"},
	llmtest.CaseUnauthorized:  {status: http.StatusUnauthorized, file: "unauthorized.json"},
	llmtest.CaseContextLength: {status: http.StatusBadRequest, file: "context_length.json"},
	llmtest.CaseTruncated:     ok("truncated.json"),
	llmtest.CaseReasoningCall: ok("reasoning_call.json"), // Responses only
}

// server is an httptest server that answers the i-th request with the i-th
// reply (the last one repeats) and records every request body.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	requests [][]byte
	paths    []string
	headers  []http.Header
}

func newServer(t *testing.T, api string, replies ...reply) *server {
	t.Helper()
	bodies := make([][]byte, len(replies))
	for i, r := range replies {
		b, err := os.ReadFile(filepath.Join("testdata", api, r.file))
		if err != nil {
			t.Fatal(err)
		}
		bodies[i] = b
	}
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.requests)
		s.requests = append(s.requests, body)
		s.paths = append(s.paths, r.URL.Path)
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		i := min(n, len(replies)-1)
		for k, v := range replies[i].header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_"+strconv.Itoa(n+1))
		w.WriteHeader(replies[i].status)
		w.Write(bodies[i])
	}))
	t.Cleanup(s.Close)
	return s
}

// last returns the body of the last request the server received.
func (s *server) last() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return nil
	}
	return s.requests[len(s.requests)-1]
}

func (s *server) request(i int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[i]
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// client builds an SDK client for s the way the package documentation
// asks: no SDK retries, so the loop's retries decide.
func (s *server) client() sdk.Client {
	return sdk.NewClient(
		option.WithBaseURL(s.URL),
		option.WithHTTPClient(s.Client()),
		option.WithAPIKey("sk-test"),
		option.WithMaxRetries(0),
	)
}

// chatResults reads the tool messages of a Chat Completions request body:
// tool_call_id -> content.
func chatResults(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			Content    string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("request body: %v\n%s", err, body)
	}
	out := map[string]string{}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out[m.ToolCallID] = m.Content
		}
	}
	return out
}

// responsesResults reads the function_call_output items of a Responses
// request body: call_id -> output.
func responsesResults(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var req struct {
		Input []struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
			Output string `json:"output"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("request body: %v\n%s", err, body)
	}
	out := map[string]string{}
	for _, it := range req.Input {
		if it.Type == "function_call_output" {
			out[it.CallID] = it.Output
		}
	}
	return out
}

// assertJSON fails unless got and the file testdata/<api>/<file> hold the
// same JSON value (key order and spacing aside; strings compare exactly).
func assertJSON(t *testing.T, got []byte, api, file string) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("testdata", api, file))
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("request is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if !reflect.DeepEqual(g, w) {
		pretty, _ := json.MarshalIndent(g, "", "  ")
		t.Fatalf("request JSON differs from testdata/%s/%s; sent:\n%s", api, file, pretty)
	}
}

// history is a conversation with a finished tool round whose results are
// not in call order, and arguments spaced as a model might send them.
func history() []llm.Message {
	return []llm.Message{
		llm.SystemMessage("You answer weather questions."),
		llm.UserMessage("Weather in Oslo and Bergen?"),
		{Role: llm.RoleAssistant, Text: "Checking both cities.", ToolCalls: []llm.ToolCall{
			{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)},
			{ID: "call_b", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Bergen"}`)},
		}},
		llm.ToolMessage(llm.ToolResult{CallID: "call_b", Name: "get_weather", Status: llm.StatusError, ErrorKind: llm.KindNotFound,
			Content: llm.ErrorContent(llm.KindNotFound, "no station in Bergen")}),
		llm.ToolMessage(llm.ToolResult{CallID: "call_a", Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":8}`)}),
		{Role: llm.RoleAssistant, Text: "Oslo is 8 °C; Bergen has no station."},
		llm.UserMessage("And the time in Oslo?"),
	}
}

func weatherTools() []llm.ToolDefinition {
	return []llm.ToolDefinition{
		{Name: "get_weather", Description: "current weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":64}},"required":["city"],"additionalProperties":false}`)},
		{Name: "get_time", Description: "local time", InputSchema: json.RawMessage(`{"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}`)},
	}
}

// newRawHTTPServer answers every request with status and body, typed as
// JSON when the body looks like JSON.
func newRawHTTPServer(status int, body string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if strings.HasPrefix(body, "{") {
			w.Header().Set("Content-Type", "application/json")
		} else {
			w.Header().Set("Content-Type", "text/plain")
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
}
