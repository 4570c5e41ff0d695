package loop_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
)

// till is a tiny payment desk for the compensation tests: refunds, which
// a reversal undoes, and vouchers, which fail for the orders in refuse.
type till struct {
	mu        sync.Mutex
	refunds   map[string]int // order -> refunds applied
	reversals map[string]int // refund ID -> reversals applied
	refuse    map[string]bool
	// failReverse makes every reversal fail.
	failReverse bool
	// late makes a refund take this long, past its timeout, ignoring its
	// context; lost makes it then not happen at all.
	late time.Duration
	lost bool
}

func newTill() *till {
	return &till{refunds: map[string]int{}, reversals: map[string]int{}, refuse: map[string]bool{}}
}

type tillOrder struct {
	OrderID string `json:"order_id"`
}

type tillRefund struct {
	RefundID string `json:"refund_id"`
	OrderID  string `json:"order_id"`
}

type tillReverse struct {
	RefundID string `json:"refund_id"`
	Reason   string `json:"reason,omitempty"`
}

// tools returns refund_order (group "money" when named, compensated by
// reverse_refund with a declarative mapping), issue_voucher (same group)
// and reverse_refund (with a status look-up).
func (b *till) tools(t *testing.T, group string) *tool.Registry {
	t.Helper()
	refund := tool.MustNew(tool.Spec[tillOrder]{
		Name: "refund_order", Effect: tool.Write, AtomicGroup: group,
		IdempotencyKey: func(in tillOrder) string { return "refund:" + in.OrderID },
		Compensation: &tool.Compensation{Tool: "reverse_refund",
			Args: map[string]string{"refund_id": "result.refund_id", "reason": `="all or nothing"`}},
		Timeout: 30 * time.Millisecond,
		Lookup: func(_ context.Context, in tillOrder) (any, bool, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.refunds[in.OrderID] > 0 {
				return tillRefund{RefundID: "R-" + in.OrderID, OrderID: in.OrderID}, true, nil
			}
			return nil, false, nil
		},
	}, func(_ context.Context, in tillOrder) (tillRefund, error) {
		time.Sleep(b.late)
		if b.lost {
			return tillRefund{}, errors.New("the bank dropped the request")
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.refunds[in.OrderID]++
		return tillRefund{RefundID: "R-" + in.OrderID, OrderID: in.OrderID}, nil
	})
	voucher := tool.MustNew(tool.Spec[tillOrder]{Name: "issue_voucher", Effect: tool.Write, AtomicGroup: group},
		func(_ context.Context, in tillOrder) (map[string]string, error) {
			if b.refuse[in.OrderID] {
				return nil, &tool.Error{Kind: llm.KindInvalidArguments, Msg: "order " + in.OrderID + " has not shipped"}
			}
			return map[string]string{"voucher": "V-" + in.OrderID}, nil
		})
	reverse := tool.MustNew(tool.Spec[tillReverse]{
		Name: "reverse_refund", Effect: tool.Write,
		Lookup: func(_ context.Context, in tillReverse) (any, bool, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.reversals[in.RefundID] > 0 {
				return map[string]string{"reversed": in.RefundID}, true, nil
			}
			return nil, false, nil
		},
	}, func(_ context.Context, in tillReverse) (map[string]string, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.failReverse {
			return nil, &tool.Error{Kind: llm.KindInvalidArguments, Msg: "the bank refuses to reverse " + in.RefundID}
		}
		if in.Reason != "all or nothing" {
			return nil, fmt.Errorf("reason %q did not come from the mapping", in.Reason)
		}
		b.reversals[in.RefundID]++
		return map[string]string{"reversed": in.RefundID}, nil
	})
	reg, err := tool.NewRegistry(refund, voucher, reverse)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func (b *till) counts(order string) (refunds, reversals int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refunds[order], b.reversals["R-"+order]
}

func tillConfig(b *till, reg *tool.Registry, ledger store.Ledger, policy loop.CompensationPolicy, batches bool, turns ...llmtest.Turn) loop.Config {
	return loop.Config{
		Model: llmtest.New(turns...), Tools: reg, Compensation: policy, AtomicBatches: batches,
		Executor: executor.New(&executor.Options{Ledger: ledger}),
		NewRunID: func() string { return "run-till" },
	}
}

var refundThenVoucher = llmtest.Calls(
	llmtest.Call("c1", "refund_order", map[string]string{"order_id": "A1"}),
	llmtest.Call("c2", "issue_voucher", map[string]string{"order_id": "A2"}))

func eventKinds(res *loop.Result) []loop.EventKind {
	var out []loop.EventKind
	for _, ev := range res.Events {
		out = append(out, ev.Kind)
	}
	return out
}

// A batch that is all or nothing: the refund succeeds, the voucher fails,
// and the refund is reversed, once, through the ledger, before the model
// is asked again; the model is told, and the result says undone.
func TestCompensateBatch(t *testing.T) {
	b := newTill()
	b.refuse["A2"] = true
	ledger := store.NewMemory()
	var sawNote bool
	answer := llmtest.Turn{Func: func(req *llm.Request) (*llm.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		sawNote = last.Role == llm.RoleUser && strings.Contains(last.Text, "refund_order c1 by reverse_refund")
		return llmtest.Text("Nothing was done: the voucher failed, so the refund was reversed.").Response, nil
	}}
	cfg := tillConfig(b, b.tools(t, ""), ledger, loop.CompensateWrites, true, refundThenVoucher, answer)
	var watched []loop.UpdateKind
	var undone []loop.CompensationOutcome
	cfg.Watch = func(_ context.Context, u loop.Update) {
		watched = append(watched, u.Kind)
		if u.Kind == loop.UpdateCompensated {
			undone = u.Compensations
		}
	}
	res, err := loop.Run(context.Background(), cfg, user("refund A1 and a voucher for A2, both or neither"))
	if err != nil {
		t.Fatalf("run: %v (%s)", err, res.Detail)
	}
	if refunds, reversals := b.counts("A1"); refunds != 1 || reversals != 1 {
		t.Errorf("refunds %d, reversals %d; want 1 and 1", refunds, reversals)
	}
	if !sawNote {
		t.Error("the model was not told that the refund was reversed")
	}
	// The watcher hears of the compensation before the step ends.
	i := slices.Index(watched, loop.UpdateCompensated)
	if i < 0 || len(undone) != 1 || undone[0].State != loop.UndoSucceeded || !slices.Contains(watched[i:], loop.UpdateStepFinished) {
		t.Errorf("updates %v, compensations %+v", watched, undone)
	}
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Errorf("history: %v", err)
	}
	w := res.Writes
	if w == nil || w.Outcome != loop.WritesUndone || len(w.Writes) != 2 ||
		w.Writes[0].State != loop.WriteUndone || w.Writes[1].State != loop.WriteFailed {
		t.Fatalf("writes = %+v; want undone (c1 undone, c2 failed)", w)
	}
	var comp *loop.Event
	for i := range res.Events {
		if res.Events[i].Kind == loop.Compensated {
			comp = &res.Events[i]
		}
	}
	if comp == nil || len(comp.Compensations) != 1 {
		t.Fatalf("events %v: want one compensated event with one compensation", eventKinds(res))
	}
	o := comp.Compensations[0]
	if o.State != loop.UndoSucceeded || o.Call == nil || o.Call.Name != "reverse_refund" ||
		string(o.Call.Arguments) != `{"reason":"all or nothing","refund_id":"R-A1"}` ||
		o.Outcome == nil || o.Outcome.IdempotencyKey != "undo:refund:A1" {
		t.Errorf("compensation = %+v (outcome %+v)", o, o.Outcome)
	}
	if rec, claimed, err := ledger.Claim(context.Background(), store.Record{Key: "undo:refund:A1"}); err != nil || claimed || rec.State != store.Done {
		t.Errorf("ledger record of the compensation: %+v (claimed %v), %v", rec, claimed, err)
	}
}

// With the default policy the refund stays, and the result says partial,
// naming what was done and what was not.
func TestLeaveWritesReports(t *testing.T) {
	b := newTill()
	b.refuse["A2"] = true
	res, _ := loop.Run(context.Background(), tillConfig(b, b.tools(t, ""), store.NewMemory(), "", true,
		refundThenVoucher, llmtest.Text("The refund went through; the voucher did not.")), user("refund and voucher"))
	if res.Status != loop.FinalAnswer {
		t.Fatalf("status %s: %s", res.Status, res.Detail)
	}
	if _, reversals := b.counts("A1"); reversals != 0 {
		t.Errorf("%d reversals under the leave policy", reversals)
	}
	w := res.Writes
	if w == nil || w.Outcome != loop.WritesPartial {
		t.Fatalf("writes = %+v; want partial", w)
	}
	if got := w.Summary(); got != "partial: done refund_order c1; not done issue_voucher c2 (failed)" {
		t.Errorf("Summary() = %q", got)
	}
	for _, ev := range res.Events {
		if ev.Kind == loop.Compensated {
			t.Error("a compensated event under the leave policy")
		}
	}
}

// A named group spans the run: a run that stops (here at its step limit)
// after the group's refund succeeded undoes it, and keeps its status.
func TestCompensateOnStop(t *testing.T) {
	b := newTill()
	cfg := tillConfig(b, b.tools(t, "money"), store.NewMemory(), loop.CompensateWrites, false,
		llmtest.Calls(llmtest.Call("c1", "refund_order", map[string]string{"order_id": "A1"})),
		llmtest.Calls(llmtest.Call("c2", "issue_voucher", map[string]string{"order_id": "A2"})))
	cfg.Budgets.MaxSteps = 2
	res, _ := loop.Run(context.Background(), cfg, user("refund"))
	if res.Status != loop.MaxStepsExceeded || !strings.Contains(res.Detail, "undone: refund_order c1 by reverse_refund") {
		t.Fatalf("status %s, detail %q; want max_steps_exceeded naming the undone refund", res.Status, res.Detail)
	}
	if refunds, reversals := b.counts("A1"); refunds != 1 || reversals != 1 {
		t.Errorf("refunds %d, reversals %d; want 1 and 1", refunds, reversals)
	}
	if res.Writes == nil || res.Writes.Outcome != loop.WritesUndone {
		t.Errorf("writes = %+v; want undone", res.Writes)
	}
}

// A canceled run still undoes its writes: the compensation runs on a
// context the cancellation does not reach.
func TestCompensateWhenCanceled(t *testing.T) {
	b := newTill()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelling := llmtest.Turn{Func: func(*llm.Request) (*llm.Response, error) {
		cancel()
		return nil, context.Canceled
	}}
	res, _ := loop.Run(ctx, tillConfig(b, b.tools(t, "money"), store.NewMemory(), loop.CompensateWrites, false,
		llmtest.Calls(llmtest.Call("c1", "refund_order", map[string]string{"order_id": "A1"})), cancelling), user("refund"))
	if res.Status != loop.Canceled {
		t.Fatalf("status %s: %s", res.Status, res.Detail)
	}
	if _, reversals := b.counts("A1"); reversals != 1 {
		t.Errorf("%d reversals after a cancellation, want 1 (%s)", reversals, res.Detail)
	}
}

// A compensation that fails stops the run with compensation_failed,
// naming what is left for a person.
func TestCompensationFails(t *testing.T) {
	b := newTill()
	b.refuse["A2"] = true
	b.failReverse = true
	res, err := loop.Run(context.Background(), tillConfig(b, b.tools(t, ""), store.NewMemory(), loop.CompensateWrites, true,
		refundThenVoucher, llmtest.Text("unreachable")), user("refund and voucher"))
	if !errors.Is(err, loop.CompensationFailed) {
		t.Fatalf("err %v; want compensation_failed", err)
	}
	if !strings.Contains(res.Detail, "left for a person: refund_order c1") || !strings.Contains(res.Detail, "refuses to reverse R-A1") {
		t.Errorf("detail %q does not name what is left and why", res.Detail)
	}
	if res.Writes == nil || res.Writes.Outcome != loop.WritesPartial || res.Writes.Writes[0].State != loop.WriteLeft {
		t.Errorf("writes = %+v; want partial with c1 left", res.Writes)
	}
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Errorf("history: %v", err)
	}
}

