package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/tool"
)

// Driving the decider by hand: each event is what a driver saw happen, and
// each effect is what the decider wants done next. A real driver (Runner,
// the Temporal workflow) performs the effects; here the outcomes are
// written out.
func ExampleNext() {
	var s loop.State
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	seq := 0
	feed := func(ev loop.Event) {
		seq++
		ev.Seq, ev.At = seq, t0.Add(time.Duration(seq)*time.Second)
		// The state may keep pointers into the event: a driver keeps its
		// events, unchanged, in the run's log.
		eff := loop.Next(&s, &ev)
		fmt.Printf("%-16s -> %s", ev.Kind, eff.Kind)
		if eff.Calls != nil {
			fmt.Print(" ", eff.Calls)
		}
		if eff.Status != "" {
			fmt.Print(" ", eff.Status)
		}
		fmt.Println()
	}

	// The log records the budgets as the run uses them, defaults filled in.
	budgets, _ := loop.Budgets{MaxSteps: 4}.Normalized()
	feed(loop.Event{Kind: loop.Started, Start: &loop.StartInfo{
		RunID: "run-1", Budgets: budgets, Messages: []llm.Message{llm.UserMessage("How cold is Oslo?")},
	}})
	// RequestModel: the model proposes a call.
	call := llmtest.Call("call_1", "weather", `{"city":"Oslo"}`)
	feed(loop.Event{Kind: loop.ModelResponded, Response: &llm.Response{
		Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}},
	}})
	// ValidateCalls: the tool is registered and the arguments conform.
	feed(loop.Event{Kind: loop.CallsValidated, Checks: []loop.CallCheck{{Known: true, Key: 1}}})
	// AuthorizeCalls: the policy allows the call.
	feed(loop.Event{Kind: loop.PolicyDecided, Decisions: []policy.Decision{{Verdict: policy.Allow, Rule: "allowlist"}}})
	// PlanBatch: one stage holding the one call.
	feed(loop.Event{Kind: loop.StagePlanned, Plan: &executor.Plan{Stages: [][]int{{0}}}})
	// ExecuteStage: the tool ran.
	feed(loop.Event{Kind: loop.StageFinished, Stage: 0, Outcomes: []executor.Outcome{{Result: llm.ToolResult{
		CallID: "call_1", Name: "weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":-3}`),
	}}}})
	// RequestModel again: the model answers.
	feed(loop.Event{Kind: loop.ModelResponded, Response: &llm.Response{
		Message: llm.Message{Role: llm.RoleAssistant, Text: "It is -3 °C in Oslo."},
	}})
	// Stop: the driver logs how the run ended.
	feed(loop.Event{Kind: loop.Stopped, Status: s.Status, Detail: s.Detail})

	fmt.Println(s.Status, s.Steps, s.ToolCalls, len(s.History()))
	// Output:
	// started          -> request_model
	// model_responded  -> validate_calls
	// calls_validated  -> authorize_calls [0]
	// policy_decided   -> plan_batch [0]
	// stage_planned    -> execute_stage [0]
	// stage_finished   -> request_model
	// model_responded  -> stop final_answer
	// stopped          -> none
	// final_answer 2 1 4
}

// A run's log is its checkpoint: encoded as a store keeps it, decoded, and
// replayed through the decider, it gives back the run's state.
func ExampleReplay() {
	type weatherIn struct {
		City string `json:"city"`
	}
	weather := tool.MustNew(tool.Spec[weatherIn]{Name: "weather", Description: "current temperature"},
		func(ctx context.Context, in weatherIn) (map[string]int, error) {
			return map[string]int{"temp_c": -3}, nil
		})
	tools, _ := tool.NewRegistry(weather)
	model := llmtest.New(
		llmtest.Calls(llmtest.Call("call_1", "weather", `{"city":"Oslo"}`)),
		llmtest.Text("It is -3 °C in Oslo."),
	)
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: tools},
		[]llm.Message{llm.UserMessage("How cold is Oslo?")})
	if err != nil {
		fmt.Println(err)
		return
	}

	// One JSON event per line, as a store would hold them.
	var log bytes.Buffer
	enc := json.NewEncoder(&log)
	for i := range res.Events {
		if err := enc.Encode(&res.Events[i]); err != nil {
			fmt.Println(err)
			return
		}
	}
	var events []loop.Event
	dec := json.NewDecoder(&log)
	for dec.More() {
		var ev loop.Event
		if err := dec.Decode(&ev); err != nil {
			fmt.Println(err)
			return
		}
		events = append(events, ev)
	}

	s := loop.Replay(events)
	kinds := make([]string, len(events))
	for i, ev := range events {
		kinds[i] = string(ev.Kind)
	}
	fmt.Println(strings.Join(kinds, " "))
	fmt.Println(s.Status, s.Steps, s.ToolCalls, s.Done)
	fmt.Println(s.Messages[len(s.Messages)-1].Text)
	// Output:
	// started model_responded calls_validated policy_decided stage_planned stage_finished model_responded stopped
	// final_answer 2 1 true
	// It is -3 °C in Oslo.
}
