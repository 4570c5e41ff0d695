package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
)

// A model may keep the requests it is given: each turn has a Request of
// its own, and the loop never changes one once sent. An observer may keep
// the events it is shown: they are immutable once appended.
func TestRequestsAndEventsMayBeKept(t *testing.T) {
	f := newFixture(t)
	script := llmtest.New(
		llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`), call("c2", "query_order", `{"id":"A2"}`)),
		llmtest.Calls(call("c3", "query_order", `{"id":"B3"}`)),
		llmtest.Text("done"))
	type kept struct {
		req  *llm.Request
		snap string
	}
	var reqs []kept
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, kept{req, string(b)})
		return script.Generate(ctx, req)
	})
	var seen []*loop.Event
	var snaps []string
	obs := loop.ObserverFunc(func(_ context.Context, ev *loop.Event) {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		seen, snaps = append(seen, ev), append(snaps, string(b))
	})
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Observer: obs}, user("q"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, k := range reqs {
		b, _ := json.Marshal(k.req)
		if string(b) != k.snap {
			t.Errorf("request %d changed after it was sent:\nthen %s\nnow  %s", i+1, k.snap, b)
		}
		if i > 0 && len(k.req.Messages) <= len(reqs[i-1].req.Messages) {
			t.Errorf("request %d has %d messages, request %d had %d", i+1, len(k.req.Messages), i, len(reqs[i-1].req.Messages))
		}
	}
	if len(seen) != len(res.Events) {
		t.Fatalf("observed %d events, the log has %d", len(seen), len(res.Events))
	}
	for i, ev := range seen {
		b, _ := json.Marshal(ev)
		if string(b) != snaps[i] {
			t.Errorf("event %d changed after it was appended:\nthen %s\nnow  %s", i+1, snaps[i], b)
		}
		if r, _ := json.Marshal(&res.Events[i]); string(r) != snaps[i] {
			t.Errorf("the result's event %d is not the one observed:\n%s\n%s", i+1, r, snaps[i])
		}
	}
}

// A pending call's arguments are the call's JSON, as the model sent them,
// not bytes encoded in base64.
func TestPendingArgumentsAreJSON(t *testing.T) {
	f := newFixture(t)
	model := llmtest.New(llmtest.Calls(call("c1", "refund_order", `{"id":"A1"}`)))
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Policy: policy.ConfirmWrites()}, user("refund"))
	mustStatus(t, res, err, loop.ConfirmationRequired)
	b, err := json.Marshal(res.Pending)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"arguments":{"id":"A1"}`) {
		t.Fatalf("pending calls encode as %s", b)
	}
}

// Usage a provider cannot mean (a negative count, a sum past int64) does
// not keep a token or cost budget from tripping: each turn's usage is
// clamped and the run's sums saturate.
func TestImpossibleUsageStillTripsBudgets(t *testing.T) {
	f := newFixture(t)
	model := func(turns []llm.Usage) llm.Model {
		return llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
			id := fmt.Sprint("c", req.Step)
			u := turns[min(req.Step, len(turns))-1]
			return &llm.Response{Usage: u, Message: llm.Message{Role: llm.RoleAssistant,
				ToolCalls: []llm.ToolCall{call(id, "query_order", fmt.Sprintf(`{"id":"A%d"}`, req.Step))}}}, nil
		})
	}
	price := loop.Prices{"m": {InputPerMTok: 1e6, OutputPerMTok: 1e6}} // $1 a token
	negative := []llm.Usage{{InputTokens: 80, OutputTokens: -1_000_000}, {InputTokens: 50}}
	for _, tc := range []struct {
		name    string
		budgets loop.Budgets
		turns   []llm.Usage
	}{
		// Turn 1 counts 80 tokens, not -999,920, so turn 2 passes 100.
		{"tokens", loop.Budgets{MaxTokens: 100}, negative},
		// Turn 1 costs $80, not a negative amount, so turn 2 passes $100.
		{"cost", loop.Budgets{MaxCost: 100, Prices: price}, negative},
		// Turn 2's sum would wrap round to a negative number.
		{"overflow", loop.Budgets{MaxTokens: math.MaxInt64 - 1}, []llm.Usage{{InputTokens: 80}, {InputTokens: math.MaxInt64}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := loop.Run(context.Background(), loop.Config{Model: model(tc.turns), ModelName: "m", Tools: f.reg, Budgets: tc.budgets}, user("q"))
			mustStatus(t, res, err, loop.CostBudgetExceeded)
			if res.Steps != 2 || res.Usage.Total() < 0 || res.Cost < 0 {
				t.Fatalf("steps %d (want 2), usage %+v, cost %v", res.Steps, res.Usage, res.Cost)
			}
		})
	}
}

