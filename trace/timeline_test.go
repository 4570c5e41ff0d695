package trace_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/trace"
)

// checkTree checks the invariants every run's spans keep.
func checkTree(t *testing.T, spans []trace.Span) map[int]trace.Span {
	t.Helper()
	if len(spans) == 0 || spans[0].Kind != trace.SpanRun || spans[0].ID != 1 || spans[0].Parent != 0 {
		t.Fatalf("spans do not begin with the run span: %+v", spans)
	}
	byID := map[int]trace.Span{}
	root := spans[0]
	for _, s := range spans {
		byID[s.ID] = s
		if s.ID == 1 {
			continue
		}
		p, ok := byID[s.Parent]
		if !ok {
			t.Errorf("span %d %s: parent %d not before it", s.ID, s.Name, s.Parent)
			continue
		}
		if s.End.Before(s.Start) {
			t.Errorf("span %d %s ends before it starts", s.ID, s.Name)
		}
		if s.Start.Before(p.Start) || (!p.Open() && s.End.After(p.End)) {
			t.Errorf("span %d %s [%v, %v] is outside its parent %s [%v, %v]", s.ID, s.Name,
				s.Start.Sub(root.Start), s.End.Sub(root.Start), p.Name, p.Start.Sub(root.Start), p.End.Sub(root.Start))
		}
		want := 1
		if s.Kind == trace.SpanTool {
			want = byID[s.Parent].ID
			if byID[s.Parent].Kind != trace.SpanStage {
				t.Errorf("tool span %d's parent is a %s", s.ID, byID[s.Parent].Kind)
			}
		}
		if s.Kind == trace.SpanUndo {
			want = byID[s.Parent].ID
			if byID[s.Parent].Kind != trace.SpanCompensate {
				t.Errorf("compensating call span %d's parent is a %s", s.ID, byID[s.Parent].Kind)
			}
		}
		if s.Parent != want {
			t.Errorf("span %d %s has parent %d, want %d", s.ID, s.Name, s.Parent, want)
		}
	}
	return byID
}

func kinds(spans []trace.Span) []trace.SpanKind {
	out := make([]trace.SpanKind, len(spans))
	for i, s := range spans {
		out[i] = s.Kind
	}
	return out
}

func TestSpansOfParallelScenario(t *testing.T) {
	res := scenario(t, "parallel")
	spans := trace.Spans(res.Events)
	checkTree(t, spans)
	want := []trace.SpanKind{trace.SpanRun,
		trace.SpanChat, trace.SpanBudget, trace.SpanValidate, trace.SpanAuthorize, trace.SpanPlan,
		trace.SpanStage, trace.SpanTool, trace.SpanTool, trace.SpanStage, trace.SpanTool, trace.SpanStage, trace.SpanTool,
		trace.SpanAppend, trace.SpanBudget, trace.SpanChat}
	if got := kinds(spans); !equalKinds(got, want) {
		t.Fatalf("span kinds\n got %v\nwant %v", got, want)
	}
	if spans[0].Open() || spans[0].Run.Status != loop.FinalAnswer || spans[0].Error != "" {
		t.Errorf("run span %+v", spans[0])
	}
	if s := spans[6]; s.Mode != executor.Parallel || s.Stage != 0 {
		t.Errorf("first stage: mode %s stage %d", s.Mode, s.Stage)
	}
	if c := spans[10].Calls[0]; spans[10].Name != "execute_tool refund_order" || c.ID != "call_r1" || !c.Executed ||
		c.Row.Effect != "write" || c.Outcome.IdempotencyKey != "refund:A103" || c.Result.Status != llm.StatusOK {
		t.Errorf("refund span %s: %+v", spans[10].Name, c)
	}
	app := spans[13]
	if len(app.Calls) != 4 {
		t.Fatalf("append span has %d calls", len(app.Calls))
	}
	for _, c := range app.Calls {
		if !c.Validated || c.Decision.Verdict != policy.Allow || !c.Planned || !c.Executed || c.Result.CallID != c.ID {
			t.Errorf("call %s incomplete: %+v", c.ID, c)
		}
	}
	if b := spans[2].Budget; b.Point != trace.AfterResponse || !b.Passed() || b.Requested != 4 || b.Steps != 1 {
		t.Errorf("after-response check %+v", b)
	}
	if b := spans[14].Budget; b.Point != trace.BeforeTurn || !b.Passed() || b.ToolCalls != 4 {
		t.Errorf("before-turn check %+v", b)
	}
}

