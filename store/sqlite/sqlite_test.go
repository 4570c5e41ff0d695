package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/store/storetest"
)

func TestSQLiteLedger(t *testing.T) {
	storetest.TestLedger(t, func(t *testing.T) store.Ledger {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "toolloop.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestOpenRejectsUnknownSynchronous(t *testing.T) {
	if _, err := sqlite.Open(filepath.Join(t.TempDir(), "x.db"), &sqlite.Options{Synchronous: "SOMETIMES"}); err == nil {
		t.Fatal("no error for an unknown synchronous setting")
	}
}
