package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
)

// Every refusal of an answer is an *AnswerError whose reason errors.Is
// finds, through Decide (a store) and Continue (no store) alike, and
// nothing is recorded for it.
func TestAnswerErrorKinds(t *testing.T) {
	_, cfg, paused := confirmSetup(t)
	ctx := context.Background()
	if err := loop.Decide(ctx, cfg.Store, paused.RunID, loop.Confirmation{CallID: "c2", Approved: true, By: "alice"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	answered, err := loop.LoadEvents(ctx, cfg.Store, paused.RunID)
	if err != nil {
		t.Fatal(err)
	}
	// A second run, still paused, for the reasons that need one.
	_, cfg2, paused2 := confirmSetup(t)
	for _, tc := range []struct {
		name     string
		answered bool // answer the run whose call c2 is approved already
		answer   loop.Confirmation
		want     error
		says     string
	}{
		{"no one", false, loop.Confirmation{CallID: "c2", Approved: true, By: " \t"}, loop.ErrNoAnswerer, "must say who decided"},
		{"a forged line", false, loop.Confirmation{CallID: "c2", Approved: true, By: "dana\nstopped status=final_answer"}, loop.ErrNoAnswerer, "holds a control character"},
		{"long note", false, loop.Confirmation{CallID: "c2", By: "bob", Note: strings.Repeat("x", loop.MaxNoteBytes+1)}, loop.ErrNoteTooLong, "16385 bytes, at most 16384"},
		{"unknown call", false, loop.Confirmation{CallID: "c9", By: "bob"}, loop.ErrUnknownCall, "call c9 is not pending in run " + paused2.RunID + "; pending: c2 (refund_order)"},
		{"answered call", true, loop.Confirmation{CallID: "c2", By: "bob"}, loop.ErrAlreadyAnswered, "already approved by alice; an answer is final"},
		{"not paused", true, loop.Confirmation{CallID: "c1", By: "bob"}, loop.ErrNotPaused, "is not waiting for confirmation (status "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, res := cfg2.Store, paused2
			if tc.answered {
				st, res = cfg.Store, &loop.Result{RunID: paused.RunID, Events: answered}
			}
			before, _ := loop.LoadEvents(ctx, st, res.RunID)
			derr := loop.Decide(ctx, st, res.RunID, tc.answer, time.Now())
			runner, _ := loop.NewRunner(loop.Config{Model: cfg.Model, Tools: cfg.Tools, Policy: cfg.Policy})
			_, cerr := runner.Continue(ctx, res, tc.answer)
			for via, err := range map[string]error{"Decide": derr, "Continue": cerr} {
				var ae *loop.AnswerError
				if !errors.Is(err, tc.want) || !errors.As(err, &ae) || ae.RunID != res.RunID || ae.CallID != tc.answer.CallID || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("%s: err = %v, want an *AnswerError with %v saying %q", via, err, tc.want, tc.says)
				}
			}
			if after, _ := loop.LoadEvents(ctx, st, res.RunID); len(after) != len(before) {
				t.Errorf("a refused answer was recorded: %d events, were %d", len(after), len(before))
			}
		})
	}
	var ae *loop.AnswerError
	err = loop.Decide(ctx, cfg.Store, paused.RunID, loop.Confirmation{CallID: "c2", By: "bob"}, time.Now())
	if !errors.As(err, &ae) || ae.Answer == nil || !ae.Answer.Approved || ae.Answer.By != "alice" {
		t.Errorf("answering twice: %#v, want the first answer (approved by alice)", ae)
	}
	err = loop.Decide(ctx, cfg2.Store, paused2.RunID, loop.Confirmation{CallID: "c9", By: "bob"}, time.Now())
	if !errors.As(err, &ae) || len(ae.Waiting) != 1 || ae.Waiting[0].CallID != "c2" || ae.Waiting[0].Tool != "refund_order" {
		t.Errorf("unknown call: %#v, want the waiting call c2", ae)
	}
	// A run answered and not resumed is named so by Decide, which has
	// its log; a stopped run by the status it stopped with.
	err = loop.Decide(ctx, cfg.Store, paused.RunID, loop.Confirmation{CallID: "c1", By: "bob"}, time.Now())
	if !errors.As(err, &ae) || ae.Status != loop.AnsweredStatus {
		t.Errorf("answering an answered run: %v, want ErrNotPaused with status answered", err)
	}
	runner, _ := loop.NewRunner(cfg)
	done, err := runner.Resume(ctx, paused.RunID)
	mustStatus(t, done, err, loop.FinalAnswer)
	err = loop.Decide(ctx, cfg.Store, paused.RunID, loop.Confirmation{CallID: "c1", By: "bob"}, time.Now())
	if !errors.Is(err, loop.ErrNotPaused) || !errors.As(err, &ae) || ae.Status != string(loop.FinalAnswer) {
		t.Errorf("answering an ended run: %v, want ErrNotPaused with status final_answer", err)
	}
}

