//go:build unix

// Package benchload is the harness of the concurrency benchmarks: many
// runs at once of the benchmark workload, toolloop's in loop and eino's in
// benchmarks/eino, measured the same way. It holds no state of its own.
package benchload

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TurnWait is how long the workload's model takes per turn, and Turns how
// many turns a run has (5 of three reads, then the answer).
const (
	TurnWait = 200 * time.Millisecond
	Turns    = 6
)

// Gate holds each run's first model turn until every run has reached it
// and the harness has measured them, so that all are in flight at once
// however long the machine takes to start them (on a busy machine the
// first runs would otherwise end before the last began, and the figures
// per run would not be per run), and so that a collection can find the
// live heap of runs that are all at the same point.
type Gate struct {
	n, in        atomic.Int64
	all, release chan struct{}
}

func (a *Gate) reset(n int) {
	a.n.Store(int64(n))
	a.in.Store(0)
	a.all, a.release = make(chan struct{}), make(chan struct{})
}

// Wait counts a run in and returns when the harness lets all go, or ctx
// is done.
func (a *Gate) Wait(ctx context.Context) error {
	if a.in.Add(1) == a.n.Load() {
		close(a.all)
	}
	select {
	case <-a.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Measure starts n goroutines that each call run once and waits
// for them; all holds the runs' first model turns until every run has
// begun. From then until the first run ends (so while all n are in
// flight) it samples heap objects plus goroutine stacks and the number of
// goroutines, less what they were before the start (after a collection),
// and reports their peaks per run; the heap figure includes garbage not
// yet collected, as the process's footprint does, and live-heap-KB/run is
// the heap after a collection while all are held at their first model
// turn. It reports the wall
// time from the start until all are done, and the part of it spent before
// all had begun (ramp-ms), and the process's CPU time per run, which
// depends less than the wall time on what else the machine is doing.
func Measure(b *testing.B, n int, all *Gate, run func(context.Context) error) {
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	read := func() (heap, stacks float64, goroutines int) {
		metrics.Read(samples)
		return float64(samples[0].Value.Uint64()), float64(samples[1].Value.Uint64()), runtime.NumGoroutine()
	}
	cpu := func() time.Duration { // the process's user and system time
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var wall, ramp, cpuTime time.Duration
	var heapPeak, stackPeak, memPeak, gPeak, live float64
	for range b.N {
		all.reset(n)
		runtime.GC()
		heap0, stacks0, g0 := read()
		peak := func(heap, stacks float64, g int) {
			heap, stacks = heap-heap0, stacks-stacks0
			if heap+stacks > memPeak {
				memPeak, heapPeak, stackPeak = heap+stacks, heap, stacks
			}
			gPeak = max(gPeak, float64(g-g0))
		}
		ctx, cancel := context.WithCancel(context.Background())
		var done atomic.Int64
		var failed atomic.Pointer[error]
		var wg sync.WaitGroup
		start, cpu0 := time.Now(), cpu()
		for range n {
			wg.Go(func() {
				if err := run(ctx); err != nil && failed.CompareAndSwap(nil, &err) {
					cancel() // releases the others from all.wait
				}
				done.Add(1)
			})
		}
		select {
		case <-all.all:
		case <-ctx.Done():
		}
		ramp += time.Since(start)
		// All runs are held at their first model turn: sample, collect and
		// sample the live heap, then let them go. The pause is left out of
		// the wall and CPU times.
		held, heldCPU := time.Now(), cpu()
		peak(read())
		runtime.GC()
		heap, _, _ := read()
		live = max(live, heap-heap0)
		pause, pauseCPU := time.Since(held), cpu()-heldCPU
		close(all.release)
		// Then every 20 ms until a run ends: a run's state grows with its
		// history. These samples include garbage not yet collected, as
		// the process's footprint does, and move with the collector's pace.
		for {
			time.Sleep(20 * time.Millisecond)
			heap, stacks, g := read()
			if done.Load() > 0 {
				break
			}
			peak(heap, stacks, g)
		}
		wg.Wait()
		wall, cpuTime = wall+time.Since(start)-pause, cpuTime+cpu()-cpu0-pauseCPU
		cancel()
		if err := failed.Load(); err != nil {
			b.Fatalf("run: %v", *err)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
	ideal := Turns * TurnWait
	b.ReportMetric(ms(wall), "wall-ms")
	b.ReportMetric(ms(ideal)*float64(b.N), "ideal-ms")
	b.ReportMetric(float64(wall)/float64(b.N)/float64(ideal), "wall/ideal")
	b.ReportMetric(ms(ramp), "ramp-ms")
	b.ReportMetric(float64(cpuTime)/float64(time.Microsecond)/float64(b.N*n), "cpu-µs/run")
	b.ReportMetric(memPeak/1024/float64(n), "KB/run")
	b.ReportMetric(heapPeak/1024/float64(n), "heap-KB/run")
	b.ReportMetric(live/1024/float64(n), "live-heap-KB/run")
	b.ReportMetric(stackPeak/1024/float64(n), "stack-KB/run")
	b.ReportMetric(gPeak/float64(n), "goroutines/run")
}
