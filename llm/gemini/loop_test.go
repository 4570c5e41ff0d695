package gemini_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/gemini"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

type weatherIn struct {
	City string `json:"city"`
}

type timeIn struct {
	Zone string `json:"zone"`
}

func weatherTools(t *testing.T) *tool.Registry {
	t.Helper()
	weather := tool.MustNew(tool.Spec[weatherIn]{Name: "get_weather", Description: "current weather in a city"},
		func(ctx context.Context, in weatherIn) (map[string]int, error) {
			return map[string]int{"temp_c": 12}, nil
		})
	clock := tool.MustNew(tool.Spec[timeIn]{Name: "get_time", Description: "local time in a time zone"},
		func(ctx context.Context, in timeIn) (map[string]string, error) {
			return map[string]string{"time": "14:05", "zone": in.Zone}, nil
		})
	reg, err := tool.NewRegistry(weather, clock)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestLoopEndToEnd runs the loop against the test server: Gemini answers
// with two function calls without IDs, then with a final answer.
func TestLoopEndToEnd(t *testing.T) {
	s := newServer(t, ok("parallel_calls.json"), ok("final_answer.json"))
	res, err := loop.Run(context.Background(), loop.Config{
		Model:     s.model(t, nil),
		ModelName: "gemini-3-flash-preview",
		Tools:     weatherTools(t),
		Budgets:   loop.Budgets{MaxSteps: 4},
	}, []llm.Message{
		llm.SystemMessage("You answer weather questions."),
		llm.UserMessage("Weather and time in Oslo?"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != loop.FinalAnswer || res.Answer() != "It is 12 °C in Oslo." || res.Steps != 2 || res.ToolCalls != 2 {
		t.Fatalf("result: status %s, answer %q, %d steps, %d calls", res.Status, res.Answer(), res.Steps, res.ToolCalls)
	}
	// Turn 1: 74 in / 31 out; turn 2: 100 in / 15+5 out.
	if want := (llm.Usage{InputTokens: 174, OutputTokens: 51, CachedInputTokens: 30, ReasoningTokens: 5}); res.Usage != want {
		t.Fatalf("usage = %+v, want %+v", res.Usage, want)
	}

	bodies, paths := s.requests()
	if len(bodies) != 2 || paths[1] != "/v1beta/models/gemini-3-flash-preview:generateContent" {
		t.Fatalf("requests: %v", paths)
	}
	// The second request replays the model's calls under the IDs the
	// adapter generated, the first with Gemini's thought signature, and
	// answers each in one user content linked by ID and name.
	req := decodeRequest(t, bodies[1])
	if len(req.Contents) != 3 || req.Contents[1].Role != "model" || req.Contents[2].Role != "user" {
		t.Fatalf("contents = %s", bodies[1])
	}
	calls := req.Contents[1].Parts
	ids := []string{res.Messages[2].ToolCalls[0].ID, res.Messages[2].ToolCalls[1].ID}
	if len(calls) != 2 || calls[0].FunctionCall.ID != ids[0] || calls[1].FunctionCall.ID != ids[1] ||
		!strings.HasPrefix(ids[0], "toolloop_") || len(calls[0].ThoughtSignature) == 0 {
		t.Fatalf("replayed calls = %s; history IDs %v", bodies[1], ids)
	}
	results := req.Contents[2].Parts
	want := map[string]string{
		ids[0]: `{"output":{"temp_c":12}}`,
		ids[1]: `{"output":{"time":"14:05","zone":"Europe/Oslo"}}`,
	}
	for i, p := range results {
		fr := p.FunctionResponse
		if fr == nil || fr.ID != ids[i] || fr.Name != calls[i].FunctionCall.Name || !jsonEqual(fr.Response, want[fr.ID]) {
			t.Fatalf("result %d = %+v, want %s", i, fr, want[ids[i]])
		}
	}
}

// TestLoopToolErrorGoesBack checks that a recoverable tool failure reaches
// Gemini as an error response linked to its call.
func TestLoopToolErrorGoesBack(t *testing.T) {
	s := newServer(t, ok("single_call.json"), ok("final_answer.json"))
	failing := tool.MustNew(tool.Spec[weatherIn]{Name: "get_weather"},
		func(ctx context.Context, in weatherIn) (map[string]int, error) {
			return nil, tool.NotFound("no station in " + in.City)
		})
	reg, err := tool.NewRegistry(failing)
	if err != nil {
		t.Fatal(err)
	}
	res, err := loop.Run(context.Background(), loop.Config{
		Model: s.model(t, &gemini.Options{Model: "gemini-3-flash-preview"}),
		Tools: reg,
	}, []llm.Message{llm.UserMessage("Weather in Oslo?")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != loop.FinalAnswer {
		t.Fatalf("status = %s", res.Status)
	}
	got := resultsSent(t, s.last())
	var resp map[string]any
	if err := json.Unmarshal([]byte(got["call_1"]), &resp); err != nil {
		t.Fatalf("results sent = %v", got)
	}
	if resp["error"] != "no station in Oslo" || resp["kind"] != string(llm.KindNotFound) {
		t.Fatalf("error response = %v", resp)
	}
}

func jsonEqual(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xa) == string(yb)
}
