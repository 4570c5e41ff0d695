package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type orderIn struct {
	ID string `json:"id"`
}

type orderOut struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// fixture is a small tool set with counters, so tests can assert what ran.
type fixture struct {
	queries atomic.Int32
	refunds atomic.Int32
	reg     *tool.Registry
}

func newFixture(t *testing.T, extra ...*tool.Tool) *fixture {
	t.Helper()
	f := &fixture{}
	query := tool.MustNew(tool.Spec[orderIn]{Name: "query_order", Description: "look an order up",
		Resources: func(in orderIn) []string { return []string{"order:" + in.ID} }},
		func(_ context.Context, in orderIn) (orderOut, error) {
			f.queries.Add(1)
			if !strings.HasPrefix(in.ID, "A") {
				return orderOut{}, tool.NotFound("no order " + in.ID)
			}
			return orderOut{ID: in.ID, Status: "shipped"}, nil
		})
	refund := tool.MustNew(tool.Spec[orderIn]{Name: "refund_order", Effect: tool.Write},
		func(_ context.Context, in orderIn) (orderOut, error) {
			f.refunds.Add(1)
			return orderOut{ID: in.ID, Status: "refunded"}, nil
		})
	base := []*tool.Tool{query, refund}
	for _, e := range extra {
		if e.Name() == refund.Name() {
			base = base[:1] // the caller brings its own refund_order
		}
	}
	reg, err := tool.NewRegistry(append(base, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	return f
}

func call(id, name, args string) llm.ToolCall { return llmtest.Call(id, name, args) }

func user(s string) []llm.Message { return []llm.Message{llm.UserMessage(s)} }

// mustStatus checks the status, that the error agrees with it, and that the
// history is valid whatever the status.
func mustStatus(t *testing.T, res *loop.Result, err error, want loop.Status) {
	t.Helper()
	if res == nil {
		t.Fatalf("no result; err = %v", err)
	}
	if res.Status != want {
		t.Fatalf("status = %s (%s), want %s", res.Status, res.Detail, want)
	}
	if want == loop.FinalAnswer {
		if err != nil {
			t.Fatalf("final answer with error %v", err)
		}
	} else {
		var se *loop.StopError
		if !errors.As(err, &se) || !errors.Is(err, want) || se.Detail == "" {
			t.Fatalf("error %v does not carry status %s with a detail", err, want)
		}
	}
	if herr := llm.CheckHistory(res.Messages); herr != nil {
		t.Fatalf("history invalid after %s: %v", res.Status, herr)
	}
	if last := res.Events[len(res.Events)-1]; last.Kind != loop.Stopped || last.Status != want {
		t.Fatalf("last event = %s %s, want stopped %s", last.Kind, last.Status, want)
	}
}

func resultFor(t *testing.T, msgs []llm.Message, callID string) llm.ToolResult {
	t.Helper()
	for _, m := range msgs {
		if m.Role == llm.RoleTool && m.Result.CallID == callID {
			return *m.Result
		}
	}
	t.Fatalf("no result for call %s", callID)
	return llm.ToolResult{}
}

func TestFinalAnswerWithToolRoundTrip(t *testing.T) {
	f := newFixture(t)
	model := llmtest.New(
		llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`), call("c2", "query_order", `{"id":"A2"}`)).WithUsage(10, 5),
		llmtest.Text("both shipped").WithUsage(20, 3),
	)
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, ModelName: "m"}, user("where are A1 and A2?"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if res.Answer() != "both shipped" || res.Steps != 2 || res.ToolCalls != 2 {
		t.Fatalf("answer %q steps %d calls %d", res.Answer(), res.Steps, res.ToolCalls)
	}
	if res.Usage != (llm.Usage{InputTokens: 30, OutputTokens: 8}) {
		t.Fatalf("usage = %+v", res.Usage)
	}
	// The second request carried both results, each linked by its call ID.
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	second := reqs[1].Messages
	for _, id := range []string{"c1", "c2"} {
		r := resultFor(t, second, id)
		if r.Status != llm.StatusOK || !strings.Contains(string(r.Content), `"shipped"`) {
			t.Fatalf("result %s = %+v", id, r)
		}
	}
	if len(reqs[0].Tools) != 2 || reqs[1].Step != 2 {
		t.Fatalf("request shape: %d tools, step %d", len(reqs[0].Tools), reqs[1].Step)
	}
	start := res.Events[0].Start
	if start == nil || start.ToolsVersion != f.reg.Version() || start.Budgets.MaxSteps != loop.DefaultMaxSteps {
		t.Fatalf("start event does not record the configuration: %+v", start)
	}
}

func TestRecoverableErrorsGoBackToTheModel(t *testing.T) {
	f := newFixture(t)
	model := llmtest.New(
		llmtest.Calls(call("c1", "query_order", `{"id":"Z9"}`), call("c2", "query_order", `{"id":42}`), call("c3", "query_order", `{"id":"A1"}`)),
		llmtest.Text("Z9 does not exist"),
	)
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg}, user("q"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if r := resultFor(t, res.Messages, "c1"); r.Status != llm.StatusError || r.ErrorKind != llm.KindNotFound {
		t.Fatalf("c1 = %+v", r)
	}
	r := resultFor(t, res.Messages, "c2")
	if r.ErrorKind != llm.KindInvalidArguments || !strings.Contains(string(r.Content), "id") {
		t.Fatalf("c2 = %+v %s", r, r.Content)
	}
	if r := resultFor(t, res.Messages, "c3"); r.Status != llm.StatusOK {
		t.Fatalf("c3 = %+v", r)
	}
	if got := f.queries.Load(); got != 2 {
		t.Fatalf("handler ran %d times; invalid arguments must never reach it", got)
	}
}

func TestResultsAppendedInModelOrder(t *testing.T) {
	f := newFixture(t)
	model := llmtest.New(
		llmtest.Calls(call("z", "query_order", `{"id":"A1"}`), call("a", "query_order", `{"id":"A2"}`), call("m", "query_order", `{"id":"A3"}`)),
		llmtest.Text("ok"),
	)
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg}, user("q"))
	mustStatus(t, res, err, loop.FinalAnswer)
	var ids []string
	for _, m := range res.Messages {
		if m.Role == llm.RoleTool {
			ids = append(ids, m.Result.CallID)
		}
	}
	if !slices.Equal(ids, []string{"z", "a", "m"}) {
		t.Fatalf("result order %v", ids)
	}
}

func TestUnknownToolStopsWithAValidHistory(t *testing.T) {
	f := newFixture(t)
	model := llmtest.New(llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`), call("c2", "drop_tables", `{}`)))
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg}, user("q"))
	mustStatus(t, res, err, loop.ToolNotAllowed)
	if r := resultFor(t, res.Messages, "c2"); r.ErrorKind != llm.KindToolNotAllowed {
		t.Fatalf("c2 = %+v", r)
	}
	if r := resultFor(t, res.Messages, "c1"); r.Status != llm.StatusSkipped {
		t.Fatalf("c1 = %+v; calls of a stopped batch are skipped", r)
	}
	if f.queries.Load() != 0 {
		t.Fatal("a call ran in a batch that stopped before execution")
	}
}

