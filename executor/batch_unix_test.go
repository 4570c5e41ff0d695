//go:build unix

package executor_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// cpuTime is the process's user and system time so far.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A call queued behind a slow one, on the batch's one worker, longer than
// its own timeout is not late (its clock starts when it starts), and the
// caller waits for it without spinning: it once did, its timer set to a
// bound of the queued call's deadline that had passed.
func TestBatchWaitsWithoutSpinning(t *testing.T) {
	const slowFor = 300 * time.Millisecond
	slow := mkTool(t, tool.Spec[args]{Name: "slow", Timeout: time.Minute}, func(context.Context, args) (any, error) {
		time.Sleep(slowFor)
		return "ok", nil
	})
	quick := mkTool(t, tool.Spec[args]{Name: "quick", Timeout: 20 * time.Millisecond}, func(context.Context, args) (any, error) { return "ok", nil })
	ex := executor.New(&executor.Options{SpillAfter: time.Hour})
	cpu0 := cpuTime(t)
	out := within(t, slowFor+margin, func() []executor.Outcome {
		return ex.RunStage(context.Background(), []executor.Call{call("c0", slow, 0), call("c1", quick, 1)})
	})
	if used := cpuTime(t) - cpu0; used > slowFor/2 {
		t.Errorf("the stage used %v of CPU waiting %v for a sleeping handler", used, slowFor)
	}
	for i, o := range out {
		if o.Result.Status != llm.StatusOK {
			t.Errorf("outcome %d = %+v", i, o)
		}
	}
}
