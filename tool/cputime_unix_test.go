//go:build unix

package tool

import (
	"syscall"
	"testing"
	"time"
)

// processCPU returns the CPU time the process has used, in all threads.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds to b the process's CPU time per operation since start
// ("cpu-ns/op"), which the machine's other load moves less than the wall
// time: on a shared machine a benchmark waits for a processor.
func reportCPU(b *testing.B, start time.Duration) {
	if b.N > 0 && start > 0 {
		b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
	}
}
