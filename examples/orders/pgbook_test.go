package orders_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/store/postgres"
	"github.com/toolloop/toolloop/store/postgres/pgtest"
)

// freshSchema makes a schema of its own for t on the test server
// (pgtest.FreshSchema) and returns a connection string whose search_path
// is it.
func freshSchema(t *testing.T) string {
	t.Helper()
	u, _ := pgtest.FreshSchema(t)
	return u
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