func TestPolicyVerdicts(t *testing.T) {
	cases := []struct {
		name   string
		policy policy.Policy
		id     policy.Identity
		want   loop.Status
		kind   llm.ErrorKind
	}{
		{"allowlist", policy.Allowlist("query_order"), policy.Identity{}, loop.ToolNotAllowed, llm.KindToolNotAllowed},
		{"permissions", policy.Permissions(policy.Grants{"role:agent": {"query_order"}}),
			policy.Identity{Name: "bob", Roles: []string{"agent"}}, loop.PermissionDenied, llm.KindPermissionDenied},
		{"confirm", policy.ConfirmWrites(), policy.Identity{}, loop.ConfirmationRequired, llm.KindAwaitingConfirmation},
		{"policy_error", policy.Func(func(context.Context, policy.Request) (policy.Decision, error) {
			return policy.Decision{}, errors.New("policy service down")
		}), policy.Identity{}, loop.PermissionDenied, llm.KindPermissionDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			model := llmtest.New(llmtest.Calls(call("c1", "refund_order", `{"id":"A1"}`)))
			res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Policy: tc.policy, Identity: tc.id}, user("refund"))
			mustStatus(t, res, err, tc.want)
			if r := resultFor(t, res.Messages, "c1"); r.ErrorKind != tc.kind {
				t.Fatalf("result = %+v, want kind %s", r, tc.kind)
			}
			if f.refunds.Load() != 0 {
				t.Fatal("the write ran although the policy did not allow it")
			}
			if tc.want == loop.ConfirmationRequired {
				if len(res.Pending) != 1 || res.Pending[0].CallID != "c1" || res.Pending[0].Tool != "refund_order" ||
					string(res.Pending[0].Arguments) != `{"id":"A1"}` || !res.Status.Resumable() {
					t.Fatalf("pending = %+v", res.Pending)
				}
			}
		})
	}
}

