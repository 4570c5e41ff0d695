package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

type lookupIn struct {
	Key string `json:"key"`
}

// turnsRunner is a runner whose model asks for as many turns of three
// look-ups as the user's message says, then answers; its clock and run IDs
// are fixed, so that two runs of the same length log the same events.
// observe, when set, sees every event.
func turnsRunner(t *testing.T, observe func(*loop.Event), requests func(*llm.Request)) *loop.Runner {
	t.Helper()
	lookup := tool.MustNew(tool.Spec[lookupIn]{Name: "lookup"},
		func(_ context.Context, in lookupIn) (lookupIn, error) { return in, nil })
	reg, err := tool.NewRegistry(lookup)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cfg := loop.Config{
		Model: llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
			if requests != nil {
				requests(req)
			}
			turns, err := strconv.Atoi(req.Messages[0].Text)
			if err != nil {
				return nil, err
			}
			resp := &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Text: "done"}}
			if req.Step <= turns {
				resp.Message.Text = ""
				for i := range 3 {
					resp.Message.ToolCalls = append(resp.Message.ToolCalls, call(fmt.Sprintf("c%d_%d", req.Step, i), "lookup",
						fmt.Sprintf(`{"key":"k%d_%d"}`, req.Step, i)))
				}
			}
			return resp, nil
		}),
		Tools:    reg,
		Budgets:  loop.Budgets{MaxSteps: 70, MaxToolCalls: 300},
		Now:      func() time.Time { return at },
		NewRunID: func() string { return "run1" },
	}
	if observe != nil {
		cfg.Observer = loop.ObserverFunc(func(_ context.Context, ev *loop.Event) { observe(ev) })
	}
	r, err := loop.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runJSON runs r for turns tool turns and returns its result as JSON.
func runJSON(t *testing.T, r *loop.Runner, turns int) string {
	t.Helper()
	res, err := r.Run(context.Background(), user(strconv.Itoa(turns)))
	mustStatus(t, res, err, loop.FinalAnswer)
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A runner makes a run's log and history with room for the runs before it
// (Runner's size hints): a run is the same whatever ran before it, long or
// short, as one on a runner of its own.
func TestRunIsTheSameAfterLongerAndShorterRuns(t *testing.T) {
	r := turnsRunner(t, nil, nil)
	for _, turns := range []int{0, 12, 1, 0, 60, 2, 2, 40, 0, 5} {
		got := runJSON(t, r, turns)
		if want := runJSON(t, turnsRunner(t, nil, nil), turns); got != want {
			t.Fatalf("a run of %d turns after others:\n%s\non a runner of its own:\n%s", turns, got, want)
		}
	}
}

// A runner's second run of the same length grows its log once, from its
// first capacity straight to what the first run needed, and makes its
// history once: every event the observer was shown after the first few is
// the result's, and every request's history is the result's, never an
// earlier copy left behind by growing them.
func TestRepeatedRunGrowsLogAndHistoryOnce(t *testing.T) {
	var observed []*loop.Event
	var firsts []*llm.Message
	r := turnsRunner(t,
		func(ev *loop.Event) { observed = append(observed, ev) },
		func(req *llm.Request) { firsts = append(firsts, &req.Messages[0]) })
	runJSON(t, r, 5)
	observed, firsts = nil, nil
	res, err := r.Run(context.Background(), user("5"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if len(observed) != len(res.Events) || len(res.Events) <= loop.FirstLogCap {
		t.Fatalf("observed %d events, the result has %d; want more than the first capacity, %d", len(observed), len(res.Events), loop.FirstLogCap)
	}
	for i, ev := range observed[loop.FirstLogCap:] {
		if ev != &res.Events[loop.FirstLogCap+i] {
			t.Fatalf("event %d (%s) was shown from a log the run outgrew: the log grew more than once", ev.Seq, ev.Kind)
		}
	}
	for i, m := range firsts {
		if m != &res.Messages[0] {
			t.Fatalf("turn %d's request held a history the run outgrew: the history grew during the run", i+1)
		}
	}
}
