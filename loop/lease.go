package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolloop/toolloop/store"
)

// DefaultLeaseTTL is Config.LeaseTTL's default: long enough that a busy
// store or a slow machine does not lose a lease between renewals (every
// third of it), short enough that a crashed driver's run can be taken
// over within half a minute.
const DefaultLeaseTTL = 30 * time.Second

// leaseHold is a drive's hold on its run's lease: taken before the run's
// log is read, renewed in the background, released when the drive ends.
// A nil *leaseHold holds nothing (a store without leases).
type leaseHold struct {
	st    store.Leaser
	lease *store.Lease
	// stop ends the renewals, also one under way (release need not
	// wait for a renewal a frozen store holds).
	stop context.CancelFunc
	done chan struct{}
	// cancel ends the drive's context when the lease is lost.
	cancel context.CancelCauseFunc
	// until is the call deadline of the drive's last append (unix
	// nanoseconds; 0 for none): the release gives up by then too, so
	// that a frozen store holds the run no longer than its appends.
	until atomic.Int64
}

// held is the lease held, or nil for no hold.
func (h *leaseHold) held() *store.Lease {
	if h == nil {
		return nil
	}
	return h.lease
}

// leaseHoldKey finds a drive's leaseHold in its context.
type leaseHoldKey struct{}

// releaseBy bounds the release by t.
func (h *leaseHold) releaseBy(t time.Time) { h.until.Store(t.UnixNano()) }

// holdLease takes runID's lease for a new owner when Config.Store has
// leases (store.Leaser) and keeps it renewed every third of Config.LeaseTTL
// until release. The context returned (ctx itself on an error) ends, with
// the loss as its cause, if the lease is lost meanwhile (another driver
// took it over after it expired): the drive then stops acting, and its
// appends, fenced by the lease, record nothing. A renewal that fails for
// another reason (the store is briefly unreachable) is tried again at the
// next tick; if the lease expires meanwhile and nobody takes it, the drive
// keeps it.
//
// A store without leases gets no hold (nil): the sequence check of Append
// is its only guard against a second driver.
func (r *Runner) holdLease(ctx context.Context, runID string) (context.Context, *leaseHold, error) {
	l, ok := r.cfg.Store.(store.Leaser)
	if !ok {
		return ctx, nil, nil
	}
	ttl := r.cfg.LeaseTTL
	owner := r.cfg.LeaseOwner + ":" + randomID()[:8] + processMark()
	lease, err := l.AcquireLease(ctx, runID, owner, ttl)
	var held *store.LeaseHeldError
	if errors.As(err, &held) && holderGone(held.Owner) {
		// Its holder was a process on this machine that has exited (a
		// crash, or a store that failed as it stopped): nobody renews the
		// lease, so it is taken over now rather than at its expiry.
		// Releasing it only while that holder still has it keeps two
		// drivers that both find it from both taking it.
		if rerr := l.ReleaseLease(ctx, runID, held.Owner); rerr == nil {
			lease, err = l.AcquireLease(ctx, runID, owner, ttl)
		}
	}
	if err != nil {
		if errors.As(err, &held) {
			return ctx, nil, err
		}
		return ctx, nil, fmt.Errorf("loop: taking the lease of run %s: %w", runID, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	h := &leaseHold{st: l, lease: &lease, done: make(chan struct{}), cancel: cancel}
	ctx = context.WithValue(ctx, leaseHoldKey{}, h)
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	h.stop = stop
	go h.renew(rctx, ttl)
	return ctx, h, nil
}

// renew renews the lease every third of ttl until release, and ends the
// drive if it was lost.
func (h *leaseHold) renew(ctx context.Context, ttl time.Duration) {
	defer close(h.done)
	every := max(ttl/3, time.Millisecond) // a ticker needs a positive period
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return // released while the tick came
		}
		rctx, cancel := context.WithTimeout(ctx, every)
		_, err := h.st.RenewLease(rctx, h.lease.RunID, h.lease.Owner, ttl)
		cancel()
		if errors.Is(err, store.ErrLeaseLost) && ctx.Err() == nil {
			h.cancel(err)
			return
		}
	}
}