func TestPolicyAllowsReadsWhileConfirmingWrites(t *testing.T) {
	f := newFixture(t)
	model := llmtest.New(llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`)), llmtest.Text("fine"))
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg,
		Policy: policy.Chain(policy.Allowlist("query_order", "refund_order"), policy.ConfirmWrites())}, user("q"))
	mustStatus(t, res, err, loop.FinalAnswer)
}

// counter returns a model that asks for query_order with a new ID every
// turn: never a repeat, so only the step budget can stop it.
func counter() llm.Model {
	return llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
			call(fmt.Sprintf("c%d", req.Step), "query_order", fmt.Sprintf(`{"id":"A%d"}`, req.Step)),
		}}, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}}, nil
	})
}

func TestMaxStepsExceeded(t *testing.T) {
	f := newFixture(t)
	res, err := loop.Run(context.Background(), loop.Config{Model: counter(), Tools: f.reg, Budgets: loop.Budgets{MaxSteps: 4}}, user("q"))
	mustStatus(t, res, err, loop.MaxStepsExceeded)
	if res.Steps != 4 || f.queries.Load() != 3 {
		t.Fatalf("steps %d, queries %d: the last turn's calls must not run", res.Steps, f.queries.Load())
	}
	if r := resultFor(t, res.Messages, "c4"); r.Status != llm.StatusSkipped {
		t.Fatalf("c4 = %+v", r)
	}
}

func TestToolBudgetExceeded(t *testing.T) {
	f := newFixture(t)
	model := llmtest.New(
		llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`)),
		llmtest.Calls(call("c2", "query_order", `{"id":"A2"}`), call("c3", "query_order", `{"id":"A3"}`)),
	)
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Budgets: loop.Budgets{MaxToolCalls: 2}}, user("q"))
	mustStatus(t, res, err, loop.ToolBudgetExceeded)
	if res.ToolCalls != 1 || f.queries.Load() != 1 {
		t.Fatalf("tool calls %d, queries %d", res.ToolCalls, f.queries.Load())
	}
}

func TestTokenAndCostBudgets(t *testing.T) {
	prices := loop.Prices{"m": {InputPerMTok: 1000, OutputPerMTok: 4000}} // $0.1 + $0.04 per turn
	cases := []struct {
		name    string
		budgets loop.Budgets
		steps   int
	}{
		{"tokens", loop.Budgets{MaxTokens: 250}, 3},
		{"cost", loop.Budgets{MaxCost: 0.3, Prices: prices}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			res, err := loop.Run(context.Background(), loop.Config{Model: counter(), ModelName: "m", Tools: f.reg, Budgets: tc.budgets}, user("q"))
			mustStatus(t, res, err, loop.CostBudgetExceeded)
			if res.Steps != tc.steps {
				t.Fatalf("steps = %d, want %d (%s)", res.Steps, tc.steps, res.Detail)
			}
		})
	}
	if _, err := loop.NewRunner(loop.Config{Model: counter(), ModelName: "unpriced", Tools: newFixture(t).reg,
		Budgets: loop.Budgets{MaxCost: 1, Prices: prices}}); err == nil || !strings.Contains(err.Error(), "unpriced") {
		t.Fatalf("MaxCost without a price: err = %v", err)
	}
}

func TestSpinDetection(t *testing.T) {
	t.Run("same call twice in a row", func(t *testing.T) {
		f := newFixture(t)
		model := llmtest.New(
			llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`)),
			llmtest.Calls(call("c2", "query_order", "{ \"id\" : \"A1\" }")), // same arguments, other spelling
		)
		res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg}, user("q"))
		mustStatus(t, res, err, loop.SpinDetected)
		if !strings.Contains(res.Detail, "c1") || f.queries.Load() != 1 {
			t.Fatalf("detail %q, queries %d", res.Detail, f.queries.Load())
		}
	})
	t.Run("retry of a deterministic failure", func(t *testing.T) {
		f := newFixture(t)
		model := llmtest.New(
			llmtest.Calls(call("c1", "query_order", `{"id":"Z1"}`)),
			llmtest.Calls(call("c2", "query_order", `{"id":"A1"}`)),
			llmtest.Calls(call("c3", "query_order", `{"id":"Z1"}`)),
		)
		res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg}, user("q"))
		mustStatus(t, res, err, loop.SpinDetected)
		if !strings.Contains(res.Detail, "not_found") {
			t.Fatalf("detail %q", res.Detail)
		}
	})
	t.Run("different arguments are progress", func(t *testing.T) {
		f := newFixture(t)
		model := llmtest.New(
			llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`)),
			llmtest.Calls(call("c2", "query_order", `{"id":"A2"}`)),
			llmtest.Text("done"),
		)
		res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg}, user("q"))
		mustStatus(t, res, err, loop.FinalAnswer)
	})
}

