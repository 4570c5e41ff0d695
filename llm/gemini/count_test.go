package gemini_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/gemini"
)

// countServer answers countTokens with status and the testdata file,
// and keeps the request's path and body.
func countServer(t *testing.T, status int, file string) (m *gemini.Model, path, body *string) {
	t.Helper()
	path, body = new(string), new(string)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*path, *body = r.Method+" "+r.URL.Path, string(b)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(status)
		_, _ = w.Write(fixture(t, file))
	}))
	t.Cleanup(srv.Close)
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "test", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return gemini.New(c, &gemini.Options{Model: "gemini-2.5-flash"}), path, body
}

func countRequest() *llm.Request {
	return &llm.Request{
		Tools: []llm.ToolDefinition{{Name: "get_weather", Description: "current weather",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
		Messages: []llm.Message{
			llm.SystemMessage("You answer weather questions."),
			llm.UserMessage("Weather in Oslo?"),
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}},
			llm.ToolMessage(llm.ToolResult{CallID: "call_a", Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":8}`)}),
		},
	}
}

// The count goes to countTokens with the turn's contents; on the
// Developer API, whose countTokens takes contents alone, the system
// instruction and the tool declarations lead them as text.
func TestCountTokens(t *testing.T) {
	m, path, body := countServer(t, http.StatusOK, "count_tokens.json")
	n, err := m.CountTokens(context.Background(), countRequest())
	if err != nil {
		t.Fatal(err)
	}
	if n != 1843 {
		t.Errorf("count = %d, want the 1843 the API counted", n)
	}
	if *path != "POST /v1beta/models/gemini-2.5-flash:countTokens" {
		t.Errorf("request %s, want POST /v1beta/models/gemini-2.5-flash:countTokens", *path)
	}
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text             string          `json:"text"`
				FunctionCall     json.RawMessage `json:"functionCall"`
				FunctionResponse json.RawMessage `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal([]byte(*body), &req); err != nil {
		t.Fatalf("count body: %v\n%s", err, *body)
	}
	if len(req.Contents) != 4 {
		t.Fatalf("count has %d contents, want the system and tools, then the turn's 3:\n%s", len(req.Contents), *body)
	}
	lead := req.Contents[0].Parts
	if len(lead) != 2 || lead[0].Text != "You answer weather questions." || !strings.Contains(lead[1].Text, `"get_weather"`) {
		t.Errorf("leading content = %+v, want the system instruction and get_weather's declaration", lead)
	}
	if req.Contents[2].Parts[0].FunctionCall == nil || req.Contents[3].Parts[0].FunctionResponse == nil {
		t.Errorf("the call and its result are not counted as they are sent:\n%s", *body)
	}
}

// A count that fails is classified as a turn's failure would be, from
// the API's own error bodies.
func TestCountTokensErrors(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		file      string
		kind      llm.ErrorKind
		retryable bool
	}{
		{"rate limited", http.StatusTooManyRequests, "rate_limited.json", llm.KindRateLimited, true},
		{"overloaded", http.StatusServiceUnavailable, "overloaded.json", llm.KindUnavailable, true},
		{"unknown model", http.StatusNotFound, "model_not_found.json", llm.KindUnknownModel, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _, _ := countServer(t, c.status, c.file)
			n, err := m.CountTokens(context.Background(), countRequest())
			var le *llm.Error
			if !errors.As(err, &le) || le.Kind != c.kind || le.Retryable != c.retryable || n != 0 {
				t.Fatalf("CountTokens = %d, %v; want 0 and a %s error, retryable %v", n, err, c.kind, c.retryable)
			}
		})
	}
}