func equalKinds(a, b []trace.SpanKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSpansOfEveryScenario derives the spans of every sandbox run.
func TestSpansOfEveryScenario(t *testing.T) {
	for _, s := range orders.Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			res := scenario(t, s.Name)
			spans := trace.Spans(res.Events)
			checkTree(t, spans)
			root := spans[0]
			if root.Open() || root.Run.Status != s.Want || !root.End.Equal(res.Events[len(res.Events)-1].At) {
				t.Errorf("run span: open %v, status %s", root.Open(), root.Run.Status)
			}
			failed := root.Error != ""
			if want := s.Want != loop.FinalAnswer && s.Want != loop.ConfirmationRequired; failed != want {
				t.Errorf("run span error %q", root.Error)
			}
			switch s.Want {
			case loop.MaxStepsExceeded, loop.ToolBudgetExceeded, loop.CostBudgetExceeded, loop.DeadlineExceeded:
				var stop *trace.BudgetCheck
				for _, sp := range spans {
					if sp.Kind == trace.SpanBudget && !sp.Budget.Passed() {
						stop = sp.Budget
					}
				}
				if stop == nil || stop.Status != s.Want {
					t.Errorf("no failed budget check with status %s: %+v", s.Want, stop)
				}
			}
		})
	}
}

// TestSpansWithFakeClock: the executor's tool times come from the real
// clock; with a fake driver clock they are placed inside their stage.
func TestSpansWithFakeClock(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
	reg, err := orders.Tools(orders.NewBook())
	if err != nil {
		t.Fatal(err)
	}
	res, _ := loop.Run(context.Background(), loop.Config{
		Model: llmtest.New(llmtest.Calls(llmtest.Call("c1", orders.QueryOrder, `{"order_id":"A100"}`),
			llmtest.Call("c2", orders.QueryOrder, `{"order_id":"A101"}`)), llmtest.Text("done")),
		Tools: reg, Now: clock, Executor: executor.New(&executor.Options{Ledger: store.NewMemory()}),
	}, []llm.Message{llm.UserMessage("hi")})
	spans := trace.Spans(res.Events)
	byID := checkTree(t, spans)
	for _, s := range spans {
		if s.Kind == trace.SpanTool && !s.Start.Equal(byID[s.Parent].Start) && s.Start.Sub(byID[s.Parent].Start) > time.Second {
			t.Errorf("tool span %s starts %v into its stage", s.Name, s.Start.Sub(byID[s.Parent].Start))
		}
	}
}

// TestSpansOfConfirmation follows a run that pauses for confirmation and
// goes on after a person approves.
func TestSpansOfConfirmation(t *testing.T) {
	reg, err := orders.Tools(orders.NewBook())
	if err != nil {
		t.Fatal(err)
	}
	r, err := loop.NewRunner(loop.Config{
		Model: llmtest.New(llmtest.Calls(llmtest.Call("c1", orders.QueryOrder, `{"order_id":"A103"}`),
			llmtest.Call("r1", orders.RefundOrder, `{"order_id":"A103","reason":"broken"}`)), llmtest.Text("refunded")),
		Tools: reg, Policy: policy.ConfirmWrites(), Executor: executor.New(&executor.Options{Ledger: store.NewMemory()}),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := r.Run(context.Background(), []llm.Message{llm.UserMessage("refund A103")})
	if res.Status != loop.ConfirmationRequired {
		t.Fatalf("status %s", res.Status)
	}
	paused := trace.Spans(res.Events)
	if paused[0].Run.Status != loop.ConfirmationRequired || len(paused[0].Run.Pending) != 1 || paused[0].Error != "" {
		t.Errorf("paused run span %+v", paused[0].Run)
	}
	res, err = r.Continue(context.Background(), res, loop.Confirmation{CallID: "r1", Approved: true, By: "alice", Note: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	spans := trace.Spans(res.Events)
	checkTree(t, spans)
	if spans[0].Run.Status != loop.FinalAnswer || !spans[0].End.Equal(res.Events[len(res.Events)-1].At) {
		t.Errorf("resumed run span: %s, end %v", spans[0].Run.Status, spans[0].End)
	}
	var confirm, refund *trace.Span
	for i := range spans {
		switch spans[i].Name {
		case "await_confirmation":
			confirm = &spans[i]
		case "execute_tool refund_order":
			refund = &spans[i]
		}
	}
	if confirm == nil || len(confirm.Calls) != 1 || confirm.Calls[0].ID != "r1" || confirm.Error != "" {
		t.Fatalf("confirmation span %+v", confirm)
	}
	if refund == nil || refund.Calls[0].Confirmation == nil || refund.Calls[0].Confirmation.By != "alice" ||
		refund.Calls[0].Decision.Verdict != policy.Confirm {
		t.Fatalf("refund span %+v", refund)
	}
}

func TestTimelineIgnoresEventsBeforeStart(t *testing.T) {
	var tl trace.Timeline
	if spans := tl.Add(&loop.Event{Kind: loop.ModelResponded, Response: &llm.Response{}}); spans != nil {
		t.Errorf("spans before the run started: %+v", spans)
	}
}