// A run whose log ends inside a compensation (the compensate effect due,
// no compensated event: a crash) finishes it on resume, and the ledger
// keeps the reversal to one, whether or not the crashed attempt reversed.
func TestResumeFinishesCompensation(t *testing.T) {
	for _, reversedBeforeCrash := range []bool{false, true} {
		t.Run(fmt.Sprintf("reversed=%v", reversedBeforeCrash), func(t *testing.T) {
			ctx := context.Background()
			b := newTill()
			b.refuse["A2"] = true
			ledger := store.NewMemory()
			done := llmtest.Text("The refund was reversed.")
			cfg := tillConfig(b, b.tools(t, ""), ledger, loop.CompensateWrites, true, refundThenVoucher, done)
			first := store.NewMemory()
			cfg.Store = first
			res, _ := loop.Run(ctx, cfg, user("both or neither"))
			recs, err := first.Events(ctx, "run-till")
			if err != nil {
				t.Fatal(err)
			}
			cut := -1
			for i, ev := range res.Events {
				if ev.Kind == loop.Compensated {
					cut = i
				}
			}
			if cut < 0 || len(recs) != len(res.Events) {
				t.Fatalf("no compensated event, or the store lacks events: %v", eventKinds(res))
			}
			if !reversedBeforeCrash {
				// The crash came before the reversal: take it back in the
				// till, and resume with a ledger that never saw it.
				b.mu.Lock()
				b.reversals["R-A1"] = 0
				b.mu.Unlock()
				ledger = store.NewMemory()
			}
			second := store.NewMemory()
			if err := second.Append(ctx, "run-till", recs[:cut], store.RunSummary{RunID: "run-till", Status: "running"}); err != nil {
				t.Fatal(err)
			}
			cfg = tillConfig(b, b.tools(t, ""), ledger, loop.CompensateWrites, true, done)
			cfg.Store = second
			r, err := loop.NewRunner(cfg)
			if err != nil {
				t.Fatal(err)
			}
			res2, err := r.Resume(ctx, "run-till")
			if err != nil {
				t.Fatalf("resume: %v", err)
			}
			if refunds, reversals := b.counts("A1"); refunds != 1 || reversals != 1 {
				t.Errorf("refunds %d, reversals %d after resume; want 1 and 1", refunds, reversals)
			}
			if res2.Writes == nil || res2.Writes.Outcome != loop.WritesUndone {
				t.Errorf("writes = %+v; want undone", res2.Writes)
			}
			var replayed bool
			for _, ev := range res2.Events[cut:] {
				for _, o := range ev.Compensations {
					replayed = o.Outcome != nil && o.Outcome.Replayed
				}
			}
			if replayed != reversedBeforeCrash {
				t.Errorf("compensation replayed from the ledger = %v, want %v", replayed, reversedBeforeCrash)
			}
		})
	}
}

