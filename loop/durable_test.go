package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
)

// stepModel answers by the request's step number, so a resumed run gets
// the same answers an uninterrupted one did.
func stepModel(turns ...llmtest.Turn) llm.Model {
	return llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		if req.Step > len(turns) {
			return nil, fmt.Errorf("no turn %d", req.Step)
		}
		t := turns[req.Step-1]
		if t.Err != nil {
			return nil, t.Err
		}
		r := *t.Response
		return &r, nil
	})
}

func historyJSON(t *testing.T, msgs []llm.Message) string {
	t.Helper()
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestResumeAtEveryEventBoundary(t *testing.T) {
	r := &refunds{applied: map[string]int{}}
	f := newFixture(t, r.tool(t, true))
	turns := []llmtest.Turn{
		llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`), call("c2", "query_order", `{"id":"A2"}`)),
		llmtest.Calls(call("c3", "refund_order", `{"order_id":"A1"}`), call("c4", "query_order", `{"id":"Z"}`)),
		llmtest.Text("refunded A1"),
	}
	ledger := store.NewMemory()
	cfg := func(st store.EventLog) loop.Config {
		return loop.Config{Model: stepModel(turns...), Tools: f.reg, Store: st,
			Executor: executor.New(&executor.Options{Ledger: ledger}),
			NewRunID: func() string { return "run-1" }}
	}
	full := store.NewMemory()
	want, err := loop.Run(context.Background(), cfg(full), user("refund A1"))
	mustStatus(t, want, err, loop.FinalAnswer)
	if r.applied["A1"] != 1 {
		t.Fatalf("%d refunds in the uninterrupted run", r.applied["A1"])
	}
	recs, err := full.Events(context.Background(), "run-1")
	if err != nil || len(recs) != len(want.Events) {
		t.Fatalf("stored %d events, ran %d: %v", len(recs), len(want.Events), err)
	}
	for k := 1; k < len(recs); k++ {
		t.Run(fmt.Sprintf("after event %d (%s)", k, recs[k-1].Kind), func(t *testing.T) {
			// A store holding only the first k events: the process died
			// right after writing them.
			partial := store.NewMemory()
			if err := partial.Append(context.Background(), "run-1", recs[:k], store.RunSummary{}); err != nil {
				t.Fatal(err)
			}
			runner, err := loop.NewRunner(cfg(partial))
			if err != nil {
				t.Fatal(err)
			}
			got, err := runner.Resume(context.Background(), "run-1")
			mustStatus(t, got, err, loop.FinalAnswer)
			if historyJSON(t, got.Messages) != historyJSON(t, want.Messages) {
				t.Fatalf("resumed history differs:\n got %s\nwant %s", historyJSON(t, got.Messages), historyJSON(t, want.Messages))
			}
			if r.applied["A1"] != 1 {
				t.Fatalf("the refund was applied %d times", r.applied["A1"])
			}
			stored, _ := partial.Events(context.Background(), "run-1")
			for i, ev := range stored {
				if ev.Seq != i+1 {
					t.Fatalf("event %d stored with seq %d", i+1, ev.Seq)
				}
			}
		})
	}
}

func TestResumingAnEndedRunReturnsItUnchanged(t *testing.T) {
	f := newFixture(t)
	st := store.NewMemory()
	cfg := loop.Config{Model: stepModel(llmtest.Text("hi")), Tools: f.reg, Store: st}
	first, err := loop.Run(context.Background(), cfg, user("q"))
	mustStatus(t, first, err, loop.FinalAnswer)
	runner, _ := loop.NewRunner(cfg)
	again, err := runner.Resume(context.Background(), first.RunID)
	mustStatus(t, again, err, loop.FinalAnswer)
	if len(again.Events) != len(first.Events) || again.Answer() != "hi" {
		t.Fatalf("resume of an ended run changed it: %d vs %d events", len(again.Events), len(first.Events))
	}
	if _, err := runner.Resume(context.Background(), "no-such-run"); err == nil || !strings.Contains(err.Error(), "no-such-run") {
		t.Fatalf("unknown run: err = %v", err)
	}
}

func confirmSetup(t *testing.T) (*refunds, loop.Config, *loop.Result) {
	t.Helper()
	r := &refunds{applied: map[string]int{}}
	f := newFixture(t, r.tool(t, true))
	cfg := loop.Config{
		Model: stepModel(
			llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`), call("c2", "refund_order", `{"order_id":"A1"}`)),
			llmtest.Text("done"),
		),
		Tools: f.reg, Store: store.NewMemory(), Policy: policy.ConfirmWrites(),
		Budgets: loop.Budgets{Deadline: time.Minute},
	}
	res, err := loop.Run(context.Background(), cfg, user("refund A1"))
	mustStatus(t, res, err, loop.ConfirmationRequired)
	if r.applied["A1"] != 0 || len(res.Pending) != 1 || res.Pending[0].CallID != "c2" {
		t.Fatalf("paused run: %d refunds, pending %+v", r.applied["A1"], res.Pending)
	}
	runs, _ := cfg.Store.Runs(context.Background(), string(loop.ConfirmationRequired))
	if len(runs) != 1 || !strings.Contains(string(runs[0].Pending), "c2") {
		t.Fatalf("stored summary = %+v", runs)
	}
	return r, cfg, res
}