func TestProtocolErrors(t *testing.T) {
	cases := map[string][]llmtest.Turn{
		"duplicate IDs in one response": {llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`), call("c1", "query_order", `{"id":"A2"}`))},
		"empty ID":                      {llmtest.Calls(call("", "query_order", `{"id":"A1"}`))},
		"ID reused across turns": {llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`)),
			llmtest.Calls(call("c1", "query_order", `{"id":"A2"}`))},
		"empty response": {{Response: &llm.Response{Message: llm.Message{Role: llm.RoleAssistant}}}},
		"long ID reused across turns": {
			llmtest.Calls(call("toolu_01abcdefgh", "query_order", `{"id":"A1"}`), call("toolu_02abcdefgh", "query_order", `{"id":"A2"}`)),
			llmtest.Calls(call("toolu_02abcdefgh", "query_order", `{"id":"A3"}`))},
		"ID of eight bytes reused across turns": {
			llmtest.Calls(call("call_1_0", "query_order", `{"id":"A1"}`)),
			llmtest.Calls(call("call_1_0", "query_order", `{"id":"A2"}`))},
	}
	for name, turns := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			res, err := loop.Run(context.Background(), loop.Config{Model: llmtest.New(turns...), Tools: f.reg}, user("q"))
			mustStatus(t, res, err, loop.ProtocolError)
		})
	}
	// A megabyte of tool name or call ID is refused without being repeated
	// in the detail or anything sent back.
	for name, c := range map[string]llm.ToolCall{
		"huge tool name": call("c1", strings.Repeat("x", 1<<20), `{}`),
		"huge call ID":   call(strings.Repeat("c", 1<<20), "query_order", `{"id":"A1"}`),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			res, err := loop.Run(context.Background(), loop.Config{Model: llmtest.New(llmtest.Calls(c)), Tools: f.reg}, user("q"))
			mustStatus(t, res, err, loop.ProtocolError)
			if len(res.Detail) > 300 || !strings.Contains(res.Detail, "1048576 bytes") {
				t.Errorf("detail of %d bytes: %.300s", len(res.Detail), res.Detail)
			}
		})
	}
	// A reasoning model that only thought says so, and why when it ran
	// out of output tokens.
	for name, tc := range map[string]struct {
		truncated bool
		want      string
	}{
		"only reasoning":          {false, "the model returned only reasoning (1 part(s)), neither text nor tool calls"},
		"only reasoning, cut off": {true, "reached its output token limit while thinking"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			turn := llmtest.Turn{Response: &llm.Response{Truncated: tc.truncated, Message: llm.Message{Role: llm.RoleAssistant,
				Reasoning: []llm.Reasoning{{Provider: "anthropic", Text: "Let me think about Oslo"}}}}}
			res, err := loop.Run(context.Background(), loop.Config{Model: llmtest.New(turn), Tools: f.reg}, user("q"))
			mustStatus(t, res, err, loop.ProtocolError)
			if !strings.Contains(res.Detail, tc.want) {
				t.Errorf("detail %q lacks %q", res.Detail, tc.want)
			}
		})
	}
	// IDs alike but for a byte, at their end or not, are distinct.
	f := newFixture(t)
	model := llmtest.New(
		llmtest.Calls(call("toolu_01abcdefgh", "query_order", `{"id":"A1"}`), call("toolu_02abcdefgh", "query_order", `{"id":"A2"}`)),
		llmtest.Calls(call("toolu_03abcdefgh", "query_order", `{"id":"A3"}`), call("toolu_01abcdefgi", "query_order", `{"id":"A4"}`),
			call("call_1_0", "query_order", `{"id":"A5"}`), call("call_1_1", "query_order", `{"id":"A6"}`)),
		llmtest.Text("ok"))
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg}, user("q"))
	mustStatus(t, res, err, loop.FinalAnswer)
}

func TestModelErrors(t *testing.T) {
	f := newFixture(t)
	t.Run("not retryable", func(t *testing.T) {
		model := llmtest.New(llmtest.Turn{Err: &llm.Error{StatusCode: 401, Err: errors.New("invalid API key")}})
		res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg}, user("q"))
		mustStatus(t, res, err, loop.ModelError)
		if len(model.Requests()) != 1 || !strings.Contains(res.Detail, "invalid API key") {
			t.Fatalf("%d requests, detail %q", len(model.Requests()), res.Detail)
		}
	})
	overloaded := llmtest.Turn{Err: &llm.Error{StatusCode: 529, Retryable: true, Err: errors.New("overloaded")}}
	t.Run("retryable until the retries run out", func(t *testing.T) {
		model := llmtest.Repeating(overloaded)
		res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, ModelRetries: 3, ModelRetryBackoff: time.Millisecond}, user("q"))
		mustStatus(t, res, err, loop.ModelError)
		if len(model.Requests()) != 4 {
			t.Fatalf("%d requests, want 1 + 3 retries", len(model.Requests()))
		}
	})
	t.Run("retryable then fine", func(t *testing.T) {
		model := llmtest.New(overloaded, llmtest.Text("hello"))
		res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, ModelRetryBackoff: time.Millisecond}, user("q"))
		mustStatus(t, res, err, loop.FinalAnswer)
		if res.Events[1].Attempts != 2 {
			t.Fatalf("attempts = %d", res.Events[1].Attempts)
		}
	})
}

