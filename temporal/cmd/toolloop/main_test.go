package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/internal/cli"
	"github.com/toolloop/toolloop/store/sqlite"
)

// childEnv makes the test binary run as the toolloop program (see
// TestMain): the worker processes of TestWorkerKill.
const childEnv = "TOOLLOOP_TEMPORAL_CLI_CHILD"

// TestMain runs the program when the test binary is started as a child;
// otherwise the tests, checked for leaked goroutines unless they talk to a
// dev server (gRPC connections wind down in the background after a client
// closes).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		return
	}
	if os.Getenv("TOOLLOOP_TEMPORAL_ADDR") != "" {
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}

// devAddr is the dev server TOOLLOOP_TEMPORAL_ADDR names; without one the
// test is skipped.
func devAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("TOOLLOOP_TEMPORAL_ADDR")
	if addr == "" {
		t.Skip("TOOLLOOP_TEMPORAL_ADDR is not set: no Temporal server to test against (see temporal/README.md, Tests)")
	}
	return addr
}

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// call runs the Temporal build of the program with args in an empty
// environment.
func call(ctx context.Context, args ...string) (int, string, string) {
	var out, errb syncBuffer
	code := cli.Main(ctx, args, &out, &errb, func(string) string { return "" }, extension())
	return code, out.String(), errb.String()
}

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// TestTemporalUsage checks what needs no server: the help, and command
// lines that are wrong before any server is dialed.
func TestTemporalUsage(t *testing.T) {
	ctx := context.Background()
	code, out, _ := call(ctx, "help")
	if code != cli.ExitOK || !strings.Contains(out, "toolloop worker --temporal HOST:PORT") || !strings.Contains(out, "toolloop demo") {
		t.Fatalf("help: %d\n%s", code, out)
	}
	if code, out, _ := call(ctx, "worker", "--help"); code != cli.ExitOK || !strings.Contains(out, "--task-queue Q") {
		t.Fatalf("worker --help: %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"worker", "--provider", "sandbox"}, "--temporal HOST:PORT is missing"},
		{[]string{"worker", "--temporal", "nonsense", "--provider", "sandbox"}, `want HOST:PORT`},
		{[]string{"worker", "--temporal", "127.0.0.1:7233"}, "--provider is missing"},
		{[]string{"worker", "--temporal", "127.0.0.1:7233", "--provider", "sandbox", "--db", "x.db", "--store", "postgres://u@h/d"},
			"--db and --store both name a store"},
		{[]string{"worker", "--temporal", "127.0.0.1:7233", "--provider", "sandbox", "--store", "host=h password=secret"},
			"--store takes a PostgreSQL URL"},
		{[]string{"worker", "--temporal", "127.0.0.1:7233", "--provider", "sandbox", "--model-timeout", "1m"},
			"--model-timeout does not apply to a worker"},
		{[]string{"run", "--temporal", "127.0.0.1:7233", "hello"}, "--model is missing"},
		{[]string{"run", "--temporal", "127.0.0.1:7233", "--model", "m", "--model-timeout", "-1s", "hello"}, "--model-timeout must not be negative"},
		{[]string{"run", "--temporal", "127.0.0.1:7233", "--model", "m", "--no-stream", "hello"}, "--no-stream does not apply to a run on Temporal"},
		{[]string{"run", "--temporal", "127.0.0.1:7233", "--model", "m"}, "want one prompt"},
		{[]string{"approve", "--temporal", "127.0.0.1:7233", "run-1", "call-1"}, "--by NAME is missing"},
		{[]string{"resume", "--temporal", "127.0.0.1:7233", "run-1"}, "needs no resume"},
		{[]string{"runs", "--temporal", "127.0.0.1:7233", "--status", "bogus"}, "unknown status"},
		{[]string{"trace", "show", "--temporal", "127.0.0.1:7233"}, "want one RUN_ID"},
		{[]string{"runs", "export", "--temporal", "127.0.0.1:7233", "--db", "x.db", "--store", "postgres://u@h/d", "run-1"}, "--db and --store both name a store"},
		{[]string{"replay", "--temporal", "nonsense", "run-1"}, "want HOST:PORT"},
		{[]string{"replay", "--temporal", "127.0.0.1:7233", "--db", "x.db", "--store", "postgres://u@h/d", "run-1"}, "--db and --store both name a store"},
		{[]string{"replay", "--temporal", "127.0.0.1:7233", "--all"}, "--all replays every run in the local store only"},
	} {
		code, _, errOut := call(ctx, tc.args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, errOut, tc.want)
		}
		if strings.Contains(errOut, "secret") {
			t.Errorf("%v: the error shows the password: %q", tc.args, errOut)
		}
	}
	// Without --temporal the core commands run as ever.
	if code, out, _ := call(ctx, "demo", "--mode", "normal"); code != cli.ExitOK || out != "mode=normal status=final_answer\n" {
		t.Fatalf("core demo: %d %q", code, out)
	}
}