// A refund that timed out may yet land: it is not undone on a guess, but
// settled by its status look-up, asked again once its timeout has passed
// and its handler (left behind, still running) has ended. Here it landed
// late, and is reversed; in lost it never happened, and nothing is undone.
func TestCompensateSettlesUnknown(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("lost=%v", lost), func(t *testing.T) {
			b := newTill()
			b.refuse["A2"] = true
			b.late, b.lost = 80*time.Millisecond, lost
			res, _ := loop.Run(context.Background(), tillConfig(b, b.tools(t, ""), store.NewMemory(), loop.CompensateWrites, true,
				refundThenVoucher, llmtest.Text("Nothing was done.")), user("both or neither"))
			// The compensation waited for the refund's handler to end:
			// a late refund has landed by now.
			// The timeout stops the run (OnTimeout stop), which settles
			// the refund before it stops.
			if res.Status != loop.ToolTimeout {
				t.Fatalf("status %s: %s", res.Status, res.Detail)
			}
			refunds, reversals := b.counts("A1")
			if refunds != reversals || refunds != map[bool]int{false: 1}[lost] {
				t.Errorf("refunds %d, reversals %d", refunds, reversals)
			}
			var states []loop.CompensationState
			for _, ev := range res.Events {
				for _, o := range ev.Compensations {
					states = append(states, o.State)
				}
			}
			want := loop.UndoSucceeded
			if lost {
				want = loop.UndoNotNeeded
			}
			if len(states) != 1 || states[0] != want {
				t.Errorf("compensations %v, want [%s]", states, want)
			}
		})
	}
}

