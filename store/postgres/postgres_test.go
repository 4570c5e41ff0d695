package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/postgres"
	"github.com/toolloop/toolloop/store/storetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m)
}

// serverURL returns the test server's connection string from
// TOOLLOOP_POSTGRES_URL. Without it the test is skipped, except in CI
// (CI=true), which starts a server and must not pass by skipping.
func serverURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("TOOLLOOP_POSTGRES_URL")
	if u == "" {
		const how = "TOOLLOOP_POSTGRES_URL is not set: start a server with eval \"$(scripts/postgres.sh start)\""
		if os.Getenv("CI") == "true" {
			t.Fatal(how + " (CI must run these tests, not skip them)")
		}
		t.Skip(how)
	}
	return u
}

// withSearchPath returns connString with its search_path set to schema.
func withSearchPath(t *testing.T, connString, schema string) string {
	t.Helper()
	return withParam(t, connString, "search_path", schema)
}

// withParam returns connString (a URL or key=value pairs) with key set to
// value.
func withParam(t *testing.T, connString, key, value string) string {
	t.Helper()
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return connString + " " + key + "=" + value
}

// freshSchema creates an empty schema of its own for t, dropped with
// everything in it when t ends, and returns a connection string whose
// search_path is it: tests so run side by side and leave nothing behind.
func freshSchema(t *testing.T) (connString, schema string) {
	t.Helper()
	base := serverURL(t)
	var b [6]byte
	rand.Read(b[:])
	schema = "toolloop_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connecting to the test server (TOOLLOOP_POSTGRES_URL): %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return withSearchPath(t, base, schema), schema
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
	u, _ := freshSchema(t)
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
				u, _ := freshSchema(t)
				return open(t, withParam(t, u, "default_query_exec_mode", mode), opts)
			}
			storetest.TestEventLog(t, func(t *testing.T) store.EventLog { return openMode(t, nil) })
			storetest.TestLeaser(t, func(t *testing.T, now func() time.Time) storetest.LeasedLog {
				return openMode(t, &postgres.Options{Now: now})
			})
		})
	}
}
