package loop_test

// Run leases between processes: this test binary, started again as a child
// (TestLeaseChildProcess), resumes a run on a SQLite file while the parent
// tries to resume the same run.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
)

const (
	leaseEnvDB      = "TOOLLOOP_LEASE_DB"
	leaseEnvRun     = "TOOLLOOP_LEASE_RUN"
	leaseEnvGo      = "TOOLLOOP_LEASE_GO"
	leaseEnvTTL     = "TOOLLOOP_LEASE_TTL"
	leaseEnvTimeout = "TOOLLOOP_LEASE_TIMEOUT"
)

// leaseProcConfig is the configuration both processes drive a run with:
// a refund that inserts a row in the store's file, says "writing", and
// then, when goFile is set, answers only once that file exists.
func leaseProcConfig(t *testing.T, st *sqlite.Store, timeout, ttl time.Duration, goFile string) loop.Config {
	t.Helper()
	if _, err := st.DB().Exec(`CREATE TABLE IF NOT EXISTS lease_refunds (id INTEGER PRIMARY KEY AUTOINCREMENT, order_id TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	refunded := func(ctx context.Context, order string) (int, error) {
		var n int
		err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM lease_refunds WHERE order_id = ?`, order).Scan(&n)
		return n, err
	}
	refund := tool.MustNew(tool.Spec[refundIn]{
		Name: "refund_order", Effect: tool.Write, Timeout: timeout,
		IdempotencyKey: func(in refundIn) string { return "refund:" + in.OrderID },
		Lookup: func(ctx context.Context, in refundIn) (any, bool, error) {
			n, err := refunded(ctx, in.OrderID)
			if err != nil || n == 0 {
				return nil, false, err
			}
			return map[string]any{"order_id": in.OrderID, "refunded": true}, true, nil
		},
	}, func(ctx context.Context, in refundIn) (map[string]any, error) {
		if _, err := st.DB().ExecContext(ctx, `INSERT INTO lease_refunds (order_id) VALUES (?)`, in.OrderID); err != nil {
			return nil, err
		}
		os.Stdout.WriteString("M writing\n")
		for goFile != "" {
			if _, err := os.Stat(goFile); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
		return map[string]any{"order_id": in.OrderID, "refunded": true}, nil
	})
	reg, err := tool.NewRegistry(refund)
	if err != nil {
		t.Fatal(err)
	}
	return loop.Config{
		Model: stepModel(llmtest.Calls(call("c1", "refund_order", `{"order_id":"A1"}`)), llmtest.Text("refunded")),
		Tools: reg, Store: st, Policy: policy.ConfirmWrites(), LeaseTTL: ttl,
		Executor: executor.New(&executor.Options{Ledger: st}),
	}
}

// TestLeaseChildProcess is the child's side; it does nothing unless
// TestLeaseAcrossProcesses started it. It resumes the run it is given.
func TestLeaseChildProcess(t *testing.T) {
	path := os.Getenv(leaseEnvDB)
	if path == "" {
		t.Skip("runs only as TestLeaseAcrossProcesses's child process")
	}
	timeout, err1 := time.ParseDuration(os.Getenv(leaseEnvTimeout))
	ttl, err2 := time.ParseDuration(os.Getenv(leaseEnvTTL))
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := loop.NewRunner(leaseProcConfig(t, st, timeout, ttl, os.Getenv(leaseEnvGo)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Resume(context.Background(), os.Getenv(leaseEnvRun))
	if res == nil {
		t.Fatal(err)
	}
	fmt.Printf("M done %s\n", res.Status)
}

// leaseChild is a child process resuming a run, and its output lines.
type leaseChild struct {
	cmd   *exec.Cmd
	lines chan string
}

func startLeaseChild(t *testing.T, path, runID, goFile string, timeout, ttl time.Duration) *leaseChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseChildProcess$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), leaseEnvDB+"="+path, leaseEnvRun+"="+runID, leaseEnvGo+"="+goFile,
		leaseEnvTimeout+"="+timeout.String(), leaseEnvTTL+"="+ttl.String(),
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &leaseChild{cmd: cmd, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return c
}

// await waits for the child to print the marker line want.
func (c *leaseChild) await(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("the child ended without printing %q", want)
			}
			if line == want {
				return
			}
		case <-timeout:
			t.Fatalf("the child did not print %q", want)
		}
	}
}