// blocker is a tool that ignores its context until released.
func blocker(t *testing.T, name string, timeout time.Duration, onTimeout tool.TimeoutAction) (*tool.Tool, func()) {
	release := make(chan struct{})
	started := make(chan struct{}, 100)
	tl := tool.MustNew(tool.Spec[struct{}]{Name: name, Timeout: timeout, OnTimeout: onTimeout},
		func(context.Context, struct{}) (string, error) {
			started <- struct{}{}
			<-release
			return "late", nil
		})
	var once atomic.Bool
	return tl, func() {
		if once.CompareAndSwap(false, true) {
			close(release)
		}
		// Give the abandoned handler goroutine a moment to finish so goleak
		// sees a clean process.
		time.Sleep(10 * time.Millisecond)
	}
}

func TestToolTimeoutIgnoringContext(t *testing.T) {
	slow, release := blocker(t, "slow", 30*time.Millisecond, "")
	defer release()
	f := newFixture(t, slow)
	model := llmtest.New(llmtest.Calls(call("c1", "slow", `{}`), call("c2", "query_order", `{"id":"A1"}`)))
	begin := time.Now()
	// Serial, so that c2 is in a later stage than the timeout.
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Planner: executor.SerialPlanner()}, user("q"))
	mustStatus(t, res, err, loop.ToolTimeout)
	if took := time.Since(begin); took > 5*time.Second {
		t.Fatalf("run took %v with a 30ms tool timeout", took)
	}
	if r := resultFor(t, res.Messages, "c1"); r.ErrorKind != llm.KindTimeout {
		t.Fatalf("c1 = %+v", r)
	}
	if r := resultFor(t, res.Messages, "c2"); r.Status != llm.StatusSkipped || f.queries.Load() != 0 {
		t.Fatalf("c2 = %+v; calls after a stopping timeout are skipped", r)
	}
}

func TestToolTimeoutInAParallelStage(t *testing.T) {
	slow, release := blocker(t, "slow", 30*time.Millisecond, "")
	defer release()
	f := newFixture(t, slow)
	model := llmtest.New(llmtest.Calls(call("c1", "slow", `{}`), call("c2", "query_order", `{"id":"A1"}`)))
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg}, user("q"))
	mustStatus(t, res, err, loop.ToolTimeout)
	// Both reads ran together; the one that finished keeps its result.
	if r := resultFor(t, res.Messages, "c2"); r.Status != llm.StatusOK {
		t.Fatalf("c2 = %+v; a sibling's timeout must not lose this result", r)
	}
	if r := resultFor(t, res.Messages, "c1"); r.ErrorKind != llm.KindTimeout {
		t.Fatalf("c1 = %+v", r)
	}
}

func TestToolTimeoutReportedToTheModel(t *testing.T) {
	slow, release := blocker(t, "slow", 20*time.Millisecond, tool.TimeoutReport)
	defer release()
	f := newFixture(t, slow)
	model := llmtest.New(llmtest.Calls(call("c1", "slow", `{}`)), llmtest.Text("the slow tool timed out"))
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg}, user("q"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if r := resultFor(t, res.Messages, "c1"); r.ErrorKind != llm.KindTimeout {
		t.Fatalf("c1 = %+v", r)
	}
}

func TestDeadlineExceeded(t *testing.T) {
	t.Run("slow model", func(t *testing.T) {
		f := newFixture(t)
		model := llmtest.New(llmtest.Turn{Delay: time.Minute, Response: &llm.Response{}})
		res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Budgets: loop.Budgets{Deadline: 30 * time.Millisecond}}, user("q"))
		mustStatus(t, res, err, loop.DeadlineExceeded)
	})
	t.Run("tool ignoring its context past the run's deadline", func(t *testing.T) {
		slow, release := blocker(t, "slow", time.Minute, "")
		defer release()
		f := newFixture(t, slow)
		model := llmtest.New(llmtest.Calls(call("c1", "slow", `{}`)))
		res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Budgets: loop.Budgets{Deadline: 40 * time.Millisecond}}, user("q"))
		mustStatus(t, res, err, loop.DeadlineExceeded)
		if r := resultFor(t, res.Messages, "c1"); r.Status != llm.StatusSkipped {
			t.Fatalf("c1 = %+v", r)
		}
	})
}

