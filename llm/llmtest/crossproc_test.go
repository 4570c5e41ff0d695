package llmtest_test

// The real adapters (official SDKs over HTTP) must carry a reasoning
// model's opaque state through a pause in one process and a resume in
// another: the second process never saw the reply, so the state can only
// come from the run's log.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	anthropicsdk "github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	openaisdk "github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"go.uber.org/goleak"
	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/anthropic"
	"github.com/toolloop/toolloop/llm/gemini"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/llm/openai"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
)

// The runs, the SDKs' HTTP clients and the test servers must leave no
// goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reasoningAdapter is a real adapter whose replies carry opaque reasoning
// state (llmtest.CaseReasoningCall), with the knowledge needed to find
// that state again in the request it sends next.
type reasoningAdapter struct {
	name string
	// testdata is the adapter's folder of wire replies, holding
	// reasoning_call.json and final_answer.json.
	testdata string
	// newModel builds the adapter through its official SDK, aimed at url.
	newModel func(t *testing.T, url string) llm.Model
	// sent returns the opaque values a request body carries where the
	// provider reads them back: Anthropic's thinking block signatures,
	// the Responses API's reasoning items' encrypted_content, Gemini's
	// thoughtSignature on functionCall parts.
	sent func(t *testing.T, body []byte) []string
}