func TestApproveThenResume(t *testing.T) {
	r, cfg, paused := confirmSetup(t)
	ctx := context.Background()
	if err := loop.Decide(ctx, cfg.Store, paused.RunID, loop.Confirmation{CallID: "c2", Approved: true, By: "alice", Note: "customer verified"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	runner, _ := loop.NewRunner(cfg)
	res, err := runner.Resume(ctx, paused.RunID)
	mustStatus(t, res, err, loop.FinalAnswer)
	if r.applied["A1"] != 1 {
		t.Fatalf("%d refunds after approval", r.applied["A1"])
	}
	if got := resultFor(t, res.Messages, "c2"); got.Status != llm.StatusOK {
		t.Fatalf("approved call result = %+v", got)
	}
	// The confirmation record is in the log, and the approved call was
	// planned alone.
	var found bool
	for _, ev := range res.Events {
		if ev.Kind == loop.ConfirmationDecided && ev.Confirmation.By == "alice" && ev.Confirmation.Note == "customer verified" {
			found = true
		}
		if ev.Kind == loop.StagePlanned {
			for _, row := range ev.Plan.Table {
				if row.CallID == "c2" && !strings.Contains(row.Reason, "confirmation") {
					t.Fatalf("approved call planned as %+v", row)
				}
			}
		}
	}
	if !found {
		t.Fatal("no confirmation record in the log")
	}
	if err := loop.Decide(ctx, cfg.Store, paused.RunID, loop.Confirmation{CallID: "c2", Approved: true, By: "bob"}, time.Now()); err == nil ||
		!strings.Contains(err.Error(), "already approved by alice") {
		t.Fatalf("approving again after the run finished: err = %v", err)
	}
	if err := loop.Decide(ctx, cfg.Store, paused.RunID, loop.Confirmation{CallID: "c1", Approved: true, By: "bob"}, time.Now()); err == nil ||
		!strings.Contains(err.Error(), "not waiting") {
		t.Fatalf("approving a call of a finished run: err = %v", err)
	}
}

func TestDenyGoesBackToTheModel(t *testing.T) {
	r, cfg, paused := confirmSetup(t)
	ctx := context.Background()
	if err := loop.Decide(ctx, cfg.Store, paused.RunID, loop.Confirmation{CallID: "c2", Approved: false, By: "alice", Note: "over the limit"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	runner, _ := loop.NewRunner(cfg)
	res, err := runner.Resume(ctx, paused.RunID)
	mustStatus(t, res, err, loop.FinalAnswer)
	got := resultFor(t, res.Messages, "c2")
	if r.applied["A1"] != 0 || got.ErrorKind != llm.KindPermissionDenied || !strings.Contains(string(got.Content), "over the limit") {
		t.Fatalf("%d refunds, c2 = %+v %s", r.applied["A1"], got, got.Content)
	}
	if q := resultFor(t, res.Messages, "c1"); q.Status != llm.StatusOK {
		t.Fatalf("the allowed read in the paused batch did not run: %+v", q)
	}
}

func TestDecideErrors(t *testing.T) {
	_, cfg, paused := confirmSetup(t)
	ctx := context.Background()
	for name, c := range map[string]loop.Confirmation{
		"not pending": {CallID: "c1", Approved: true, By: "alice"},
		"no one":      {CallID: "c2", Approved: true},
	} {
		if err := loop.Decide(ctx, cfg.Store, paused.RunID, c, time.Now()); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := loop.Decide(ctx, cfg.Store, paused.RunID, loop.Confirmation{CallID: "c2", Approved: true, By: "alice"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	err := loop.Decide(ctx, cfg.Store, paused.RunID, loop.Confirmation{CallID: "c2", Approved: false, By: "bob"}, time.Now())
	if err == nil || !strings.Contains(err.Error(), "already approved by alice") {
		t.Fatalf("deciding twice: err = %v", err)
	}
	if err := loop.Decide(ctx, cfg.Store, "nope", loop.Confirmation{CallID: "c2", By: "x"}, time.Now()); err == nil {
		t.Fatal("unknown run: no error")
	}
}

func TestContinueInMemory(t *testing.T) {
	r := &refunds{applied: map[string]int{}}
	f := newFixture(t, r.tool(t, true))
	cfg := loop.Config{
		Model: stepModel(llmtest.Calls(call("c1", "refund_order", `{"order_id":"A1"}`)), llmtest.Text("done")),
		Tools: f.reg, Policy: policy.ConfirmWrites(),
	}
	runner, _ := loop.NewRunner(cfg)
	paused, err := runner.Run(context.Background(), user("refund"))
	mustStatus(t, paused, err, loop.ConfirmationRequired)
	res, err := runner.Continue(context.Background(), paused, loop.Confirmation{CallID: "c1", Approved: true, By: "ops"})
	mustStatus(t, res, err, loop.FinalAnswer)
	if r.applied["A1"] != 1 {
		t.Fatalf("%d refunds", r.applied["A1"])
	}
	if _, err := runner.Continue(context.Background(), paused, loop.Confirmation{CallID: "zz", Approved: true, By: "ops"}); err == nil {
		t.Fatal("continuing with an answer for no pending call: no error")
	}
}

func TestPauseDoesNotSpendTheDeadline(t *testing.T) {
	r, cfg, paused := confirmSetup(t)
	// The human answers long after the run's one-minute deadline.
	later := time.Now().Add(time.Hour)
	if err := loop.Decide(context.Background(), cfg.Store, paused.RunID, loop.Confirmation{CallID: "c2", Approved: true, By: "alice"}, later); err != nil {
		t.Fatal(err)
	}
	cfg.Now = func() time.Time { return later.Add(time.Second) }
	runner, _ := loop.NewRunner(cfg)
	res, err := runner.Resume(context.Background(), paused.RunID)
	mustStatus(t, res, err, loop.FinalAnswer)
	if r.applied["A1"] != 1 {
		t.Fatalf("%d refunds", r.applied["A1"])
	}
}

type resumeRecorder struct {
	history int
	kinds   []loop.EventKind
	runIDs  map[string]bool
}

func (r *resumeRecorder) Observe(ctx context.Context, ev *loop.Event) {
	r.kinds = append(r.kinds, ev.Kind)
	r.runIDs[loop.RunID(ctx)] = true
}

func (r *resumeRecorder) ObserveResume(ctx context.Context, history []loop.Event) {
	r.history = len(history)
	r.runIDs[loop.RunID(ctx)] = true
}

func TestObserversSeeTheResumedPart(t *testing.T) {
	_, cfg, paused := confirmSetup(t)
	ctx := context.Background()
	if err := loop.Decide(ctx, cfg.Store, paused.RunID, loop.Confirmation{CallID: "c2", Approved: true, By: "alice"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	rec := &resumeRecorder{runIDs: map[string]bool{}}
	cfg.Observer = loop.Observers(rec)
	runner, _ := loop.NewRunner(cfg)
	res, err := runner.Resume(ctx, paused.RunID)
	mustStatus(t, res, err, loop.FinalAnswer)
	// The history handed over includes the answer recorded by Decide.
	if rec.history != len(paused.Events)+1 {
		t.Fatalf("history of %d events, want %d", rec.history, len(paused.Events)+1)
	}
	if len(rec.kinds) == 0 || rec.kinds[0] != loop.Resumed || rec.kinds[len(rec.kinds)-1] != loop.Stopped {
		t.Fatalf("observed %v", rec.kinds)
	}
	if len(rec.runIDs) != 1 || !rec.runIDs[paused.RunID] {
		t.Fatalf("observers saw run IDs %v, want %s", rec.runIDs, paused.RunID)
	}
}

// refusingStore accepts appends until refuseFrom events are stored, then
// refuses every append as another driver's would be refused. It embeds
// the interface, not the store, so that it has no leases and every append
// goes through Append.
type refusingStore struct {
	store.EventLog
	refuseFrom int
	stored     int
}

func (s *refusingStore) Append(ctx context.Context, runID string, recs []store.EventRecord, sum store.RunSummary) error {
	if s.stored+len(recs) > s.refuseFrom {
		return store.ErrSeqConflict
	}
	if err := s.EventLog.Append(ctx, runID, recs, sum); err != nil {
		return err
	}
	s.stored += len(recs)
	return nil
}

// A durable run's observers see only what the store accepted: a log that
// an observer writes never holds events the store refused or lost.
func TestObserversSeeOnlyCommittedEvents(t *testing.T) {
	r := &refunds{applied: map[string]int{}}
	f := newFixture(t, r.tool(t, true))
	turns := []llmtest.Turn{
		llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`)),
		llmtest.Calls(call("c2", "refund_order", `{"order_id":"A1"}`)),
		llmtest.Text("refunded A1"),
	}
	for refuseFrom := 1; refuseFrom < 12; refuseFrom++ {
		st := &refusingStore{EventLog: store.NewMemory(), refuseFrom: refuseFrom}
		var seen []int
		cfg := loop.Config{Model: stepModel(turns...), Tools: f.reg, Store: st,
			Executor: executor.New(&executor.Options{Ledger: store.NewMemory()}),
			NewRunID: func() string { return "run-1" },
			Observer: loop.ObserverFunc(func(_ context.Context, ev *loop.Event) { seen = append(seen, ev.Seq) }),
		}
		res, err := loop.Run(context.Background(), cfg, user("refund A1"))
		var stored []int
		if recs, _ := st.Events(context.Background(), "run-1"); recs != nil {
			for _, rec := range recs {
				stored = append(stored, rec.Seq)
			}
		}
		if fmt.Sprint(seen) != fmt.Sprint(stored) {
			t.Errorf("store refusing from event %d: observer saw %v, store holds %v", refuseFrom+1, seen, stored)
		}
		if err == nil && res.Status != loop.FinalAnswer {
			t.Errorf("store refusing from event %d: status %s", refuseFrom+1, res.Status)
		}
	}
}

// racingStore lets another answer land just before the first append it is
// asked for, as when two people answer at the same moment.
type racingStore struct {
	*store.Memory
	other func() error
}

func (s *racingStore) Append(ctx context.Context, runID string, recs []store.EventRecord, sum store.RunSummary) error {
	if other := s.other; other != nil {
		s.other = nil
		if err := other(); err != nil {
			return fmt.Errorf("the other answer: %w", err)
		}
	}
	return s.Memory.Append(ctx, runID, recs, sum)
}

// Two people answering one run at the same moment: answers to different
// calls are both recorded; of two answers to one call the first counts
// and the second is told who gave it, as if it had come later.
func TestDecideRaces(t *testing.T) {
	r := &refunds{applied: map[string]int{}}
	f := newFixture(t, r.tool(t, true))
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		otherCall string
		wantErr   string
	}{
		{"other call", "c2", ""},
		{"same call", "c1", "already denied by bob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := store.NewMemory()
			cfg := loop.Config{
				Model: stepModel(llmtest.Calls(call("c1", "refund_order", `{"order_id":"A1"}`), call("c2", "refund_order", `{"order_id":"A2"}`)),
					llmtest.Text("done")),
				Tools: f.reg, Store: mem, Policy: policy.ConfirmWrites(), NewRunID: func() string { return "run-r" },
			}
			res, err := loop.Run(ctx, cfg, user("refund A1 and A2"))
			mustStatus(t, res, err, loop.ConfirmationRequired)
			racing := &racingStore{Memory: mem, other: func() error {
				return loop.Decide(ctx, mem, "run-r", loop.Confirmation{CallID: tc.otherCall, By: "bob"}, time.Now())
			}}
			err = loop.Decide(ctx, racing, "run-r", loop.Confirmation{CallID: "c1", Approved: true, By: "alice"}, time.Now())
			var answered *loop.AnswerError
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("answering c1 while c2 was answered: %v", err)
			case tc.wantErr != "" && (!errors.As(err, &answered) || !errors.Is(err, loop.ErrAlreadyAnswered) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want an *AnswerError (ErrAlreadyAnswered) saying %q", err, tc.wantErr)
			}
			events, err := loop.LoadEvents(ctx, mem, "run-r")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range events {
				if ev.Kind == loop.ConfirmationDecided {
					got = append(got, ev.Confirmation.CallID+":"+ev.Confirmation.By)
				}
			}
			want := "[c2:bob c1:alice]"
			if tc.wantErr != "" {
				want = "[c1:bob]"
			}
			if fmt.Sprint(got) != want {
				t.Errorf("recorded answers %v, want %s", got, want)
			}
		})
	}
}

// failingStore fails every append after the first with err (a store
// without leases, as refusingStore).
type failingStore struct {
	store.EventLog
	err     error
	appends int
}

func (s *failingStore) Append(ctx context.Context, runID string, recs []store.EventRecord, sum store.RunSummary) error {
	if s.appends++; s.appends > 1 {
		return s.err
	}
	return s.EventLog.Append(ctx, runID, recs, sum)
}

// An interrupted run says what to do by cause: wait for a failing store,
// but look for the other driver when another process wrote first.
func TestInterruptedErrorNamesItsCause(t *testing.T) {
	r := &refunds{applied: map[string]int{}}
	f := newFixture(t, r.tool(t, true))
	for _, tc := range []struct {
		err       error
		want, not string
	}{
		{errors.New("disk I/O error"), "resume it once the store is back", "another process"},
		{store.ErrSeqConflict, "another process wrote to this run at the same time", "store is back"},
	} {
		st := &failingStore{EventLog: store.NewMemory(), err: tc.err}
		cfg := loop.Config{Model: stepModel(llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`)), llmtest.Text("done")),
			Tools: f.reg, Store: st}
		_, err := loop.Run(context.Background(), cfg, user("where is A1?"))
		var ie *loop.InterruptedError
		if !errors.As(err, &ie) || !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.not) {
			t.Errorf("store error %v: run error %v, want an *InterruptedError saying %q", tc.err, err, tc.want)
		}
	}
}
