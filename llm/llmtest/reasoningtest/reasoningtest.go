// Package reasoningtest gives tests the real reasoning adapters
// (Anthropic with thinking, OpenAI Responses with reasoning items, Gemini
// with thought signatures), built through their official SDKs against a
// stand-in server that plays their wire replies, and a check that a
// request carries llmtest.ReasoningToken back where the provider reads
// it. Tests in several modules use it to follow a reasoning model's
// opaque state across processes and Temporal workers; llmtest itself
// cannot import the adapters, whose own tests import it.
package reasoningtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	anthropicsdk "github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	openaisdk "github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/anthropic"
	"github.com/toolloop/toolloop/llm/gemini"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/llm/openai"
)

// Adapter is a real adapter whose replies carry opaque reasoning state
// (llmtest.CaseReasoningCall), with what it takes to find that state
// again in the request it sends next.
type Adapter struct {
	Name string
	// Testdata is the adapter's folder of wire replies, holding
	// reasoning_call.json and final_answer.json.
	Testdata string
	// New builds the adapter through its official SDK, aimed at url.
	New func(t testing.TB, url string) llm.Model
	// Sent returns the opaque values a request body carries where the
	// provider reads them back: Anthropic's thinking block signatures,
	// the Responses API's reasoning items' encrypted_content, Gemini's
	// thoughtSignature on functionCall parts.
	Sent func(t testing.TB, body []byte) []string
}

// Adapters returns the three reasoning adapters; llmDir is the path of
// the repository's llm folder from the calling test's package (their
// wire replies are in its testdata folders).
func Adapters(llmDir string) []Adapter {
	return []Adapter{
		{
			Name:     "anthropic",
			Testdata: filepath.Join(llmDir, "anthropic", "testdata"),
			New: func(t testing.TB, url string) llm.Model {
				return anthropic.New(anthropicsdk.NewClient(
					anthropicoption.WithoutEnvironmentDefaults(),
					anthropicoption.WithBaseURL(url),
					anthropicoption.WithAPIKey("test"),
					anthropicoption.WithMaxRetries(0),
				), &anthropic.Options{Model: "claude-sonnet-4-6", ThinkingBudget: 2048})
			},
			Sent: func(t testing.TB, body []byte) []string {
				var req struct {
					Messages []struct {
						Role    string `json:"role"`
						Content []struct {
							Type      string `json:"type"`
							Signature string `json:"signature"`
						} `json:"content"`
					} `json:"messages"`
				}
				decodeBody(t, body, &req)
				var out []string
				for _, m := range req.Messages {
					for _, b := range m.Content {
						if m.Role == "assistant" && b.Type == "thinking" {
							out = append(out, b.Signature)
						}
					}
				}
				return out
			},
		},
		{
			Name:     "openai-responses",
			Testdata: filepath.Join(llmDir, "openai", "testdata", "responses"),
			New: func(t testing.TB, url string) llm.Model {
				return openai.NewResponses(openaisdk.NewClient(
					openaioption.WithBaseURL(url),
					openaioption.WithAPIKey("sk-test"),
					openaioption.WithMaxRetries(0),
				), &openai.ResponsesOptions{Model: "gpt-5-mini", KeepReasoning: new(true)})
			},
			Sent: func(t testing.TB, body []byte) []string {
				var req struct {
					Input []struct {
						Type             string `json:"type"`
						EncryptedContent string `json:"encrypted_content"`
					} `json:"input"`
				}
				decodeBody(t, body, &req)
				var out []string
				for _, it := range req.Input {
					if it.Type == "reasoning" {
						out = append(out, it.EncryptedContent)
					}
				}
				return out
			},
		},
		{
			Name:     "gemini",
			Testdata: filepath.Join(llmDir, "gemini", "testdata"),
			New: func(t testing.TB, url string) llm.Model {
				c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
					APIKey:      "test",
					Backend:     genai.BackendGeminiAPI,
					HTTPOptions: genai.HTTPOptions{BaseURL: url},
				})
				if err != nil {
					t.Fatal(err)
				}
				return gemini.New(c, &gemini.Options{Model: "gemini-3-flash-preview"})
			},
			Sent: func(t testing.TB, body []byte) []string {
				var req struct {
					Contents []struct {
						Parts []struct {
							FunctionCall     json.RawMessage `json:"functionCall"`
							ThoughtSignature string          `json:"thoughtSignature"`
						} `json:"parts"`
					} `json:"contents"`
				}
				decodeBody(t, body, &req)
				var out []string
				for _, c := range req.Contents {
					for _, p := range c.Parts {
						if p.FunctionCall != nil {
							out = append(out, p.ThoughtSignature)
						}
					}
				}
				return out
			},
		},
	}
}

func decodeBody(t testing.TB, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("request body %s: %v", body, err)
	}
}

// WireServer stands in for a provider's API: it answers the n-th request
// with the n-th wire reply file (the last one repeats) and records every
// request body.
type WireServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

// NewWireServer starts a WireServer answering with files of dir; it is
// closed when the test ends.
func NewWireServer(t testing.TB, dir string, files ...string) *WireServer {
	t.Helper()
	replies := make([][]byte, len(files))
	for i, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		replies[i] = b
	}
	s := &WireServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.bodies)
		s.bodies = append(s.bodies, body)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(replies[min(n, len(replies)-1)])
	}))
	t.Cleanup(s.Close)
	return s
}

// Requests returns the request bodies received so far.
func (s *WireServer) Requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

// MustSendToken checks that body gives llmtest.ReasoningToken back, once,
// byte for byte, in the field the provider reads it from.
func MustSendToken(t testing.TB, a Adapter, body []byte) {
	t.Helper()
	if !bytes.Contains(body, []byte(llmtest.ReasoningToken)) {
		t.Fatalf("the request does not carry the reasoning state %s:\n%s", llmtest.ReasoningToken, body)
	}
	if got := a.Sent(t, body); !reflect.DeepEqual(got, []string{llmtest.ReasoningToken}) {
		t.Fatalf("the request's reasoning state fields hold %q, want [%q]:\n%s", got, llmtest.ReasoningToken, body)
	}
}
