package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/loop"
)

// Each reason an answer is refused, from a real store: exit 2 and one
// line naming the fix, and nothing recorded.
func TestAnswerRefusals(t *testing.T) {
	db := filepath.Join(t.TempDir(), "toolloop.db")
	run := pauseRefund(t, db)
	answered := pauseRefund(t, db)
	if code, _, errOut := call("approve", answered, "call_r1", "--by", "dana", "--note", "customer called", "--db", db); code != exitOK {
		t.Fatalf("approve: %s", errOut)
	}
	ended := pauseRefund(t, db)
	if code, _, _ := call("deny", ended, "call_r1", "--by", "dana", "--db", db); code != exitOK {
		t.Fatal("deny failed")
	}
	if code, _, errOut := call("resume", ended, "--db", db); code != exitOK {
		t.Fatalf("resume: %s", errOut)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no one", []string{"approve", run, "call_r1", "--by", "\t", "--db", db},
			"toolloop approve: --by NAME is missing: say who decides, e.g. toolloop approve " + run + " call_r1 --by alice"},
		{"name on two lines", []string{"approve", run, "call_r1", "--by", "dana\nstopped status=final_answer", "--db", db},
			`toolloop approve: --by: the name "dana\nstopped status=final_answer" holds a control character: give a name on one line`},
		{"long note", []string{"deny", run, "call_r1", "--by", "dana", "--note", strings.Repeat("é", loop.MaxNoteBytes/2+1), "--db", db},
			fmt.Sprintf("toolloop deny: --note is too long (%d bytes, at most %d): say why in fewer words", loop.MaxNoteBytes+2, loop.MaxNoteBytes)},
		{"unknown call", []string{"approve", run, "call_zz", "--by", "dana", "--db", db},
			"toolloop approve: call call_zz is not pending in run " + run + "; pending: call_r1 (refund_order)"},
		{"already answered", []string{"deny", answered, "call_r1", "--by", "erin", "--db", db},
			"toolloop deny: call call_r1 of run " + answered + " was already approved by dana; an answer cannot change: resume the run with: toolloop resume " + answered + " --db " + db},
		{"ended", []string{"approve", ended, "call_q1", "--by", "erin", "--db", db},
			"toolloop approve: run " + ended + " is not waiting for confirmation (status final_answer); list the runs that are with: toolloop runs --status confirmation_required --db " + db},
		{"answered, not resumed", []string{"approve", answered, "call_q1", "--by", "erin", "--db", db},
			"toolloop approve: run " + answered + " is not waiting for confirmation (status answered): every call it paused for is answered; resume it with: toolloop resume " + answered + " --db " + db},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, before, _ := call("trace", "show", "--db", db, tc.args[1])
			code, out, errOut := call(tc.args...)
			if code != exitUsage || out != "" || errOut != tc.want+"\n" {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 2 and:\n%s", code, out, errOut, tc.want)
			}
			if _, after, _ := call("trace", "show", "--db", db, tc.args[1]); after != before {
				t.Errorf("the refused answer changed the run's log")
			}
		})
	}
}

// refusingDriver makes a backend whose Decide fails with err: the command
// words the refusal by its reason (errors.Is), however the backend wraps
// it or words it.
type refusingDriver struct{ err error }

func (d refusingDriver) Flags(cmd string, fs *flag.FlagSet) Opener {
	fs.Bool("refuse", false, "")
	return func(context.Context, *Kit) (Backend, error) { return &refusing{d.err}, nil }
}

type refusing struct{ err error }

func (*refusing) Start(context.Context, *Request) (*loop.Result, error)       { return nil, nil }
func (*refusing) Runs(context.Context, console.Filter) ([]console.Run, error) { return nil, nil }
func (*refusing) Events(context.Context, string) ([]loop.Event, error)        { return nil, nil }
func (r *refusing) Decide(context.Context, string, loop.Confirmation) error {
	return r.err
}
func (*refusing) Resume(context.Context, string) (*loop.Result, error) { return nil, nil }
func (*refusing) Info() Info                                           { return Info{Flags: " --refuse", Where: "here"} }
func (*refusing) Close() error                                         { return nil }

