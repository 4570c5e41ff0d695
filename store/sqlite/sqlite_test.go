package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

func TestSQLiteBlobs(t *testing.T) {
	storetest.TestBlobs(t, func(t *testing.T) store.Blobs {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "toolloop.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestSQLiteLeaser(t *testing.T) {
	storetest.TestLeaser(t, func(t *testing.T, now func() time.Time) storetest.LeasedLog {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "toolloop.db"), &sqlite.Options{Now: now})
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

// Existing and ReadOnly open only a store that is there: a missing, empty
// or foreign file is refused and left as it was; ReadOnly reads a store
// and refuses every write.
func TestOpenExistingAndReadOnly(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "foreign.db")
	db, err := sql.Open("sqlite", foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE notes (text TEXT)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte("not a database, just text that is long enough to have a header's length"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []sqlite.Options{{Existing: true}, {ReadOnly: true}} {
		for _, tc := range []struct{ path, want string }{
			{missing, "no such file"}, {empty, "the file is empty"}, {foreign, "not a toolloop store"}, {notDB, "not a SQLite database"},
		} {
			before, _ := os.ReadFile(tc.path)
			_, err := sqlite.Open(tc.path, &opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%+v %s: %v, want an error saying %q", opts, filepath.Base(tc.path), err, tc.want)
			}
			after, _ := os.ReadFile(tc.path)
			if string(before) != string(after) {
				t.Errorf("%+v %s: the file changed", opts, filepath.Base(tc.path))
			}
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("opening a missing store created it")
	}

	path := filepath.Join(dir, "toolloop.db")
	rw, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec := store.EventRecord{Seq: 1, Kind: "started", At: time.Now(), Data: []byte(`{}`)}
	if err := rw.Append(ctx, "r1", []store.EventRecord{rec}, store.RunSummary{RunID: "r1", StartedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	ro, err := sqlite.Open(path, &sqlite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if recs, err := ro.Events(ctx, "r1"); err != nil || len(recs) != 1 {
		t.Fatalf("read-only Events: %d records, %v", len(recs), err)
	}
	rec.Seq = 2
	if err := ro.Append(ctx, "r1", []store.EventRecord{rec}, store.RunSummary{RunID: "r1"}); err == nil {
		t.Fatal("a read-only store took a write")
	}
	ex, err := sqlite.Open(path, &sqlite.Options{Existing: true})
	if err != nil {
		t.Fatalf("Existing on a store: %v", err)
	}
	ex.Close()
}

// A store made before run leases (no run_leases table) is still a store:
// read-only it opens and reads without the table (and takes no lease,
// with an error rather than a crash), and opened to write it gets the
// table and leases runs.
func TestStoreWithoutLeaseTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec := store.EventRecord{Seq: 1, Kind: "started", At: time.Now(), Data: []byte(`{}`)}
	if err := s.Append(ctx, "r1", []store.EventRecord{rec}, store.RunSummary{StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec(`DROP TABLE run_leases`); err != nil {
		t.Fatal(err)
	}
	s.Close()

	ro, err := sqlite.Open(path, &sqlite.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a store without run_leases: %v", err)
	}
	if recs, err := ro.Events(ctx, "r1"); err != nil || len(recs) != 1 {
		t.Fatalf("read-only Events: %d records, %v", len(recs), err)
	}
	if _, err := ro.AcquireLease(ctx, "r1", "alice", time.Minute); err == nil {
		t.Fatal("a read-only store gave a lease")
	}
	ro.Close()

	rw, err := sqlite.Open(path, &sqlite.Options{Existing: true})
	if err != nil {
		t.Fatalf("Existing open of a store without run_leases: %v", err)
	}
	defer rw.Close()
	if _, err := rw.AcquireLease(ctx, "r1", "alice", time.Minute); err != nil {
		t.Fatalf("leasing after the table was added: %v", err)
	}
}

// A store made before blobs (no blobs table) is still a store: read-only,
// Blob finds nothing (ErrUnknownBlob, not an SQL error), and opened to
// write it gets the table and keeps blobs across a reopen.
func TestStoreWithoutBlobTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec(`DROP TABLE blobs`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ctx := context.Background()
	data := []byte("a conversation")
	d := store.BlobDigest(data)

	ro, err := sqlite.Open(path, &sqlite.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a store without blobs: %v", err)
	}
	if _, err := ro.Blob(ctx, d); !errors.Is(err, store.ErrUnknownBlob) {
		t.Fatalf("read-only Blob without the table: %v, want ErrUnknownBlob", err)
	}
	ro.Close()

	rw, err := sqlite.Open(path, &sqlite.Options{Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.PutBlob(ctx, data); err != nil {
		t.Fatalf("storing a blob after the table was added: %v", err)
	}
	rw.Close()
	again, err := sqlite.Open(path, &sqlite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got, err := again.Blob(ctx, d); err != nil || string(got) != string(data) {
		t.Fatalf("after reopening: %q, %v", got, err)
	}
}
