package loop_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
)

// TestCompactionAfterOutputCorrection: a run with an output schema and
// compaction whose first answer was refused (a correction joined the
// history) and which then called tools. The compaction must cut the
// history where its turns are: every call left keeps its result.
// Before, the correction was not counted in the context memory, whose
// message indexes then lagged the history's by one, and the cut left
// c1's result after the summary without its call.
func TestCompactionAfterOutputCorrection(t *testing.T) {
	big := strings.Repeat("Order A1 left the Oslo warehouse on Monday and is with the carrier. ", 6)
	lines := []string{
		`{"seq":1,"at":"2026-01-01T10:00:00Z","kind":"started","start":{"run_id":"run-1","model":"scripted","tools_version":"tools-v1","identity":{"name":"alice","roles":["support"]},"budgets":{"max_steps":6,"deadline":600000000000,"max_tool_calls":10},"context":{"window":1000,"margin":100,"low_water":300,"keep_tool_results":1,"exclude_tools":["query_order"],"compact":true},"messages":[{"role":"user","text":"Where are orders A1 and A2?"}],"output":{"name":"answer","schema":{"type":"object","required":["status"]},"retries":2}}}`,
		`{"seq":2,"at":"2026-01-01T10:00:01Z","kind":"model_responded","response":{"message":{"role":"assistant","text":"not JSON"},"usage":{"input_tokens":100,"output_tokens":5},"finish_reason":"stop"},"attempts":1}`,
		`{"seq":3,"at":"2026-01-01T10:00:02Z","kind":"model_responded","response":{"message":{"role":"assistant","tool_calls":[{"id":"c1","name":"query_order","arguments":{"id":"A1"}}]},"usage":{"input_tokens":150,"output_tokens":20},"finish_reason":"tool_calls"},"attempts":1}`,
		`{"seq":4,"at":"2026-01-01T10:00:03Z","kind":"calls_validated","checks":[{"known":true,"key":1000}]}`,
		`{"seq":5,"at":"2026-01-01T10:00:04Z","kind":"policy_decided","decisions":[{"verdict":"allow","rule":"allowlist","reason":"ok"}]}`,
		`{"seq":6,"at":"2026-01-01T10:00:05Z","kind":"stage_planned","plan":{"stages":[[0]],"table":[{"call_id":"c1","tool":"query_order","effect":"read_only","stage":0,"mode":"serial","reason":"a single read"}]}}`,
		`{"seq":7,"at":"2026-01-01T10:00:06Z","kind":"stage_finished","outcomes":[{"result":{"call_id":"c1","name":"query_order","status":"ok","content":{"status":"` + big + `"}},"attempts":1}]}`,
		`{"seq":8,"at":"2026-01-01T10:00:07Z","kind":"model_responded","response":{"message":{"role":"assistant","tool_calls":[{"id":"c2","name":"query_order","arguments":{"id":"A2"}}]},"usage":{"input_tokens":850,"output_tokens":20},"finish_reason":"tool_calls"},"attempts":1}`,
		`{"seq":9,"at":"2026-01-01T10:00:08Z","kind":"calls_validated","checks":[{"known":true,"key":2000}]}`,
		`{"seq":10,"at":"2026-01-01T10:00:09Z","kind":"policy_decided","decisions":[{"verdict":"allow","rule":"allowlist","reason":"ok"}]}`,
		`{"seq":11,"at":"2026-01-01T10:00:10Z","kind":"stage_planned","plan":{"stages":[[0]],"table":[{"call_id":"c2","tool":"query_order","effect":"read_only","stage":0,"mode":"serial","reason":"a single read"}]}}`,
		`{"seq":12,"at":"2026-01-01T10:00:11Z","kind":"stage_finished","outcomes":[{"result":{"call_id":"c2","name":"query_order","status":"ok","content":{"status":"` + big + big + `"}},"attempts":1}]}`,
	}
	events, err := decodeEvents([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	var s loop.State
	var eff loop.Effect
	for i := range events {
		eff = loop.Next(&s, &events[i])
	}
	if eff.Kind != loop.Summarize {
		t.Fatalf("after c2's result the decider calls for %s %q, want a summary", eff.Kind, eff.Detail)
	}
	r := eff.Summary
	// The summary covers the refused answer, its correction and c1's
	// turn (messages 1 to 4 of the history), and keeps c2's whole.
	if r.From != 1 || r.Through != 5 {
		t.Errorf("the summary covers messages [%d,%d), want [1,5): the history is %d messages", r.From, r.Through, len(s.Messages))
	}
	ev := loop.SummaryEvent(loop.Event{Kind: loop.ModelResponded, Response: &llm.Response{
		Message: llm.Message{Role: llm.RoleAssistant, Text: "A1 is with the carrier."}, Usage: llm.Usage{InputTokens: 300, OutputTokens: 10},
	}}, r)
	ev.Seq = 13
	eff = loop.Next(&s, &ev)
	if eff.Kind != loop.RequestModel {
		t.Fatalf("after the summary the decider calls for %s %q, want request_model", eff.Kind, eff.Detail)
	}
	if err := llm.CheckHistory(s.Messages); err != nil {
		t.Fatalf("the history after the compaction is not valid: %v", err)
	}
	if n := len(s.Messages); n != 4 || s.Messages[2].ToolCalls[0].ID != "c2" {
		t.Errorf("history after the compaction has %d messages, want the opening, the summary and c2's turn", n)
	}
}

// TestClearedResultFetchedAgainIsNews: a cleared result's note tells the
// model to call the tool again if it needs the result. Doing so must not
// count as a turn that added nothing new: the model no longer sees the
// cleared content. Before, the fetched-again results matched the hashes
// of those seen before the clearing, two such turns in a row counted as
// stale, and the next call stopped the run with spin_detected.
func TestClearedResultFetchedAgainIsNews(t *testing.T) {
	page := func(n int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf("%q", strings.Repeat(fmt.Sprintf("page %d. ", n), 700)))
	}
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	var s loop.State
	var eff loop.Effect
	feed := func(ev loop.Event) {
		at = at.Add(time.Second)
		ev.At = at
		eff = loop.Next(&s, &ev)
	}
	feed(loop.Event{Kind: loop.Started, Start: &loop.StartInfo{RunID: "r", Budgets: loop.Budgets{MaxSteps: 20, MaxToolCalls: 20, Deadline: time.Hour},
		Context:  &loop.ContextPolicy{Window: 4000, Margin: 400, LowWater: 1000, KeepToolResults: 1},
		Messages: []llm.Message{llm.UserMessage("Read the pages.")}}})
	edits := 0
	for i, p := range []int{1, 2, 3, 1, 2, 4, 5} {
		id := fmt.Sprintf("c%d", i+1)
		feed(loop.Event{Kind: loop.ModelResponded, Response: &llm.Response{
			Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: "fetch_page", Arguments: json.RawMessage(fmt.Sprintf(`{"page":%d}`, p))}}}}})
		feed(loop.Event{Kind: loop.CallsValidated, Checks: []loop.CallCheck{{Known: true, Key: uint64(p)}}})
		if eff.Kind != loop.AuthorizeCalls {
			t.Fatalf("call %s for page %d (after %d edits): the decider calls for %s %s %q", id, p, edits, eff.Kind, eff.Status, eff.Detail)
		}
		feed(loop.Event{Kind: loop.PolicyDecided, Decisions: []policy.Decision{{Verdict: policy.Allow}}})
		feed(loop.Event{Kind: loop.StagePlanned, Plan: &executor.Plan{Stages: [][]int{{0}}}})
		feed(loop.Event{Kind: loop.StageFinished, Outcomes: []executor.Outcome{{Result: llm.ToolResult{CallID: id, Name: "fetch_page", Status: llm.StatusOK, Content: page(p)}}}})
		for eff.Kind == loop.EditContext {
			edits++
			feed(loop.Event{Kind: loop.ContextEdited, Edit: eff.Edit})
		}
		if eff.Kind != loop.RequestModel {
			t.Fatalf("after %s's result: %s %q", id, eff.Kind, eff.Detail)
		}
	}
	if edits == 0 {
		t.Fatal("no result was cleared: the test does not test what it says")
	}
	// The decider's memory carries what was cleared: a state decoded
	// from it decides the same.
	b, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	var d loop.State
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(&d)
	if string(b) != string(b2) {
		t.Fatal("the state's encoding does not round-trip")
	}
}
