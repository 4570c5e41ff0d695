package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/sqlite"
)

// BenchmarkLedgerWrite measures one guarded write's ledger traffic: claim
// the key, record the result, look it up again (as a replay would), for
// each synchronous setting. ops/s counts whole claim+finish+lookup cycles.
func BenchmarkLedgerWrite(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("synchronous="+sync, func(b *testing.B) {
			s, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"), &sqlite.Options{Synchronous: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			result := json.RawMessage(`{"call_id":"c1","name":"refund_order","status":"ok","content":{"refunded":true}}`)
			now := time.Now()
			i := 0
			for b.Loop() {
				key := fmt.Sprintf("refund:%d", i)
				i++
				if _, claimed, err := s.Claim(ctx, store.Record{Key: key, ArgsHash: "h", CreatedAt: now}); err != nil || !claimed {
					b.Fatalf("claim: %v %v", claimed, err)
				}
				if err := s.Finish(ctx, key, result, now); err != nil {
					b.Fatal(err)
				}
				if _, ok, err := s.Lookup(ctx, key); err != nil || !ok {
					b.Fatalf("lookup: %v %v", ok, err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}