// TestDemoTemporal runs the sandbox through a dev server and compares it
// with the in-process demo: the same scenarios, in the same order, with
// the same statuses, the three contract lines exactly.
func TestDemoTemporal(t *testing.T) {
	addr := devAddr(t)
	ctx := context.Background()
	code, want, errOut := call(ctx, "demo")
	if code != cli.ExitOK {
		t.Fatalf("in-process demo: %d\n%s", code, errOut)
	}
	code, got, errOut := call(ctx, "demo", "--temporal", addr, "--task-queue", "demo-test-"+suffix())
	if code != cli.ExitOK {
		t.Fatalf("demo --temporal: exit %d\n%s%s", code, got, errOut)
	}
	wl, gl := strings.Split(strings.TrimSpace(want), "\n"), strings.Split(strings.TrimSpace(got), "\n")
	if len(wl) != len(gl) {
		t.Fatalf("%d lines, in-process %d:\n%s", len(gl), len(wl), got)
	}
	for i := range wl {
		if i < 3 && wl[i] != gl[i] {
			t.Errorf("line %d: %q, in-process %q", i+1, gl[i], wl[i])
		}
		// Mode and status always; the counters and refunds too, but for
		// the deadline, which passes wherever the time runs out, and the
		// cancellation, which reaches a run of local turns at a workflow
		// task's end (see temporal/README.md, "Local turns"). The details
		// differ in wording.
		wf, gf := strings.Fields(wl[i]), strings.Fields(gl[i])
		n := min(len(wf), len(gf))
		if strings.HasPrefix(wf[0], "mode=deadline_exceeded") || strings.HasPrefix(wf[0], "mode=canceled") {
			n = 2
		}
		for j := range n {
			if strings.HasPrefix(wf[j], "detail=") {
				break
			}
			if wf[j] != gf[j] {
				t.Errorf("line %d, field %d: %q, in-process %q\n%s\n%s", i+1, j+1, gf[j], wf[j], gl[i], wl[i])
			}
		}
	}
	code, _, errOut = call(ctx, "demo", "--temporal", addr, "--mode", "confirm_refund")
	// A mode this backend cannot play is the person's to fix: exit 2.
	if code != cli.ExitUsage || !strings.Contains(errOut, "--confirm-writes") {
		t.Fatalf("interactive mode: %d %s", code, errOut)
	}
}

