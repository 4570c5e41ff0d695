package gemini_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm/gemini"
)

// The texts of the Gemini API's 400 INVALID_ARGUMENT answers for a
// function call of the current turn replayed without its thought signature
// and with one it did not issue.
const (
	missingSignatureFormat = "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, " +
		"and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:%s` , " +
		"position %d. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
	corruptedSignature = "Corrupted thought signature."
)

// apiStep is one scripted model reply of the fake API: function calls (in
// parallel when more than one), else a text answer; thought is a thought
// summary, sent only when the request asks for thoughts.
type apiStep struct {
	calls   []apiCall
	text    string
	thought string
}

type apiCall struct{ name, args string }

// fakeAPI stands in for the Gemini API as Gemini 3 treats thought
// signatures. It answers from its script, one step per request, with the
// wire JSON Gemini sends: no call IDs, a thought signature on the first
// functionCall part of a step only, or on the last part of a text answer.
// Before answering it validates the request the way the API does: the
// current turn starts at the last user content with text (not a
// functionResponse); the first functionCall part of every model content
// after it must carry a signature, either Google's placeholder or exactly
// the bytes issued for that call; otherwise the request fails with the
// API's 400 INVALID_ARGUMENT and its error text. Earlier turns are not
// validated. The signatures it issues include bytes that are not UTF-8, so
// that only a byte-exact round trip passes.
type fakeAPI struct {
	t      *testing.T
	srv    *httptest.Server
	script []apiStep

	mu     sync.Mutex
	next   int               // the script's next step
	issued map[string]string // signature -> the call it was issued for
	bodies [][]byte
	errs   []string // the error text of each request answered with 400, "" for the others
}

func newFakeAPI(t *testing.T, script ...apiStep) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t, script: script, issued: map[string]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// apiRequest is what the fake API reads of a generateContent request.
type apiRequest struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []struct {
			Text         string `json:"text"`
			Thought      bool   `json:"thought"`
			FunctionCall *struct {
				Name string          `json:"name"`
				Args json.RawMessage `json:"args"`
			} `json:"functionCall"`
			FunctionResponse json.RawMessage `json:"functionResponse"`
			ThoughtSignature []byte          `json:"thoughtSignature"`
		} `json:"parts"`
	} `json:"contents"`
	GenerationConfig struct {
		ThinkingConfig struct {
			IncludeThoughts bool `json:"includeThoughts"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("reading request: %v", err)
	}
	var req apiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		f.t.Errorf("request body %s: %v", body, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bodies = append(f.bodies, body)
	if msg := f.validate(&req); msg != "" {
		f.errs = append(f.errs, msg)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
			"code": 400, "message": msg, "status": "INVALID_ARGUMENT",
		}})
		return
	}
	f.errs = append(f.errs, "")
	if f.next >= len(f.script) {
		f.t.Errorf("request %d: the script has only %d steps", len(f.bodies), len(f.script))
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	n := f.next
	f.next++
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(f.reply(n, req.GenerationConfig.ThinkingConfig.IncludeThoughts))
}

// validate returns the API's error text for req, "" when it passes.
func (f *fakeAPI) validate(req *apiRequest) string {
	start := -1
	for i, c := range req.Contents {
		if c.Role != "user" {
			continue
		}
		for _, p := range c.Parts {
			if p.Text != "" && p.FunctionResponse == nil {
				start = i
			}
		}
	}
	for i := start + 1; i < len(req.Contents); i++ {
		c := req.Contents[i]
		if c.Role != "model" {
			continue
		}
		for _, p := range c.Parts {
			if p.FunctionCall == nil {
				continue
			}
			// Only the first functionCall part of a step is checked.
			sig := string(p.ThoughtSignature)
			switch {
			case sig == "":
				return fmt.Sprintf(missingSignatureFormat, p.FunctionCall.Name, i+1)
			case sig == "skip_thought_signature_validator" || sig == "context_engineering_is_the_way_to_go":
			case f.issued[sig] != callKey(p.FunctionCall.Name, p.FunctionCall.Args):
				return corruptedSignature
			}
			break
		}
	}
	return ""
}

// reply builds the wire JSON of the script's step n and records the
// signatures it issues.
func (f *fakeAPI) reply(n int, thoughts bool) map[string]any {
	step := f.script[n]
	var parts []map[string]any
	if thoughts && step.thought != "" {
		parts = append(parts, map[string]any{"text": step.thought, "thought": true})
	}
	for i, c := range step.calls {
		part := map[string]any{"functionCall": map[string]any{"name": c.name, "args": json.RawMessage(c.args)}}
		if i == 0 {
			sig := signatureBytes(n, "call")
			f.issued[string(sig)] = callKey(c.name, json.RawMessage(c.args))
			part["thoughtSignature"] = sig
		}
		parts = append(parts, part)
	}
	if len(step.calls) == 0 {
		parts = append(parts, map[string]any{"text": step.text, "thoughtSignature": signatureBytes(n, "text")})
	}
	return map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": parts},
			"finishReason": "STOP",
			"index":        0,
		}},
		"usageMetadata": map[string]any{
			"promptTokenCount": 50, "candidatesTokenCount": 10, "thoughtsTokenCount": 20, "totalTokenCount": 80,
		},
		"modelVersion": "gemini-3-flash-preview",
		"responseId":   fmt.Sprintf("resp-%d", n),
	}
}

// signatureBytes makes the opaque signature of step n: a digest with bytes
// that are not valid UTF-8 and that base64 writes as '+' and '/'.
func signatureBytes(n int, kind string) []byte {
	d := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", kind, n)))
	return append([]byte{0x0a, 0xff, 0xfe, 0xfb, 0xef, byte(n)}, d[:12]...)
}

// callKey names a call by its tool and arguments, whatever their key order.
func callKey(name string, args json.RawMessage) string {
	var v any
	_ = json.Unmarshal(args, &v)
	b, _ := json.Marshal(v)
	return name + " " + string(b)
}

func (f *fakeAPI) model(t *testing.T, opts *gemini.Options) *gemini.Model {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      "test",
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: f.srv.URL},
		HTTPClient:  f.srv.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return gemini.New(c, opts)
}

// requests returns the bodies received and the error text each was
// answered with ("" for success).
func (f *fakeAPI) requests() ([][]byte, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.bodies...), append([]string(nil), f.errs...)
}

// firstCallSignatures returns, for each model content of a request body,
// the name of its first functionCall part and that part's signature, and
// the signatures of its other functionCall parts.
func firstCallSignatures(t *testing.T, body []byte) (names []string, first [][]byte, others [][]byte) {
	t.Helper()
	for _, c := range decodeRequest(t, body).Contents {
		if c.Role != "model" {
			continue
		}
		seen := false
		for _, p := range c.Parts {
			if p.FunctionCall == nil {
				continue
			}
			if !seen {
				names = append(names, p.FunctionCall.Name)
				first = append(first, p.ThoughtSignature)
				seen = true
			} else {
				others = append(others, p.ThoughtSignature)
			}
		}
	}
	return names, first, others
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// mustNotContain fails when body holds needle.
func mustNotContain(t *testing.T, body []byte, needle, what string) {
	t.Helper()
	if strings.Contains(string(body), needle) {
		t.Fatalf("the request carries %s (%q): %s", what, needle, body)
	}
}
