package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/store/sqlite"
)

// confirmLine matches confirm_refund's stop line.
var confirmLine = regexp.MustCompile(`^mode=confirm_refund status=(\S+) steps=(\d+) tool_calls=(\d+) tokens=0 refunds=(\d+) run=(run-confirm_refund-[0-9a-f]{8})(?: call=(\S+))? detail=".*"$`)

// pauseRefund runs confirm_refund into the store at db and returns the
// run's ID, checking the stop line and the next steps it prints.
func pauseRefund(t *testing.T, db string, extra ...string) string {
	t.Helper()
	code, out, errOut := call(append([]string{"demo", "--mode", "confirm_refund", "--db", db}, extra...)...)
	if code != exitOK || errOut != "" {
		t.Fatalf("demo --mode confirm_refund: exit %d, stderr:\n%s", code, errOut)
	}
	got := lines(out)
	m := confirmLine.FindStringSubmatch(got[len(got)-7])
	if m == nil || m[1] != "confirmation_required" || m[4] != "0" || m[6] != "call_r1" {
		t.Fatalf("stop line %q, want confirmation_required with refunds=0, run= and call=call_r1:\n%s", got[len(got)-7], out)
	}
	run := m[5]
	want := []string{
		"# to approve and go on:",
		"toolloop approve " + run + " call_r1 --by NAME --db " + db,
		"toolloop resume " + run + " --db " + db,
		"# or to deny (the model is told, with the note) and go on:",
		"toolloop deny " + run + " call_r1 --by NAME --note TEXT --db " + db,
		"toolloop resume " + run + " --db " + db,
	}
	if strings.Join(got[len(got)-6:], "\n") != strings.Join(want, "\n") {
		t.Errorf("next steps:\n%s\nwant:\n%s", strings.Join(got[len(got)-6:], "\n"), strings.Join(want, "\n"))
	}
	return run
}

// fill runs a printed command with NAME and TEXT filled in.
func fill(t *testing.T, line, name, text string) (int, string, string) {
	t.Helper()
	var args []string
	for _, f := range strings.Fields(line)[1:] {
		switch f {
		case "NAME":
			f = name
		case "TEXT":
			f = text
		}
		args = append(args, f)
	}
	return call(args...)
}

func TestConfirmRefundApprove(t *testing.T) {
	db := filepath.Join(t.TempDir(), "toolloop.db")
	run := pauseRefund(t, db)
	code, out, errOut := fill(t, "toolloop approve "+run+" call_r1 --by NAME --db "+db, "dana", "")
	if code != exitOK || errOut != "" || !strings.Contains(out, "approved call call_r1 of run "+run+" (by dana)") ||
		!strings.Contains(out, "toolloop resume "+run+" --db "+db) {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = call("resume", run, "--db", db)
	if code != exitOK || errOut != "" {
		t.Fatalf("resume: exit %d, stderr:\n%s", code, errOut)
	}
	m := confirmLine.FindStringSubmatch(strings.TrimSuffix(out, "\n"))
	if m == nil || m[1] != "final_answer" || m[2] != "3" || m[3] != "2" || m[4] != "1" || m[5] != run || m[6] != "" {
		t.Fatalf("resume printed %q; want final_answer after 3 steps and 2 tool calls, refunds=1", out)
	}
	// Resuming a run that has ended prints its stop line unchanged.
	code, again, errOut := call("resume", "--db", db, run)
	if code != exitOK || again != out || errOut != "" {
		t.Errorf("second resume: exit %d\n%s\nwant\n%s%s", code, again, out, errOut)
	}
}

func TestConfirmRefundDeny(t *testing.T) {
	db := filepath.Join(t.TempDir(), "toolloop.db")
	run := pauseRefund(t, db)
	code, out, errOut := fill(t, "toolloop deny "+run+" call_r1 --by NAME --note TEXT --db "+db, "dana", "photos show it was dropped")
	if code != exitOK || !strings.HasPrefix(out, "denied call call_r1 of run "+run+" (by dana)") {
		t.Fatalf("deny: exit %d\n%s%s", code, out, errOut)
	}
	logs := t.TempDir()
	code, out, errOut = call("resume", run, "--db", db, "--log", logs)
	m := confirmLine.FindStringSubmatch(strings.TrimSuffix(out, "\n"))
	if code != exitOK || m == nil || m[1] != "final_answer" || m[4] != "0" {
		t.Fatalf("resume after a denial: exit %d, %q %s; want final_answer with refunds=0", code, out, errOut)
	}
	// The model read the denial and its note: the log shows the answer.
	code, out, errOut = call("trace", "show", run, "--log", logs)
	for _, want := range []string{
		"result call_id=call_r1 tool=refund_order status=error kind=permission_denied",
		"I have not refunded the order",
		"stopped status=final_answer",
	} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("trace show after the denial lacks %q (exit %d):\n%s%s", want, code, out, errOut)
		}
	}
}

