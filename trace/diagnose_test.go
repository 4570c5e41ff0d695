package trace_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/trace"
)

func first(t *testing.T, findings []trace.Finding, kind trace.FindingKind, ids ...string) trace.Finding {
	t.Helper()
	if len(findings) == 0 {
		t.Fatalf("no findings, want %s first", kind)
	}
	f := findings[0]
	if f.Kind != kind || !slices.Equal(f.CallIDs, ids) {
		t.Fatalf("first finding %s, want %s %v; all:\n%s", f, kind, ids, list(findings))
	}
	return f
}

func list(findings []trace.Finding) string {
	var b strings.Builder
	for _, f := range findings {
		b.WriteString(f.String() + "\n")
	}
	return b.String()
}

func TestDiagnoseSpin(t *testing.T) {
	res := scenario(t, "spin_detected")
	// As a person would: from the redacted log.
	f := first(t, trace.Diagnose(logged(t, res.Events)), trace.RepeatedCall, "call_q1", "call_q2")
	if !strings.Contains(f.Message, "query_order") || f.Step != 2 {
		t.Errorf("finding %s", f)
	}
}

func TestDiagnoseLoopForever(t *testing.T) {
	res := scenario(t, "loop_forever")
	findings := trace.Diagnose(logged(t, res.Events))
	f := first(t, findings, trace.RepeatedTool, "call_l1", "call_l2", "call_l3")
	if !strings.Contains(f.Message, "list_orders") || !strings.Contains(f.Message, "to call_l5") {
		t.Errorf("finding %s", f)
	}
	if last := findings[len(findings)-1]; last.Kind != trace.BudgetStop || !strings.Contains(last.Message, "max_steps_exceeded") {
		t.Errorf("last finding %s, want the budget stop", last)
	}
}

func TestDiagnoseCleanRuns(t *testing.T) {
	for _, name := range []string{"normal", "parallel", "not_found", "refund_retry", "confirmation_required", "canceled"} {
		if findings := trace.Diagnose(scenario(t, name).Events); len(findings) > 0 {
			t.Errorf("%s: findings in a clean run:\n%s", name, list(findings))
		}
	}
	// A run that stops on an error has one finding, the stop.
	for _, name := range []string{"protocol_error", "tool_timeout", "refund_unknown", "unknown_tool", "permission_denied", "model_error"} {
		res := scenario(t, name)
		f := first(t, trace.Diagnose(res.Events), trace.RunStopped)
		if !strings.Contains(f.Message, string(res.Status)) || f.Seq != len(res.Events) {
			t.Errorf("%s: finding %s", name, f)
		}
	}
}

func TestDiagnoseRepeatedWrite(t *testing.T) {
	f := first(t, trace.Diagnose(scenario(t, "refund_twice").Events), trace.RepeatedCall, "call_r1", "call_r2")
	if !strings.Contains(f.Message, "refund:A103") {
		t.Errorf("finding %s", f)
	}
}

func TestDiagnoseMismatchedResult(t *testing.T) {
	// The executor reports the results of a stage in the wrong order.
	events := newLog().
		turn(tool.ReadOnly, 100, call("c1", "lookup", `{"id":1}`), call("c2", "lookup", `{"id":2}`)).
		add(loop.Event{Kind: loop.StageFinished, Stage: 0, Outcomes: []executor.Outcome{ok("c2", "lookup", `{}`)}}).
		add(loop.Event{Kind: loop.StageFinished, Stage: 1, Outcomes: []executor.Outcome{ok("c1", "lookup", `{}`)}}).
		answer("done", 100).
		stop(loop.FinalAnswer, "done")
	f := first(t, trace.Diagnose(events), trace.MismatchedResult, "c1", "c2")
	if f.Seq != 6 || !strings.Contains(f.Message, "wrong call") {
		t.Errorf("finding %s", f)
	}
}

