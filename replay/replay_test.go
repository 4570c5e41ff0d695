package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/replay"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/trace"
)

// format is a report's text.
func format(rep *replay.Report) string {
	var b strings.Builder
	rep.Format(&b)
	return b.String()
}

// withTool is the order desk's tools plus t.
func withTool(tb testing.TB, t *tool.Tool) *tool.Registry {
	tb.Helper()
	reg, err := tool.NewRegistry(append(sandboxTools(tb).Tools(), t)...)
	if err != nil {
		tb.Fatal(err)
	}
	return reg
}

// countingTool is a raw tool named name that counts its calls.
func countingTool(t testing.TB, name string, effect tool.Effect, calls *int) *tool.Tool {
	t.Helper()
	tl, err := tool.NewRaw(tool.Definition{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`), Effect: effect},
		func(context.Context, json.RawMessage) (json.RawMessage, error) {
			*calls++
			return json.RawMessage(`{"deleted":0}`), nil
		}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// TestCallNeverRecorded: a tool registered now that the recorded run
// lacked changes validation, and the call it lets through was never
// made: the replay stops there, saying so, and runs nothing.
func TestCallNeverRecorded(t *testing.T) {
	calls := 0
	cfg := replay.Config{Tools: withTool(t, countingTool(t, "delete_database", tool.ReadOnly, &calls))}
	rep, err := replay.Run(context.Background(), readLog(t, "unknown_tool"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := format(rep)
	if rep.Diff == nil || rep.Diff.Aspect != replay.Validation || len(rep.Diff.Calls) != 1 ||
		rep.Diff.Calls[0].CallID != "call_d1" || rep.Diff.Calls[0].Recorded != "unknown tool" || rep.Diff.Calls[0].New != "valid" {
		t.Fatalf("want a validation difference on call_d1, unknown tool then valid; got\n%s", text)
	}
	if g := rep.Gap; g == nil || g.CallID != "call_d1" || !strings.Contains(g.Reason, "never made") {
		t.Fatalf("want the replay to stop at call_d1, never recorded; got\n%s", text)
	}
	if rep.NewStatus != "" || calls != 0 {
		t.Errorf("new status %q, tool run %d time(s); want none and none", rep.NewStatus, calls)
	}
}

// TestLiveTools: with LiveTools the read-only call never recorded runs
// for real, and the replay goes on until the model would be asked with
// a history it never saw.
func TestLiveTools(t *testing.T) {
	calls := 0
	cfg := replay.Config{Tools: withTool(t, countingTool(t, "delete_database", tool.ReadOnly, &calls)), LiveTools: true}
	rep, err := replay.Run(context.Background(), readLog(t, "unknown_tool"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := format(rep)
	if calls != 1 || len(rep.LiveCalls) != 1 || rep.LiveCalls[0] != "call_d1" {
		t.Fatalf("want call_d1 run once for real; ran %d time(s), live %q\n%s", calls, rep.LiveCalls, text)
	}
	if g := rep.Gap; g == nil || g.CallID != "" || !strings.Contains(g.Reason, "turn 2") {
		t.Fatalf("want the replay to stop at the model's turn 2; got\n%s", text)
	}
}

// TestLiveToolsNeverWrite: a write never recorded does not run, live
// tools or not.
func TestLiveToolsNeverWrite(t *testing.T) {
	s, _ := orders.Lookup("permission_denied")
	cfg := sameConfig(t, s)
	cfg.Policy, cfg.LiveTools = nil, true // everything allowed now
	rep, err := replay.Run(context.Background(), readLog(t, s.Name), cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := format(rep)
	if rep.Diff == nil || rep.Diff.Aspect != replay.Authorization || rep.Diff.Calls[0].CallID != "call_r1" ||
		!strings.HasPrefix(rep.Diff.Calls[0].Recorded, "deny") || !strings.HasPrefix(rep.Diff.Calls[0].New, "allow") {
		t.Fatalf("want call_r1 denied then allowed; got\n%s", text)
	}
	if g := rep.Gap; g == nil || g.CallID != "call_r1" || !strings.Contains(g.Reason, "a write") {
		t.Fatalf("want the replay to stop at the write call_r1; got\n%s", text)
	}
	if len(rep.LiveCalls) != 0 {
		t.Errorf("live calls %q; want none", rep.LiveCalls)
	}
}

// TestStricterToolSchema: a tool whose argument schema is stricter now
// refuses a recorded call's arguments: the validation differs there.
func TestStricterToolSchema(t *testing.T) {
	strict, err := tool.NewRaw(tool.Definition{Name: orders.QueryOrder, InputSchema: json.RawMessage(
		`{"type":"object","properties":{"order_id":{"type":"string","pattern":"^B[0-9]+$"}},"required":["order_id"]}`)},
		func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, errors.New("not run") }, nil)
	if err != nil {
		t.Fatal(err)
	}
	var others []*tool.Tool
	for _, tl := range sandboxTools(t).Tools() {
		if tl.Name() != orders.QueryOrder {
			others = append(others, tl)
		}
	}
	reg, err := tool.NewRegistry(append(others, strict)...)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay.Run(context.Background(), readLog(t, "normal"), replay.Config{Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	text := format(rep)
	if rep.Diff == nil || rep.Diff.Aspect != replay.Validation || rep.Diff.Calls[0].CallID != "call_q1" ||
		!strings.HasPrefix(rep.Diff.Calls[0].New, "invalid: ") {
		t.Fatalf("want call_q1's arguments refused; got\n%s", text)
	}
	// The refusal goes back to the model, which was never asked with it.
	if rep.Gap == nil || rep.Gap.CallID != "" {
		t.Fatalf("want the replay to stop at the model's next turn; got\n%s", text)
	}
}

// TestUnknownEventKind: a log with an event this replay does not know
// (a newer version's, say) cannot be replayed, and says which.
func TestUnknownEventKind(t *testing.T) {
	events := readLog(t, "normal")
	events[4].Kind = "compensation_started"
	s, _ := orders.Lookup("normal")
	_, err := replay.Run(context.Background(), events, sameConfig(t, s))
	var ce *replay.CannotReplayError
	if !errors.As(err, &ce) || ce.Kind != "compensation_started" || ce.Seq != 5 {
		t.Fatalf("err = %v; want a CannotReplayError for event 5 of kind compensation_started", err)
	}
	if !strings.Contains(err.Error(), `cannot replay: event kind "compensation_started" (event 5)`) {
		t.Errorf("message %q does not name the kind and the event", err)
	}
}

// TestBadLogs: a log that does not start with its started event, or has
// a hole, is refused; a log cut short replays as far as it goes.
func TestBadLogs(t *testing.T) {
	s, _ := orders.Lookup("normal")
	cfg := sameConfig(t, s)
	events := readLog(t, "normal")
	if _, err := replay.Run(context.Background(), events[1:], cfg); err == nil || !strings.Contains(err.Error(), "started event") {
		t.Errorf("log without its start: err = %v", err)
	}
	holed := append(append([]loop.Event(nil), events[:3]...), events[4:]...)
	if _, err := replay.Run(context.Background(), holed, cfg); err == nil || !strings.Contains(err.Error(), "hole") {
		t.Errorf("log with a hole: err = %v", err)
	}
	rep, err := replay.Run(context.Background(), events[:6], cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Equal() || !rep.Truncated || rep.NewStatus != "" || rep.RecordedStatus != "" {
		t.Errorf("cut log: %+v\n%s", rep, format(rep))
	}
	if _, err := replay.Run(context.Background(), events, replay.Config{}); err == nil {
		t.Error("no tools: want an error")
	}
}

// TestSameVerdictOtherRule: a policy rewritten to the same
// verdicts with other rules is no difference.
func TestSameVerdictOtherRule(t *testing.T) {
	allowAll := policy.Func(func(context.Context, policy.Request) (policy.Decision, error) {
		return policy.Decision{Verdict: policy.Allow, Rule: "everything", Reason: "allowed"}, nil
	})
	rep, err := replay.Run(context.Background(), readLog(t, "parallel"), replay.Config{Tools: sandboxTools(t), Policy: allowAll})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Equal() {
		t.Errorf("want no difference:\n%s", format(rep))
	}
}

// TestRedactedLog: a run log written with the trace's default redaction
// (arguments summarized) is refused, not judged.
func TestRedactedLog(t *testing.T) {
	events := readLog(t, "normal")
	var buf strings.Builder
	w := trace.NewLogWriter(&buf, nil)
	for i := range events {
		w.Observe(context.Background(), &events[i])
	}
	redacted, err := trace.ReadLog(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := orders.Lookup("normal")
	_, err = replay.Run(context.Background(), redacted, sameConfig(t, s))
	var ce *replay.CannotReplayError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "the log is redacted") || ce.Seq != 2 {
		t.Fatalf("err = %v; want the redacted log refused at event 2", err)
	}
	// Whole content with secrets masked is a log a replay can follow.
	buf.Reset()
	w = trace.NewLogWriter(&buf, &trace.LogOptions{Redactor: trace.NewRedactor(&trace.RedactOptions{FullContent: true})})
	for i := range events {
		w.Observe(context.Background(), &events[i])
	}
	whole, err := trace.ReadLog(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := replay.Run(context.Background(), whole, sameConfig(t, s)); err != nil || !rep.Equal() {
		t.Fatalf("whole log: err %v, report %v", err, rep)
	}
}

// TestPlanDiffers: another planner plans the parallel turn otherwise; the
// calls and results are the same, so the replay goes on past the
// difference, answering the next turn from the log by its history, and
// reaches the recorded status.
func TestPlanDiffers(t *testing.T) {
	cfg := replay.Config{Tools: sandboxTools(t), Planner: executor.SerialPlanner()}
	rep, err := replay.Run(context.Background(), readLog(t, "parallel"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := format(rep)
	if rep.Diff == nil || rep.Diff.Aspect != replay.Plan ||
		rep.Diff.Recorded != "[call_q1 call_t1] then [call_r1] then [call_q2]" ||
		rep.Diff.New != "[call_q1] then [call_t1] then [call_r1] then [call_q2]" {
		t.Fatalf("want the plans side by side:\n%s", text)
	}
	if rep.Gap != nil || rep.NewStatus != loop.FinalAnswer {
		t.Fatalf("want the replay to reach final_answer:\n%s", text)
	}
}