// TestDecideErrors checks every way an answer cannot be recorded: exit 2
// and one line that names the fix.
func TestDecideErrors(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "toolloop.db")
	run := pauseRefund(t, db)
	ended := pauseRefund(t, db)
	if code, _, _ := call("approve", ended, "call_r1", "--by", "dana", "--db", db); code != exitOK {
		t.Fatal("approve failed")
	}
	if code, _, _ := call("resume", ended, "--db", db); code != exitOK {
		t.Fatal("resume failed")
	}
	emptyFile := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(emptyFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"approve", run, "call_r1", "--db", db}, "--by NAME is missing"},
		{[]string{"deny", run, "call_r1", "--by", " ", "--db", db}, "--by NAME is missing"},
		{[]string{"approve", run, "--by", "dana", "--db", db}, "want RUN_ID CALL_ID, got 1"},
		{[]string{"approve", "run-nope", "call_r1", "--by", "dana", "--db", db}, "no run run-nope in " + db + "; list the runs with: toolloop runs --db " + db},
		{[]string{"approve", run, "call_zz", "--by", "dana", "--db", db}, "call call_zz is not pending in run " + run + "; pending: call_r1 (refund_order)"},
		{[]string{"deny", ended, "call_r1", "--by", "erin", "--db", db}, "was already approved by dana"},
		{[]string{"approve", ended, "call_q1", "--by", "erin", "--db", db}, "is not waiting for confirmation (status final_answer)"},
		{[]string{"approve", run, "call_r1", "--by", "dana", "--db", filepath.Join(dir, "other.db")}, "no store at " + filepath.Join(dir, "other.db")},
		{[]string{"approve", run, "call_r1", "--by", "dana"}, "no data directory"},
		{[]string{"approve", run, "call_r1", "--by", "dana", "--bogus", "--db", db}, "flag provided but not defined: -bogus"},
		{[]string{"resume", "run-nope", "--db", db}, "no run run-nope"},
		{[]string{"resume", run, "--db", db, "--provider", "openai"}, "is a sandbox run (demo:confirm_refund)"},
		{[]string{"resume", "--db", db}, "want one RUN_ID"},
		{[]string{"runs", "--status", "done", "--db", db}, "unknown status \"done\""},
		{[]string{"runs", "--db", filepath.Join(dir, "other.db")}, "no store at"},
		// A file that is there but is no store is left alone.
		{[]string{"runs", "--db", emptyFile}, "the file is empty, not a store"},
		{[]string{"trace", "show", "--db", emptyFile, run}, "the file is empty, not a store"},
		{[]string{"approve", run, "call_r1", "--by", "dana", "--db", emptyFile}, "the file is empty, not a store"},
		{[]string{"resume", run, "--db", emptyFile}, "the file is empty, not a store"},
	} {
		code, out, errOut := call(tc.args...)
		if code != exitUsage || out != "" || len(lines(errOut)) != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
	// An answer once given stands: deny after approve, approve twice.
	if code, _, _ := call("approve", run, "call_r1", "--by", "dana", "--db", db); code != exitOK {
		t.Fatal("approve failed")
	}
	for _, verb := range []string{"approve", "deny"} {
		code, _, errOut := call(verb, run, "call_r1", "--by", "erin", "--db", db)
		if code != exitUsage || !strings.Contains(errOut, "already approved by dana") || !strings.Contains(errOut, "toolloop resume "+run+" --db "+db) {
			t.Errorf("%s after approve: exit %d, %s", verb, code, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "other.db")); err == nil {
		t.Error("a command that needs a store created one")
	}
	if fi, err := os.Stat(emptyFile); err != nil || fi.Size() != 0 {
		t.Errorf("a command changed an empty file that is not a store: %v, %d bytes", err, fi.Size())
	}
}

// runsRow matches a row of toolloop runs.
var runsRow = regexp.MustCompile(`^(\S+) +(\S+) +(\d+) +(\d+) +(\d+) +(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) +(\S+) +(.+)$`)

func TestRuns(t *testing.T) {
	db := filepath.Join(t.TempDir(), "toolloop.db")
	paused := pauseRefund(t, db)
	done := pauseRefund(t, db)
	call("approve", done, "call_r1", "--by", "dana", "--db", db)
	call("resume", done, "--db", db)

	code, out, errOut := call("runs", "--db", db)
	if code != exitOK || errOut != "" {
		t.Fatalf("runs: exit %d %s", code, errOut)
	}
	got := lines(out)
	if len(got) != 3 || !regexp.MustCompile(`^RUN_ID +STATUS +STEPS +TOOL_CALLS +TOKENS +STARTED +SESSION +PENDING$`).MatchString(got[0]) {
		t.Fatalf("runs:\n%s", out)
	}
	rows := map[string][]string{}
	for _, l := range got[1:] {
		m := runsRow.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("row %q does not parse", l)
			continue
		}
		rows[m[1]] = m[1:]
		for _, col := range []string{"STATUS", "STEPS", "TOOL_CALLS", "TOKENS", "STARTED", "SESSION", "PENDING"} {
			if at := strings.Index(got[0], col); l[at-1] != ' ' || l[at] == ' ' {
				t.Errorf("row %q: column %s is not aligned with the header", l, col)
			}
		}
	}
	if r := rows[paused]; r == nil || r[1] != "confirmation_required" || r[2] != "2" || r[3] != "2" || r[6] != "demo:confirm_refund" || r[7] != "call_r1 (refund_order)" {
		t.Errorf("paused run's row: %q", r)
	}
	if r := rows[done]; r == nil || r[1] != "final_answer" || r[2] != "3" || r[7] != "-" {
		t.Errorf("finished run's row: %q", r)
	}
	for status, want := range map[string]string{"confirmation_required": paused, "final_answer": done} {
		code, out, _ := call("runs", "--status", status, "--db", db)
		if got := lines(out); code != exitOK || len(got) != 2 || !strings.HasPrefix(got[1], want+" ") {
			t.Errorf("runs --status %s:\n%s", status, out)
		}
	}
	code, out, _ = call("runs", "--status", "canceled", "--db", db)
	if code != exitOK || out != "no runs with status canceled in "+db+"\n" {
		t.Errorf("runs --status canceled: exit %d %q", code, out)
	}
}