// While a compensation is due, any other event leaves it due: a stray
// answer, an interruption, a resumption.
func TestCompensationStaysDue(t *testing.T) {
	a, err := txtar.ParseFile(filepath.Join("testdata", "decider", "compensated_on_stop.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := file(a, "events")
	events, err := decodeEvents(data)
	if err != nil {
		t.Fatal(err)
	}
	var s loop.State
	var eff loop.Effect
	for i := range events[:7] {
		eff = loop.Next(&s, &events[i])
	}
	if eff.Kind != loop.Compensate {
		t.Fatalf("effect %s after the step limit, want compensate", eff.Kind)
	}
	for _, ev := range []loop.Event{
		{Kind: loop.ConfirmationDecided, Confirmation: &loop.Confirmation{CallID: "c2", Approved: true, By: "dana"}},
		{Kind: loop.Interrupted, Failure: &loop.Failure{Kind: loop.FailCanceled, Message: "context canceled"}},
		{Kind: loop.Resumed},
	} {
		if got := loop.Next(&s, &ev); got.Kind != loop.Compensate || len(got.Compensations) != 1 {
			t.Errorf("after %s: effect %s, want the compensation still due", ev.Kind, got.Kind)
		}
	}
}

// A write undone by a compensation is not asked for again under its key
// in the same run: the ledger would replay the undone result as if it
// stood. The model is told instead.
func TestUndoneWriteNotReplayed(t *testing.T) {
	b := newTill()
	b.refuse["A2"] = true
	again := llmtest.Calls(llmtest.Call("c3", "refund_order", map[string]string{"order_id": "A1"}))
	res, _ := loop.Run(context.Background(), tillConfig(b, b.tools(t, ""), store.NewMemory(), loop.CompensateWrites, true,
		refundThenVoucher, again, llmtest.Text("The refund was taken back.")), user("both or neither"))
	if res.Status != loop.FinalAnswer {
		t.Fatalf("status %s: %s", res.Status, res.Detail)
	}
	var r *llm.ToolResult
	for _, m := range res.Messages {
		if m.Result != nil && m.Result.CallID == "c3" {
			r = m.Result
		}
	}
	if r == nil || r.Status != llm.StatusError || r.ErrorKind != llm.KindIdempotencyConflict || !strings.Contains(string(r.Content), "was undone earlier in this run") {
		t.Fatalf("result of the refund asked for again: %+v", r)
	}
	if refunds, reversals := b.counts("A1"); refunds != 1 || reversals != 1 {
		t.Errorf("refunds %d, reversals %d", refunds, reversals)
	}
	if w := res.Writes; w == nil || w.Outcome != loop.WritesUndone || w.Writes[len(w.Writes)-1].State != loop.WriteNotRun {
		t.Errorf("writes = %+v", w)
	}
}

// Another run asking later for a write that a compensation undid, on the
// same ledger file (another process, say), is told so and runs nothing:
// the ledger keeps the original's key done, and replaying its result
// would report a refund that was reversed as made.
func TestUndoneWriteNotReplayedToAnotherRun(t *testing.T) {
	b := newTill()
	b.refuse["A2"] = true
	path := filepath.Join(t.TempDir(), "ledger.db")
	first, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := loop.Run(context.Background(), tillConfig(b, b.tools(t, ""), first, loop.CompensateWrites, true,
		refundThenVoucher, llmtest.Text("Nothing was done.")), user("both or neither"))
	first.Close()
	if res.Status != loop.FinalAnswer || res.Writes == nil || res.Writes.Outcome != loop.WritesUndone {
		t.Fatalf("first run: %s (%s), writes %+v", res.Status, res.Detail, res.Writes)
	}
	second, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	cfg := tillConfig(b, b.tools(t, ""), second, loop.LeaveWrites, false,
		llmtest.Calls(llmtest.Call("d1", "refund_order", map[string]string{"order_id": "A1"})), llmtest.Text("Not refunded."))
	cfg.NewRunID = func() string { return "run-later" }
	res, err = loop.Run(context.Background(), cfg, user("refund A1"))
	if err != nil || res.Status != loop.FinalAnswer {
		t.Fatalf("second run: %v, %s (%s)", err, res.Status, res.Detail)
	}
	var r *llm.ToolResult
	for _, m := range res.Messages {
		if m.Result != nil && m.Result.CallID == "d1" {
			r = m.Result
		}
	}
	if r == nil || r.Status != llm.StatusError || r.ErrorKind != llm.KindIdempotencyConflict ||
		!strings.Contains(string(r.Content), `\"refund:A1\" (run run-till, call c1) was undone by its compensation`) {
		t.Fatalf("result of the refund asked for by another run: %+v", r)
	}
	if refunds, reversals := b.counts("A1"); refunds != 1 || reversals != 1 {
		t.Errorf("refunds %d, reversals %d; want 1 and 1", refunds, reversals)
	}
	if w := res.Writes; w == nil || w.Outcome != loop.WritesNone {
		t.Errorf("second run's writes = %+v; want none", w)
	}
}

// An unknown policy is refused when the runner is built, naming it.
func TestCompensationBadPolicy(t *testing.T) {
	b := newTill()
	_, err := loop.NewRunner(tillConfig(b, b.tools(t, ""), store.NewMemory(), "undo-everything", false))
	if err == nil || !strings.Contains(err.Error(), `unknown compensation policy "undo-everything"`) {
		t.Errorf("NewRunner: %v", err)
	}
}