func TestCanceled(t *testing.T) {
	t.Run("during the model request", func(t *testing.T) {
		f := newFixture(t)
		ctx, cancel := context.WithCancel(context.Background())
		model := llm.ModelFunc(func(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
			cancel()
			<-ctx.Done()
			return nil, ctx.Err()
		})
		res, err := loop.Run(ctx, loop.Config{Model: model, Tools: f.reg}, user("q"))
		mustStatus(t, res, err, loop.Canceled)
	})
	t.Run("during a tool that ignores its context", func(t *testing.T) {
		slow, release := blocker(t, "slow", time.Minute, "")
		defer release()
		f := newFixture(t, slow)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		model := llmtest.New(llmtest.Calls(call("c1", "slow", `{}`)))
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		res, err := loop.Run(ctx, loop.Config{Model: model, Tools: f.reg}, user("q"))
		mustStatus(t, res, err, loop.Canceled)
	})
}

// TestReplayReproducesTheRun feeds a finished run's events through the
// decider again: the state must come out identical. This is what lets a
// log serve as a checkpoint.
func TestReplayReproducesTheRun(t *testing.T) {
	f := newFixture(t)
	model := llmtest.New(
		llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`), call("c2", "query_order", `{"id":"Z"}`)),
		llmtest.Calls(call("c3", "refund_order", `{"id":"A1"}`)),
		llmtest.Text("refunded"),
	)
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg}, user("q"))
	mustStatus(t, res, err, loop.FinalAnswer)

	// Round-trip through JSON, as a durable store would.
	raw, err := json.Marshal(res.Events)
	if err != nil {
		t.Fatal(err)
	}
	var events []loop.Event
	if err := json.Unmarshal(raw, &events); err != nil {
		t.Fatal(err)
	}
	var s loop.State
	var last loop.Effect
	for i := range events {
		last = loop.Next(&s, &events[i])
	}
	if last.Kind != loop.None || s.Status != res.Status || s.Steps != res.Steps || s.ToolCalls != res.ToolCalls {
		t.Fatalf("replay: effect %s status %s steps %d calls %d", last.Kind, s.Status, s.Steps, s.ToolCalls)
	}
	a, _ := json.Marshal(s.Messages)
	b, _ := json.Marshal(res.Messages)
	if string(a) != string(b) {
		t.Fatalf("replayed history differs:\n%s\n%s", a, b)
	}
}

func TestDeciderIgnoresEventsAfterStop(t *testing.T) {
	var s loop.State
	now := time.Unix(0, 0)
	eff := loop.Next(&s, &loop.Event{Kind: loop.Started, At: now, Start: &loop.StartInfo{Budgets: loop.Budgets{MaxSteps: 3}}})
	if eff.Kind != loop.RequestModel {
		t.Fatalf("first effect %s", eff.Kind)
	}
	eff = loop.Next(&s, &loop.Event{Kind: loop.ModelResponded, At: now, Response: &llm.Response{Message: llm.Message{Text: "hi"}}})
	if eff.Kind != loop.Stop || eff.Status != loop.FinalAnswer {
		t.Fatalf("effect %+v", eff)
	}
	// Until Stopped is logged, the decider keeps saying stop.
	if again := loop.Next(&s, &loop.Event{Kind: loop.ModelResponded, At: now, Response: &llm.Response{}}); again.Kind != loop.Stop {
		t.Fatalf("after stop: %+v", again)
	}
	loop.Next(&s, &loop.Event{Kind: loop.Stopped, At: now, Status: loop.FinalAnswer})
	if !s.Done || loop.Next(&s, &loop.Event{Kind: loop.ModelResponded, At: now}).Kind != loop.None {
		t.Fatal("a finished run must ignore further events")
	}
}

func TestConfigErrors(t *testing.T) {
	f := newFixture(t)
	for name, cfg := range map[string]loop.Config{
		"no model":       {Tools: f.reg},
		"no tools":       {Model: counter()},
		"negative steps": {Model: counter(), Tools: f.reg, Budgets: loop.Budgets{MaxSteps: -1}},
	} {
		if _, err := loop.NewRunner(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParallelStageThroughRunStage(t *testing.T) {
	// A planner that puts every call in one stage exercises the executor's
	// concurrent path; results still come back in model order.
	f := newFixture(t)
	together := executor.PlannerFunc(func(calls []executor.PlanCall) executor.Plan {
		st := make([]int, len(calls))
		for i := range st {
			st[i] = i
		}
		return executor.Plan{Stages: [][]int{st}}
	})
	model := llmtest.New(
		llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`), call("c2", "query_order", `{"id":"A2"}`), call("c3", "query_order", `{"id":"Z"}`)),
		llmtest.Text("ok"),
	)
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Planner: together}, user("q"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if f.queries.Load() != 3 {
		t.Fatalf("queries = %d", f.queries.Load())
	}
}