// TestDefaultStore checks the store's default place, from the
// environment run is given: $XDG_DATA_HOME/toolloop/toolloop.db, else
// under $HOME; without either, a one-line error asks for --db.
func TestDefaultStore(t *testing.T) {
	for _, env := range []map[string]string{
		{"XDG_DATA_HOME": t.TempDir()},
		{"HOME": t.TempDir(), "XDG_DATA_HOME": "relative/is/ignored"},
	} {
		code, out, errOut := callEnv(env, "demo", "--mode", "confirm_refund")
		if code != exitOK {
			t.Fatalf("%v: exit %d %s", env, code, errOut)
		}
		want := filepath.Join(env["XDG_DATA_HOME"], "toolloop", "toolloop.db")
		if env["HOME"] != "" {
			want = filepath.Join(env["HOME"], ".local", "share", "toolloop", "toolloop.db")
		}
		if !strings.Contains(out, " --db "+want+"\n") {
			t.Errorf("%v: next steps do not name %s:\n%s", env, want, out)
		}
		if _, err := os.Stat(want); err != nil {
			t.Errorf("%v: %v", env, err)
		}
		code, out, _ = callEnv(env, "runs", "--status", "confirmation_required")
		if code != exitOK || len(lines(out)) != 2 {
			t.Errorf("%v: runs:\n%s", env, out)
		}
	}
	code, out, errOut := call("demo", "--mode", "confirm_refund")
	if code != exitUsage || out != "" || len(lines(errOut)) != 1 || !strings.Contains(errOut, "pass --db PATH") {
		t.Errorf("no data directory: exit %d, %q %q", code, out, errOut)
	}
}

