package loop_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/llm/llmtest/reasoningtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// A session's second run starts from the first run's history, whose
// assistant turn carries the provider's reasoning state (through each
// real reasoning adapter, from its real wire replies). Near the window,
// with ClearReasoning, the edit clears that earlier cycle's reasoning
// first: the next request gives back only the current cycle's state,
// once, where the provider reads it, and the history stays valid.
// Without ClearReasoning the request carries both.
func TestClearReasoningOfEarlierCycles(t *testing.T) {
	type weatherIn struct {
		City string `json:"city"`
	}
	weather := tool.MustNew(tool.Spec[weatherIn]{Name: "get_weather", Description: "current weather"},
		func(_ context.Context, in weatherIn) (map[string]int, error) {
			return map[string]int{"temp_c": 12}, nil
		})
	reg, err := tool.NewRegistry(weather)
	if err != nil {
		t.Fatal(err)
	}
	// A long first prompt (about 1300 tokens) brings the second run near
	// its window, and clearing the reasoning does not bring it far.
	prompt := "Weather in Oslo? " + strings.Repeat("Oslo has a harbour. ", 260)
	for _, a := range reasoningtest.Adapters("../llm") {
		t.Run(a.Name, func(t *testing.T) {
			for _, clear := range []bool{true, false} {
				srv := reasoningtest.NewWireServer(t, a.Testdata, "reasoning_call.json", "final_answer.json")
				first, err := loop.Run(context.Background(), loop.Config{Model: a.New(t, srv.URL), Tools: reg}, []llm.Message{llm.UserMessage(prompt)})
				if err != nil {
					t.Fatal(err)
				}
				opening := append(first.Messages, llm.UserMessage("And in Bergen?"))
				// The second run's call is the same reply under another
				// call ID: a run refuses an ID used before.
				dir := t.TempDir()
				id := first.Messages[1].ToolCalls[0].ID
				call, err := os.ReadFile(filepath.Join(a.Testdata, "reasoning_call.json"))
				if err != nil {
					t.Fatal(err)
				}
				answer, err := os.ReadFile(filepath.Join(a.Testdata, "final_answer.json"))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "call.json"), bytes.ReplaceAll(call, []byte(id), []byte(id+"b")), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "answer.json"), answer, 0o600); err != nil {
					t.Fatal(err)
				}
				srv = reasoningtest.NewWireServer(t, dir, "call.json", "answer.json")
				m := a.New(t, srv.URL)
				policy := &loop.ContextPolicy{Window: 2000, Margin: 900, LowWater: 200, KeepToolResults: 1, ClearReasoning: clear}
				res, err := loop.Run(context.Background(), loop.Config{Model: m, Tools: reg, Context: policy}, opening)
				if err != nil {
					t.Fatalf("second run: %v", err)
				}
				if err := llm.CheckHistory(res.Messages); err != nil {
					t.Fatal(err)
				}
				reqs := srv.Requests()
				last := reqs[len(reqs)-1]
				cleared := 0
				for _, ev := range res.Events {
					if ev.Kind == loop.ContextEdited {
						cleared += len(ev.Edit.Reasoning)
					}
				}
				var sent []string
				for _, v := range a.Sent(t, last) {
					if v != "" {
						sent = append(sent, v)
					}
				}
				if !clear {
					if len(sent) != 2 || cleared != 0 {
						t.Fatalf("without ClearReasoning: the request gives back %q, %d reasoning cleared; want both cycles' state", sent, cleared)
					}
					continue
				}
				if cleared == 0 {
					t.Fatalf("%d messages' reasoning cleared, want the first run's", cleared)
				}
				// The current cycle's state goes back, once, where the
				// provider reads it; the earlier cycle's is gone.
				if len(sent) != 1 || sent[0] != llmtest.ReasoningToken || bytes.Count(last, []byte(llmtest.ReasoningToken)) != 1 {
					t.Fatalf("the request gives back %q; want the current cycle's %s alone:\n%s", sent, llmtest.ReasoningToken, last)
				}
				if got := loop.Replay(res.Events).History(); !sameHistory(got, res.Messages) {
					t.Fatal("the replayed history differs from the run's")
				}
			}
		})
	}
}
