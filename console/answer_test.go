package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
)

// Each reason an answer is refused gets its HTTP status, from a real
// store, and nothing is recorded.
func TestAnswerRefusalStatuses(t *testing.T) {
	e := newEnv(t, func(o *console.Options) {
		o.Backend.(*console.LogBackend).ResumeFunc = nil // answered runs stay answered
	})
	paused, answered, done := e.scenario("confirmation_required"), e.scenario("confirmation_required"), e.scenario("normal")
	if code, _, raw := e.decision(bobToken, answered, "call_r1", "deny", `{"note": "no"}`); code != http.StatusOK {
		t.Fatalf("deny: %d %s", code, raw)
	}
	long, _ := json.Marshal(map[string]string{"note": strings.Repeat("x", loop.MaxNoteBytes+1)})
	for _, tc := range []struct {
		name, run, call, body string
		code                  int
		says                  string
	}{
		{"long note", paused, "call_r1", string(long), http.StatusBadRequest, "is too long: 16385 bytes, at most 16384"},
		{"unknown run", "run-nope", "call_r1", `{}`, http.StatusNotFound, "no run run-nope"},
		{"unknown call", paused, "call_zz", `{}`, http.StatusNotFound, "call call_zz is not pending in run " + paused + "; pending: call_r1 (refund_order)"},
		{"answered call", answered, "call_r1", `{}`, http.StatusConflict, "call call_r1 of run " + answered + " was already denied by bob; an answer is final"},
		{"answered run", answered, "call_q1", `{}`, http.StatusConflict, "run " + answered + " is not waiting for confirmation (status answered)"},
		{"ended run", done, "call_1", `{}`, http.StatusConflict, "run " + done + " is not waiting for confirmation (status final_answer)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before int
			if tc.run != "run-nope" {
				before = len(e.events(tc.run))
			}
			code, _, raw := e.decision(aliceToken, tc.run, tc.call, "approve", tc.body)
			if code != tc.code || !strings.Contains(raw, tc.says) {
				t.Errorf("%d %s, want %d saying %q", code, raw, tc.code, tc.says)
			}
			if tc.run != "run-nope" && len(e.events(tc.run)) != before {
				t.Errorf("the refused answer was recorded")
			}
		})
	}
}

// refusingBackend refuses every answer with err.
type refusingBackend struct {
	console.Backend
	err error
}

func (b refusingBackend) Decide(context.Context, string, loop.Confirmation) error { return b.err }

// The console tells refusals apart by their reason (errors.Is), however a
// backend wraps or words them; other errors are its own failures (500).
func TestAnswerRefusalsByReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{loop.ErrNoAnswerer, http.StatusBadRequest},
		{loop.ErrNoteTooLong, http.StatusBadRequest},
		{loop.ErrUnknownCall, http.StatusNotFound},
		{store.ErrUnknownRun, http.StatusNotFound},
		{loop.ErrNotPaused, http.StatusConflict},
		{loop.ErrAlreadyAnswered, http.StatusConflict},
		{fmt.Errorf("disk I/O error"), http.StatusInternalServerError},
	} {
		err := fmt.Errorf("the backend says: %w", &loop.AnswerError{Err: tc.err, RunID: "r", CallID: "c", Answer: &loop.Confirmation{By: "x"}})
		e := newEnv(t, func(o *console.Options) { o.Backend = refusingBackend{o.Backend, err} })
		run := e.scenario("confirmation_required")
		if code, _, raw := e.decision(aliceToken, run, "call_r1", "approve", `{}`); code != tc.code {
			t.Errorf("%v: %d %s, want %d", tc.err, code, raw, tc.code)
		}
	}
}

// An approved run the console could not resume is listed as answered with
// its answer (the list and its status filter, the runs page), and its page
// says so, with the command that resumes it.
func TestAnsweredRunShown(t *testing.T) {
	e := newEnv(t, func(o *console.Options) {
		o.Backend.(*console.LogBackend).ResumeFunc = nil
		o.ResumeCommand = func(id string) string { return "toolloop resume " + id + " --db x.db" }
	})
	run := e.scenario("confirmation_required")
	if code, _, raw := e.decision(aliceToken, run, "call_r1", "approve", `{"note": "customer called"}`); code != http.StatusOK {
		t.Fatalf("approve: %d %s", code, raw)
	}
	for status, listed := range map[string]bool{"answered": true, "confirmation_required": false, "running": false} {
		var list struct {
			Runs []console.Run `json:"runs"`
		}
		e.getJSON("/api/runs?status="+status, &list)
		if got := len(list.Runs) == 1 && list.Runs[0].RunID == run; got != listed {
			t.Errorf("status=%s lists %+v; want the run listed: %v", status, list.Runs, listed)
		}
		if status != "answered" || len(list.Runs) != 1 {
			continue
		}
		p := list.Runs[0].Pending
		if list.Runs[0].Status != loop.AnsweredStatus || len(p) != 1 || p[0].Confirmation == nil || p[0].Confirmation.By != "alice" || p[0].Confirmation.Note != "customer called" {
			t.Errorf("the answered run: %+v, want its answer by alice with the note", list.Runs[0])
		}
	}
	var doc struct {
		Summary console.Summary `json:"summary"`
	}
	e.getJSON("/api/runs/"+run, &doc)
	if doc.Summary.Status != loop.AnsweredStatus || doc.Summary.Stopped || !strings.Contains(doc.Summary.StopLine, "waits to be resumed") {
		t.Errorf("summary %+v, want status answered, waiting to be resumed", doc.Summary)
	}
	_, page := e.do(req{path: "/runs/" + run, token: aliceToken})
	for _, want := range []string{`data-status="answered"`, "it waits to be resumed", "resumed with: toolloop resume " + run + " --db x.db", "approved by alice: customer called"} {
		if !strings.Contains(page, want) {
			t.Errorf("the run's page lacks %q", want)
		}
	}
	_, page = e.do(req{path: "/runs?status=answered", token: aliceToken})
	if !strings.Contains(page, "answered, waiting to be resumed: <code>call_r1</code> approved by alice") {
		t.Errorf("the runs page does not show the answer:\n%s", page)
	}
}