func TestAnswerRefusalsByReason(t *testing.T) {
	wrap := func(ae *loop.AnswerError) error { return fmt.Errorf("the server says: %w", ae) }
	for _, tc := range []struct {
		err  error
		code int
		want string
	}{
		{wrap(&loop.AnswerError{Err: loop.ErrNotPaused, RunID: "r1", CallID: "c1", Status: "canceled"}), exitUsage,
			"toolloop approve: run r1 is not waiting for confirmation (status canceled); list the runs that are with: toolloop runs --status confirmation_required --refuse"},
		{wrap(&loop.AnswerError{Err: loop.ErrUnknownCall, RunID: "r1", CallID: "c1", Waiting: []loop.Pending{{CallID: "c2", Tool: "t"}}}), exitUsage,
			"toolloop approve: call c1 is not pending in run r1; pending: c2 (t)"},
		{wrap(&loop.AnswerError{Err: loop.ErrAlreadyAnswered, RunID: "r1", CallID: "c1", Answer: &loop.Confirmation{By: "bob"}}), exitUsage,
			"toolloop approve: call c1 of run r1 was already denied by bob; an answer cannot change: resume the run with: toolloop resume r1 --refuse"},
		{wrap(&loop.AnswerError{Err: loop.ErrNoteTooLong, RunID: "r1", CallID: "c1", Detail: "9 bytes"}), exitUsage,
			"toolloop approve: --note is too long (9 bytes): say why in fewer words"},
		{fmt.Errorf("connection refused"), exitFail, "toolloop approve: connection refused"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), []string{"approve", "r1", "c1", "--by", "ann", "--refuse"}, &out, &errb,
			func(string) string { return "" }, &Extension{Flag: "refuse", Driver: refusingDriver{tc.err}})
		if code != tc.code || errb.String() != tc.want+"\n" {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.err, code, errb.String(), tc.code, tc.want)
		}
	}
}

// An approved run that was not resumed is listed as answered, with the
// answer and the command that resumes it; --status answered finds it,
// --status confirmation_required and running do not; trace show ends with
// the answers and the command, not with an empty stop line.
func TestAnsweredRunShown(t *testing.T) {
	db := filepath.Join(t.TempDir(), "toolloop.db")
	run := pauseRefund(t, db)
	if code, _, errOut := call("approve", run, "call_r1", "--by", "dana", "--note", "customer called", "--db", db); code != exitOK {
		t.Fatalf("approve: %s", errOut)
	}
	resume := "toolloop resume " + run + " --db " + db
	code, out, errOut := call("runs", "--db", db)
	got := lines(out)
	if code != exitOK || errOut != "" || len(got) != 3 {
		t.Fatalf("runs: exit %d\n%s%s", code, out, errOut)
	}
	if f := strings.Fields(got[1]); f[0] != run || f[1] != "answered" || !strings.HasSuffix(got[1], "answered: call_r1 approved by dana") {
		t.Errorf("the run's row: %q, want status answered and the answer", got[1])
	}
	if want := "run " + run + ` is answered (call_r1 approved by dana note="customer called"); resume it with: ` + resume; got[2] != want {
		t.Errorf("after the table: %q\nwant %q", got[2], want)
	}
	for status, listed := range map[string]bool{"answered": true, "confirmation_required": false, "running": false} {
		code, out, _ := call("runs", "--status", status, "--db", db)
		if code != exitOK || strings.Contains(out, run) != listed {
			t.Errorf("runs --status %s: exit %d, lists the run: %v, want %v\n%s", status, code, !listed, listed, out)
		}
	}
	code, out, errOut = call("trace", "show", "--db", db, run)
	got = lines(out)
	want := []string{
		`answered call_id=call_r1 tool=refund_order approved by dana note="customer called"`,
		"answered: every call the run paused for has its answer; it waits to be resumed (status=answered steps=2 tool_calls=2 tokens=0)",
		"resume it with: " + resume,
	}
	if code != exitOK || len(got) < 3 || strings.Join(got[len(got)-3:], "\n") != strings.Join(want, "\n") || strings.Contains(out, "stopped status= ") {
		t.Errorf("trace show: exit %d, ends with:\n%s\nwant:\n%s\n%s", code, strings.Join(got[max(len(got)-3, 0):], "\n"), strings.Join(want, "\n"), errOut)
	}
	if code, out, _ = call("trace", "diagnose", "--db", db, run); !strings.Contains(out, "(status=answered, waiting to be resumed)") {
		t.Errorf("trace diagnose: exit %d %s", code, out)
	}
	// The printed command resumes it.
	if code, out, errOut = fill(t, resume, "", ""); code != exitOK || !strings.Contains(out, "status=final_answer") {
		t.Fatalf("%s: exit %d %s%s", resume, code, out, errOut)
	}
	if code, out, _ = call("runs", "--status", "answered", "--db", db); strings.Contains(out, run) {
		t.Errorf("resumed, the run is still listed as answered:\n%s", out)
	}
}
