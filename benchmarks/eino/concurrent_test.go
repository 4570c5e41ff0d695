//go:build unix

package eino

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cloudwego/eino/schema"
)

// turnWait is how long the model of BenchmarkConcurrent takes per turn.
const turnWait = 200 * time.Millisecond

// BenchmarkConcurrent starts N runs of the agent at once, with a model that
// waits turnWait per turn, and reports the wall time until all are done
// against the ideal (6 turns x turnWait), and the memory and goroutines per
// run while all are in flight: toolloop's BenchmarkConcurrent, with the
// same harness. Run it with -test.benchtime 1x.
func BenchmarkConcurrent(b *testing.B) {
	for _, n := range []int{10_000, 50_000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var all allIn
			agent := newAgent(b, scripted{wait: turnWait, first: all.wait})
			msgs := []*schema.Message{schema.UserMessage("check the keys")}
			measureConcurrent(b, n, &all, func(ctx context.Context) error {
				res, err := agent.Generate(ctx, msgs)
				if err == nil && res.Content != "done" {
					err = fmt.Errorf("answer %q", res.Content)
				}
				return err
			})
		})
	}
}

// allIn holds each run's first model turn until every run has reached it
// and the harness has measured them, so that all are in flight at once
// however long the machine takes to start them (on a busy machine the
// first runs would otherwise end before the last began, and the figures
// per run would not be per run), and so that a collection can find the
// live heap of runs that are all at the same point.
type allIn struct {
	n, in        atomic.Int64
	all, release chan struct{}
}

func (a *allIn) reset(n int) {
	a.n.Store(int64(n))
	a.in.Store(0)
	a.all, a.release = make(chan struct{}), make(chan struct{})
}

// wait counts a run in and returns when the harness lets all go, or ctx
// is done.
func (a *allIn) wait(ctx context.Context) error {
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

// measureConcurrent starts n goroutines that each call run once and waits
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
// It is toolloop's harness (loop/concurrency_bench_test.go), copied since
// this is another module.
func measureConcurrent(b *testing.B, n int, all *allIn, run func(context.Context) error) {
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
	ideal := benchTurns * turnWait
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