// release stops the renewals and gives the lease back, so that the next
// driver need not wait for it to expire. It reports no error: the run's
// outcome is recorded by then, and a lease that could not be released
// expires.
func (h *leaseHold) release(ctx context.Context) {
	if h == nil || h.lease == nil {
		return
	}
	h.stop()
	<-h.done
	h.cancel(nil)
	rctx := context.WithoutCancel(ctx)
	if until := h.until.Load(); until != 0 {
		rctx = store.WithCallDeadline(rctx, time.Unix(0, until))
	}
	_ = h.st.ReleaseLease(rctx, h.lease.RunID, h.lease.Owner)
}

// defaultLeaseOwner names this process in leases: host and process ID.
func defaultLeaseOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// A lease's owner ends in a mark of the process that holds it, on Linux:
// "/PID.START.MACHINE", its process ID, its start time (field 22 of
// /proc/PID/stat, in clock ticks since boot) and a digest of the boot and
// PID namespace it runs in. Another driver on the same machine that finds
// the lease held by a process that no longer runs takes it over at once
// (holderGone). The start time tells a process from a later one that got
// its ID; the machine digest keeps a driver from judging a process ID of
// another machine or container, whose host name may well be the same.
// Holders without a mark (other systems, older versions) are waited for
// until their lease expires.

// processMark returns this process's mark, or "" where there is none.
func processMark() string {
	markOnce.Do(func() {
		machine := machineID()
		start, ok := processStart(os.Getpid())
		if machine == "" || !ok {
			return
		}
		mark = "/" + strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(start, 10) + "." + machine
	})
	return mark
}

var (
	markOnce sync.Once
	mark     string
)

// machineID is a digest of this boot of this machine and of the PID
// namespace of this process: two processes with the same machineID see
// the same processes under the same IDs. "" when it cannot be read.
func machineID() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil || len(bytes.TrimSpace(boot)) == 0 {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil || ns == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(string(bytes.TrimSpace(boot)) + "\n" + ns))
	return hex.EncodeToString(sum[:6])
}

// processStart returns when process pid started (clock ticks since boot,
// field 22 of /proc/PID/stat), and false if no such process runs: it does
// not exist, or has exited and not yet been reaped (a zombie).
func processStart(pid int) (uint64, bool) {
	b, err := os.ReadFile(procDir + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses itself: the fields after it follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (the state), so field 22 is fields[19].
	if len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return 0, false
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, false
	}
	return start, true
}

// procDir is where processStart reads the processes' entries; tests
// point it elsewhere.
var procDir = "/proc"

// holderGone reports whether owner's mark names a process of this machine
// (same boot, same PID namespace) that no longer runs: its ID is free, a
// zombie's, or another process's that started at another time. A process
// that /proc hides from us but that runs is not judged gone. An owner
// without a mark, or of another machine, is not judged: false.
func holderGone(owner string) bool {
	i := strings.LastIndexByte(owner, '/')
	if i < 0 {
		return false
	}
	parts := strings.Split(owner[i+1:], ".")
	if len(parts) != 3 {
		return false
	}
	machine := machineID()
	if machine == "" || parts[2] != machine {
		return false
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil || pid <= 0 {
		return false
	}
	start, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return false
	}
	now, running := processStart(pid)
	if !running {
		return !hiddenProcess(pid)
	}
	return now != start
}

// hiddenProcess reports whether process pid runs although /proc does not
// show it to us: mounted with hidepid, /proc shows a user only its own
// processes, while kill(pid, 0) still finds the others. Such a holder may
// well be driving its run; a zombie's entry is shown, and judged by it.
func hiddenProcess(pid int) bool {
	if _, err := os.ReadFile(procDir + "/" + strconv.Itoa(pid) + "/stat"); err == nil {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	defer p.Release()
	return !errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone)
}
