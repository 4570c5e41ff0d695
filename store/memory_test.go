package store_test

import (
	"testing"
	"time"

	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/storetest"
)

func TestMemoryLedger(t *testing.T) {
	storetest.TestLedger(t, func(*testing.T) store.Ledger { return store.NewMemory() })
}

func TestMemoryEventLog(t *testing.T) {
	storetest.TestEventLog(t, func(*testing.T) store.EventLog { return store.NewMemory() })
}

func TestMemoryLeaser(t *testing.T) {
	storetest.TestLeaser(t, func(_ *testing.T, now func() time.Time) storetest.LeasedLog { return store.NewMemoryClock(now) })
}

func TestMemoryBlobs(t *testing.T) {
	storetest.TestBlobs(t, func(*testing.T) store.Blobs { return store.NewMemory() })
}