func TestObserverSeesEveryEventInOrder(t *testing.T) {
	f := newFixture(t)
	var seen []loop.EventKind
	var seqs []int
	obs := loop.Observers(nil, loop.ObserverFunc(func(_ context.Context, ev *loop.Event) {
		seen = append(seen, ev.Kind)
		seqs = append(seqs, ev.Seq)
	}))
	model := llmtest.New(llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`)), llmtest.Text("ok"))
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Observer: obs}, user("q"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if len(seen) != len(res.Events) {
		t.Fatalf("observed %d events, log has %d", len(seen), len(res.Events))
	}
	for i, ev := range res.Events {
		if seen[i] != ev.Kind || seqs[i] != i+1 {
			t.Fatalf("event %d: observed %s #%d, logged %s", i, seen[i], seqs[i], ev.Kind)
		}
	}
}

type callerKey struct{}

// TestRunContext checks what the run's context carries to the model, the
// tools and the observers: the run's ID, the caller's values and the run's
// deadline; and that the caller's cancellation still reaches it.
func TestRunContext(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	look := func(where string, ctx context.Context) {
		mu.Lock()
		defer mu.Unlock()
		_, hasDeadline := ctx.Deadline()
		seen = append(seen, fmt.Sprintf("%s:%s:%v:%v", where, loop.RunID(ctx), ctx.Value(callerKey{}), hasDeadline))
	}
	probe := tool.MustNew(tool.Spec[orderIn]{Name: "probe"}, func(ctx context.Context, in orderIn) (orderOut, error) {
		look("tool", ctx)
		return orderOut{ID: in.ID}, nil
	})
	f := newFixture(t, probe)
	scripted := llmtest.New(llmtest.Calls(call("c1", "probe", `{"id":"A1"}`)), llmtest.Text("ok"))
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		look("model", ctx)
		return scripted.Generate(ctx, req)
	})
	obs := loop.ObserverFunc(func(ctx context.Context, ev *loop.Event) {
		if ev.Kind == loop.Stopped {
			look("observer", ctx)
		}
	})
	ctx := context.WithValue(context.Background(), callerKey{}, "v")
	res, err := loop.Run(ctx, loop.Config{Model: model, Tools: f.reg, Observer: obs,
		NewRunID: func() string { return "run-1" }}, user("q"))
	mustStatus(t, res, err, loop.FinalAnswer)
	want := []string{"model:run-1:v:true", "tool:run-1:v:true", "model:run-1:v:true", "observer:run-1:v:true"}
	if !slices.Equal(seen, want) {
		t.Fatalf("contexts seen: %v, want %v", seen, want)
	}
	if id := loop.RunID(ctx); id != "" {
		t.Fatalf("RunID of a context that is no run's = %q", id)
	}

	// Without a deadline, the caller's cancellation still reaches the run.
	cctx, cancel := context.WithCancel(ctx)
	model = llm.ModelFunc(func(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
		if loop.RunID(ctx) != "run-2" {
			t.Errorf("RunID = %q", loop.RunID(ctx))
		}
		cancel()
		<-ctx.Done()
		return nil, ctx.Err()
	})
	res, err = loop.Run(cctx, loop.Config{Model: model, Tools: f.reg, Budgets: loop.Budgets{Deadline: -1},
		NewRunID: func() string { return "run-2" }}, user("q"))
	mustStatus(t, res, err, loop.Canceled)
}

// TestAbandonedHandlerKeepsItsCall runs a stage whose handler ignores its
// context past its timeout, and then more stages. The handler, given up
// on, still reads its call when it returns; the later stages must not
// have written over it (the race detector tells).
func TestAbandonedHandlerKeepsItsCall(t *testing.T) {
	for _, name := range []string{"alone", "beside a slower call"} {
		t.Run(name, func(t *testing.T) {
			returned := make(chan struct{})
			// Unlike blocker, it wakes on its own, so that nothing orders
			// its return after the run's later stages.
			stuck := tool.MustNew(tool.Spec[struct{}]{Name: "stuck", Timeout: 20 * time.Millisecond, OnTimeout: tool.TimeoutReport},
				func(context.Context, struct{}) (string, error) {
					defer close(returned)
					time.Sleep(150 * time.Millisecond)
					return "late", nil
				})
			pause := tool.MustNew(tool.Spec[struct{}]{Name: "pause"}, func(context.Context, struct{}) (string, error) {
				time.Sleep(5 * time.Millisecond)
				return "ok", nil
			})
			f := newFixture(t, stuck, pause)
			first := []llm.ToolCall{call("c1", "stuck", `{}`)}
			if name != "alone" {
				// The driver runs the pause; a helper takes the stuck call.
				first = []llm.ToolCall{call("c0", "pause", `{}`), call("c1", "stuck", `{}`)}
			}
			var turns []llmtest.Turn
			turns = append(turns, llmtest.Calls(first...))
			for i := 2; i < 6; i++ {
				turns = append(turns, llmtest.Calls(call(fmt.Sprintf("c%d", 2*i), "query_order", fmt.Sprintf(`{"id":"A%d"}`, 2*i)),
					call(fmt.Sprintf("c%d", 2*i+1), "query_order", fmt.Sprintf(`{"id":"A%d"}`, 2*i+1))))
			}
			turns = append(turns, llmtest.Text("done"))
			res, err := loop.Run(context.Background(), loop.Config{Model: llmtest.New(turns...), Tools: f.reg}, user("q"))
			mustStatus(t, res, err, loop.FinalAnswer)
			if r := resultFor(t, res.Messages, "c1"); r.ErrorKind != llm.KindTimeout {
				t.Fatalf("c1 = %+v", r)
			}
			<-returned
			time.Sleep(10 * time.Millisecond) // for goleak: the handler's goroutine ends
		})
	}
}

// TestEventTimesIgnoreObserversAndStores plays one script on a fake
// clock with and without an observer and a store: the logs must be the
// same, byte for byte. Every event is stamped by Config.Now when it is
// appended, and neither an observer nor a store reads the clock.
func TestEventTimesIgnoreObserversAndStores(t *testing.T) {
	f := newFixture(t)
	logOf := func(obs loop.Observer, st store.EventLog) []byte {
		var reads int
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		clock := func() time.Time {
			reads++
			return base.Add(time.Duration(reads) * time.Second)
		}
		model := llmtest.New(
			llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`), call("c2", "query_order", `{"id":"A2"}`)),
			llmtest.Calls(call("c3", "query_order", `{"id":"A3"}`)),
			llmtest.Text("ok"))
		// Calls run one at a time, so the clock is read in one order.
		res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Now: clock, Observer: obs, Store: st,
			Planner: executor.SerialPlanner(), NewRunID: func() string { return "run-1" }}, user("q"))
		mustStatus(t, res, err, loop.FinalAnswer)
		b, err := json.Marshal(res.Events)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var seen int
	observer := loop.ObserverFunc(func(context.Context, *loop.Event) { seen++ })
	plain := logOf(nil, nil)
	for _, tc := range []struct {
		name string
		obs  loop.Observer
		st   store.EventLog
	}{{"observer", observer, nil}, {"store", nil, store.NewMemory()}, {"both", observer, store.NewMemory()}} {
		if got := logOf(tc.obs, tc.st); !bytes.Equal(got, plain) {
			t.Errorf("with %s the log differs:\n%s\nwithout:\n%s", tc.name, got, plain)
		}
	}
	if seen == 0 {
		t.Fatal("the observer saw no event")
	}
	var events []loop.Event
	if err := json.Unmarshal(plain, &events); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(events); i++ {
		if ev, prev := events[i], events[i-1]; !ev.At.After(prev.At) {
			t.Errorf("event %d (%s) at %v, not after event %d at %v", ev.Seq, ev.Kind, ev.At, prev.Seq, prev.At)
		}
	}
}