// pauseApproved records a run paused for its refund, and approves it.
func pauseApproved(t *testing.T, cfg loop.Config, runID string) {
	t.Helper()
	cfg.NewRunID = func() string { return runID }
	res, err := loop.Run(context.Background(), cfg, user("refund A1"))
	mustStatus(t, res, err, loop.ConfirmationRequired)
	if err := loop.Decide(context.Background(), cfg.Store, runID, loop.Confirmation{CallID: "c1", Approved: true, By: "dana"}, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// Two processes resume one run: the one that comes second, while the
// first is inside a slow write, is refused with the first's owner (its
// host and process ID) and writes nothing; the first finishes the run,
// the refund made once. Then a process is killed inside the write,
// leaving its lease: the next driver is refused until the lease expires,
// then takes the run over and settles the write by its status look-up.
func TestLeaseAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	if os.Getenv(leaseEnvDB) != "" {
		t.Skip("inside a child")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "lease.db")
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	rows := func(order string) int {
		var n int
		if err := st.DB().QueryRow(`SELECT COUNT(*) FROM lease_refunds WHERE order_id = ?`, order).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	count := func(runID string) int { return eventCount(t, st, runID) }

	t.Run("the second driver is refused", func(t *testing.T) {
		const timeout, ttl = time.Minute, 30 * time.Second
		cfg := leaseProcConfig(t, st, timeout, ttl, "")
		pauseApproved(t, cfg, "run-a")
		goFile := filepath.Join(dir, "go-a")
		child := startLeaseChild(t, path, "run-a", goFile, timeout, ttl)
		child.await(t, "M writing")
		before := count("run-a")

		r, err := loop.NewRunner(cfg)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Resume(ctx, "run-a")
		held := mustBeHeld(t, res, err, "")
		if pid := ":" + strconv.Itoa(child.cmd.Process.Pid) + ":"; !strings.Contains(held.Owner, pid) {
			t.Fatalf("the refusal names %q, not the child (pid %s)", held.Owner, pid)
		}
		if count("run-a") != before || rows("A1") != 1 {
			t.Fatalf("the refused driver acted: %d events (were %d), %d refunds", count("run-a"), before, rows("A1"))
		}

		if err := os.WriteFile(goFile, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		child.await(t, "M done final_answer")
		if err := child.cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
		runs, _ := st.Runs(ctx, string(loop.FinalAnswer))
		rec, _, _ := st.Lookup(ctx, "refund:A1")
		if len(runs) != 1 || runs[0].RunID != "run-a" || rows("A1") != 1 || rec.State != store.Done {
			t.Fatalf("after the child: final runs %+v, %d refunds, ledger %+v", runs, rows("A1"), rec)
		}
	})

	t.Run("a killed driver's lease is taken over at once", func(t *testing.T) {
		const timeout, ttl = 300 * time.Millisecond, 600 * time.Millisecond
		if _, err := st.DB().Exec(`DELETE FROM lease_refunds; DELETE FROM idempotency_ledger`); err != nil {
			t.Fatal(err)
		}
		cfg := leaseProcConfig(t, st, timeout, ttl, "")
		pauseApproved(t, cfg, "run-b")
		// The child never gets its go file: it is killed inside the write,
		// after the row is in, before the ledger hears of it.
		child := startLeaseChild(t, path, "run-b", filepath.Join(dir, "go-never"), timeout, ttl)
		child.await(t, "M writing")
		if err := child.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		err := child.cmd.Wait()
		if ws, ok := child.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("child was not killed: %v", err)
		}

		r, err := loop.NewRunner(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// The child ran on this machine and has exited: its lease is
		// taken over at once (on Linux; elsewhere once it expires).
		res, err := r.Resume(ctx, "run-b")
		if loop.ProcessMark() == "" {
			held := mustBeHeld(t, res, err, "")
			if time.Until(held.Expires) > ttl {
				t.Fatalf("the dead child's lease runs until %v, more than %v from now", held.Expires, ttl)
			}
			time.Sleep(time.Until(held.Expires) + 10*time.Millisecond)
			res, err = r.Resume(ctx, "run-b")
		}
		mustStatus(t, res, err, loop.FinalAnswer)
		if rows("A1") != 1 {
			t.Fatalf("%d refunds after the takeover, want the killed child's one", rows("A1"))
		}
		if got := resultFor(t, res.Messages, "c1"); got.Status != llm.StatusOK {
			t.Fatalf("the refund's result after the takeover: %+v", got)
		}
		var left int
		if err := st.DB().QueryRow(`SELECT COUNT(*) FROM run_leases`).Scan(&left); err != nil || left != 0 {
			t.Fatalf("%d leases left (%v)", left, err)
		}
	})
}