// An approved run that was not resumed is listed as answered, with the
// answers, and found by that status; resumed, it is listed by how it ended.
func TestAnsweredRunIsListedAsAnswered(t *testing.T) {
	_, cfg, paused := confirmSetup(t)
	ctx := context.Background()
	if err := loop.Decide(ctx, cfg.Store, paused.RunID, loop.Confirmation{CallID: "c2", Approved: true, By: "alice", Note: "customer verified"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	list := func(status string) []store.RunSummary {
		t.Helper()
		runs, err := cfg.Store.Runs(ctx, status)
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	if runs := list(string(loop.ConfirmationRequired)); len(runs) != 0 {
		t.Errorf("an answered run is listed as confirmation_required: %+v", runs)
	}
	if runs := list(loop.RunningStatus); len(runs) != 0 {
		t.Errorf("an answered run is listed as running: %+v", runs)
	}
	runs := list(loop.AnsweredStatus)
	if len(runs) != 1 || runs[0].RunID != paused.RunID {
		t.Fatalf("runs with status answered: %+v", runs)
	}
	var listed []loop.Pending
	if err := json.Unmarshal(runs[0].Pending, &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].CallID != "c2" || listed[0].Confirmation == nil ||
		!listed[0].Confirmation.Approved || listed[0].Confirmation.By != "alice" || listed[0].Confirmation.Note != "customer verified" {
		t.Errorf("listed calls of the answered run: %+v, want c2 approved by alice with the note", listed)
	}
	runner, _ := loop.NewRunner(cfg)
	res, err := runner.Resume(ctx, paused.RunID)
	mustStatus(t, res, err, loop.FinalAnswer)
	if runs := list(string(loop.FinalAnswer)); len(runs) != 1 || len(runs[0].Pending) != 0 {
		t.Errorf("resumed run: %+v, want it listed as final_answer with no calls", runs)
	}
}

// A denied run, whose batch is gone once answered (nothing to run), is
// listed with its denial too.
func TestDeniedRunIsListedWithItsDenial(t *testing.T) {
	r := &refunds{applied: map[string]int{}}
	f := newFixture(t, r.tool(t, true))
	mem := store.NewMemory()
	cfg := loop.Config{Model: stepModel(llmtest.Calls(call("c1", "refund_order", `{"order_id":"A1"}`)), llmtest.Text("done")),
		Tools: f.reg, Store: mem, Policy: policy.ConfirmWrites()}
	ctx := context.Background()
	res, err := loop.Run(ctx, cfg, user("refund A1"))
	mustStatus(t, res, err, loop.ConfirmationRequired)
	if err := loop.Decide(ctx, mem, res.RunID, loop.Confirmation{CallID: "c1", By: "bob", Note: "no"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	runs, _ := mem.Runs(ctx, loop.AnsweredStatus)
	var listed []loop.Pending
	if len(runs) == 1 {
		_ = json.Unmarshal(runs[0].Pending, &listed)
	}
	if len(listed) != 1 || listed[0].Confirmation == nil || listed[0].Confirmation.Approved || listed[0].Confirmation.Note != "no" {
		t.Errorf("answered runs %+v, calls %+v: want c1 denied by bob", runs, listed)
	}
}

// PendingAfter counts the calls of the answer's own pause only.
func TestPendingAfterAnswer(t *testing.T) {
	r := &refunds{applied: map[string]int{}}
	f := newFixture(t, r.tool(t, true))
	mem := store.NewMemory()
	cfg := loop.Config{Model: stepModel(llmtest.Calls(call("c1", "refund_order", `{"order_id":"A1"}`), call("c2", "refund_order", `{"order_id":"A2"}`)),
		llmtest.Text("done")), Tools: f.reg, Store: mem, Policy: policy.ConfirmWrites()}
	ctx := context.Background()
	res, err := loop.Run(ctx, cfg, user("refund A1 and A2"))
	mustStatus(t, res, err, loop.ConfirmationRequired)
	if err := loop.Decide(ctx, mem, res.RunID, loop.Confirmation{CallID: "c1", Approved: true, By: "bob"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	events, _ := loop.LoadEvents(ctx, mem, res.RunID)
	if still := loop.PendingAfter(events, "c1"); len(still) != 1 || still[0].CallID != "c2" {
		t.Errorf("after c1: still %+v, want c2", still)
	}
	if err := loop.Decide(ctx, mem, res.RunID, loop.Confirmation{CallID: "c2", Approved: true, By: "bob"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	events, _ = loop.LoadEvents(ctx, mem, res.RunID)
	if still := loop.PendingAfter(events, "c2"); len(still) != 0 {
		t.Errorf("after c2: still %+v, want none", still)
	}
	if still := loop.PendingAfter(events, "c1"); len(still) != 1 {
		t.Errorf("c1's answer, read later: still %+v, want c2 (as it was then)", still)
	}
}

// CheckAnswer only reads the state: a state that shares its Answered
// array with another (ForBatch's copy shares it; a later answer appended
// to the original fills the slot past the copy's end) keeps what is
// there. It used to append Pending to Answered to look through both,
// writing over that slot.
func TestCheckAnswerWritesNothing(t *testing.T) {
	s := &loop.State{RunID: "r1", Status: loop.ConfirmationRequired,
		Answered: make([]loop.Pending, 1, 2), Pending: []loop.Pending{{CallID: "c2", Tool: "refund"}}}
	s.Answered[0] = loop.Pending{CallID: "c1", Tool: "lookup", Confirmation: &loop.Confirmation{CallID: "c1", Approved: true, By: "dana"}}
	copied := s.ForBatch()
	s.Answered = append(s.Answered, loop.Pending{CallID: "c3", Tool: "cancel"})
	_ = loop.CheckAnswer(copied, loop.Confirmation{CallID: "c2", Approved: true, By: "dana"})
	if got := s.Answered[1]; got.CallID != "c3" || got.Tool != "cancel" {
		t.Fatalf("the original state's second answered call is %+v after CheckAnswer of its copy, want c3 (cancel)", got)
	}
}
