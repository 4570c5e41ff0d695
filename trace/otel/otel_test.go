package otel_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/trace"
	traceotel "github.com/toolloop/toolloop/trace/otel"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type keyIn struct {
	Key string `json:"key"`
}

type payIn struct {
	OrderID  string `json:"order_id"`
	Account  string `json:"account"`
	Password string `json:"password"`
	Note     string `json:"note"`
}

type okOut struct {
	OK bool `json:"ok"`
}

// registry has slow_a and slow_b, reads that sleep 20ms (so a parallel
// stage really runs them side by side), and pay, a write whose account
// field is marked sensitive.
func registry(t testing.TB) *tool.Registry {
	t.Helper()
	slow := func(name string) *tool.Tool {
		return tool.MustNew(tool.Spec[keyIn]{Name: name, Description: "a slow read"},
			func(ctx context.Context, in keyIn) (okOut, error) {
				select {
				case <-time.After(20 * time.Millisecond):
					return okOut{OK: true}, nil
				case <-ctx.Done():
					return okOut{}, ctx.Err()
				}
			})
	}
	pay := tool.MustNew(tool.Spec[payIn]{Name: "pay", Effect: tool.Write, Sensitive: []string{"account"}},
		func(context.Context, payIn) (okOut, error) { return okOut{OK: true}, nil })
	reg, err := tool.NewRegistry(slow("slow_a"), slow("slow_b"), pay)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// runWith runs turns against registry with obs attached.
func runWith(ctx context.Context, t testing.TB, obs loop.Observer, turns ...llmtest.Turn) *loop.Result {
	t.Helper()
	return runID(ctx, t, obs, "run-test", turns...)
}

func runID(ctx context.Context, t testing.TB, obs loop.Observer, id string, turns ...llmtest.Turn) *loop.Result {
	t.Helper()
	res, _ := loop.Run(ctx, loop.Config{
		Model: llmtest.New(turns...), ModelName: "scripted-1", Tools: registry(t), Observer: obs,
		SessionID: "session-7", PromptVersion: "p1",
		Executor: executor.New(&executor.Options{MaxParallel: 4, Ledger: store.NewMemory()}),
		NewRunID: func() string { return id },
	}, []llm.Message{llm.UserMessage("go")})
	if res == nil {
		t.Fatal("no result")
	}
	return res
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func byName(spans []sdktrace.ReadOnlySpan, prefix string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if strings.HasPrefix(s.Name(), prefix) {
			out = append(out, s)
		}
	}
	return out
}

func one(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	got := byName(spans, name)
	if len(got) != 1 {
		t.Fatalf("%d spans named %q, want 1", len(got), name)
	}
	return got[0]
}

// requireAttrs checks that s has each key, and the given value where one
// is given.
func requireAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]any) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("span %s: no attribute %s", s.Name(), k)
			continue
		}
		if v != nil && fmt.Sprint(g.AsInterface()) != fmt.Sprint(v) {
			t.Errorf("span %s: %s = %v, want %v", s.Name(), k, g.AsInterface(), v)
		}
	}
}

