package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/temporal"
)

// lostWorkerEnv makes the test binary run as TestDevServerLostWorkerLocalRead's
// first worker (see TestMain): its value is the task queue.
const lostWorkerEnv = "TOOLLOOP_TEST_LOST_WORKER"

// lostWorkerTurns and lostWorkerPage are the lost-worker run's turns and
// result size.
const lostWorkerTurns, lostWorkerPage = 2, 100

// runLostWorker is the first worker of TestDevServerLostWorkerLocalRead,
// in a process of its own: it serves the queue lostWorkerEnv names, with
// the blob store of the SQLite file TOOLLOOP_TEST_LOST_DB, and when its
// read begins it creates the file TOOLLOOP_TEST_LOST_MARK and blocks, to
// be killed there.
func runLostWorker() error {
	st, err := sqlite.Open(os.Getenv("TOOLLOOP_TEST_LOST_DB"), nil)
	if err != nil {
		return err
	}
	defer st.Close()
	acts, err := pagesActivities(lostWorkerTurns, lostWorkerPage, st, func(ctx context.Context, _ int) (string, error) {
		if err := os.WriteFile(os.Getenv("TOOLLOOP_TEST_LOST_MARK"), nil, 0o644); err != nil {
			return "", err
		}
		<-ctx.Done()
		return "", ctx.Err()
	})
	if err != nil {
		return err
	}
	c, err := client.Dial(client.Options{HostPort: os.Getenv("TOOLLOOP_TEMPORAL_ADDR"), Namespace: namespace(), Logger: testLogger()})
	if err != nil {
		return err
	}
	defer c.Close()
	w := worker.New(c, os.Getenv(lostWorkerEnv), worker.Options{})
	temporal.RegisterWorkflow(w)
	acts.Register(w)
	return w.Run(worker.InterruptCh())
}

// namespace is TOOLLOOP_TEMPORAL_NAMESPACE, default "default".
func namespace() string {
	if ns := os.Getenv("TOOLLOOP_TEMPORAL_NAMESPACE"); ns != "" {
		return ns
	}
	return "default"
}

// TestDevServerLostWorkerLocalRead: a worker lost in the middle of a turn
// whose model request and read run as local activities (the defaults).
// Worker A, a process of its own, takes the run's first workflow task and
// is killed (SIGKILL) during the first read. Nothing of that workflow
// task is in the history (local activities are recorded when their
// workflow task completes), so once it times out (2 s here, 10 s by
// default) worker B takes the run from the history, makes the first
// model request and read again, and the run ends final_answer with every
// result whole, in one workflow run, no activity scheduled but the
// SaveLog that commits the last workflow task before the close.
func TestDevServerLostWorkerLocalRead(t *testing.T) {
	c := devClient(t)
	dir := t.TempDir()
	db, mark := filepath.Join(dir, "blobs.db"), filepath.Join(dir, "entered")
	st, err := sqlite.Open(db, nil) // the store both workers reach
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	queue := "toolloop-test-lost-" + suffix()

	a := exec.Command(os.Args[0], "-test.run", "^$")
	a.Env = append(os.Environ(), lostWorkerEnv+"="+queue, "TOOLLOOP_TEST_LOST_DB="+db, "TOOLLOOP_TEST_LOST_MARK="+mark)
	a.Stdout, a.Stderr = os.Stderr, os.Stderr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if a.ProcessState == nil {
			_ = a.Process.Kill()
			_ = a.Wait()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "toolloop-test-lost-" + suffix()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue, WorkflowTaskTimeout: 2 * time.Second},
		temporal.WorkflowName, temporal.RunInput{Model: "scripted", Messages: []llm.Message{llm.UserMessage("read every page")},
			Budgets: loop.Budgets{MaxSteps: lostWorkerTurns + 1}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("worker A never began the read")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	lost := time.Now()

	var reads, requests atomic.Int32
	actsB, err := pagesActivities(lostWorkerTurns, lostWorkerPage, st, func(_ context.Context, p int) (string, error) {
		reads.Add(1)
		return pageContent(p, lostWorkerPage), nil
	}, func(cfg *temporal.Config) {
		model := cfg.Model
		cfg.Model = llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
			requests.Add(1)
			return model.Generate(ctx, req)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	wB := worker.New(c, queue, worker.Options{})
	temporal.RegisterWorkflow(wB)
	actsB.Register(wB)
	if err := wB.Start(); err != nil {
		t.Fatal(err)
	}
	defer wB.Stop()

	var out temporal.RunOutput
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	took := time.Since(lost)
	if out.Status != loop.FinalAnswer || out.ToolCalls != lostWorkerTurns || out.ContinuedAsNew != 0 {
		t.Fatalf("output %+v", out)
	}
	res := readResult(t, st, out)
	for p := 1; p <= lostWorkerTurns; p++ {
		var got string
		if r := res.Messages[2*p].Result; r == nil || json.Unmarshal(r.Content, &got) != nil || got != pageContent(p, lostWorkerPage) {
			t.Fatalf("result %d is not whole: %+v", p, res.Messages[2*p].Result)
		}
	}
	h := history(t, c, id, run.GetRunID())
	var evs []string
	timedOut, closing := 0, 0
	for _, ev := range h.Events {
		evs = append(evs, ev.GetEventType().String())
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			// The one activity: SaveLog, which commits the last workflow
			// task's markers before the workflow closes.
			if closing++; a.GetActivityType().GetName() != temporal.SaveLogActivity || closing > 1 {
				t.Fatalf("activity %s scheduled: the defaults run these turns locally", a.GetActivityType().GetName())
			}
		}
		if a := ev.GetWorkflowTaskTimedOutEventAttributes(); a != nil && a.GetTimeoutType() == enums.TIMEOUT_TYPE_START_TO_CLOSE {
			timedOut++
		}
	}
	// B made the lost turn's request and read again, then the rest.
	if r, q := reads.Load(), requests.Load(); r != lostWorkerTurns || q != lostWorkerTurns+1 || timedOut != 1 {
		t.Fatalf("worker B read %d pages and made %d model requests, want %d and %d; %d workflow tasks timed out, want 1: %v",
			r, q, lostWorkerTurns, lostWorkerTurns+1, timedOut, evs)
	}
	t.Logf("worker A killed mid-read; the run ended on worker B %v later: %v", took.Round(time.Millisecond), evs)
	replayOnly(t, "lost worker", h)
}

// lostWorkerMain runs the test binary as the lost worker, and exits,
// when lostWorkerEnv is set.
func lostWorkerMain() {
	if os.Getenv(lostWorkerEnv) == "" {
		return
	}
	if err := runLostWorker(); err != nil {
		fmt.Fprintln(os.Stderr, "lost worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