func TestDiagnoseUnkeyedWriteRetry(t *testing.T) {
	// A write times out without an idempotency key, and the model asks for
	// it again: it runs a second time.
	timedOut := failed("p1", "pay", llm.KindTimeout)
	timedOut.TimedOut = true
	events := newLog().
		turn(tool.Write, 100, call("p1", "pay", `{"order":"A1","cents":500}`)).stage(0, timedOut).
		turn(tool.Write, 100, call("p2", "pay", `{"cents":500,"order":"A1"}`)).stage(0, ok("p2", "pay", `{"paid":true}`)).
		answer("paid", 100).stop(loop.FinalAnswer, "done")
	findings := trace.Diagnose(events)
	first(t, findings, trace.RepeatedCall, "p1", "p2")
	if !slices.ContainsFunc(findings, func(f trace.Finding) bool {
		return f.Kind == trace.UnkeyedWriteRetry && slices.Equal(f.CallIDs, []string{"p1", "p2"}) && strings.Contains(f.Message, "twice")
	}) {
		t.Errorf("no unkeyed write retry:\n%s", list(findings))
	}

	// A write retried inside the executor without a key.
	retried := ok("p1", "pay", `{"paid":true}`)
	retried.Attempts = 3
	events = newLog().turn(tool.Write, 100, call("p1", "pay", `{"order":"A1"}`)).stage(0, retried).
		answer("paid", 100).stop(loop.FinalAnswer, "done")
	f := first(t, trace.Diagnose(events), trace.UnkeyedWriteRetry, "p1")
	if !strings.Contains(f.Message, "3 times") {
		t.Errorf("finding %s", f)
	}
	// With a key, the same retry is fine.
	retried.IdempotencyKey = "pay:A1"
	events = newLog().turn(tool.Write, 100, call("p1", "pay", `{"order":"A1"}`)).stage(0, retried).
		answer("paid", 100).stop(loop.FinalAnswer, "done")
	if findings := trace.Diagnose(events); len(findings) > 0 {
		t.Errorf("findings for a keyed retry:\n%s", list(findings))
	}
}

func TestDiagnoseLostResults(t *testing.T) {
	// A driver reports a successful stage under the wrong index; the run
	// stops on the mismatch and the call's result is lost.
	events := newLog().
		turn(tool.ReadOnly, 100, call("c1", "lookup", `{"id":1}`), call("c2", "lookup", `{"id":2}`)).
		stage(1, ok("c1", "lookup", `{}`)).
		stop(loop.ProtocolError, "driver error: stage outcomes do not match the plan")
	findings := trace.Diagnose(events)
	if !slices.ContainsFunc(findings, func(f trace.Finding) bool {
		return f.Kind == trace.LostResults && slices.Equal(f.CallIDs, []string{"c1"}) && strings.Contains(f.Message, "skipped")
	}) {
		t.Errorf("no lost result:\n%s", list(findings))
	}
}

func TestDiagnoseResultNotSeen(t *testing.T) {
	events := newLog().
		turn(tool.ReadOnly, 100, call("c1", "lookup", `{"id":1}`)).stage(0, ok("c1", "lookup", `{"found":true}`)).
		answer("Sorry, I did not get any result from the lookup tool.", 100).stop(loop.FinalAnswer, "done")
	f := first(t, trace.Diagnose(events), trace.ResultNotSeen, "c1")
	if !strings.Contains(f.Message, "linked to its call by ID") || f.Seq != 7 {
		t.Errorf("finding %s", f)
	}
}

func TestDiagnoseCostRising(t *testing.T) {
	b := newLog()
	for i, n := range []int64{100, 300, 900} {
		id := string(rune('a' + i))
		b.turn(tool.ReadOnly, n, call(id, "lookup_"+id, `{}`)).stage(0, ok(id, "lookup_"+id, `{}`))
	}
	events := b.answer("done", 1000).stop(loop.FinalAnswer, "done")
	f := first(t, trace.Diagnose(events), trace.CostRising)
	if !strings.Contains(f.Message, "100, 300, 900, 1000") {
		t.Errorf("finding %s", f)
	}
}

// TestDiagnoseUncachedGrowth: four turns in a row whose input grows past
// 4,096 tokens with no cache read are reported once; the same turns with
// cache reads are not.
func TestDiagnoseUncachedGrowth(t *testing.T) {
	build := func(cached bool) []loop.Event {
		b := newLog()
		for i, n := range []int64{5000, 7000, 9000, 11000, 13000} {
			id := string(rune('a' + i))
			b.turn(tool.ReadOnly, n, call(id, "page", fmt.Sprintf(`{"page":%d}`, i))).stage(0, ok(id, "page", fmt.Sprintf(`{"page":%d}`, i)))
			if cached {
				r := b.events[len(b.events)-5].Response
				r.Usage.CachedInputTokens = n - 2000
			}
		}
		return b.answer("done", 15000).stop(loop.FinalAnswer, "done")
	}
	var found []trace.Finding
	for _, f := range trace.Diagnose(build(false)) {
		if f.Kind == trace.UncachedGrowth {
			found = append(found, f)
		}
	}
	if len(found) != 1 || found[0].Step != 4 || !strings.Contains(found[0].Message, "from 5000 to 11000 tokens over 4 turns") {
		t.Fatalf("findings %v", found)
	}
	for _, f := range trace.Diagnose(build(true)) {
		if f.Kind == trace.UncachedGrowth {
			t.Fatalf("a run that reads the cache: %s", f)
		}
	}
}
