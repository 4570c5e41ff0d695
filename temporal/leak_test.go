package temporal_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the SDK's test
// environment stops all of its own. Against a dev server
// (TOOLLOOP_TEMPORAL_ADDR) the check is off: gRPC connections wind down
// in the background after the client closes.
// The binary may also run as a test's worker process (lostWorkerMain).
func TestMain(m *testing.M) {
	lostWorkerMain()
	if os.Getenv("TOOLLOOP_TEMPORAL_ADDR") != "" {
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}
