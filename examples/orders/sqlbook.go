package orders

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolloop/toolloop/tool"
)

// sqlBook is the order book in a SQL database, the part SQLiteBook and
// PostgresBook share: the same two tables, sandbox_orders and
// sandbox_refunds, the same statements, written with ? placeholders. The
// dialect is the difference: Postgres numbers its placeholders ($1) and
// locks the order's row (SELECT ... FOR UPDATE) where SQLite takes the
// database's write lock when a transaction begins.
type sqlBook struct {
	db        *sql.DB
	shipments map[string]Shipment
	// postgres selects PostgreSQL's dialect.
	postgres bool
}

// sql returns query in the book's dialect: for Postgres, each ? becomes
// $1, $2, ... (the statements here have no ? in their literals).
func (b *sqlBook) sql(query string) string {
	if !b.postgres {
		return query
	}
	var out strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			out.WriteString("$" + strconv.Itoa(n))
			continue
		}
		out.WriteRune(r)
	}
	return out.String()
}

// AddOrders puts orders in the book, in one transaction, leaving alone any
// whose ID the book already has: tests and load runs add orders of their
// own beside the sandbox's (a run of many refunds needs an order each). An
// order's total is computed from its items; its refunded amount and
// cancellations start at zero.
func (b *sqlBook) AddOrders(ctx context.Context, add ...Order) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("orders: adding orders: %w", err)
	}
	defer tx.Rollback() // after Commit, a no-op
	insert := b.sql(`INSERT INTO sandbox_orders
		(id, customer, items, total_cents, status, carrier, tracking) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`)
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
		if _, err := tx.ExecContext(ctx, insert,
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

// getOrder reads an order; with lock, in Postgres, it also locks the
// order's row until q's transaction ends, so that a concurrent change
// waits and then reads what this one wrote.
func (b *sqlBook) getOrder(ctx context.Context, q querier, id string, lock bool) (Order, int, error) {
	query := `SELECT ` + orderColumns + ` FROM sandbox_orders WHERE id = ?`
	if lock && b.postgres {
		query += ` FOR UPDATE`
	}
	o, cancels, err := scanOrder(q.QueryRowContext(ctx, b.sql(query), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, 0, notFound(id)
	}
	if err != nil {
		return Order{}, 0, fmt.Errorf("orders: reading order %s: %w", id, err)
	}
	return o, cancels, nil
}

// Order implements OrderBook.
func (b *sqlBook) Order(ctx context.Context, id string) (Order, error) {
	o, _, err := b.getOrder(ctx, b.db, id, false)
	return o, err
}

// Orders implements OrderBook.
func (b *sqlBook) Orders(ctx context.Context) ([]Order, error) {
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
func (b *sqlBook) Track(ctx context.Context, id string) (Shipment, error) {
	o, err := b.Order(ctx, id)
	if err != nil {
		return Shipment{}, err
	}
	return track(ctx, o, b.shipments[id])
}

// Refund implements OrderBook.
func (b *sqlBook) Refund(ctx context.Context, id, reason string) (Refund, error) {
	return b.refund(ctx, id, reason, ToPayment)
}

// Voucher implements OrderBook.
func (b *sqlBook) Voucher(ctx context.Context, id, reason string) (Refund, error) {
	return b.refund(ctx, id, reason, AsVoucher)
}

func (b *sqlBook) refund(ctx context.Context, id, reason, method string) (Refund, error) {
	var r Refund
	err := b.update(ctx, id, func(tx *sql.Tx, o *Order, _ *int) error {
		var n int
		if err := tx.QueryRowContext(ctx, b.sql(`SELECT COUNT(*) FROM sandbox_refunds WHERE order_id = ?`), id).Scan(&n); err != nil {
			return err
		}
		var err error
		if r, err = applyRefund(o, n, reason, method); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, b.sql(`INSERT INTO sandbox_refunds (refund_id, order_id, seq, amount_cents, method, reason)
			VALUES (?, ?, ?, ?, ?, ?)`), r.RefundID, id, n+1, r.AmountCents, r.Method, r.Reason)
		return err
	})
	if err != nil {
		return Refund{}, err
	}
	return r, nil
}

// Cancel implements OrderBook.
func (b *sqlBook) Cancel(ctx context.Context, id string) (Order, error) {
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

// update reads the order in a write transaction (in Postgres, locking its
// row), lets change apply a change to it (and record more in the
// transaction), writes it back and commits. An error from change, or from
// the database, rolls everything back; change's own errors come back
// unwrapped, so that the model sees a refusal as it was given.
func (b *sqlBook) update(ctx context.Context, id string, change func(tx *sql.Tx, o *Order, cancels *int) error) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("orders: changing order %s: %w", id, err)
	}
	defer tx.Rollback() // after Commit, a no-op
	o, cancels, err := b.getOrder(ctx, tx, id, true)
	if err != nil {
		return err
	}
	if err := change(tx, &o, &cancels); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, b.sql(`UPDATE sandbox_orders SET status = ?, refunded_cents = ?, cancels = ? WHERE id = ?`),
		o.Status, o.RefundedCents, cancels, id); err != nil {
		return fmt.Errorf("orders: changing order %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("orders: changing order %s: %w", id, err)
	}
	return nil
}

// RefundOf implements OrderBook.
func (b *sqlBook) RefundOf(ctx context.Context, id, method string) (Refund, bool, error) {
	var r Refund
	err := b.db.QueryRowContext(ctx, b.sql(`SELECT refund_id, order_id, amount_cents, method, reason FROM sandbox_refunds
		WHERE order_id = ? AND method = ? ORDER BY seq DESC LIMIT 1`), id, method).
		Scan(&r.RefundID, &r.OrderID, &r.AmountCents, &r.Method, &r.Reason)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Refund{}, false, nil
	case err != nil:
		return Refund{}, false, fmt.Errorf("orders: looking up the refunds of order %s: %w", id, err)
	}
	return r, true, nil
}

