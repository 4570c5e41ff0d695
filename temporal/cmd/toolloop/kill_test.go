package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/postgres"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/temporal"
)

// killSlowWrites is how long each refund takes to answer after it is
// applied: the window in which the kill leaves writes done but unreported.
const killSlowWrites = 500 * time.Millisecond

var (
	killRuns  = flag.Int("kill.runs", 50, "TestWorkerKill: how many runs")
	killAfter = flag.Int("kill.after", 10, "TestWorkerKill: SIGKILL the first worker once this many runs have finished")
)

// worker is one toolloop worker process of TestWorkerKill: the test binary
// run as the program (TestMain).
type workerProc struct {
	cmd *exec.Cmd
	out string
}

// startWorker starts a worker process on queue, its store given by
// storeArgs (--db PATH or --store URL).
func startWorker(t *testing.T, name, addr, queue string, storeArgs ...string) *workerProc {
	t.Helper()
	out := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	args := append([]string{"worker", "--temporal", addr, "--task-queue", queue,
		"--provider", "sandbox", "--tools", "orders", "--slow-writes", killSlowWrites.String()}, storeArgs...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProc{cmd: cmd, out: out}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(w.log(), "serving task queue") {
		if time.Now().After(deadline) {
			t.Fatalf("worker %s did not start:\n%s", name, w.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return w
}

func (w *workerProc) log() string {
	b, _ := os.ReadFile(w.out)
	return string(b)
}

// TestWorkerKill runs 50 sandbox runs with writes on two worker processes
// that share an order book and idempotency ledger, and kills one of them
// with SIGKILL once some runs have finished and others are in flight.
// Every run must still end in final_answer with its refund done, and the
// book must hold exactly one refund per order: a tool activity retried on
// the surviving worker replays the ledger rather than refunding again (the
// book would refuse a second refund, and the run's answer would show the
// error). The workers share a SQLite file (--db), as on one machine, or a
// PostgreSQL schema (--store), as on several; the postgres case needs
// TOOLLOOP_POSTGRES_URL (see postgresSchema).
//
// The runs have the defaults: the model requests and the order look-ups
// (reads) are local activities of the workflow tasks, so the kill also
// loses requests and reads in flight, which the surviving worker's
// workflow task makes again once the lost one times out; the refunds
// (writes) are activities. sqlite_activities is the SQLite case with
// every request and call an activity (RunInput.ModelAsActivity,
// LocalReadBound -1), retried on the surviving worker when their
// heartbeats stop.
func TestWorkerKill(t *testing.T) {
	addr := devAddr(t)
	for _, activities := range []bool{false, true} {
		name := "sqlite"
		if activities {
			name = "sqlite_activities"
		}
		t.Run(name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "shared.db")
			st, err := sqlite.Open(db, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			book, err := orders.OpenSQLiteBook(context.Background(), st.DB())
			if err != nil {
				t.Fatal(err)
			}
			workerKill(t, addr, book, st, "; store "+db+"\n", activities, "--db", db)
		})
	}
	t.Run("postgres", func(t *testing.T) {
		// The server trusts local connections: the password is there to
		// check that the workers never print it.
		url, schema := postgresSchema(t, "secret")
		st, err := postgres.Open(context.Background(), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		db := stdlib.OpenDBFromPool(st.Pool())
		defer db.Close()
		book, err := orders.OpenPostgresBook(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		workerKill(t, addr, book, st, "?search_path="+schema+"\n", false, "--store", url)
	})
}

// killBook is the book the workers of TestWorkerKill share, as the test
// sees it: it adds the runs' orders and counts their refunds.
type killBook interface {
	orders.OrderBook
	AddOrders(ctx context.Context, add ...orders.Order) error
}

// workerKill is TestWorkerKill with the workers' store given by storeArgs
// and book and st (where the runs' logs are) open on it; the workers'
// startup line must name the store as wantStore (part of the line).
// activities makes every model request and call of the runs an activity.
func workerKill(t *testing.T, addr string, book killBook, st store.Blobs, wantStore string, activities bool, storeArgs ...string) {
	ctx := context.Background()
	n := *killRuns
	var add []orders.Order
	for i := 1; i <= n; i++ {
		add = append(add, orders.Order{ID: fmt.Sprintf("K%03d", i), Customer: "load test", Status: orders.StatusDelivered,
			Items: []orders.Item{{SKU: "K", Name: "kit", Quantity: 1, PriceCents: int64(1000 + i)}}})
	}
	if err := book.AddOrders(ctx, add...); err != nil {
		t.Fatal(err)
	}

	queue := "kill-test-" + suffix()
	first := startWorker(t, "first", addr, queue, storeArgs...)
	second := startWorker(t, "second", addr, queue, storeArgs...)
	if !strings.Contains(first.log(), wantStore) || strings.Contains(first.log(), "secret") {
		t.Fatalf("the worker's startup line does not name its store as %s, or shows its password:\n%s", wantStore, first.log())
	}

	cl, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	started := time.Now()
	ids := make([]string, n)
	results := make(chan error, n)
	replays := make(chan [2]int, n)
	finished := make(chan int, n)
	for i := range n {
		ids[i] = fmt.Sprintf("kill-%s-%03d", queue, i+1)
		in := temporal.RunInput{Model: orders.DeskModelName, Messages: []llm.Message{
			llm.UserMessage(fmt.Sprintf("Please refund order K%03d.", i+1))},
			// A tool activity lost with its worker is retried once its
			// StartToClose timeout (tool timeout + slack) passes.
			Budgets: loop.Budgets{ToolTimeout: 3 * time.Second, Deadline: 3 * time.Minute}}
		if activities {
			in.ModelAsActivity, in.LocalReadBound = true, -1
		}
		wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: queue}, temporal.WorkflowName, in)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			var small temporal.RunOutput
			err := wr.Get(ctx, &small)
			var out *loop.Result
			if err == nil {
				// The log and history are in the store the workers share.
				out, err = temporal.ReadResult(ctx, st, small)
			}
			if err == nil && out.Status != loop.FinalAnswer {
				err = fmt.Errorf("status %s (%s)", out.Status, out.Detail)
			}
			if err == nil && !strings.HasPrefix(out.Answer(), "refund_order (desk_1_1): done: ") {
				err = fmt.Errorf("answer %q", out.Answer())
			}
			if err != nil {
				err = fmt.Errorf("run %s: %w", wr.GetID(), err)
			}
			var settled [2]int // replayed from the ledger, reconciled by the look-up
			var events []loop.Event
			if out != nil {
				events = out.Events
			}
			for _, ev := range events {
				for _, o := range ev.Outcomes {
					if o.Replayed {
						settled[0]++
					}
					if o.Reconciled {
						settled[1]++
					}
				}
			}
			replays <- settled
			results <- err
			finished <- 1
		}()
	}

	// Kill the first worker once some runs are done and others still run.
	done := 0
	for done < *killAfter {
		done += <-finished
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	killedAt := time.Since(started)
	t.Logf("SIGKILL to the first worker after %v, %d of %d runs finished", killedAt.Round(time.Millisecond), done, n)

	timeout := time.After(4 * time.Minute)
	var failures []string
	for range n {
		select {
		case err := <-results:
			if err != nil {
				failures = append(failures, err.Error())
			}
		case <-timeout:
			t.Fatalf("not every run finished within 4 minutes; failures so far: %v\nsecond worker:\n%s", failures, second.log())
		}
	}
	total := time.Since(started)
	if len(failures) > 0 {
		t.Fatalf("%d run(s) did not end as expected:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	for i := 1; i <= n; i++ {
		if c, err := book.RefundCount(ctx, fmt.Sprintf("K%03d", i)); err != nil || c != 1 {
			t.Fatalf("order K%03d refunded %d times (%v)", i, c, err)
		}
	}

	// What the kill cost: activities that Temporal started again, and the
	// runs they belonged to.
	replayed, reconciled := 0, 0
	for range n {
		r := <-replays
		replayed, reconciled = replayed+r[0], reconciled+r[1]
	}
	// lostTasks counts the workflow tasks the killed worker had started
	// (timed out start to close): with local activities, what they had
	// not recorded was done again by the surviving worker.
	retried, runsHit, timedOut, lostTasks := map[string]int{}, 0, 0, 0
	for _, id := range ids {
		hit := false
		types := map[int64]string{}
		it := cl.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				types[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				if a := ev.GetActivityTaskStartedEventAttributes(); a.GetAttempt() > 1 {
					retried[types[a.GetScheduledEventId()]]++
					hit = true
				}
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
				timedOut++
				hit = true
				if a := ev.GetWorkflowTaskTimedOutEventAttributes(); a.GetTimeoutType() == enumspb.TIMEOUT_TYPE_START_TO_CLOSE {
					lostTasks++
				}
			}
		}
		if hit {
			runsHit++
		}
	}
	t.Logf("%d runs, all final_answer, one refund per order (%d replayed from the ledger, %d settled by the status look-up); "+
		"%d runs touched by the kill (activities started again: %v; %d task timeouts, of which %d workflow tasks lost while started); all done after %v",
		n, replayed, reconciled, runsHit, retried, timedOut, lostTasks, total.Round(time.Millisecond))
	if runsHit == 0 {
		t.Fatal("the kill touched no run: nothing was tested (raise -kill.runs or lower -kill.after)")
	}
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.cmd.Wait(); err != nil {
		t.Fatalf("second worker on SIGTERM: %v\n%s", err, second.log())
	}
}

// quietLogger drops the SDK's log.
func quietLogger() sdklog.Logger { return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }
