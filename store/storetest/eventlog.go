package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolloop/toolloop/store"
)

// TestEventLog runs the event-log conformance suite. open must return a
// new, empty log each time it is called.
func TestEventLog(t *testing.T, open func(t *testing.T) store.EventLog) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	evs := func(from, n int) []store.EventRecord {
		var out []store.EventRecord
		for i := from; i < from+n; i++ {
			out = append(out, store.EventRecord{Seq: i, Kind: fmt.Sprint("k", i), At: t0.Add(time.Duration(i) * time.Second),
				Data: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, i))})
		}
		return out
	}
	sum := func(status string, steps int) store.RunSummary {
		return store.RunSummary{Status: status, Steps: steps, StartedAt: t0, UpdatedAt: t0.Add(time.Minute)}
	}

	t.Run("append and read back", func(t *testing.T) {
		l := open(t)
		if err := l.Append(ctx, "r1", evs(1, 3), sum("", 1)); err != nil {
			t.Fatal(err)
		}
		if err := l.Append(ctx, "r1", evs(4, 2), sum("final_answer", 2)); err != nil {
			t.Fatal(err)
		}
		got, err := l.Events(ctx, "r1")
		if err != nil || len(got) != 5 {
			t.Fatalf("events = %d, %v", len(got), err)
		}
		for i, ev := range got {
			if ev.Seq != i+1 || ev.Kind != fmt.Sprint("k", i+1) || !ev.At.Equal(t0.Add(time.Duration(i+1)*time.Second)) ||
				!jsonEqual(ev.Data, json.RawMessage(fmt.Sprintf(`{"seq":%d}`, i+1))) {
				t.Fatalf("event %d = %+v", i, ev)
			}
		}
		runs, err := l.Runs(ctx, "")
		if err != nil || len(runs) != 1 || runs[0].RunID != "r1" || runs[0].Status != "final_answer" || runs[0].Steps != 2 {
			t.Fatalf("runs = %+v, %v", runs, err)
		}
	})

	t.Run("a gap or overlap writes nothing", func(t *testing.T) {
		l := open(t)
		if err := l.Append(ctx, "r1", evs(1, 2), sum("", 0)); err != nil {
			t.Fatal(err)
		}
		for _, bad := range [][]store.EventRecord{evs(2, 2), evs(4, 1), evs(1, 1)} {
			if err := l.Append(ctx, "r1", bad, sum("x", 9)); !errors.Is(err, store.ErrSeqConflict) {
				t.Fatalf("append seq %d: err = %v", bad[0].Seq, err)
			}
		}
		if err := l.Append(ctx, "new", evs(2, 1), sum("", 0)); !errors.Is(err, store.ErrSeqConflict) {
			t.Fatalf("a new run must start at seq 1: err = %v", err)
		}
		got, _ := l.Events(ctx, "r1")
		runs, _ := l.Runs(ctx, "")
		if len(got) != 2 || len(runs) != 1 || runs[0].Status != "" {
			t.Fatalf("after conflicts: %d events, runs %+v", len(got), runs)
		}
	})

	t.Run("unknown run", func(t *testing.T) {
		l := open(t)
		if _, err := l.Events(ctx, "nope"); !errors.Is(err, store.ErrUnknownRun) {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("list by status, newest first", func(t *testing.T) {
		l := open(t)
		for i, st := range []string{"final_answer", "confirmation_required", "final_answer"} {
			s := sum(st, i)
			s.StartedAt = t0.Add(time.Duration(i) * time.Hour)
			s.Pending = json.RawMessage(`[{"call_id":"c1"}]`)
			if err := l.Append(ctx, fmt.Sprint("run", i), evs(1, 1), s); err != nil {
				t.Fatal(err)
			}
		}
		all, _ := l.Runs(ctx, "")
		if len(all) != 3 || all[0].RunID != "run2" || all[2].RunID != "run0" {
			t.Fatalf("all = %+v", all)
		}
		fa, _ := l.Runs(ctx, "final_answer")
		if len(fa) != 2 || !jsonEqual(fa[0].Pending, json.RawMessage(`[{"call_id":"c1"}]`)) {
			t.Fatalf("final_answer runs = %+v", fa)
		}
	})

	t.Run("concurrent appenders: one wins each seq", func(t *testing.T) {
		l := open(t)
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := l.Append(ctx, "hot", evs(1, 2), sum("", 0))
				if err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				} else if !errors.Is(err, store.ErrSeqConflict) {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		got, _ := l.Events(ctx, "hot")
		if wins != 1 || len(got) != 2 {
			t.Fatalf("%d winners, %d events", wins, len(got))
		}
	})
}
