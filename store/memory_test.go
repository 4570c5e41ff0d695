package store_test

import (
	"testing"

	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/storetest"
)

func TestMemoryLedger(t *testing.T) {
	storetest.TestLedger(t, func(*testing.T) store.Ledger { return store.NewMemory() })
}

func TestMemoryEventLog(t *testing.T) {
	storetest.TestEventLog(t, func(*testing.T) store.EventLog { return store.NewMemory() })
}
