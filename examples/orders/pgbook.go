package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// PostgresBook is the order book kept in a PostgreSQL database: the same
// two tables as SQLiteBook's, sandbox_orders and sandbox_refunds, in the
// connection's current schema, beside a run store (store/postgres) that
// workers on several machines share:
//
//	st, err := postgres.Open(ctx, url, nil)
//	...
//	db := stdlib.OpenDBFromPool(st.Pool()) // github.com/jackc/pgx/v5/stdlib
//	book, err := orders.OpenPostgresBook(ctx, db)
//
// It takes a *sql.DB, not a pgx pool, so that this package (which the core
// command line imports) does not carry a Postgres driver; the caller picks
// one. Every change is one transaction that locks the order's row (SELECT
// ... FOR UPDATE), reads it and writes it back: a concurrent change to the
// same order, from this process or another machine, waits for the lock
// and then reads the order as the first change left it, so a refund is
// never applied twice. It is safe for concurrent use.
//
// As for SQLiteBook, the carriers' reports (Track) are the sandbox's fixed
// ones, and there is no HangAfterWrite.
type PostgresBook struct{ sqlBook }

var _ OrderBook = (*PostgresBook)(nil)

const postgresBookSchema = `
CREATE TABLE IF NOT EXISTS sandbox_orders (
	id             text PRIMARY KEY,
	customer       text NOT NULL,
	items          text NOT NULL,
	total_cents    bigint NOT NULL,
	status         text NOT NULL,
	carrier        text NOT NULL DEFAULT '',
	tracking       text NOT NULL DEFAULT '',
	refunded_cents bigint NOT NULL DEFAULT 0,
	cancels        bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS sandbox_refunds (
	refund_id    text PRIMARY KEY,
	order_id     text NOT NULL,
	seq          bigint NOT NULL,
	amount_cents bigint NOT NULL,
	method       text NOT NULL,
	reason       text NOT NULL DEFAULT '',
	UNIQUE (order_id, seq)
);
CREATE TABLE IF NOT EXISTS sandbox_reversals (
	refund_id    text PRIMARY KEY,
	order_id     text NOT NULL,
	amount_cents bigint NOT NULL,
	reason       text NOT NULL DEFAULT ''
);
`

// OpenPostgresBook makes the book's tables in db's current schema if they
// are missing and puts in the sandbox's orders, A100 to A105 (see
// NewBook), unless they are there already: a book opened again, or by
// another worker, keeps the refunds and cancellations. db is a PostgreSQL
// database on any database/sql driver; the caller keeps it and closes it.
func OpenPostgresBook(ctx context.Context, db *sql.DB) (*PostgresBook, error) {
	if db == nil {
		return nil, errors.New("orders: OpenPostgresBook needs a database")
	}
	// Workers that start at once all create the tables, and CREATE TABLE
	// IF NOT EXISTS races in the catalog: one at a time per schema.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("orders: creating the book's tables: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('toolloop orders ' || current_schema()))`); err != nil {
		return nil, fmt.Errorf("orders: creating the book's tables: %w", err)
	}
	if _, err := tx.ExecContext(ctx, postgresBookSchema); err != nil {
		return nil, fmt.Errorf("orders: creating the book's tables: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("orders: creating the book's tables: %w", err)
	}
	b := &PostgresBook{sqlBook{db: db, shipments: seedShipments(), postgres: true}}
	if err := b.AddOrders(ctx, seedOrders()...); err != nil {
		return nil, err
	}
	return b, nil
}
