package loop_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
)

// A lease whose holder is a process of this machine that no longer runs
// is taken over at once, not at its expiry: nobody renews it (the holder
// crashed, or its store failed as it stopped and the release failed too).
// A holder that runs, or one of another machine, is waited for; a process
// that now has the holder's ID but started at another time is not the
// holder.
func TestLeaseOfAnExitedProcessIsTakenOverAtOnce(t *testing.T) {
	self := loop.ProcessMark()
	if self == "" {
		t.Skip("no process marks here (they need Linux's /proc)")
	}
	exited := exec.Command(os.Args[0], "-test.run=^$")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := strconv.Itoa(exited.Process.Pid)
	machine := loop.MachineID()
	for _, tc := range []struct {
		name, holder string
		takenOver    bool
	}{
		{"an exited process", "worker:" + deadPID + ":0badf00d/" + deadPID + ".1." + machine, true},
		{"a process with the holder's ID that started later", "worker:1:0badf00d/" + strconv.Itoa(os.Getpid()) + ".1." + machine, true},
		{"a running process", "worker:1:0badf00d" + self, false},
		{"an exited process of another machine", "worker:" + deadPID + ":0badf00d/" + deadPID + ".1.0123456789ab", false},
		{"a holder without a mark", "worker:" + deadPID + ":0badf00d", false},
	} {
		t.Run(tc.name, func(t *testing.T) { resumeHeldBy(t, tc.holder, tc.takenOver) })
	}
}

// On a machine whose /proc shows each user only its own processes
// (mounted with hidepid=2), a holder run by another user is not in /proc
// at all: it is not judged gone for that, but waited for, since it may
// well run; one that has exited is still taken over. (Every holder /proc
// did not show was taken for exited, and a running driver of another user
// lost its run to a second one.)
func TestLeaseOfAProcessHiddenFromUsIsWaitedFor(t *testing.T) {
	self := loop.ProcessMark()
	if self == "" {
		t.Skip("no process marks here (they need Linux's /proc)")
	}
	exited := exec.Command(os.Args[0], "-test.run=^$")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := strconv.Itoa(exited.Process.Pid)
	machine := loop.MachineID()
	defer loop.HideProcesses(t.TempDir())()
	for _, tc := range []struct {
		name, holder string
		takenOver    bool
	}{
		{"a running process", "worker:1:0badf00d" + self, false},
		{"an exited process", "worker:" + deadPID + ":0badf00d/" + deadPID + ".1." + machine, true},
	} {
		t.Run(tc.name, func(t *testing.T) { resumeHeldBy(t, tc.holder, tc.takenOver) })
	}
}

// resumeHeldBy resumes a paused run whose lease holder holds, and checks
// that the resume took the lease over and applied the run's write once,
// or, unless takenOver, was refused and did nothing.
func resumeHeldBy(t *testing.T, holder string, takenOver bool) {
	t.Helper()
	st := store.NewMemory()
	g := newGatedWrite()
	close(g.release)
	runID, cfg := pausedWrite(t, st, g)
	ctx := context.Background()
	if _, err := st.AcquireLease(ctx, runID, holder, time.Hour); err != nil {
		t.Fatal(err)
	}
	r, err := loop.NewRunner(cfg("next"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Resume(ctx, runID)
	if !takenOver {
		mustBeHeld(t, res, err, holder)
		if g.applied.Load() != 0 {
			t.Fatal("the refused driver acted")
		}
		return
	}
	mustStatus(t, res, err, loop.FinalAnswer)
	if n := g.applied.Load(); n != 1 {
		t.Fatalf("the refund was applied %d times", n)
	}
}