func TestSpanTreeParallelStage(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	obs := traceotel.NewObserver(tp, &traceotel.Options{ProviderName: "toolloop.scripted", AgentName: "order-desk"})

	// The caller's own span: the run's span must be its child.
	ctx, outer := tp.Tracer("test").Start(context.Background(), "request")
	res := runWith(ctx, t, obs,
		llmtest.Calls(llmtest.Call("c1", "slow_a", `{"key":"1"}`), llmtest.Call("c2", "slow_b", `{"key":"2"}`)).WithUsage(100, 20),
		llmtest.Text("done").WithUsage(150, 5),
	)
	outer.End()
	if res.Status != loop.FinalAnswer {
		t.Fatalf("status %s: %s", res.Status, res.Detail)
	}
	spans := rec.Ended()

	root := one(t, spans, "invoke_agent order-desk")
	if root.Parent().SpanID() != outer.SpanContext().SpanID() {
		t.Errorf("run span's parent is %v, want the caller's span", root.Parent().SpanID())
	}
	if root.SpanKind() != oteltrace.SpanKindInternal {
		t.Errorf("run span kind %v", root.SpanKind())
	}
	for _, s := range spans {
		if s == root || s.Name() == "request" {
			continue
		}
		if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("span %s is in another trace", s.Name())
		}
		if s.StartTime().Before(root.StartTime()) || s.EndTime().After(root.EndTime()) {
			t.Errorf("span %s [%v, %v] is outside the run [%v, %v]", s.Name(), s.StartTime(), s.EndTime(), root.StartTime(), root.EndTime())
		}
	}

	// Every stage of the run is a child of the run span; tools are children
	// of their stage.
	for _, name := range []string{"chat scripted-1", "validate_calls", "authorize_calls", "plan_batch", "execute_stage",
		"append_results", "budget_check"} {
		got := byName(spans, name)
		if len(got) == 0 {
			t.Errorf("no %s span", name)
		}
		for _, s := range got {
			if s.Parent().SpanID() != root.SpanContext().SpanID() {
				t.Errorf("%s's parent is not the run span", s.Name())
			}
		}
	}
	if n := len(byName(spans, "chat scripted-1")); n != 2 {
		t.Errorf("%d chat spans, want 2", n)
	}
	stage := one(t, spans, "execute_stage")
	tools := byName(spans, "execute_tool ")
	if len(tools) != 2 {
		t.Fatalf("%d execute_tool spans, want 2", len(tools))
	}
	for _, s := range tools {
		if s.Parent().SpanID() != stage.SpanContext().SpanID() {
			t.Errorf("%s's parent is not the stage span", s.Name())
		}
		if s.StartTime().Before(stage.StartTime()) || s.EndTime().After(stage.EndTime()) {
			t.Errorf("%s [%v, %v] is outside its stage [%v, %v]", s.Name(), s.StartTime(), s.EndTime(), stage.StartTime(), stage.EndTime())
		}
		if d := s.EndTime().Sub(s.StartTime()); d < 20*time.Millisecond {
			t.Errorf("%s lasted %v, want the tool's 20ms", s.Name(), d)
		}
	}
	// Parallel: the two calls overlap.
	a, b := tools[0], tools[1]
	if !a.StartTime().Before(b.EndTime()) || !b.StartTime().Before(a.EndTime()) {
		t.Errorf("parallel calls do not overlap: [%v, %v] and [%v, %v]", a.StartTime(), a.EndTime(), b.StartTime(), b.EndTime())
	}

	// Attributes per span kind.
	requireAttrs(t, root, map[attribute.Key]any{
		"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "toolloop.scripted",
		"gen_ai.agent.name": "order-desk", "gen_ai.conversation.id": "session-7", "gen_ai.request.model": "scripted-1",
		"toolloop.run.id": "run-test", "toolloop.prompt.version": "p1", "toolloop.tools.version": nil,
		"toolloop.budget.max_steps": 10, "toolloop.status": "final_answer", "toolloop.steps": 2,
		"toolloop.tool_calls": 2, "gen_ai.usage.input_tokens": 250, "gen_ai.usage.output_tokens": 25,
	})
	chat := byName(spans, "chat scripted-1")[0]
	if chat.SpanKind() != oteltrace.SpanKindClient {
		t.Errorf("chat span kind %v, want client", chat.SpanKind())
	}
	requireAttrs(t, chat, map[attribute.Key]any{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "toolloop.scripted", "gen_ai.request.model": "scripted-1",
		"gen_ai.conversation.id": "session-7", "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20,
		"gen_ai.response.finish_reasons": []string{"tool_calls"}, "toolloop.step": 1, "toolloop.response.tool_calls": 2,
		"toolloop.model.attempts": 1,
	})
	requireAttrs(t, stage, map[attribute.Key]any{"toolloop.stage": 0, "toolloop.plan.mode": "parallel", "toolloop.stage.calls": 2})
	requireAttrs(t, one(t, spans, "execute_tool slow_a"), map[attribute.Key]any{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "slow_a", "gen_ai.tool.call.id": "c1",
		"gen_ai.tool.type": "function", "toolloop.tool.arguments": `{"key":"<string:1>"}`, "toolloop.tool.status": "ok",
		"toolloop.tool.attempts": 1, "toolloop.tool.retries": 0, "toolloop.policy.verdict": "allow",
		"toolloop.plan.mode": "parallel", "toolloop.stage": 0, "toolloop.tool.effect": "read_only", "toolloop.step": 1,
	})
	plan := one(t, spans, "plan_batch")
	requireAttrs(t, plan, map[attribute.Key]any{"toolloop.plan.stages": 1, "toolloop.calls": 2})
	if n := countEvents(plan, "plan_row"); n != 2 {
		t.Errorf("plan_batch has %d plan_row events, want 2 (the decision table)", n)
	}
	requireAttrs(t, one(t, spans, "authorize_calls"), map[attribute.Key]any{
		"toolloop.calls": 2, "toolloop.policy.allowed": 2, "toolloop.policy.not_allowed": 0})
	requireAttrs(t, one(t, spans, "append_results"), map[attribute.Key]any{"toolloop.results": 2, "toolloop.results.ok": 2})
	checks := byName(spans, "budget_check")
	if len(checks) != 2 {
		t.Fatalf("%d budget checks, want 2 (after the response, before the next turn)", len(checks))
	}
	requireAttrs(t, checks[0], map[attribute.Key]any{"toolloop.budget.point": "after_response", "toolloop.budget.outcome": "ok",
		"toolloop.steps": 1, "toolloop.budget.max_steps": 10, "toolloop.tool_calls.requested": 2, "toolloop.tool_calls": 0})
	requireAttrs(t, checks[1], map[attribute.Key]any{"toolloop.budget.point": "before_turn", "toolloop.tool_calls": 2})
	for _, s := range spans {
		if _, ok := attrs(s)["gen_ai.tool.call.arguments"]; ok {
			t.Errorf("span %s records the arguments without full content opted in", s.Name())
		}
	}
}

