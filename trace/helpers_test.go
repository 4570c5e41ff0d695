package trace_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// scenario runs one of the sandbox's scenarios.
func scenario(t *testing.T, name string) *loop.Result {
	t.Helper()
	s, ok := orders.Lookup(name)
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	s.Ledger = store.NewMemory()
	res, _, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != s.Want {
		t.Fatalf("%s: status %s, want %s (%s)", name, res.Status, s.Want, res.Detail)
	}
	return res
}

// logBuilder builds a run's log by hand, for what the loop itself
// prevents: each event one millisecond after the previous.
type logBuilder struct {
	events []loop.Event
	at     time.Time
	step   int
}

func newLog(calls ...llm.ToolCall) *logBuilder {
	b := &logBuilder{at: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	b.add(loop.Event{Kind: loop.Started, Start: &loop.StartInfo{
		RunID: "run-hand", Model: "m", ToolsVersion: "tools-x",
		Budgets:  loop.Budgets{MaxSteps: 10, MaxToolCalls: 100, Deadline: time.Hour},
		Messages: []llm.Message{llm.UserMessage("hello")},
	}})
	return b
}

func (b *logBuilder) add(ev loop.Event) *logBuilder {
	b.at = b.at.Add(time.Millisecond)
	ev.Seq, ev.At = len(b.events)+1, b.at
	b.events = append(b.events, ev)
	return b
}

// turn adds a model response with calls and, if effect is set, their
// validation, allowing decisions and a serial plan.
func (b *logBuilder) turn(effect tool.Effect, usage int64, calls ...llm.ToolCall) *logBuilder {
	b.step++
	b.add(loop.Event{Kind: loop.ModelResponded, Latency: 500 * time.Microsecond, Attempts: 1, Response: &llm.Response{
		Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: calls}, Usage: llm.Usage{InputTokens: usage}}})
	checks := make([]loop.CallCheck, len(calls))
	decisions := make([]policy.Decision, len(calls))
	plan := executor.Plan{}
	for i, c := range calls {
		var v any
		_ = json.Unmarshal(c.Arguments, &v)
		checks[i] = loop.CallCheck{Known: true, Key: tool.CallKey(c.Name, tool.Fingerprint(v))}
		decisions[i] = policy.Decision{Verdict: policy.Allow, Rule: "test", Reason: "allowed"}
		plan.Stages = append(plan.Stages, []int{i})
		plan.Table = append(plan.Table, executor.Row{CallID: c.ID, Tool: c.Name, Effect: effect, Stage: i, Mode: executor.Serial, Reason: "test"})
	}
	b.add(loop.Event{Kind: loop.CallsValidated, Checks: checks})
	b.add(loop.Event{Kind: loop.PolicyDecided, Decisions: decisions})
	b.add(loop.Event{Kind: loop.StagePlanned, Plan: &plan})
	return b
}

// stage adds a stage's outcomes.
func (b *logBuilder) stage(i int, outs ...executor.Outcome) *logBuilder {
	for j := range outs {
		if outs[j].Started.IsZero() {
			outs[j].Started = b.at.Add(100 * time.Microsecond)
			outs[j].Duration = 200 * time.Microsecond
		}
		if outs[j].Attempts == 0 {
			outs[j].Attempts = 1
		}
	}
	return b.add(loop.Event{Kind: loop.StageFinished, Stage: i, Outcomes: outs})
}

func (b *logBuilder) answer(text string, usage int64) *logBuilder {
	b.step++
	return b.add(loop.Event{Kind: loop.ModelResponded, Latency: time.Millisecond / 2, Attempts: 1, Response: &llm.Response{
		Message: llm.Message{Role: llm.RoleAssistant, Text: text}, Usage: llm.Usage{InputTokens: usage}}})
}

func (b *logBuilder) stop(st loop.Status, detail string) []loop.Event {
	b.add(loop.Event{Kind: loop.Stopped, Status: st, Detail: detail})
	return b.events
}

func ok(id, name, content string) executor.Outcome {
	return executor.Outcome{Result: llm.ToolResult{CallID: id, Name: name, Status: llm.StatusOK, Content: json.RawMessage(content)}}
}

func failed(id, name string, kind llm.ErrorKind) executor.Outcome {
	return executor.Outcome{Result: llm.ToolResult{CallID: id, Name: name, Status: llm.StatusError, ErrorKind: kind,
		Content: llm.ErrorContent(kind, "it failed")}, Err: "it failed"}
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}
