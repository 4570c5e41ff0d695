package orders

import (
	"context"
	"database/sql"
	"encoding/json"
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
type SQLiteBook struct {
	db        *sql.DB
	shipments map[string]Shipment
}

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
	b := &SQLiteBook{db: db, shipments: seedShipments()}
	if err := b.AddOrders(ctx, seedOrders()...); err != nil {
		return nil, err
	}
	return b, nil
}

// AddOrders puts orders in the book, in one transaction, leaving alone any
// whose ID the book already has: tests and load runs add orders of their
// own beside the sandbox's (a run of many refunds needs an order each). An
// order's total is computed from its items; its refunded amount and
// cancellations start at zero.
func (b *SQLiteBook) AddOrders(ctx context.Context, add ...Order) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("orders: adding orders: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	for _, o := range add {
		if o.ID == "" {
			return errors.New("orders: adding an order without an ID")
		}
		o.TotalCents = 0
		for _, it := range o.Items {
			o.TotalCents += int64(it.Quantity) * it.PriceCents
		}
		items, err := json.Marshal(o.Items)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sandbox_orders
			(id, customer, items, total_cents, status, carrier, tracking) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`,
			o.ID, o.Customer, string(items), o.TotalCents, o.Status, o.Carrier, o.Tracking); err != nil {
			return fmt.Errorf("orders: adding order %s: %w", o.ID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("orders: adding orders: %w", err)
	}
	return nil
}

// querier is what both *sql.DB and *sql.Tx offer.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

const orderColumns = `id, customer, items, total_cents, status, carrier, tracking, refunded_cents, cancels`

type scanner interface{ Scan(dest ...any) error }

func scanOrder(row scanner) (Order, int, error) {
	var (
		o       Order
		items   string
		cancels int
	)
	if err := row.Scan(&o.ID, &o.Customer, &items, &o.TotalCents, &o.Status, &o.Carrier, &o.Tracking,
		&o.RefundedCents, &cancels); err != nil {
		return Order{}, 0, err
	}
	if err := json.Unmarshal([]byte(items), &o.Items); err != nil {
		return Order{}, 0, fmt.Errorf("order %s: items: %w", o.ID, err)
	}
	return o, cancels, nil
}

func getOrder(ctx context.Context, q querier, id string) (Order, int, error) {
	o, cancels, err := scanOrder(q.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM sandbox_orders WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, 0, notFound(id)
	}
	if err != nil {
		return Order{}, 0, fmt.Errorf("orders: reading order %s: %w", id, err)
	}
	return o, cancels, nil
}

// Order implements OrderBook.
func (b *SQLiteBook) Order(ctx context.Context, id string) (Order, error) {
	o, _, err := getOrder(ctx, b.db, id)
	return o, err
}

// Orders implements OrderBook.
func (b *SQLiteBook) Orders(ctx context.Context) ([]Order, error) {
	rows, err := b.db.QueryContext(ctx, `SELECT `+orderColumns+` FROM sandbox_orders ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("orders: listing orders: %w", err)
	}
	defer rows.Close()
	var out []Order
	for rows.Next() {
		o, _, err := scanOrder(rows)
		if err != nil {
			return nil, fmt.Errorf("orders: listing orders: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("orders: listing orders: %w", err)
	}
	return out, nil
}

// Track implements OrderBook.
func (b *SQLiteBook) Track(ctx context.Context, id string) (Shipment, error) {
	o, err := b.Order(ctx, id)
	if err != nil {
		return Shipment{}, err
	}
	return track(ctx, o, b.shipments[id])
}

// Refund implements OrderBook.
func (b *SQLiteBook) Refund(ctx context.Context, id, reason string) (Refund, error) {
	return b.refund(ctx, id, reason, ToPayment)
}

// Voucher implements OrderBook.
func (b *SQLiteBook) Voucher(ctx context.Context, id, reason string) (Refund, error) {
	return b.refund(ctx, id, reason, AsVoucher)
}

func (b *SQLiteBook) refund(ctx context.Context, id, reason, method string) (Refund, error) {
	var r Refund
	err := b.update(ctx, id, func(tx *sql.Tx, o *Order, _ *int) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandbox_refunds WHERE order_id = ?`, id).Scan(&n); err != nil {
			return err
		}
		var err error
		if r, err = applyRefund(o, n, reason, method); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO sandbox_refunds (refund_id, order_id, seq, amount_cents, method, reason)
			VALUES (?, ?, ?, ?, ?, ?)`, r.RefundID, id, n+1, r.AmountCents, r.Method, r.Reason)
		return err
	})
	if err != nil {
		return Refund{}, err
	}
	return r, nil
}

// Cancel implements OrderBook.
func (b *SQLiteBook) Cancel(ctx context.Context, id string) (Order, error) {
	var out Order
	err := b.update(ctx, id, func(_ *sql.Tx, o *Order, cancels *int) error {
		if err := applyCancel(o); err != nil {
			return err
		}
		*cancels++
		out = *o
		return nil
	})
	return out, err
}

// update reads the order in a write transaction, lets change apply a
// change to it (and record more in the transaction), writes it back and
// commits. An error from change, or from the database, rolls everything
// back; change's own errors come back unwrapped, so that the model sees
// a refusal as it was given.
func (b *SQLiteBook) update(ctx context.Context, id string, change func(tx *sql.Tx, o *Order, cancels *int) error) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("orders: changing order %s: %w", id, err)
	}
	defer tx.Rollback() // after Commit, a no-op
	o, cancels, err := getOrder(ctx, tx, id)
	if err != nil {
		return err
	}
	if err := change(tx, &o, &cancels); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sandbox_orders SET status = ?, refunded_cents = ?, cancels = ? WHERE id = ?`,
		o.Status, o.RefundedCents, cancels, id); err != nil {
		return fmt.Errorf("orders: changing order %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("orders: changing order %s: %w", id, err)
	}
	return nil
}

// RefundOf implements OrderBook.
func (b *SQLiteBook) RefundOf(ctx context.Context, id, method string) (Refund, bool, error) {
	var r Refund
	err := b.db.QueryRowContext(ctx, `SELECT refund_id, order_id, amount_cents, method, reason FROM sandbox_refunds
		WHERE order_id = ? AND method = ? ORDER BY seq DESC LIMIT 1`, id, method).
		Scan(&r.RefundID, &r.OrderID, &r.AmountCents, &r.Method, &r.Reason)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Refund{}, false, nil
	case err != nil:
		return Refund{}, false, fmt.Errorf("orders: looking up the refunds of order %s: %w", id, err)
	}
	return r, true, nil
}

// RefundCount implements OrderBook.
func (b *SQLiteBook) RefundCount(ctx context.Context, id string) (int, error) {
	q, args := `SELECT COUNT(*) FROM sandbox_refunds`, []any(nil)
	if id != "" {
		q, args = q+` WHERE order_id = ?`, []any{id}
	}
	var n int
	if err := b.db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("orders: counting refunds: %w", err)
	}
	return n, nil
}

// Cancels returns how many times the order was cancelled.
func (b *SQLiteBook) Cancels(ctx context.Context, id string) (int, error) {
	_, cancels, err := getOrder(ctx, b.db, id)
	return cancels, err
}
