package orders_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/store/postgres"
)

// freshSchema makes a schema of its own for t on the server that
// TOOLLOOP_POSTGRES_URL names, dropped with its tables when t ends, and
// returns a connection string whose search_path is it. Without the
// variable the test is skipped, except in CI (CI=true), which starts a
// server and must not pass by skipping.
func freshSchema(t *testing.T) string {
	t.Helper()
	base := os.Getenv("TOOLLOOP_POSTGRES_URL")
	if base == "" {
		const how = "TOOLLOOP_POSTGRES_URL is not set: start a server with eval \"$(scripts/postgres.sh start)\""
		if os.Getenv("CI") == "true" {
			t.Fatal(how + " (CI must run these tests, not skip them)")
		}
		t.Skip(how)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "toolloop_orders_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	exec := func(stmt string) error {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, stmt)
		return err
	}
	if err := exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("making a schema on the test server (TOOLLOOP_POSTGRES_URL): %v", err)
	}
	t.Cleanup(func() {
		if err := exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return base + " search_path=" + schema
}

// openPostgresDB opens a run store in connString, as a worker does, and
// returns a database/sql handle on its pool; both close when t ends.
func openPostgresDB(t *testing.T, connString string) *sql.DB {
	t.Helper()
	st, err := postgres.Open(context.Background(), connString, nil)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(st.Pool())
	t.Cleanup(func() {
		db.Close()
		st.Close()
	})
	return db
}

func openPostgresBook(t *testing.T, db *sql.DB) *orders.PostgresBook {
	t.Helper()
	book, err := orders.OpenPostgresBook(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return book
}

// TestPostgresBookShared checks the book as workers on two machines have
// it: two pools open it at once on an empty schema (both make the tables
// and seed the orders without tripping over each other), concurrent
// refunds of one order from both apply once, and both, and a book opened
// again, see the one refund.
func TestPostgresBookShared(t *testing.T) {
	conn := freshSchema(t)
	dbA, dbB := openPostgresDB(t, conn), openPostgresDB(t, conn)
	var (
		books [2]*orders.PostgresBook
		errs  [2]error
		wg    sync.WaitGroup
	)
	for i, db := range []*sql.DB{dbA, dbB} {
		wg.Go(func() { books[i], errs[i] = orders.OpenPostgresBook(context.Background(), db) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("opening the book from two pools at once: %v", err)
		}
	}
	all, err := books[1].Orders(context.Background())
	if err != nil || len(all) != 6 {
		t.Fatalf("after two openings, Orders() = %d orders, %v; want the 6 seeded once", len(all), err)
	}
	checkShared(t, books[0], books[1], func() orders.OrderBook { return openPostgresBook(t, dbA) })
	if _, err := orders.OpenPostgresBook(context.Background(), nil); err == nil {
		t.Error("OpenPostgresBook(nil) succeeded")
	}
}
