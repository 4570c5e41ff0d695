package executor_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// slowRelease holds the first claim release until told to go on, so that a
// second attempt can take the key over in between.
type slowRelease struct {
	store.Ledger
	n       atomic.Int32
	blocked chan struct{}
	proceed chan struct{}
}

func (l *slowRelease) ReleaseClaim(ctx context.Context, claim store.Record) error {
	if l.n.Add(1) == 1 {
		close(l.blocked)
		<-l.proceed
	}
	return l.Ledger.(store.ClaimReleaser).ReleaseClaim(ctx, claim)
}

type takeoverIn struct {
	OrderID string `json:"order_id"`
}

// Two attempts find one stale in-flight record at once: the one that
// releases it late must not delete the claim the other made meanwhile.
func TestStaleTakeoverNeverReleasesANewerClaim(t *testing.T) {
	mem := store.NewMemory()
	old := time.Now().Add(-time.Hour)
	// A write left in flight by a process that died an hour ago.
	if _, ok, err := mem.Claim(context.Background(), store.Record{Key: "refund:A1", ArgsHash: "h", CallID: "dead", CreatedAt: old}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	l := &slowRelease{Ledger: mem, blocked: make(chan struct{}), proceed: make(chan struct{})}
	var effects atomic.Int32
	started := make(chan struct{}, 2)
	tl := tool.MustNew(tool.Spec[takeoverIn]{Name: "refund", Effect: tool.Write, Timeout: time.Second,
		IdempotencyKey: func(in takeoverIn) string { return "refund:" + in.OrderID },
		Lookup:         func(context.Context, takeoverIn) (any, bool, error) { return nil, effects.Load() > 0, nil },
	}, func(ctx context.Context, in takeoverIn) (map[string]string, error) {
		started <- struct{}{}
		time.Sleep(100 * time.Millisecond) // a write takes a while
		effects.Add(1)
		return map[string]string{"ok": in.OrderID}, nil
	})
	ex := executor.New(&executor.Options{Ledger: l})
	mk := func(id string) executor.Call {
		return executor.Call{Call: llm.ToolCall{ID: id, Name: "refund", Arguments: []byte(`{"order_id":"A1"}`)}, Tool: tl,
			IdempotencyKey: "refund:A1", ArgsHash: "h", RunID: "r-" + id}
	}
	var wg sync.WaitGroup
	outs := make([]executor.Outcome, 2)
	wg.Add(2)
	go func() { defer wg.Done(); outs[0] = ex.Run(context.Background(), mk("y")) }()
	<-l.blocked // Y judged the record stale and is about to release it
	go func() { defer wg.Done(); outs[1] = ex.Run(context.Background(), mk("x")) }()
	<-started // X released the stale record, claimed the key and is writing
	close(l.proceed)
	wg.Wait()
	t.Logf("y: %+v", outs[0])
	t.Logf("x: %+v", outs[1])
	if n := effects.Load(); n != 1 {
		t.Fatalf("the refund happened %d times", n)
	}
}
