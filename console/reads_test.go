package console_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/console/consoletest"
	"github.com/toolloop/toolloop/store"
)

// slowReader is a backend whose whole-log reads take a while and are
// counted: how many ran at once at most.
type slowReader struct {
	*console.LogBackend
	mu       sync.Mutex
	in, most int
}

func (b *slowReader) Records(ctx context.Context, runID string, after int) ([]store.EventRecord, error) {
	b.mu.Lock()
	b.in++
	b.most = max(b.most, b.in)
	b.mu.Unlock()
	time.Sleep(30 * time.Millisecond)
	b.mu.Lock()
	b.in--
	b.mu.Unlock()
	return b.LogBackend.Records(ctx, runID, after)
}

// Many views of runs at once read the logs MaxReads at a time: a store
// hands a log over whole, large events and all, so this is what bounds
// the memory of many views of a run that holds a large event.
func TestReadsAreCapped(t *testing.T) {
	mem := store.NewMemory()
	partialTurnRun(t, mem, "big", 1<<20)
	sr := &slowReader{LogBackend: consoletest.Backend(mem)}
	e := newEnv(t, func(o *console.Options) {
		o.Backend = sr
		o.MaxReads = 2
	})
	var wg sync.WaitGroup
	codes := make(chan int, 8)
	for i := range 8 {
		path := "/api/runs/big"
		if i%2 == 1 {
			path = "/api/runs/big/events/2"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			hr, _ := http.NewRequest(http.MethodGet, e.ts.URL+path, nil)
			hr.Header.Set("Authorization", "Bearer "+aliceToken)
			resp, err := http.DefaultClient.Do(hr)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("a view answered %d, want 200", c)
		}
	}
	if sr.most > 2 {
		t.Fatalf("%d whole-log reads ran at once, want at most MaxReads (2)", sr.most)
	}
}