// TestCacheKeyPerRun checks that every turn of a run asks for one prompt
// cache (llm.Request.CacheKey), another run for another, and that the key
// does not carry the run ID itself to the provider.
func TestCacheKeyPerRun(t *testing.T) {
	probe := tool.MustNew(tool.Spec[orderIn]{Name: "probe"}, func(ctx context.Context, in orderIn) (orderOut, error) {
		return orderOut{ID: in.ID}, nil
	})
	f := newFixture(t, probe)
	keys := func(runID string) []string {
		m := llmtest.New(llmtest.Calls(call("c1", "probe", `{"id":"A1"}`)), llmtest.Calls(call("c2", "probe", `{"id":"A2"}`)), llmtest.Text("ok"))
		res, err := loop.Run(context.Background(), loop.Config{Model: m, Tools: f.reg, NewRunID: func() string { return runID }}, user("q"))
		mustStatus(t, res, err, loop.FinalAnswer)
		var out []string
		for _, r := range m.Requests() {
			out = append(out, r.CacheKey)
		}
		return out
	}
	a, b := keys("run-secret-a"), keys("run-secret-b")
	if len(a) != 3 || a[0] == "" || a[1] != a[0] || a[2] != a[0] {
		t.Fatalf("keys of one run's turns = %q; want one key, three times", a)
	}
	if b[0] == a[0] {
		t.Fatalf("two runs share the cache key %q", a[0])
	}
	if strings.Contains(a[0], "secret") || a[0] != loop.CacheKey("run-secret-a") {
		t.Fatalf("key %q: want loop.CacheKey's digest, not the run ID", a[0])
	}
}
