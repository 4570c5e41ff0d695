package loop_test

import (
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
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