func countEvents(s sdktrace.ReadOnlySpan, name string) int {
	n := 0
	for _, e := range s.Events() {
		if e.Name == name {
			n++
		}
	}
	return n
}

func TestRedaction(t *testing.T) {
	args := `{"order_id":"A100","account":"DE89370400440532013000","password":"hunter2","note":"card 4111 1111 1111 1111 please"}`
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("full=%v", full), func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			defer tp.Shutdown(context.Background())
			red := trace.NewRedactor(&trace.RedactOptions{Tools: registry(t), FullContent: full})
			obs := traceotel.NewObserver(tp, &traceotel.Options{ProviderName: "toolloop.scripted", Redactor: red})
			res := runWith(context.Background(), t, obs, llmtest.Calls(llmtest.Call("p1", "pay", args)), llmtest.Text("paid"))
			if res.Status != loop.FinalAnswer {
				t.Fatalf("status %s: %s", res.Status, res.Detail)
			}
			span := one(t, rec.Ended(), "execute_tool pay")
			got := attrs(span)
			summary := got["toolloop.tool.arguments"].AsString()
			if want := `{"order_id":"<string:4>","account":"<masked>","password":"<masked>","note":"<string:31>"}`; summary != want {
				t.Errorf("summary %s, want %s", summary, want)
			}
			for _, s := range rec.Ended() {
				for _, kv := range s.Attributes() {
					v := kv.Value.Emit()
					for _, secret := range []string{"DE89370400440532013000", "hunter2", "4111 1111 1111 1111"} {
						if strings.Contains(v, secret) {
							t.Errorf("span %s attribute %s leaks %q: %s", s.Name(), kv.Key, secret, v)
						}
					}
				}
			}
			full, ok := got["gen_ai.tool.call.arguments"]
			if ok != red.FullContent() {
				t.Fatalf("gen_ai.tool.call.arguments present = %v with full content %v", ok, red.FullContent())
			}
			if ok {
				want := `{"order_id":"A100","account":"<masked>","password":"<masked>","note":"card <masked> please"}`
				if full.AsString() != want {
					t.Errorf("arguments %s, want %s", full.AsString(), want)
				}
				if _, ok := got["gen_ai.tool.call.result"]; !ok {
					t.Error("no gen_ai.tool.call.result with full content")
				}
			}
		})
	}
}

