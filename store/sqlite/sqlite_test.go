package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

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

func TestSQLiteEventLog(t *testing.T) {
	storetest.TestEventLog(t, func(t *testing.T) store.EventLog {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "toolloop.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestSQLiteSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolloop.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := s.Claim(ctx, store.Record{Key: "k", ArgsHash: "h", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "r", []store.EventRecord{{Seq: 1, Kind: "started", At: time.Now(), Data: []byte(`{}`)}}, store.RunSummary{StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rec, ok, err := s.Lookup(ctx, "k"); !ok || err != nil || rec.State != store.InFlight {
		t.Fatalf("ledger after reopen: %+v %v %v", rec, ok, err)
	}
	if evs, err := s.Events(ctx, "r"); err != nil || len(evs) != 1 {
		t.Fatalf("events after reopen: %v %v", evs, err)
	}
}
