package temporal_test

// The real adapters (official SDKs over HTTP) must carry a reasoning
// model's opaque state from one Temporal worker to another: the worker
// that resumes never saw the reply, so the state can only come from the
// workflow's history and the shared blob store.

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
	"time"

	anthropicsdk "github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	openaisdk "github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/anthropic"
	"github.com/toolloop/toolloop/llm/gemini"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/llm/openai"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
	"github.com/toolloop/toolloop/tool"
)

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
		testdata: "../llm/anthropic/testdata",
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
		testdata: "../llm/openai/testdata/responses",
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
		testdata: "../llm/gemini/testdata",
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

// cityLog records the city of each get_weather execution, whichever
// worker ran it.
type cityLog struct {
	mu     sync.Mutex
	cities []string
}

func (l *cityLog) add(city string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cities = append(l.cities, city)
}

func (l *cityLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.cities...)
}

// weatherActivities is a worker's side of the reasoning runs: get_weather
// is a write, so policy.ConfirmWrites pauses for a human before it runs;
// the run's log lives in the workers' shared blob store.
func weatherActivities(t *testing.T, model llm.Model, blobs store.Blobs, ran *cityLog) *temporal.Activities {
	t.Helper()
	weather := tool.MustNew(tool.Spec[weatherIn]{Name: "get_weather", Description: "current weather", Effect: tool.Write},
		func(_ context.Context, in weatherIn) (map[string]int, error) {
			ran.add(in.City)
			return map[string]int{"temp_c": 12}, nil
		})
	reg, err := tool.NewRegistry(weather)
	if err != nil {
		t.Fatal(err)
	}
	acts, err := temporal.NewActivities(temporal.Config{Model: model, Tools: reg, Policy: policy.ConfirmWrites(), Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	return acts
}

// A run on a real server, through each real adapter: worker A's adapter
// gets the reply carrying llmtest.ReasoningToken and the run waits for
// confirmation; worker A stops, and worker B, with a new adapter and a new
// provider server, takes the approval, runs the tool and sends the next
// request, which gives the token back exactly where the provider reads it.
func TestDevServerReasoningAdaptersAcrossWorkers(t *testing.T) {
	c := devClient(t)
	for _, a := range reasoningAdapters {
		t.Run(a.name, func(t *testing.T) {
			queue := "toolloop-test-reasoning-" + suffix()
			blobs := store.NewMemory() // the store both workers reach
			ran := &cityLog{}
			newWorker := func(srv *wireServer) worker.Worker {
				w := worker.New(c, queue, worker.Options{})
				temporal.RegisterWorkflow(w)
				weatherActivities(t, a.newModel(t, srv.URL), blobs, ran).Register(w)
				if err := w.Start(); err != nil {
					t.Fatal(err)
				}
				return w
			}
			srvA := newWireServer(t, a.testdata, "reasoning_call.json")
			wA := newWorker(srvA)
			stopA := sync1(wA.Stop)
			defer stopA()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			id := "toolloop-test-reasoning-" + a.name + "-" + suffix()
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName,
				temporal.RunInput{RunID: id, Messages: []llm.Message{llm.UserMessage("What is the weather in Oslo?")}})
			if err != nil {
				t.Fatal(err)
			}
			var st temporal.RunStatus
			for {
				v, err := c.QueryWorkflow(ctx, id, "", temporal.StatusQuery)
				if err != nil {
					t.Fatal(err)
				}
				if err := v.Get(&st); err != nil {
					t.Fatal(err)
				}
				if st.Status == string(loop.ConfirmationRequired) {
					break
				}
				if st.Status != loop.RunningStatus {
					t.Fatalf("status %+v", st)
				}
				time.Sleep(50 * time.Millisecond)
			}
			var args weatherIn
			if len(st.Pending) != 1 || st.Pending[0].Tool != "get_weather" ||
				json.Unmarshal(st.Pending[0].Arguments, &args) != nil || args.City != "Oslo" {
				t.Fatalf("pending %+v, want get_weather for Oslo", st.Pending)
			}
			stopA()

			srvB := newWireServer(t, a.testdata, "final_answer.json")
			wB := newWorker(srvB)
			defer wB.Stop()
			h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: temporal.ConfirmUpdate,
				Args:         []any{loop.Confirmation{CallID: st.Pending[0].CallID, Approved: true, By: "dana"}},
				WaitForStage: client.WorkflowUpdateStageCompleted})
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Get(ctx, nil); err != nil {
				t.Fatal(err)
			}
			var out temporal.RunOutput
			if err := run.Get(ctx, &out); err != nil {
				t.Fatal(err)
			}
			if out.Status != loop.FinalAnswer {
				t.Fatalf("status %s (%s)", out.Status, out.Detail)
			}
			if got := ran.all(); !reflect.DeepEqual(got, []string{"Oslo"}) {
				t.Fatalf("get_weather ran for %v, want Oslo once", got)
			}
			if n := len(srvA.requests()); n != 1 {
				t.Fatalf("worker A's provider got %d requests, want 1", n)
			}
			reqs := srvB.requests()
			if len(reqs) != 1 {
				t.Fatalf("worker B's provider got %d requests, want 1", len(reqs))
			}
			body := reqs[0]
			if !bytes.Contains(body, []byte(llmtest.ReasoningToken)) {
				t.Fatalf("worker B's request does not carry the reasoning state %s:\n%s", llmtest.ReasoningToken, body)
			}
			if got := a.sent(t, body); !reflect.DeepEqual(got, []string{llmtest.ReasoningToken}) {
				t.Fatalf("worker B's request's reasoning state fields hold %q, want [%q]:\n%s", got, llmtest.ReasoningToken, body)
			}
			res, err := temporal.ReadResult(ctx, blobs, out)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Answer(); got != "It is 12 °C in Oslo." {
				t.Fatalf("answer %q", got)
			}
			replay(t, "reasoning "+a.name, history(t, c, id, run.GetRunID()))
		})
	}
}