func TestFailuresAndBudgets(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	obs := traceotel.NewObserver(tp, &traceotel.Options{ProviderName: "toolloop.scripted"})
	res, _ := loop.Run(context.Background(), loop.Config{
		Model: llmtest.New(llmtest.Calls(llmtest.Call("c1", "slow_a", `{"key":"1"}`), llmtest.Call("c2", "slow_a", `{"key":"2"}`),
			llmtest.Call("c3", "slow_a", `{"key":"3"}`))),
		ModelName: "m", Tools: registry(t), Observer: obs, Budgets: loop.Budgets{MaxToolCalls: 2},
	}, []llm.Message{llm.UserMessage("go")})
	if res.Status != loop.ToolBudgetExceeded {
		t.Fatalf("status %s", res.Status)
	}
	spans := rec.Ended()
	root := one(t, spans, "invoke_agent")
	requireAttrs(t, root, map[attribute.Key]any{"error.type": "tool_budget_exceeded", "toolloop.status": "tool_budget_exceeded"})
	if root.Status().Code != codes.Error {
		t.Errorf("run span status %v, want error", root.Status())
	}
	check := one(t, spans, "budget_check")
	requireAttrs(t, check, map[attribute.Key]any{"toolloop.budget.outcome": "tool_budget_exceeded",
		"error.type": "tool_budget_exceeded", "toolloop.tool_calls.requested": 3, "toolloop.budget.max_tool_calls": 2})
	requireAttrs(t, one(t, spans, "append_results"), map[attribute.Key]any{"toolloop.results.skipped": 3})
}

// TestConcurrentRuns runs several runs at once through one observer: each
// gets a trace of its own, whole.
func TestConcurrentRuns(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	obs := traceotel.NewObserver(tp, &traceotel.Options{ProviderName: "toolloop.scripted"})
	const n = 8
	var wg sync.WaitGroup
	results := make([]*loop.Result, n)
	for i := range n {
		wg.Go(func() {
			var turns []llmtest.Turn
			for j := range i%3 + 1 {
				turns = append(turns, llmtest.Calls(
					llmtest.Call(fmt.Sprintf("a%d", j), "slow_a", fmt.Sprintf(`{"key":"a%d"}`, j)),
					llmtest.Call(fmt.Sprintf("b%d", j), "slow_b", fmt.Sprintf(`{"key":"b%d"}`, j))))
			}
			turns = append(turns, llmtest.Text("done"))
			results[i] = runID(context.Background(), t, obs, fmt.Sprintf("run-%d", i), turns...)
		})
	}
	wg.Wait()
	checkTraces(t, rec.Ended(), results)
}

// checkTraces checks that each result has one trace, with the spans its
// log gives and its status.
func checkTraces(t *testing.T, spans []sdktrace.ReadOnlySpan, results []*loop.Result) {
	t.Helper()
	roots := byName(spans, "invoke_agent")
	if len(roots) != len(results) {
		t.Fatalf("%d run spans, want %d", len(roots), len(results))
	}
	for _, root := range roots {
		id := attrs(root)["toolloop.run.id"].AsString()
		var res *loop.Result
		for _, r := range results {
			if r != nil && r.RunID == id {
				res = r
			}
		}
		if res == nil {
			t.Fatalf("run span for unknown run %s", id)
		}
		want := len(trace.Spans(res.Events))
		got := 0
		for _, s := range spans {
			if s.SpanContext().TraceID() == root.SpanContext().TraceID() {
				got++
				if s != root && s.Parent().TraceID() != root.SpanContext().TraceID() {
					t.Errorf("run %s: span %s has a parent outside the trace", id, s.Name())
				}
			}
		}
		if got != want {
			t.Errorf("run %s: %d spans in its trace, want %d", id, got, want)
		}
		if st := attrs(root)["toolloop.status"].AsString(); st != string(res.Status) {
			t.Errorf("run %s: status %s, want %s", id, st, res.Status)
		}
	}
}

