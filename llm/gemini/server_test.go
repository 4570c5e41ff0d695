package gemini_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm/gemini"
)

// reply is one canned answer of the test server: an HTTP status and a
// testdata file holding the Gemini API's wire JSON.
type reply struct {
	status int
	file   string
}

func ok(file string) reply { return reply{http.StatusOK, file} }

// server stands in for generativelanguage.googleapis.com: it answers
// generateContent requests (and streamGenerateContent ones, as a server
// that does not stream) with its replies in order (repeating the last)
// and records every request.
type server struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	bodies  [][]byte
	paths   []string
}

func newServer(t *testing.T, replies ...reply) *server {
	t.Helper()
	s := &server{t: t, replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("reading request: %v", err)
	}
	// A streamed request is answered with the same JSON, as a server or
	// proxy that does not stream answers it.
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1beta/models/") ||
		!(strings.HasSuffix(r.URL.Path, ":generateContent") || strings.HasSuffix(r.URL.Path, ":streamGenerateContent")) {
		s.t.Errorf("request %s %s, want POST /v1beta/models/{model}:generateContent or :streamGenerateContent", r.Method, r.URL.Path)
	}
	if got := r.Header.Get("x-goog-api-key"); got != "test" {
		s.t.Errorf("x-goog-api-key = %q, want the client's key", got)
	}
	s.mu.Lock()
	n := len(s.bodies)
	s.bodies = append(s.bodies, body)
	s.paths = append(s.paths, r.URL.Path)
	rp := s.replies[min(n, len(s.replies)-1)]
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(rp.status)
	_, _ = w.Write(fixture(s.t, rp.file))
}

// client builds a real SDK client talking to the server.
func (s *server) client(t *testing.T) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      "test",
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: s.srv.URL},
		HTTPClient:  s.srv.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (s *server) model(t *testing.T, opts *gemini.Options) *gemini.Model {
	t.Helper()
	return gemini.New(s.client(t), opts)
}

// last returns the body of the last request received (nil if none).
func (s *server) last() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) == 0 {
		return nil
	}
	return s.bodies[len(s.bodies)-1]
}

func (s *server) requests() (bodies [][]byte, paths []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...), append([]string(nil), s.paths...)
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wireRequest is the part of a generateContent request body the tests read.
type wireRequest struct {
	Contents []struct {
		Role  string     `json:"role"`
		Parts []wirePart `json:"parts"`
	} `json:"contents"`
	SystemInstruction *struct {
		Parts []wirePart `json:"parts"`
	} `json:"systemInstruction"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
}

type wirePart struct {
	Text         string `json:"text"`
	FunctionCall *struct {
		ID   string         `json:"id"`
		Name string         `json:"name"`
		Args map[string]any `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
	ThoughtSignature []byte `json:"thoughtSignature"`
}

func decodeRequest(t *testing.T, body []byte) wireRequest {
	t.Helper()
	var r wireRequest
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("request body %s: %v", body, err)
	}
	return r
}

// resultsSent maps each functionResponse's id to its response object as
// sent.
func resultsSent(t *testing.T, body []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range decodeRequest(t, body).Contents {
		for _, p := range c.Parts {
			if fr := p.FunctionResponse; fr != nil {
				out[fr.ID] = string(fr.Response)
			}
		}
	}
	return out
}