// TestDemoWithStore checks that --db records every scenario without
// changing a stop line, and that --log writes logs trace show can read.
func TestDemoWithStore(t *testing.T) {
	_, plain, _ := call("demo")
	dir := t.TempDir()
	db, logs := filepath.Join(dir, "t.db"), filepath.Join(dir, "logs")
	code, out, errOut := call("demo", "--db", db, "--log", logs)
	// Runs recorded in a store get IDs of their own, which two details
	// (default idempotency keys) show.
	out = regexp.MustCompile(`(run-refund_unknown|run-compensation_failed)-[0-9a-f]{8}`).ReplaceAllString(out, "$1")
	if code != exitOK || out != plain || errOut != "" {
		t.Fatalf("demo --db --log: exit %d, stderr %q; output differs from the plain demo:\n%s", code, errOut, out)
	}
	code, out, _ = call("runs", "--db", db)
	if got := lines(out); code != exitOK || len(got) != 1+len(lines(plain)) {
		t.Errorf("runs lists %d lines for %d scenarios:\n%s", len(got)-1, len(lines(plain)), out)
	}
	code, out, _ = call("runs", "--status", "max_steps_exceeded", "--db", db)
	if got := lines(out); code != exitOK || len(got) != 2 || !strings.HasPrefix(got[1], "run-loop_forever-") {
		t.Errorf("runs --status max_steps_exceeded:\n%s", out)
	}
	entries, err := os.ReadDir(logs)
	if err != nil || len(entries) != len(lines(plain)) {
		t.Fatalf("%d logs for %d scenarios (%v)", len(entries), len(lines(plain)), err)
	}
	// Resuming an ended sandbox run prints its stop line.
	run := strings.Fields(lines(out)[1])[0]
	code, out, errOut = call("resume", run, "--db", db)
	if code != exitFail || !strings.HasPrefix(out, "mode=loop_forever status=max_steps_exceeded steps=5 tool_calls=") || !strings.Contains(out, " run="+run+" ") {
		t.Errorf("resume of loop_forever: exit %d %q %s", code, out, errOut)
	}
}

// TestDemoLog runs one scenario with --log and reads its log back by run
// ID: the chain of calls and results, and the stop line.
func TestDemoLog(t *testing.T) {
	logs := t.TempDir()
	code, out, errOut := call("demo", "--mode", "normal", "--log", logs)
	if code != exitOK || out != "mode=normal status=final_answer\n" {
		t.Fatalf("exit %d %q %s", code, out, errOut)
	}
	code, out, errOut = call("trace", "show", "run-normal", "--log", logs)
	if code != exitOK || errOut != "" {
		t.Fatalf("trace show: exit %d %s", code, errOut)
	}
	chain := []string{
		`call   call_id=call_q1 tool=query_order`,
		`result call_id=call_q1 tool=query_order status=ok`,
		`call   call_id=call_t1 tool=track_shipment`,
		`result call_id=call_t1 tool=track_shipment status=ok`,
		`stopped status=final_answer steps=3 tool_calls=2`,
	}
	at := 0
	for _, want := range chain {
		i := strings.Index(out[at:], want)
		if i < 0 {
			t.Fatalf("trace show lacks %q after offset %d:\n%s", want, at, out)
		}
		at += i
	}
	// The interactive scenario's log follows the run across processes:
	// after approve and resume it holds the whole run.
	db := filepath.Join(t.TempDir(), "t.db")
	run := pauseRefund(t, db, "--log", logs)
	call("approve", run, "call_r1", "--by", "dana", "--db", db)
	if code, _, errOut := call("resume", run, "--db", db, "--log", logs); code != exitOK {
		t.Fatalf("resume: %s", errOut)
	}
	code, out, _ = call("trace", "show", run, "--log", logs)
	for _, want := range []string{"call_id=call_r1 approved by dana", "result call_id=call_r1 tool=refund_order status=ok", "stopped status=final_answer steps=3"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("trace show of the resumed run lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := call("trace", "diagnose", run, "--log", logs); code != exitOK {
		t.Errorf("trace diagnose of the resumed run: exit %d\n%s", code, out)
	}
}

func TestDemoExporterFlags(t *testing.T) {
	code, out, errOut := call("demo", "--mode", "normal", "--exporter", "stdout")
	if code != exitOK || !strings.HasPrefix(out, "{") || !strings.Contains(out, `"Name":"execute_tool query_order"`) ||
		!strings.HasSuffix(out, "mode=normal status=final_answer\n") {
		t.Errorf("--exporter stdout: exit %d, stderr %q\n%s", code, errOut, out)
	}
	code, out, errOut = call("demo", "--exporter", "jaeger")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "unknown exporter") {
		t.Errorf("--exporter jaeger: exit %d %q %q", code, out, errOut)
	}
	code, _, errOut = call("demo", "--exporter", "otlp", "--otlp-endpoint", "ftp://x")
	if code != exitUsage || !strings.Contains(errOut, "--otlp-endpoint") {
		t.Errorf("--otlp-endpoint ftp://x: exit %d %q", code, errOut)
	}
}

