package temporal

import (
	"context"
	"testing"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
)

// A worker's log cache holds one copy of a run's log however many turns
// it takes: each turn's log replaces the one before it, rather than every
// turn keeping a whole copy (up to 256 of them).
func TestLogCacheKeepsOneLogPerRun(t *testing.T) {
	ctx := context.Background()
	blobs := store.NewMemory()
	c := newLogCache()
	head, seq := "", 0
	for range 300 {
		evs := make([]loop.Event, 6)
		for i := range evs {
			seq++
			evs[i] = loop.Event{Seq: seq, Kind: loop.Resumed}
		}
		var err error
		if head, err = appendLog(ctx, blobs, c, head, evs); err != nil {
			t.Fatal(err)
		}
		got, err := readLog(ctx, blobs, c, head)
		if err != nil || len(got) != seq {
			t.Fatalf("after event %d: %d events read back (%v)", seq, len(got), err)
		}
	}
	if len(c.logs) != 1 || c.events != seq {
		t.Fatalf("the cache holds %d logs, %d events in all; want the one log of %d events", len(c.logs), c.events, seq)
	}
	// Read back from the store alone, the log is the same.
	got, err := readLog(ctx, blobs, nil, head)
	if err != nil || len(got) != seq || got[seq-1].Seq != seq {
		t.Fatalf("from the store: %d events (%v)", len(got), err)
	}
}