// holeLog is a store that lost one event of every run's log.
type holeLog struct {
	store.EventLog
	lost int
}

func (h holeLog) Events(ctx context.Context, runID string) ([]store.EventRecord, error) {
	recs, err := h.EventLog.Events(ctx, runID)
	if err != nil || len(recs) < h.lost {
		return recs, err
	}
	return append(recs[:h.lost-1:h.lost-1], recs[h.lost:]...), nil
}

// A log with a hole in its numbers is refused, naming the missing event:
// neither Resume nor Decide may go on from it (Decide used to ask to try
// again for ever).
func TestLogWithAHoleIsRefused(t *testing.T) {
	f := newFixture(t)
	mem := store.NewMemory()
	model := llmtest.New(llmtest.Calls(call("c1", "refund_order", `{"id":"A1"}`)))
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Policy: policy.ConfirmWrites(), Store: mem}, user("refund"))
	mustStatus(t, res, err, loop.ConfirmationRequired)
	holed := holeLog{mem, 3}
	want := fmt.Sprintf("run %s: the store has no event 3 (after event 2 comes 4)", res.RunID)
	if _, err := loop.LoadEvents(context.Background(), holed, res.RunID); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("LoadEvents: %v, want an error saying %q", err, want)
	}
	answer := loop.Confirmation{CallID: "c1", Approved: true, By: "bob"}
	if err := loop.Decide(context.Background(), holed, res.RunID, answer, time.Now()); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Decide: %v, want an error saying %q", err, want)
	}
	r, err := loop.NewRunner(loop.Config{Model: model, Tools: f.reg, Store: holed})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resume(context.Background(), res.RunID); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Resume: %v, want an error saying %q", err, want)
	}
}

// A model request that hangs is abandoned at Config.ModelTimeout and
// retried as a retryable failure: it does not spend the run's deadline.
func TestModelRequestTimeout(t *testing.T) {
	f := newFixture(t)
	var calls atomic.Int32
	hangsOnce := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done() // a request that never answers, until its context ends
			return nil, ctx.Err()
		}
		return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Text: "done"}}, nil
	})
	cfg := loop.Config{Model: hangsOnce, Tools: f.reg, ModelTimeout: 20 * time.Millisecond, ModelRetryBackoff: time.Millisecond,
		Budgets: loop.Budgets{Deadline: time.Minute}}
	res, err := loop.Run(context.Background(), cfg, user("q"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if ev := res.Events[1]; ev.Kind != loop.ModelResponded || ev.Attempts != 2 {
		t.Fatalf("event 2 = %s after %d attempts, want model_responded after 2", ev.Kind, ev.Attempts)
	}

	calls.Store(0)
	cfg.ModelRetries = -1
	start := time.Now()
	res, err = loop.Run(context.Background(), cfg, user("q"))
	mustStatus(t, res, err, loop.ModelError)
	if !strings.Contains(res.Detail, "timeout: the model did not answer within 20ms") {
		t.Fatalf("detail %q does not name the model request timeout", res.Detail)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the run took %v: the hung request was not cut at its timeout", took)
	}
}