func TestHelpCommands(t *testing.T) {
	for cmd, want := range map[string]string{
		"runs": "--status S", "approve": "--by NAME", "deny": "--note TEXT", "resume": "run:PROVIDER:MODEL",
		"run": "--provider P", "demo": "confirm_refund", "trace": "toolloop trace show",
	} {
		code, out, _ := call("help", cmd)
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("help %s: exit %d, lacks %q", cmd, code, want)
		}
		code, out, _ = call(cmd, "--help")
		if cmd != "trace" && (code != exitOK || !strings.Contains(out, want)) {
			t.Errorf("%s --help: exit %d, lacks %q", cmd, code, want)
		}
	}
	code, out, _ := call("help")
	for _, cmd := range []string{"demo", "run", "runs", "approve", "deny", "resume", "trace"} {
		if code != exitOK || !strings.Contains(out, "toolloop "+cmd+" ") {
			t.Errorf("help does not list %s", cmd)
		}
	}
}

// A resume of a run that another process is driving (it holds the run's
// lease) is refused with one line naming that process and when its lease
// runs out, exit status 3, and nothing written; once the lease is given
// back, the same command drives the run.
func TestResumeOfARunDrivenElsewhere(t *testing.T) {
	db := filepath.Join(t.TempDir(), "toolloop.db")
	run := pauseRefund(t, db)
	if code, out, errOut := call("approve", run, "call_r1", "--by", "dana", "--db", db); code != exitOK {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
	}
	st, err := sqlite.Open(db, &sqlite.Options{Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	lease, err := st.AcquireLease(ctx, run, "desk-1:48213:9f2c41d0", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := st.Events(ctx, run)

	code, out, errOut := call("resume", run, "--db", db)
	until := lease.Expires.UTC().Format(time.RFC3339)
	want := "toolloop resume: run " + run + " is being driven by desk-1:48213:9f2c41d0 (its lease is held until " + until
	if code != exitBusy || out != "" || len(lines(errOut)) != 1 || !strings.HasPrefix(errOut, want) ||
		!strings.Contains(errOut, "try again once it has stopped") {
		t.Fatalf("resume of a run driven elsewhere: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s\nwant one line beginning %q", code, exitBusy, out, errOut, want)
	}
	if after, _ := st.Events(ctx, run); len(after) != len(before) {
		t.Fatalf("the refused resume wrote %d events", len(after)-len(before))
	}

	if err := st.ReleaseLease(ctx, run, lease.Owner); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = call("resume", run, "--db", db)
	m := confirmLine.FindStringSubmatch(strings.TrimSuffix(out, "\n"))
	if code != exitOK || errOut != "" || m == nil || m[1] != "final_answer" || m[4] != "1" {
		t.Fatalf("resume once the lease is free: exit %d\n%s%s", code, out, errOut)
	}
}