var reasoningAdapters = []reasoningAdapter{
	{
		name:     "anthropic",
		testdata: "../anthropic/testdata",
		newModel: func(t *testing.T, url string) llm.Model {
			return anthropic.New(anthropicsdk.NewClient(
				anthropicoption.WithoutEnvironmentDefaults(),
				anthropicoption.WithBaseURL(url),
				anthropicoption.WithAPIKey("test"),
				anthropicoption.WithMaxRetries(0),
			), &anthropic.Options{Model: "claude-sonnet-4-6", ThinkingBudget: 2048})
		},
		sent: func(t *testing.T, body []byte) []string {
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
		name:     "openai-responses",
		testdata: "../openai/testdata/responses",
		newModel: func(t *testing.T, url string) llm.Model {
			return openai.NewResponses(openaisdk.NewClient(
				openaioption.WithBaseURL(url),
				openaioption.WithAPIKey("sk-test"),
				openaioption.WithMaxRetries(0),
			), &openai.ResponsesOptions{Model: "gpt-5-mini", KeepReasoning: new(true)})
		},
		sent: func(t *testing.T, body []byte) []string {
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
		name:     "gemini",
		testdata: "../gemini/testdata",
		newModel: func(t *testing.T, url string) llm.Model {
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
		sent: func(t *testing.T, body []byte) []string {
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

func decodeBody(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("request body %s: %v", body, err)
	}
}

func adapterNamed(t *testing.T, name string) reasoningAdapter {
	t.Helper()
	for _, a := range reasoningAdapters {
		if a.name == name {
			return a
		}
	}
	t.Fatalf("no adapter named %q", name)
	return reasoningAdapter{}
}

// wireServer stands in for a provider's API: it answers the n-th request
// with the n-th wire reply file (the last one repeats) and records every
// request body.
type wireServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newWireServer(t *testing.T, dir string, files ...string) *wireServer {
	t.Helper()
	replies := make([][]byte, len(files))
	for i, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		replies[i] = b
	}
	s := &wireServer{}
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

func (s *wireServer) requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

type weatherIn struct {
	City string `json:"city"`
}

// weatherConfig is how both processes drive the run: get_weather is a
// write, so policy.ConfirmWrites pauses for a human before it runs; the
// log is a SQLite file. cities records the arguments of each execution.
func weatherConfig(t *testing.T, st *sqlite.Store, model llm.Model, runID string, cities *[]string) loop.Config {
	t.Helper()
	var mu sync.Mutex
	weather := tool.MustNew(tool.Spec[weatherIn]{Name: "get_weather", Description: "current weather", Effect: tool.Write},
		func(_ context.Context, in weatherIn) (map[string]int, error) {
			mu.Lock()
			defer mu.Unlock()
			*cities = append(*cities, in.City)
			return map[string]int{"temp_c": 12}, nil
		})
	reg, err := tool.NewRegistry(weather)
	if err != nil {
		t.Fatal(err)
	}
	return loop.Config{Model: model, Tools: reg, Store: st, Policy: policy.ConfirmWrites(),
		NewRunID: func() string { return runID }}
}

const (
	reasoningEnvDB      = "TOOLLOOP_REASONING_DB"
	reasoningEnvRun     = "TOOLLOOP_REASONING_RUN"
	reasoningEnvAdapter = "TOOLLOOP_REASONING_ADAPTER"
)

// TestReasoningStateChildProcess is the child's side; it does nothing
// unless TestReasoningStateAcrossProcesses started it. Its adapter gets
// the reasoning reply and the run pauses for confirmation of the call,
// leaving the state only in the SQLite log.
func TestReasoningStateChildProcess(t *testing.T) {
	path := os.Getenv(reasoningEnvDB)
	if path == "" {
		t.Skip("runs only as TestReasoningStateAcrossProcesses's child process")
	}
	a := adapterNamed(t, os.Getenv(reasoningEnvAdapter))
	srv := newWireServer(t, a.testdata, "reasoning_call.json")
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var cities []string
	cfg := weatherConfig(t, st, a.newModel(t, srv.URL), os.Getenv(reasoningEnvRun), &cities)
	res, err := loop.Run(context.Background(), cfg, []llm.Message{llm.UserMessage("What is the weather in Oslo?")})
	if res == nil || res.Status != loop.ConfirmationRequired {
		t.Fatalf("result %+v, err %v; want confirmation_required", res, err)
	}
	var args weatherIn
	if len(res.Pending) != 1 || res.Pending[0].Tool != "get_weather" ||
		json.Unmarshal(res.Pending[0].Arguments, &args) != nil || args.City != "Oslo" {
		t.Fatalf("pending %+v, want get_weather for Oslo", res.Pending)
	}
	if len(cities) != 0 || len(srv.requests()) != 1 {
		t.Fatalf("before confirmation: tool ran for %v, %d requests; want none and 1", cities, len(srv.requests()))
	}
	fmt.Printf("R paused %s %s\n", res.RunID, res.Pending[0].CallID)
}

// A reasoning model's opaque state survives the process that received it,
// through each real adapter: a child process gets the reply carrying
// llmtest.ReasoningToken and pauses for confirmation on a SQLite file;
// this process, with a new adapter and a new server, approves, resumes,
// runs the tool, and its request gives the token back exactly where the
// provider reads it.
func TestReasoningStateAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	if os.Getenv(reasoningEnvDB) != "" {
		t.Skip("inside a child")
	}
	for _, a := range reasoningAdapters {
		t.Run(a.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run.db")
			runID := "reasoning-" + a.name
			cmd := exec.Command(os.Args[0], "-test.run=^TestReasoningStateChildProcess$", "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), reasoningEnvDB+"="+path, reasoningEnvRun+"="+runID, reasoningEnvAdapter+"="+a.name,
				"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("child: %v\n%s\n%s", err, out, stderr.Bytes())
			}
			callID := ""
			for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
				if rest, ok := strings.CutPrefix(sc.Text(), "R paused "+runID+" "); ok {
					callID = rest
				}
			}
			if callID == "" {
				t.Fatalf("the child did not pause the run:\n%s", out)
			}

			st, err := sqlite.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := loop.Decide(ctx, st, runID, loop.Confirmation{CallID: callID, Approved: true, By: "dana"}, time.Now()); err != nil {
				t.Fatal(err)
			}
			srv := newWireServer(t, a.testdata, "final_answer.json")
			var cities []string
			r, err := loop.NewRunner(weatherConfig(t, st, a.newModel(t, srv.URL), runID, &cities))
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Resume(ctx, runID)
			if err != nil || res.Status != loop.FinalAnswer {
				t.Fatalf("resume: result %+v, err %v; want final_answer", res, err)
			}
			if got := res.Answer(); got != "It is 12 °C in Oslo." {
				t.Fatalf("answer %q", got)
			}
			if !reflect.DeepEqual(cities, []string{"Oslo"}) {
				t.Fatalf("get_weather ran for %v, want Oslo once", cities)
			}
			reqs := srv.requests()
			if len(reqs) != 1 {
				t.Fatalf("the resuming adapter sent %d requests, want 1", len(reqs))
			}
			mustSendToken(t, a, reqs[0])
		})
	}
}

// mustSendToken checks that body gives llmtest.ReasoningToken back, once,
// byte for byte, in the field the provider reads it from.
func mustSendToken(t *testing.T, a reasoningAdapter, body []byte) {
	t.Helper()
	if !bytes.Contains(body, []byte(llmtest.ReasoningToken)) {
		t.Fatalf("the request does not carry the reasoning state %s:\n%s", llmtest.ReasoningToken, body)
	}
	if got := a.sent(t, body); !reflect.DeepEqual(got, []string{llmtest.ReasoningToken}) {
		t.Fatalf("the request's reasoning state fields hold %q, want [%q]:\n%s", got, llmtest.ReasoningToken, body)
	}
}
