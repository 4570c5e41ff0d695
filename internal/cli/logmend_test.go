package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run log left shorter than the store's log (the process was killed
// after its last commits and before their lines, or in the middle of one)
// is mended from the store by trace and by resume of the ended run: the
// lines that are there stay, the cut one is made whole, the rest is added,
// and trace shows how the run stopped. (Trace used to say the run never
// stopped, and resume of the ended run left the file as it was.)
func TestLogThatLagsBehindTheStoreIsMended(t *testing.T) {
	t.Run("a sandbox scenario's run", func(t *testing.T) {
		dir := t.TempDir()
		db, logs := filepath.Join(dir, "toolloop.db"), filepath.Join(dir, "logs")
		run := pauseRefund(t, db, "--log", logs)
		if code, out, errOut := call("approve", run, "call_r1", "--by", "dana", "--db", db); code != exitOK {
			t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
		}
		if code, out, errOut := call("resume", run, "--db", db, "--log", logs); code != exitOK {
			t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
		}
		checkLogMended(t, run, db, logs)
	})
	t.Run("a toolloop run run", func(t *testing.T) {
		dir := t.TempDir()
		db, logs := filepath.Join(dir, "toolloop.db"), filepath.Join(dir, "logs")
		if code, out, errOut := call("run", "--provider", "sandbox", "--tools", "orders", "--db", db, "--log", logs, "--id", "run-lag", "refund A103 please"); code != exitOK {
			t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
		}
		checkLogMended(t, "run-lag", db, logs)
	})
}

// checkLogMended cuts the log of run, which has ended, short, and checks
// that trace and resume mend it.
func checkLogMended(t *testing.T, run, db, logs string) {
	t.Helper()
	path := filepath.Join(logs, run+".jsonl")
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ls := bytes.SplitAfter(full, []byte("\n"))
	if len(ls) < 6 {
		t.Fatalf("the run's log has %d lines", len(ls))
	}
	// Three lines short, and half of the next one written.
	keep := len(ls) - 5
	short := append(bytes.Join(ls[:keep], nil), ls[keep][:len(ls[keep])/2]...)

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"trace show", []string{"trace", "show", run, "--log", logs, "--db", db}},
		{"trace diagnose", []string{"trace", "diagnose", run, "--log", logs, "--db", db}},
		{"resume", []string{"resume", run, "--db", db, "--log", logs}},
	} {
		if err := os.WriteFile(path, short, 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := call(tc.args...)
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s%s", tc.name, code, out, errOut)
		}
		if !strings.Contains(errOut, "lacked the last") {
			t.Errorf("%s: stderr does not say the log was mended:\n%s", tc.name, errOut)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, full) {
			t.Fatalf("the log after %s:\n%s\nwant the whole run's:\n%s", tc.name, got, full)
		}
		if tc.name == "trace show" && !strings.Contains(out, "stopped status=final_answer") {
			t.Errorf("trace show does not show the run's end:\n%s", out)
		}
		if tc.name == "trace diagnose" && !strings.Contains(out, "status=final_answer") {
			t.Errorf("trace diagnose does not say how the run ended:\n%s", out)
		}
	}

	// A file that is not a prefix of the store's log is left alone.
	other := bytes.Replace(short, []byte(`"kind":"started"`), []byte(`"kind":"resumed"`), 1)
	if bytes.Equal(other, short) {
		t.Fatal("the test did not change the log")
	}
	if err := os.WriteFile(path, other, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, errOut := call("trace", "show", run, "--log", logs, "--db", db)
	if got, _ := os.ReadFile(path); !bytes.Equal(got, other) || !strings.Contains(errOut, "left as it is") {
		t.Errorf("a log that is not the store's was changed, or the note is missing:\n%s", errOut)
	}
}

// A paused run's log goes on after its stopped event: the answers that
// approve and deny record go to the store only. trace of the log file
// mends it from the store and shows the run answered, with the command
// that resumes it. (The file was taken as whole because its last event
// was a stop, and trace said the run stopped for confirmation.)
func TestAnsweredRunLogIsMended(t *testing.T) {
	dir := t.TempDir()
	db, logs := filepath.Join(dir, "toolloop.db"), filepath.Join(dir, "logs")
	run := pauseRefund(t, db, "--log", logs)
	if code, out, errOut := call("approve", run, "call_r1", "--by", "dana", "--db", db); code != exitOK {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := call("trace", "show", run, "--log", logs, "--db", db)
	if code != exitOK {
		t.Fatalf("trace show: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "lacked the last 1 events") {
		t.Errorf("trace show does not say it mended the log:\n%s", errOut)
	}
	if !strings.Contains(out, "toolloop resume "+run) || strings.Contains(out, "stopped status=confirmation_required") {
		t.Errorf("trace show of the answered run's log:\n%s\nwant it answered, with the resume command", out)
	}
	b, err := os.ReadFile(filepath.Join(logs, run+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"kind":"confirmation_decided"`)) {
		t.Errorf("the log file still lacks the answer:\n%s", b)
	}
}
