package executor_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
)

// The crash test runs a refund in a child process (this test binary, in
// TestCrashChild), kills it with SIGKILL at a chosen point, and resumes the
// same write in this process on the same SQLite file. The refund's side
// effect is a row in the same database, so it survives the kill exactly
// as the ledger does.

const (
	crashEnvDB    = "TOOLLOOP_CRASH_DB"
	crashEnvMode  = "TOOLLOOP_CRASH_MODE"
	crashEnvOrder = "TOOLLOOP_CRASH_ORDER"
	crashReady    = "CRASHTEST READY"
)

// Kill points, in the order a write passes them.
const (
	crashBeforeClaim  = "before-claim"  // the ledger has no record
	crashBeforeEffect = "before-effect" // in flight, nothing refunded
	crashAfterEffect  = "after-effect"  // in flight, refunded
	crashAfterDone    = "after-done"    // done, refunded
)

var crashModes = []string{crashBeforeClaim, crashBeforeEffect, crashAfterEffect, crashAfterDone}

const refundsTable = `CREATE TABLE IF NOT EXISTS refunds (id INTEGER PRIMARY KEY AUTOINCREMENT, order_id TEXT NOT NULL)`

func openCrashStore(path string) (*sqlite.Store, error) {
	// NORMAL survives a process crash, which is what this test does.
	s, err := sqlite.Open(path, &sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		return nil, err
	}
	// Deliberately no uniqueness on order_id: a second refund must show
	// up as a second row, not as a constraint error.
	if _, err := s.DB().Exec(refundsTable); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func refundRows(db *sql.DB, order string) (int, error) {
	var n int
	err := db.QueryRow(`SELECT COUNT(*) FROM refunds WHERE order_id = ?`, order).Scan(&n)
	return n, err
}

// crashRefundTool refunds by inserting a row; its look-up reads the rows.
// at is called at each kill point inside the handler.
func crashRefundTool(db *sql.DB, at func(point string), execs *atomic.Int32) *tool.Tool {
	return tool.MustNew(tool.Spec[refundArgs]{
		Name: "refund", Effect: tool.Write,
		IdempotencyKey: func(in refundArgs) string { return "refund:" + in.OrderID },
		Lookup: func(ctx context.Context, in refundArgs) (any, bool, error) {
			var n int
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM refunds WHERE order_id = ?`, in.OrderID).Scan(&n); err != nil {
				return nil, false, err
			}
			if n == 0 {
				return nil, false, nil
			}
			return refundResult{RefundID: "R-" + in.OrderID}, true, nil
		},
	}, func(ctx context.Context, in refundArgs) (refundResult, error) {
		execs.Add(1)
		at(crashBeforeEffect)
		if _, err := db.ExecContext(ctx, `INSERT INTO refunds (order_id) VALUES (?)`, in.OrderID); err != nil {
			return refundResult{}, tool.Unavailable(err)
		}
		at(crashAfterEffect)
		return refundResult{RefundID: "R-" + in.OrderID}, nil
	})
}

func crashCall(id string, tl *tool.Tool, order string, timeout time.Duration) executor.Call {
	c := refundCall(id, tl, order)
	c.Timeout = timeout
	return c
}

// TestCrashChild is the child process's side; it does nothing unless
// TestCrashResume started it.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnvDB)
	if path == "" {
		t.Skip("runs only as TestCrashResume's child process")
	}
	mode, order := os.Getenv(crashEnvMode), os.Getenv(crashEnvOrder)
	s, err := openCrashStore(path)
	if err != nil {
		fmt.Println("CRASHTEST ERROR", err)
		os.Exit(2)
	}
	at := func(point string) {
		if point != mode {
			return
		}
		fmt.Println(crashReady, mode) // os.Stdout is unbuffered
		time.Sleep(time.Minute)       // the parent kills us long before
		fmt.Println("CRASHTEST ERROR not killed")
		os.Exit(3)
	}
	var execs atomic.Int32
	tl := crashRefundTool(s.DB(), at, &execs)
	at(crashBeforeClaim)
	o := executor.New(&executor.Options{Ledger: s}).Run(context.Background(), crashCall("c-child", tl, order, time.Minute))
	if o.Result.Status != llm.StatusOK {
		fmt.Printf("CRASHTEST ERROR outcome %+v\n", o)
		os.Exit(2)
	}
	at(crashAfterDone)
	fmt.Println("CRASHTEST ERROR unknown mode", mode)
	os.Exit(2)
}

// runChildUntilKilled starts the child for one write, waits until it
// reports that it reached the kill point, and kills it with SIGKILL.
func runChildUntilKilled(t *testing.T, path, mode, order string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvDB+"="+path, crashEnvMode+"="+mode, crashEnvOrder+"="+order)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	drained := make(chan []string, 1)
	go func() {
		var other []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, crashReady) {
				ready <- line
			} else {
				other = append(other, line)
			}
		}
		drained <- other
	}()
	var failure string
	select {
	case line := <-ready:
		if line != crashReady+" "+mode {
			failure = "child reported " + line
		}
	case <-time.After(30 * time.Second):
		failure = "child never reached the kill point"
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL on Unix
		t.Fatal(err)
	}
	other := <-drained
	err = cmd.Wait()
	if failure == "" && (err == nil || !strings.Contains(err.Error(), "killed")) {
		failure = fmt.Sprintf("child ended with %v, want killed", err)
	}
	if failure != "" {
		t.Fatalf("mode %s, order %s: %s\nstdout: %s\nstderr: %s", mode, order, failure, strings.Join(other, "\n"), stderr.String())
	}
}

// crashTally counts how the resumed writes were settled.
type crashTally struct {
	cycles, executed, reconciled, replayed, inProgress, refunds int
}

func TestCrashResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills child processes")
	}
	const (
		cycles = 20
		// timeout is the resumed call's timeout; an in-flight record
		// older than this is stale.
		timeout = 500 * time.Millisecond
	)
	path := filepath.Join(t.TempDir(), "crash.db")
	s, err := openCrashStore(path) // schema in place before any child runs
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	tally := map[string]*crashTally{}
	for _, m := range crashModes {
		tally[m] = &crashTally{}
	}
	var killTime, resumeTime time.Duration
	start := time.Now()
	for i := range cycles {
		mode := crashModes[i%len(crashModes)]
		order := fmt.Sprintf("A%03d", i)
		key := "refund:" + order
		tl := tally[mode]
		tl.cycles++

		t0 := time.Now()
		runChildUntilKilled(t, path, mode, order)
		killTime += time.Since(t0)

		// A restarted process: the store and the executor are new.
		t1 := time.Now()
		s, err := openCrashStore(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		rec, found, err := s.Lookup(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		before, err := refundRows(s.DB(), order)
		if err != nil {
			t.Fatal(err)
		}
		wantState, wantRows := map[string]store.WriteState{
			crashBeforeClaim: "", crashBeforeEffect: store.InFlight, crashAfterEffect: store.InFlight, crashAfterDone: store.Done,
		}[mode], map[string]int{crashBeforeClaim: 0, crashBeforeEffect: 0, crashAfterEffect: 1, crashAfterDone: 1}[mode]
		if rec.State != wantState || found != (wantState != "") || before != wantRows {
			t.Fatalf("cycle %d (%s): after the kill the ledger has %+v (found=%v) and %d refunds; want state %q and %d",
				i, mode, rec, found, before, wantState, wantRows)
		}

		var execs atomic.Int32
		refund := crashRefundTool(s.DB(), func(string) {}, &execs)
		ex := executor.New(&executor.Options{Ledger: s})
		if mode == crashBeforeEffect {
			// The killed attempt may, for all the ledger knows, still be
			// running: while its record is younger than the timeout a
			// new attempt is refused. (Checked only while surely young.)
			if time.Since(rec.UpdatedAt) < timeout/2 {
				o := ex.Run(ctx, crashCall("c-early", refund, order, timeout))
				if o.Result.ErrorKind != llm.KindWriteInProgress || execs.Load() != 0 {
					t.Fatalf("cycle %d (%s): attempt on a young in-flight record = %+v", i, mode, o)
				}
				tl.inProgress++
			}
			time.Sleep(time.Until(rec.UpdatedAt.Add(timeout + 10*time.Millisecond)))
		}
		o := ex.Run(ctx, crashCall("c-resume", refund, order, timeout))
		if o.Result.Status != llm.StatusOK || o.StopRun || o.OutcomeUnknown {
			t.Fatalf("cycle %d (%s): resumed outcome = %+v", i, mode, o)
		}
		var res refundResult
		if err := json.Unmarshal(o.Result.Content, &res); err != nil || res.RefundID != "R-"+order {
			t.Errorf("cycle %d (%s): result %s", i, mode, o.Result.Content)
		}
		switch mode {
		case crashBeforeClaim, crashBeforeEffect:
			if execs.Load() != 1 || o.Replayed || o.Reconciled {
				t.Errorf("cycle %d (%s): executed %d times, outcome %+v; want executed once", i, mode, execs.Load(), o)
			}
		case crashAfterEffect:
			if execs.Load() != 0 || !o.Reconciled {
				t.Errorf("cycle %d (%s): executed %d times, outcome %+v; want reconciled", i, mode, execs.Load(), o)
			}
		case crashAfterDone:
			if execs.Load() != 0 || !o.Replayed {
				t.Errorf("cycle %d (%s): executed %d times, outcome %+v; want replayed", i, mode, execs.Load(), o)
			}
		}
		switch {
		case o.Reconciled:
			tl.reconciled++
		case o.Replayed:
			tl.replayed++
		default:
			tl.executed += int(execs.Load())
		}
		// Settled for good: asked again, the write is replayed.
		if o := ex.Run(ctx, crashCall("c-again", refund, order, timeout)); !o.Replayed || o.Result.Status != llm.StatusOK {
			t.Errorf("cycle %d (%s): third attempt = %+v", i, mode, o)
		}
		rec, _, _ = s.Lookup(ctx, key)
		rows, err := refundRows(s.DB(), order)
		if err != nil {
			t.Fatal(err)
		}
		if rows != 1 || rec.State != store.Done {
			t.Errorf("cycle %d (%s): %d refunds, ledger state %q; want exactly 1 refund, done", i, mode, rows, rec.State)
		}
		tl.refunds += rows
		s.Close()
		resumeTime += time.Since(t1)
	}
	var total int
	for _, m := range crashModes {
		c := tally[m]
		total += c.refunds
		t.Logf("%-13s cycles %d: executed %d, reconciled %d, replayed %d, refused while young %d; refunds %d",
			m, c.cycles, c.executed, c.reconciled, c.replayed, c.inProgress, c.refunds)
	}
	t.Logf("%d kill/resume cycles, %d orders refunded %d times in all; %v (children until killed %v, resumes %v)",
		cycles, cycles, total, time.Since(start).Round(time.Millisecond), killTime.Round(time.Millisecond), resumeTime.Round(time.Millisecond))
	if total != cycles {
		t.Errorf("%d refunds for %d orders", total, cycles)
	}
}