// TestRunConfirmOnTemporal walks a run that needs a person through the
// Temporal commands: a worker with --confirm-writes, run (which returns
// when the run pauses, printing the commands that answer it), a wrong
// answer refused, approve, runs, trace show and diagnose, and the refund
// in the worker's book exactly once.
func TestRunConfirmOnTemporal(t *testing.T) {
	addr := devAddr(t)
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "worker.db")
	queue := "cli-test-" + suffix()
	stopWorker := runWorker(t, "--temporal", addr, "--task-queue", queue, "--provider", "sandbox",
		"--tools", "orders", "--confirm-writes", "--db", db)
	defer stopWorker()

	id := "toolloop-test-" + suffix()
	code, out, errOut := call(ctx, "run", "--temporal", addr, "--task-queue", queue, "--model", orders.DeskModelName,
		"--id", id, "Please refund A103, the arm arrived broken.")
	if code != cli.ExitOK || !strings.Contains(out, "status=confirmation_required") ||
		!strings.Contains(out, "# the run waits on "+addr+"; to approve (it goes on once every call is answered):\n") ||
		!strings.Contains(out, "toolloop approve "+id+" desk_1_1 --by NAME --temporal "+addr) || strings.Contains(out, "toolloop resume") {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	// The core's checks and words, on this backend too.
	if code, _, errOut := call(ctx, "approve", "--temporal", addr, id, "desk_9_9", "--by", "ops"); code != cli.ExitUsage ||
		errOut != "toolloop approve: call desk_9_9 is not pending in run "+id+"; pending: desk_1_1 (refund_order)\n" {
		t.Fatalf("answering a call that is not pending: %d %s", code, errOut)
	}
	if code, out, errOut := call(ctx, "approve", "--temporal", addr, id, "desk_1_1", "--by", "ops", "--note", "photo checked"); code != cli.ExitOK ||
		out != "approved call desk_1_1 of run "+id+" (by ops); the run goes on; follow it with: toolloop trace show --temporal "+addr+" "+id+"\n" {
		t.Fatalf("approve: %d %s%s", code, out, errOut)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, out, _ := call(ctx, "runs", "--temporal", addr, "--status", "final_answer")
		if strings.Contains(out, id) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not finish after the approval:\n%s", id, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	code, out, errOut = call(ctx, "trace", "show", "--temporal", addr, id)
	if code != cli.ExitOK || !strings.Contains(out, "desk_1_1") || !strings.Contains(out, "final_answer") || !strings.Contains(out, "ops") {
		t.Fatalf("trace show: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = call(ctx, "trace", "diagnose", "--temporal", addr, id)
	if code != cli.ExitOK || !strings.Contains(out, "nothing suspicious") {
		t.Fatalf("trace diagnose: %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := call(ctx, "approve", "--temporal", addr, id, "desk_1_1", "--by", "ops"); code != cli.ExitUsage ||
		!strings.Contains(errOut, "was already approved by ops") {
		t.Fatalf("answering a closed run: %d %s", code, errOut)
	}
	if code, _, errOut := call(ctx, "approve", "--temporal", addr, "nope-"+suffix(), "c", "--by", "ops"); code != cli.ExitUsage ||
		!strings.Contains(errOut, " on "+addr+"; list the runs with: toolloop runs --temporal "+addr+"\n") {
		t.Fatalf("answering a run that does not exist: %d %s", code, errOut)
	}
	// A detached run, denied: the model hears the note, nothing is
	// refunded.
	denied := "toolloop-test-" + suffix()
	code, out, errOut = call(ctx, "run", "--temporal", addr, "--task-queue", queue, "--model", orders.DeskModelName,
		"--id", denied, "--detach", "Please refund A101.")
	if code != cli.ExitOK || !strings.HasPrefix(out, "run="+denied+"\n") {
		t.Fatalf("run --detach: %d %s%s", code, out, errOut)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, out, _ := call(ctx, "runs", "--temporal", addr, "--status", "confirmation_required")
		if strings.Contains(out, denied) && strings.Contains(out, "desk_1_1 (refund_order)") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not pause:\n%s", denied, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, out, errOut := call(ctx, "deny", "--temporal", addr, denied, "desk_1_1", "--by", "ops", "--note", "no photo"); code != cli.ExitOK {
		t.Fatalf("deny: %d %s%s", code, out, errOut)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, out, _ := call(ctx, "trace", "show", "--temporal", addr, denied)
		if code == cli.ExitOK && strings.Contains(out, "final_answer") {
			if !strings.Contains(out, "no photo") {
				t.Fatalf("the denial's note is not in the trace:\n%s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not finish after the denial:\n%s", denied, out)
		}
		time.Sleep(100 * time.Millisecond)
	}

	st, err := sqlite.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	book, err := orders.OpenSQLiteBook(ctx, st.DB())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := book.RefundCount(ctx, "A103"); err != nil || n != 1 {
		t.Fatalf("A103 refunded %d times (%v)", n, err)
	}
	if n, err := book.RefundCount(ctx, "A101"); err != nil || n != 0 {
		t.Fatalf("A101, denied, refunded %d times (%v)", n, err)
	}
}