// ReverseRefund implements OrderBook.
func (b *sqlBook) ReverseRefund(ctx context.Context, refundID, reason string) (Reversal, error) {
	r, ok, err := b.refundByID(ctx, refundID)
	if err != nil {
		return Reversal{}, err
	}
	if !ok {
		return Reversal{}, tool.NotFound("no refund " + refundID)
	}
	var rv Reversal
	err = b.update(ctx, r.OrderID, func(tx *sql.Tx, o *Order, _ *int) error {
		var n int
		if err := tx.QueryRowContext(ctx, b.sql(`SELECT COUNT(*) FROM sandbox_reversals WHERE refund_id = ?`), refundID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return invalid("refund %s is already reversed", refundID)
		}
		var err error
		if rv, err = applyReversal(o, r, b.shipments[r.OrderID], reason); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, b.sql(`INSERT INTO sandbox_reversals (refund_id, order_id, amount_cents, reason) VALUES (?, ?, ?, ?)`),
			rv.RefundID, rv.OrderID, rv.AmountCents, rv.Reason)
		return err
	})
	if err != nil {
		return Reversal{}, err
	}
	return rv, nil
}

func (b *sqlBook) refundByID(ctx context.Context, refundID string) (Refund, bool, error) {
	var r Refund
	err := b.db.QueryRowContext(ctx, b.sql(`SELECT refund_id, order_id, amount_cents, method, reason FROM sandbox_refunds
		WHERE refund_id = ?`), refundID).Scan(&r.RefundID, &r.OrderID, &r.AmountCents, &r.Method, &r.Reason)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Refund{}, false, nil
	case err != nil:
		return Refund{}, false, fmt.Errorf("orders: looking up refund %s: %w", refundID, err)
	}
	return r, true, nil
}

// ReversalOf implements OrderBook.
func (b *sqlBook) ReversalOf(ctx context.Context, refundID string) (Reversal, bool, error) {
	var rv Reversal
	err := b.db.QueryRowContext(ctx, b.sql(`SELECT refund_id, order_id, amount_cents, reason FROM sandbox_reversals WHERE refund_id = ?`),
		refundID).Scan(&rv.RefundID, &rv.OrderID, &rv.AmountCents, &rv.Reason)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Reversal{}, false, nil
	case err != nil:
		return Reversal{}, false, fmt.Errorf("orders: looking up the reversal of refund %s: %w", refundID, err)
	}
	return rv, true, nil
}

// ReversalCount implements OrderBook.
func (b *sqlBook) ReversalCount(ctx context.Context, id string) (int, error) {
	q, args := `SELECT COUNT(*) FROM sandbox_reversals`, []any(nil)
	if id != "" {
		q, args = q+` WHERE order_id = ?`, []any{id}
	}
	var n int
	if err := b.db.QueryRowContext(ctx, b.sql(q), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("orders: counting reversals: %w", err)
	}
	return n, nil
}

// RefundCount implements OrderBook.
func (b *sqlBook) RefundCount(ctx context.Context, id string) (int, error) {
	q, args := `SELECT COUNT(*) FROM sandbox_refunds`, []any(nil)
	if id != "" {
		q, args = q+` WHERE order_id = ?`, []any{id}
	}
	var n int
	if err := b.db.QueryRowContext(ctx, b.sql(q), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("orders: counting refunds: %w", err)
	}
	return n, nil
}

// Cancels returns how many times the order was cancelled.
func (b *sqlBook) Cancels(ctx context.Context, id string) (int, error) {
	_, cancels, err := b.getOrder(ctx, b.db, id, false)
	return cancels, err
}
