package trace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/trace"
)

func show(t *testing.T, events []loop.Event, opts *trace.ShowOptions) string {
	t.Helper()
	var buf bytes.Buffer
	if err := trace.Show(&buf, events, opts); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestShowNormalRun(t *testing.T) {
	res := scenario(t, "normal")
	// Show what the log file holds: redacted, read back.
	events, err := trace.ReadLog(bytes.NewReader(writeLog(t, res.Events, nil)))
	if err != nil {
		t.Fatal(err)
	}
	out := show(t, events, nil)
	for _, want := range []string{
		"run run-normal",
		"session demo:normal  model scripted-order-desk  prompt order-desk-v1",
		`call   call_id=call_q1 tool=query_order args={"order_id":"<string:4>"}`,
		"result call_id=call_q1 tool=query_order status=ok",
		"call   call_id=call_t1 tool=track_shipment",
		"result call_id=call_t1 tool=track_shipment status=ok",
		"decision tables",
		"CALL_ID  TOOL         EFFECT     RESOURCES   STAGE  MODE    REASON",
		"execute_tool query_order",
		"budget_check",
		"after_response",
		`stopped status=final_answer steps=3 tool_calls=2 tokens=0`,
		`detail="the model answered after 3 turn(s)"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Each result line names its call ID, and each call ID of the run has
	// exactly one result line.
	results := regexp.MustCompile(`result call_id=(\S+)`).FindAllStringSubmatch(out, -1)
	if len(results) != 2 || results[0][1] != "call_q1" || results[1][1] != "call_t1" {
		t.Errorf("result lines %v", results)
	}
	if last := strings.TrimRight(out, "\n"); !strings.HasPrefix(last[strings.LastIndex(last, "\n")+1:], "stopped status=final_answer") {
		t.Errorf("the stop line is not last:\n%s", out)
	}
}

// TestShowParallelGantt: the bars of a parallel stage's calls overlap.
func TestShowParallelGantt(t *testing.T) {
	slow := func(name string) *tool.Tool {
		return tool.MustNew(tool.Spec[struct {
			Key string `json:"key"`
		}]{Name: name}, func(ctx context.Context, _ struct {
			Key string `json:"key"`
		}) (bool, error) {
			time.Sleep(30 * time.Millisecond)
			return true, nil
		})
	}
	reg, err := tool.NewRegistry(slow("slow_a"), slow("slow_b"))
	if err != nil {
		t.Fatal(err)
	}
	res, _ := loop.Run(context.Background(), loop.Config{
		Model: llmtest.New(llmtest.Calls(llmtest.Call("a", "slow_a", `{"key":"1"}`), llmtest.Call("b", "slow_b", `{"key":"2"}`)),
			llmtest.Text("done")),
		Tools: reg, Executor: executor.New(&executor.Options{Ledger: store.NewMemory()}),
	}, []llm.Message{llm.UserMessage("go")})
	out := show(t, res.Events, &trace.ShowOptions{Width: 60})
	bars := map[string][2]int{}
	for _, line := range strings.Split(out, "\n") {
		for _, name := range []string{"execute_tool slow_a", "execute_tool slow_b"} {
			if strings.Contains(line, name) {
				bar := line[strings.Index(line, "|")+1:]
				bar = bar[:strings.Index(bar, "|")]
				bars[name] = [2]int{strings.Index(bar, "#"), strings.LastIndex(bar, "#")}
			}
		}
	}
	a, b := bars["execute_tool slow_a"], bars["execute_tool slow_b"]
	if a[0] < 0 || b[0] < 0 || a[0] > b[1] || b[0] > a[1] {
		t.Errorf("the bars of a parallel stage do not overlap (%v, %v):\n%s", a, b, out)
	}
	if !strings.Contains(out, "mode=parallel") {
		t.Errorf("no parallel stage:\n%s", out)
	}
}

func TestShowPausedAndTruncated(t *testing.T) {
	res := scenario(t, "confirmation_required")
	out := show(t, res.Events, nil)
	for _, want := range []string{"pending call_id=call_r1 tool=refund_order",
		"needs_confirmation (confirm_writes)", "status=skipped kind=awaiting_confirmation", "stopped status=confirmation_required"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out = show(t, res.Events[:len(res.Events)-3], nil)
	if !strings.Contains(out, "not stopped: the log ends at seq") || !strings.Contains(out, "open: the log has no stopped event") {
		t.Errorf("a truncated log:\n%s", out)
	}
	var buf bytes.Buffer
	if err := trace.Show(&buf, res.Events[1:], nil); !errors.Is(err, trace.ErrNotARun) {
		t.Errorf("a log without its start: %v", err)
	}
}

func TestShowProtocolError(t *testing.T) {
	out := show(t, scenario(t, "protocol_error").Events, nil)
	if strings.Count(out, "rejected  call   call_id=call_1") != 2 {
		t.Errorf("the rejected calls are not shown:\n%s", out)
	}
}

// TestShowResultCut: a result the executor cut to its cap says so in the
// call's notes, with how many bytes were left out.
func TestShowResultCut(t *testing.T) {
	big := tool.MustNew(tool.Spec[struct{}]{Name: "big"}, func(context.Context, struct{}) (string, error) {
		return strings.Repeat("x", 5000), nil
	})
	reg, err := tool.NewRegistry(big)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := loop.Run(context.Background(), loop.Config{
		Model: llmtest.New(llmtest.Calls(llmtest.Call("c1", "big", `{}`)), llmtest.Text("done")),
		Tools: reg, Executor: executor.New(&executor.Options{MaxResultBytes: 1000}),
	}, []llm.Message{llm.UserMessage("go")})
	out := show(t, res.Events, nil)
	if !regexp.MustCompile(`c1 .*result_cut=4\d\d\dB`).MatchString(out) {
		t.Errorf("no note of the cut result:\n%s", out)
	}
}

// TestShowContextEdits: the header gives the run's context policy, and
// each context edit has a line naming the calls it cleared and the
// tokens before and after.
// A turn the provider answered without reasoning of earlier turns, which
// it dropped because the history before it had been edited, says so in
// the transcript and on its span.
func TestShowDroppedReasoning(t *testing.T) {
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	events := []loop.Event{
		{Seq: 1, At: at, Kind: loop.Started, Start: &loop.StartInfo{RunID: "run-dropped", Budgets: loop.Budgets{MaxSteps: 4},
			Messages: []llm.Message{llm.UserMessage("read")}}},
		{Seq: 2, At: at.Add(time.Second), Kind: loop.ModelResponded, Response: &llm.Response{DroppedReasoning: 2,
			Message: llm.Message{Role: llm.RoleAssistant, Text: "done"}}},
	}
	out := show(t, events, nil)
	for _, want := range []string{
		`"done"`,
		"note   the provider dropped 2 reasoning block(s) of earlier turns from the request",
		"dropped_reasoning=2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestShowContextEdits(t *testing.T) {
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	big := json.RawMessage(`"` + strings.Repeat("x", 2000) + `"`)
	var events []loop.Event
	add := func(ev loop.Event) {
		ev.Seq, ev.At = len(events)+1, at.Add(time.Duration(len(events))*time.Second)
		events = append(events, ev)
	}
	add(loop.Event{Kind: loop.Started, Start: &loop.StartInfo{RunID: "run-edits", Budgets: loop.Budgets{MaxSteps: 4},
		Context:  &loop.ContextPolicy{Window: 60000, Margin: 6000, LowWater: 30000, KeepToolResults: 3},
		Messages: []llm.Message{llm.UserMessage("read")}}})
	add(loop.Event{Kind: loop.ModelResponded, Response: &llm.Response{Message: llm.Message{Role: llm.RoleAssistant,
		ToolCalls: []llm.ToolCall{{ID: "c1", Name: "fetch", Arguments: json.RawMessage(`{}`)}}}}})
	add(loop.Event{Kind: loop.CallsValidated, Checks: []loop.CallCheck{{Known: true, Key: 1}}})
	add(loop.Event{Kind: loop.PolicyDecided, Decisions: []policy.Decision{{Verdict: policy.Allow}}})
	add(loop.Event{Kind: loop.StagePlanned, Plan: &executor.Plan{Stages: [][]int{{0}}}})
	add(loop.Event{Kind: loop.StageFinished, Outcomes: []executor.Outcome{{Result: llm.ToolResult{CallID: "c1", Name: "fetch", Status: llm.StatusOK, Content: big}}}})
	add(loop.Event{Kind: loop.ContextEdited, Edit: &loop.ContextEdit{Reason: loop.EditForWindow,
		Cleared: []loop.ClearedResult{{CallID: "c1", Tool: "fetch", Tokens: 520}}, TokensBefore: 56000, TokensAfter: 29000}})
	add(loop.Event{Kind: loop.ContextSummarized, Response: &llm.Response{Usage: llm.Usage{InputTokens: 900, OutputTokens: 40}},
		Edit: &loop.ContextEdit{Reason: loop.EditCompaction, From: 1, Through: 3, Summary: "c1 read the page.", TokensBefore: 57000, TokensAfter: 20000}})
	out := show(t, events, nil)
	for _, want := range []string{
		"context window=60000 margin=6000 low_water=30000 keep_tool_results=3",
		"seq 8   before step 2  compaction      summarized messages 1-2 in 17 bytes (900 tokens in, 40 out)  tokens 57000 -> 20000",
		"context edits",
		"seq 7   before step 2  window          cleared 1 result(s): c1(fetch)  tokens 56000 -> 29000",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
