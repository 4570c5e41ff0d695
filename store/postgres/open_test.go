package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/postgres"
	"github.com/toolloop/toolloop/store/postgres/pgtest"
)

// tablesIn lists the tables of schema, sorted.
func tablesIn(t *testing.T, schema string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.ServerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename`, schema)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// Existing and ReadOnly open only a schema that holds a store: an empty or
// foreign schema is refused and left as it was; ReadOnly reads a store and
// the server refuses its every write.
func TestOpenExistingAndReadOnly(t *testing.T) {
	ctx := context.Background()
	empty, emptySchema := pgtest.FreshSchema(t)
	foreign, foreignSchema := pgtest.FreshSchema(t)
	f := open(t, foreign, nil)
	if _, err := f.Pool().Exec(ctx, `DROP TABLE idempotency_ledger, runs, run_events, run_leases, blobs; CREATE TABLE notes (text text)`); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []postgres.Options{{Existing: true}, {ReadOnly: true}} {
		for _, tc := range []struct{ url, schema, want string }{
			{empty, emptySchema, ""}, {foreign, foreignSchema, "notes"},
		} {
			_, err := postgres.Open(ctx, tc.url, &opts)
			if err == nil || !strings.Contains(err.Error(), "not a toolloop store") || !strings.Contains(err.Error(), tc.schema) {
				t.Errorf("%+v on schema %s: %v, want an error naming the schema and saying it is not a toolloop store", opts, tc.schema, err)
			}
			if got := strings.Join(tablesIn(t, tc.schema), ","); got != tc.want {
				t.Errorf("%+v on schema %s: its tables are now %q, want %q", opts, tc.schema, got, tc.want)
			}
		}
	}

	u, _ := pgtest.FreshSchema(t)
	rw := open(t, u, nil)
	ev := store.EventRecord{Seq: 1, Kind: "started", At: time.Now(), Data: []byte(`{}`)}
	if err := rw.Append(ctx, "r1", []store.EventRecord{ev}, store.RunSummary{StartedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	digest, err := rw.PutBlob(ctx, []byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	rw.Close()

	ro := open(t, u, &postgres.Options{ReadOnly: true})
	if recs, err := ro.Events(ctx, "r1"); err != nil || len(recs) != 1 {
		t.Fatalf("read-only Events: %d records, %v", len(recs), err)
	}
	if runs, err := ro.Runs(ctx, ""); err != nil || len(runs) != 1 {
		t.Fatalf("read-only Runs: %+v, %v", runs, err)
	}
	if data, err := ro.Blob(ctx, digest); err != nil || string(data) != "kept" {
		t.Fatalf("read-only Blob: %q, %v", data, err)
	}
	ev.Seq = 2
	writes := map[string]error{
		"Append": ro.Append(ctx, "r1", []store.EventRecord{ev}, store.RunSummary{}),
	}
	_, _, writes["Claim"] = ro.Claim(ctx, store.Record{Key: "k", ArgsHash: "h", CreatedAt: time.Now()})
	_, writes["AcquireLease"] = ro.AcquireLease(ctx, "r1", "alice", time.Minute)
	_, writes["PutBlob"] = ro.PutBlob(ctx, []byte("new"))
	for what, err := range writes {
		// 25006: read_only_sql_transaction, the server's refusal.
		if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "25006" {
			t.Errorf("read-only %s: err = %v, want the server's read-only refusal", what, err)
		}
	}
	if recs, _ := ro.Events(ctx, "r1"); len(recs) != 1 {
		t.Fatalf("a read-only store took an append: %d events", len(recs))
	}
	open(t, u, &postgres.Options{Existing: true})
}

// A search_path that names no schema that exists leaves the store nowhere
// to be: Open says so instead of failing on its first CREATE TABLE.
func TestOpenMissingSchema(t *testing.T) {
	u := withSearchPath(t, pgtest.ServerURL(t), "toolloop_no_such_schema")
	_, err := postgres.Open(context.Background(), u, nil)
	if err == nil || !strings.Contains(err.Error(), "toolloop_no_such_schema") || !strings.Contains(err.Error(), "names none that exists") {
		t.Fatalf("err = %v, want one naming the search_path and saying no schema exists", err)
	}
}

// Connection strings carry passwords; errors name the host, port and
// database instead.
func TestOpenErrorsHidePassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cs := range []string{
		"postgres://alice:s3cr3t-pw@127.0.0.1:1/db?connect_timeout=2", // nothing listens on port 1
		"postgres://alice:s3cr3t-pw@127.0.0.1:notaport/db",
		"host=127.0.0.1 port=1 user=alice password=s3cr3t-pw dbname=db connect_timeout=2",
	} {
		_, err := postgres.Open(ctx, cs, nil)
		if err == nil || strings.Contains(err.Error(), "s3cr3t-pw") || !strings.Contains(err.Error(), "postgres store") {
			t.Errorf("Open(%q): err = %v, want a postgres store error without the password", cs, err)
		}
	}
}

// Workers that start at once all open the store in one schema: creating
// its tables concurrently must not fail any of them.
func TestConcurrentOpen(t *testing.T) {
	u, _ := pgtest.FreshSchema(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			s, err := postgres.Open(context.Background(), u, nil)
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A store made before run leases and blobs (without their tables) is
// still a store: read-only it opens and reads (and takes no lease, with an
// error rather than a crash), and opened to write it gets the tables.
func TestStoreWithoutNewerTables(t *testing.T) {
	ctx := context.Background()
	u, schema := pgtest.FreshSchema(t)
	s := open(t, u, nil)
	ev := store.EventRecord{Seq: 1, Kind: "started", At: time.Now(), Data: []byte(`{}`)}
	if err := s.Append(ctx, "r1", []store.EventRecord{ev}, store.RunSummary{StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `DROP TABLE run_leases, blobs`); err != nil {
		t.Fatal(err)
	}
	s.Close()

	ro := open(t, u, &postgres.Options{ReadOnly: true})
	if recs, err := ro.Events(ctx, "r1"); err != nil || len(recs) != 1 {
		t.Fatalf("read-only Events: %d records, %v", len(recs), err)
	}
	if _, err := ro.AcquireLease(ctx, "r1", "alice", time.Minute); err == nil {
		t.Fatal("a read-only store gave a lease")
	}
	if got := strings.Join(tablesIn(t, schema), ","); got != "idempotency_ledger,run_events,runs" {
		t.Fatalf("a read-only open changed the tables: %s", got)
	}
	ro.Close()

	rw := open(t, u, &postgres.Options{Existing: true})
	if _, err := rw.AcquireLease(ctx, "r1", "alice", time.Minute); err != nil {
		t.Fatalf("leasing after the table was added: %v", err)
	}
	if _, err := rw.PutBlob(ctx, []byte("b")); err != nil {
		t.Fatalf("a blob after the table was added: %v", err)
	}
}

// Runs of one start time list in byte order of their IDs, as in
// store.Memory and store/sqlite, whatever the database's collation.
func TestRunsOrderIsByteOrder(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t, nil)
	// The test server's database collates as C; an ICU collation on the
	// column stands for a database made with a natural-language one.
	if _, err := s.Pool().Exec(ctx, `ALTER TABLE runs ALTER COLUMN run_id TYPE text COLLATE "und-x-icu"`); err != nil {
		t.Skipf("the server has no ICU collation to order run IDs by: %v", err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ids := []string{"b", "B", "a-2", "a_1", "A", "é"}
	for _, id := range ids {
		ev := store.EventRecord{Seq: 1, Kind: "started", At: t0, Data: []byte(`{}`)}
		if err := s.Append(ctx, id, []store.EventRecord{ev}, store.RunSummary{StartedAt: t0, UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := s.Runs(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.RunID)
	}
	if want := "A,B,a-2,a_1,b,é"; strings.Join(got, ",") != want {
		t.Fatalf("runs listed %s, want %s", strings.Join(got, ","), want)
	}
}
