package postgres_test

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/postgres"
	"github.com/toolloop/toolloop/store/postgres/pgtest"
	"github.com/toolloop/toolloop/store/storetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m)
}

// withSearchPath returns connString with its search_path set to schema.
func withSearchPath(t *testing.T, connString, schema string) string {
	t.Helper()
	return pgtest.WithParam(t, connString, "search_path", schema)
}

// open opens a store in connString, closed when t ends.
func open(t *testing.T, connString string, opts *postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), connString, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openFresh opens a store in a fresh schema.
func openFresh(t *testing.T, opts *postgres.Options) *postgres.Store {
	t.Helper()
	u, _ := pgtest.FreshSchema(t)
	return open(t, u, opts)
}

func TestPostgresLedger(t *testing.T) {
	storetest.TestLedger(t, func(t *testing.T) store.Ledger { return openFresh(t, nil) })
}

func TestPostgresEventLog(t *testing.T) {
	storetest.TestEventLog(t, func(t *testing.T) store.EventLog { return openFresh(t, nil) })
}

// The suite moves time past expiries, so its leases expire on its clock
// (Options.Now, sent in place of the server's now()); every statement is
// the one production runs. TestLeaseOnServerClock covers the server's own
// clock.
func TestPostgresLeaser(t *testing.T) {
	storetest.TestLeaser(t, func(t *testing.T, now func() time.Time) storetest.LeasedLog {
		return openFresh(t, &postgres.Options{Now: now})
	})
}

func TestPostgresBlobs(t *testing.T) {
	storetest.TestBlobs(t, func(t *testing.T) store.Blobs { return openFresh(t, nil) })
}

// Behind a transaction-pooling proxy statements cannot be prepared once
// per connection; the package doc points to default_query_exec_mode for
// that, and the store works in those modes too.
func TestPostgresQueryExecModes(t *testing.T) {
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			openMode := func(t *testing.T, opts *postgres.Options) *postgres.Store {
				u, _ := pgtest.FreshSchema(t)
				return open(t, pgtest.WithParam(t, u, "default_query_exec_mode", mode), opts)
			}
			storetest.TestEventLog(t, func(t *testing.T) store.EventLog { return openMode(t, nil) })
			storetest.TestLeaser(t, func(t *testing.T, now func() time.Time) storetest.LeasedLog {
				return openMode(t, &postgres.Options{Now: now})
			})
		})
	}
}