// TestSandboxLogs exports the sandbox's runs from their logs afterwards:
// spans come from events, so a recorded run traces like a live one.
func TestSandboxLogs(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	obs := traceotel.NewObserver(tp, &traceotel.Options{ProviderName: "toolloop.scripted"})
	var results []*loop.Result
	for _, s := range orders.Scenarios() {
		s.Ledger = store.NewMemory()
		res, _, err := s.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != s.Want {
			t.Fatalf("%s: status %s, want %s", s.Name, res.Status, s.Want)
		}
		ctx := context.Background()
		ctx, cancel := context.WithCancel(ctx) // a context of its own per run
		for i := range res.Events {
			obs.Observe(ctx, &res.Events[i])
		}
		cancel()
		results = append(results, res)
	}
	checkTraces(t, rec.Ended(), results)
}

// TestValidationAndConfirmation: an invalid call and a call that waits for
// a person. The run pauses: its trace ends there (the runner drives a
// resumed run under a new context with no started event, so this observer
// does not see it; the log's await_confirmation span is tested in package
// trace).
func TestValidationAndConfirmation(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	r, err := loop.NewRunner(loop.Config{
		Model: llmtest.New(llmtest.Calls(llmtest.Call("bad", "slow_a", `{"key":1}`),
			llmtest.Call("p1", "pay", `{"order_id":"A1","account":"x","password":"y","note":"z"}`)), llmtest.Text("paid")),
		ModelName: "m", Tools: registry(t), Policy: policy.ConfirmWrites(), Observer: traceotel.NewObserver(tp, nil),
		Executor: executor.New(&executor.Options{Ledger: store.NewMemory()}),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := r.Run(context.Background(), []llm.Message{llm.UserMessage("pay")})
	if res.Status != loop.ConfirmationRequired {
		t.Fatalf("status %s: %s", res.Status, res.Detail)
	}
	spans := rec.Ended()
	if n := countEvents(one(t, spans, "validate_calls"), "invalid_arguments"); n != 1 {
		t.Errorf("%d invalid_arguments events, want 1", n)
	}
	auth := one(t, spans, "authorize_calls")
	if countEvents(auth, "policy_decision") != 1 || countEvents(auth, "confirmation_required") != 1 {
		t.Errorf("authorize_calls events %v", auth.Events())
	}
	requireAttrs(t, auth, map[attribute.Key]any{"toolloop.policy.allowed": 0, "toolloop.policy.not_allowed": 1})
	root := one(t, spans, "invoke_agent")
	requireAttrs(t, root, map[attribute.Key]any{"toolloop.status": "confirmation_required",
		"toolloop.pending.call_ids": []string{"p1"}, "gen_ai.provider.name": "unknown"})
	if root.Status().Code == codes.Error {
		t.Error("a pause for confirmation is not an error")
	}
	n := len(spans)
	if _, err := r.Continue(context.Background(), res, loop.Confirmation{CallID: "p1", Approved: true, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	// The resumed part has a root span of its own, marked resumed, with the
	// approved call's execution under it.
	var resumedRoot sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended()[n:] {
		if sp.Name() == "invoke_agent" {
			resumedRoot = sp
		}
	}
	if resumedRoot == nil {
		t.Fatalf("the resumed part made %d spans but no invoke_agent span", len(rec.Ended())-n)
	}
	requireAttrs(t, resumedRoot, map[attribute.Key]any{"toolloop.resumed": true, "toolloop.status": "final_answer"})
	var tools int
	for _, sp := range rec.Ended()[n:] {
		if sp.Name() == "execute_tool pay" && sp.Parent().SpanID() != resumedRoot.SpanContext().SpanID() {
			// under the stage span, which is under the resumed root
			tools++
		}
	}
	if tools != 1 {
		t.Errorf("%d execute_tool pay spans in the resumed part, want 1", tools)
	}
}
