package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SQLiteBook is an order book kept in a SQLite database: the sandbox's
// orders and the refunds applied to them live in two tables of their own,
// sandbox_orders and sandbox_refunds, beside whatever else the database
// holds. Its point is to share one file with a run store (store/sqlite):
//
//	st, err := sqlite.Open(path, nil)
//	...
//	book, err := orders.OpenSQLiteBook(ctx, st.DB())
//
// so that a run paused in one process and resumed in the next finds the
// book as the first one left it, and a refund applied by either is seen by
// both. Every change is one transaction that reads the order and writes it
// back (a store/sqlite database takes the write lock when a transaction
// begins), so processes sharing the file never apply a refund twice. It is
// safe for concurrent use.
//
// The carriers' reports (Track) are the sandbox's fixed ones; they are not
// stored. SQLiteBook has no HangAfterWrite: that fault is for the in-memory
// sandbox's scenarios.
type SQLiteBook struct{ sqlBook }

var _ OrderBook = (*SQLiteBook)(nil)

const sqliteBookSchema = `
CREATE TABLE IF NOT EXISTS sandbox_orders (
	id             TEXT PRIMARY KEY,
	customer       TEXT NOT NULL,
	items          TEXT NOT NULL,
	total_cents    INTEGER NOT NULL,
	status         TEXT NOT NULL,
	carrier        TEXT NOT NULL DEFAULT '',
	tracking       TEXT NOT NULL DEFAULT '',
	refunded_cents INTEGER NOT NULL DEFAULT 0,
	cancels        INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE TABLE IF NOT EXISTS sandbox_refunds (
	refund_id    TEXT PRIMARY KEY,
	order_id     TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	amount_cents INTEGER NOT NULL,
	method       TEXT NOT NULL,
	reason       TEXT NOT NULL DEFAULT '',
	UNIQUE (order_id, seq)
) STRICT;
CREATE TABLE IF NOT EXISTS sandbox_reversals (
	refund_id    TEXT PRIMARY KEY,
	order_id     TEXT NOT NULL,
	amount_cents INTEGER NOT NULL,
	reason       TEXT NOT NULL DEFAULT ''
) STRICT;
`

// OpenSQLiteBook makes the book's tables in db if they are missing and
// puts in the sandbox's orders, A100 to A105 (see NewBook), unless they are
// there already: a book opened again keeps its refunds and cancellations.
// db is a SQLite database, such as the one store/sqlite's Store.DB returns;
// the caller keeps it and closes it.
func OpenSQLiteBook(ctx context.Context, db *sql.DB) (*SQLiteBook, error) {
	if db == nil {
		return nil, errors.New("orders: OpenSQLiteBook needs a database")
	}
	if _, err := db.ExecContext(ctx, sqliteBookSchema); err != nil {
		return nil, fmt.Errorf("orders: creating the book's tables: %w", err)
	}
	b := &SQLiteBook{sqlBook{db: db, shipments: seedShipments()}}
	if err := b.AddOrders(ctx, seedOrders()...); err != nil {
		return nil, err
	}
	return b, nil
}
