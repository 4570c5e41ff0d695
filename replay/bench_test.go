package replay_test

import (
	"context"
	"testing"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/replay"
)

// BenchmarkReplaySandbox replays the sandbox's 21 recorded runs with the
// configuration they ran with: what a suite of pinned runs costs.
func BenchmarkReplaySandbox(b *testing.B) {
	type run struct {
		events []loop.Event
		cfg    replay.Config
	}
	var runs []run
	for _, s := range orders.Scenarios() {
		runs = append(runs, run{readLog(b, s.Name), sameConfig(b, s)})
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range runs {
			if rep, err := replay.Run(context.Background(), r.events, r.cfg); err != nil || !rep.Equal() {
				b.Fatal(err)
			}
		}
	}
}
