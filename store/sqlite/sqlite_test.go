package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
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

// makeDB writes a SQLite database of another program at path, made by
// stmts, and returns its bytes.
func makeDB(t *testing.T, path string, stmts ...string) []byte {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dirNames lists the files in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// pragma reads an integer pragma of the file at path.
func pragma(t *testing.T, path, name string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("PRAGMA " + name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Open makes a store only in a new or empty file or in a store: another
// program's database is refused, by name and with the reason, and left
// exactly as it was, without a journal, WAL or shared-memory file beside
// it. (Open used to add its tables and WAL mode to any SQLite file, and to
// stop half-way, a table and the WAL left behind, on a file whose runs
// table was another's.)
func TestOpenLeavesAnotherProgramsDatabaseAlone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stmts []string
		want  string
	}{
		{"a database with tables of its own", []string{"CREATE TABLE notes (text TEXT)", "INSERT INTO notes VALUES ('keep me')"}, "lacks toolloop's tables idempotency_ledger, runs, run_events"},
		{"a database with a runs table of its own", []string{"CREATE TABLE runs (id INTEGER PRIMARY KEY, km REAL)", "INSERT INTO runs (km) VALUES (5.2)"}, "its table runs has the columns (id, km)"},
		{"a database marked by another program", []string{"PRAGMA application_id = 1196444487"}, "its application_id is 0x47504b47"},
		{"toolloop's tables under another program's mark", []string{"PRAGMA application_id = 7", "CREATE TABLE idempotency_ledger (key TEXT)"}, "its application_id is 0x7"},
		{"a database with a user_version of its own", []string{"PRAGMA user_version = 3"}, "lacks toolloop's tables"},
		{"toolloop's tables with a user_version of another program", []string{"CREATE TABLE idempotency_ledger (key TEXT, args_hash TEXT, state TEXT, result BLOB, run_id TEXT, call_id TEXT, tool TEXT, created_at INTEGER, updated_at INTEGER)",
			"CREATE TABLE runs (run_id TEXT, session_id TEXT, status TEXT, detail TEXT, steps INTEGER, tool_calls INTEGER, input_tokens INTEGER, output_tokens INTEGER, started_at INTEGER, updated_at INTEGER, pending BLOB)",
			"CREATE TABLE run_events (run_id TEXT, seq INTEGER, kind TEXT, at INTEGER, data BLOB)", "PRAGMA user_version = 3"}, "its user_version is 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "theirs.db")
			before := makeDB(t, path, tc.stmts...)
			st, err := sqlite.Open(path, nil)
			if err == nil {
				st.Close()
				t.Fatal("Open took another program's database for a store")
			}
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "not a toolloop store") || !strings.Contains(msg, tc.want) {
				t.Errorf("refusal %q: want the path, \"not a toolloop store\" and %q", msg, tc.want)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Error("the refused file changed")
			}
			if names := dirNames(t, dir); len(names) != 1 {
				t.Errorf("files beside the refused one: %v, want only theirs.db", names)
			}
		})
	}
	t.Run("a file that is not a database", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "notes.txt")
		before := []byte("a text file, long enough to hold a database header if it were one, but it is not\n")
		if err := os.WriteFile(path, before, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := sqlite.Open(path, nil)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a SQLite database") {
			t.Fatalf("Open of a text file: %v, want an error naming it and saying it is not a SQLite database", err)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
			t.Error("the refused file changed")
		}
		if names := dirNames(t, dir); len(names) != 1 {
			t.Errorf("files beside the refused one: %v", names)
		}
	})
}

// A new file, an empty one and an empty database become stores, marked
// with the application ID and the schema version; a store made before the
// mark (toolloop's tables, no mark) keeps opening, also read-only, and is
// marked when opened to write.
func TestOpenMarksItsStores(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "new.db")
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	emptyDB := filepath.Join(dir, "emptydb.db")
	makeDB(t, emptyDB, "PRAGMA journal_mode = DELETE")
	for _, path := range []string{fresh, empty, emptyDB} {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(path), err)
		}
		st.Close()
		if app, v := pragma(t, path, "application_id"), pragma(t, path, "user_version"); app != sqlite.ApplicationID || v != sqlite.SchemaVersion {
			t.Errorf("%s: application_id %#x, user_version %d; want %#x, %d", filepath.Base(path), app, v, sqlite.ApplicationID, sqlite.SchemaVersion)
		}
	}

	// A store from before the mark: the same tables, with a run in them,
	// and extra tables of the programs that share its file.
	old := filepath.Join(dir, "old.db")
	st, err := sqlite.Open(old, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec := store.EventRecord{Seq: 1, Kind: "started", At: time.Now(), Data: []byte(`{}`)}
	if err := st.Append(ctx, "r1", []store.EventRecord{rec}, store.RunSummary{StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(`PRAGMA application_id = 0; PRAGMA user_version = 0; DROP TABLE blobs; CREATE TABLE sandbox_orders (id TEXT)`); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if pragma(t, old, "application_id") != 0 {
		t.Fatal("the old store kept its mark")
	}
	ro, err := sqlite.Open(old, &sqlite.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a store made before the mark: %v", err)
	}
	ro.Close()
	if pragma(t, old, "application_id") != 0 {
		t.Fatal("a read-only open marked the store")
	}
	rw, err := sqlite.Open(old, nil)
	if err != nil {
		t.Fatalf("open of a store made before the mark: %v", err)
	}
	defer rw.Close()
	if recs, err := rw.Events(ctx, "r1"); err != nil || len(recs) != 1 {
		t.Fatalf("the old store's run: %d events, %v", len(recs), err)
	}
	if _, err := rw.PutBlob(ctx, []byte("x")); err != nil {
		t.Fatalf("the old store did not get its blobs table: %v", err)
	}
	if app := pragma(t, old, "application_id"); app != sqlite.ApplicationID {
		t.Errorf("the old store's application_id is %#x after opening it, want %#x", app, sqlite.ApplicationID)
	}

	// A store of a later toolloop is refused.
	later := filepath.Join(dir, "later.db")
	makeDB(t, later, fmt.Sprintf("PRAGMA application_id = %d", sqlite.ApplicationID), fmt.Sprintf("PRAGMA user_version = %d", sqlite.SchemaVersion+1))
	if _, err := sqlite.Open(later, nil); err == nil || !strings.Contains(err.Error(), "later toolloop") {
		t.Errorf("open of a later store: %v, want it refused", err)
	}
}
