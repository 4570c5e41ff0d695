package orders

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// Order statuses used by the book.
const (
	StatusPlaced    = "placed"
	StatusShipped   = "shipped"
	StatusDelivered = "delivered"
	StatusCancelled = "cancelled"
	StatusRefunded  = "refunded"
)

// SlowCarrier is the carrier whose tracking service never answers in time.
// Tracking an order it carries blocks until the call's context ends (or
// SlowCarrierDelay passes), which is how the sandbox produces timeouts.
const SlowCarrier = "SlowPost"

// SlowCarrierDelay is how long the slow carrier takes to answer when nothing
// cuts the call short. It is far longer than any timeout the sandbox sets.
const SlowCarrierDelay = 30 * time.Second

// Item is one line of an order.
type Item struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	Quantity   int    `json:"quantity"`
	PriceCents int64  `json:"price_cents"`
}

// Order is an order as the book stores it. Amounts are in euro cents.
type Order struct {
	ID         string `json:"id"`
	Customer   string `json:"customer"`
	Items      []Item `json:"items"`
	TotalCents int64  `json:"total_cents"`
	Status     string `json:"status"`
	// Carrier and Tracking are empty until the order ships.
	Carrier  string `json:"carrier,omitempty"`
	Tracking string `json:"tracking,omitempty"`
	// RefundedCents is what has been paid back so far.
	RefundedCents int64 `json:"refunded_cents,omitempty"`
}

func (o Order) clone() Order {
	o.Items = slices.Clone(o.Items)
	return o
}

// Shipment is what a carrier reports about a parcel.
type Shipment struct {
	OrderID  string `json:"order_id"`
	Carrier  string `json:"carrier"`
	Tracking string `json:"tracking"`
	// State is in_transit or delivered.
	State    string `json:"state"`
	Location string `json:"location"`
	// ETA is the expected delivery date (YYYY-MM-DD); empty once delivered.
	ETA string `json:"eta,omitempty"`
}

// How a refund pays the customer back.
const (
	// ToPayment pays back to the original means of payment (refund_order).
	ToPayment = "original_payment"
	// AsVoucher pays back as a store voucher (issue_voucher).
	AsVoucher = "voucher"
)

// Refund records one refund the book applied.
type Refund struct {
	RefundID    string `json:"refund_id"`
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	// Method is ToPayment or AsVoucher.
	Method string `json:"method"`
	Reason string `json:"reason,omitempty"`
}

// Reversal records a refund taken back: the money it paid returns to the
// shop, and the order is as it was before the refund (reverse_refund, the
// compensation of refund_order).
type Reversal struct {
	RefundID    string `json:"refund_id"`
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	Reason      string `json:"reason,omitempty"`
}

// OrderBook is the order book the sandbox's tools work on. Book keeps one
// in memory, SQLiteBook in a SQLite database, PostgresBook in PostgreSQL.
// All apply the same rules (a refund pays back the rest of a shipped or
// delivered order, once; only an order that has not shipped can be
// cancelled) and fail the same way: an unknown order is a tool.NotFound
// error and a refused change a llm.KindInvalidArguments error, both of
// which go back to the model. Implementations are safe for concurrent use.
type OrderBook interface {
	// Order returns the order with the given ID.
	Order(ctx context.Context, id string) (Order, error)
	// Orders returns all orders, sorted by ID.
	Orders(ctx context.Context) ([]Order, error)
	// Track asks the order's carrier where the parcel is; it honours ctx.
	Track(ctx context.Context, id string) (Shipment, error)
	// Refund pays back the rest of the order's total to the original
	// payment; Voucher pays it back as a store voucher.
	Refund(ctx context.Context, id, reason string) (Refund, error)
	Voucher(ctx context.Context, id, reason string) (Refund, error)
	// Cancel cancels an order that has not shipped yet.
	Cancel(ctx context.Context, id string) (Order, error)
	// RefundOf returns the order's latest refund paid by method (ToPayment
	// or AsVoucher), and whether there is one.
	RefundOf(ctx context.Context, id, method string) (Refund, bool, error)
	// RefundCount counts the refunds applied to the order, by any method;
	// id "" counts the refunds of all orders.
	RefundCount(ctx context.Context, id string) (int, error)
	// ReverseRefund takes a refund back, once: the order's refunded
	// amount goes down by the refund's and, with nothing refunded left,
	// the order is shipped or delivered again. ReversalOf returns the
	// refund's reversal, and whether there is one (reverse_refund's
	// status look-up); ReversalCount counts the order's reversals.
	ReverseRefund(ctx context.Context, refundID, reason string) (Reversal, error)
	ReversalOf(ctx context.Context, refundID string) (Reversal, bool, error)
	ReversalCount(ctx context.Context, id string) (int, error)
}

var _ OrderBook = (*Book)(nil)

// Book is an in-memory order book. It is safe for concurrent use. Reads
// return copies, so callers can never change the book behind its lock.
type Book struct {
	mu        sync.Mutex
	orders    map[string]*Order
	shipments map[string]Shipment
	refunds   map[string][]Refund
	cancels   map[string]int
	// reversals holds the reversals by refund ID.
	reversals map[string]Reversal
	// hang holds the orders whose writes apply and then never answer.
	hang map[string]bool
}

// NewBook returns a book holding the sandbox's fixed orders, A100 to A105:
//
//	A100  shipped with DHL, in transit
//	A101  delivered by UPS
//	A102  placed, not shipped yet
//	A103  delivered by DHL (the one customers ask to refund)
//	A104  shipped with SlowPost, whose tracking never answers in time
//	A105  cancelled
func NewBook() *Book {
	orders := seedOrders()
	b := &Book{
		orders:    make(map[string]*Order, len(orders)),
		refunds:   map[string][]Refund{},
		cancels:   map[string]int{},
		reversals: map[string]Reversal{},
		hang:      map[string]bool{},
		shipments: seedShipments(),
	}
	for _, o := range orders {
		b.orders[o.ID] = &o
	}
	return b
}

// seedOrders returns the sandbox's fixed orders, A100 to A105, with their
// totals computed.
func seedOrders() []Order {
	orders := []Order{
		{ID: "A100", Customer: "Ada Lovelace", Status: StatusShipped, Carrier: "DHL", Tracking: "DHL-100-7731",
			Items: []Item{{SKU: "KB-01", Name: "mechanical keyboard", Quantity: 1, PriceCents: 8900}}},
		{ID: "A101", Customer: "Grace Hopper", Status: StatusDelivered, Carrier: "UPS", Tracking: "1Z-A101-0042",
			Items: []Item{{SKU: "CB-USB-C", Name: "USB-C cable", Quantity: 2, PriceCents: 1200}}},
		{ID: "A102", Customer: "Alan Turing", Status: StatusPlaced,
			Items: []Item{{SKU: "LP-22", Name: "desk lamp", Quantity: 1, PriceCents: 4500}}},
		{ID: "A103", Customer: "Katherine Johnson", Status: StatusDelivered, Carrier: "DHL", Tracking: "DHL-103-5120",
			Items: []Item{{SKU: "MA-07", Name: "monitor arm", Quantity: 1, PriceCents: 6400}}},
		{ID: "A104", Customer: "Edsger Dijkstra", Status: StatusShipped, Carrier: SlowCarrier, Tracking: "SP-104-0001",
			Items: []Item{{SKU: "NB-A5", Name: "dotted notebook", Quantity: 3, PriceCents: 800}}},
		{ID: "A105", Customer: "Barbara Liskov", Status: StatusCancelled,
			Items: []Item{{SKU: "HP-90", Name: "headphones", Quantity: 1, PriceCents: 12900}}},
	}
	for i := range orders {
		for _, it := range orders[i].Items {
			orders[i].TotalCents += int64(it.Quantity) * it.PriceCents
		}
	}
	return orders
}

// seedShipments returns what the carriers report about the shipped
// orders. Carriers are outside the book: their reports never change.
func seedShipments() map[string]Shipment {
	return map[string]Shipment{
		"A100": {State: "in_transit", Location: "Leipzig hub", ETA: "2025-06-12"},
		"A101": {State: "delivered", Location: "front desk"},
		"A103": {State: "delivered", Location: "parcel locker 14"},
		"A104": {State: "in_transit", Location: "unknown"},
	}
}

// Order returns a copy of the order with the given ID. An unknown ID is a
// tool.NotFound error, which the loop hands back to the model.
func (b *Book) Order(_ context.Context, id string) (Order, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.orders[id]
	if !ok {
		return Order{}, notFound(id)
	}
	return o.clone(), nil
}

// Orders returns copies of all orders, sorted by ID.
func (b *Book) Orders(context.Context) ([]Order, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Order, 0, len(b.orders))
	for _, o := range b.orders {
		out = append(out, o.clone())
	}
	slices.SortFunc(out, func(x, y Order) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// Track asks the order's carrier where the parcel is. It honours ctx: for
// an order carried by SlowCarrier it waits until ctx ends and returns
// ctx.Err(), unless SlowCarrierDelay passes first.
func (b *Book) Track(ctx context.Context, id string) (Shipment, error) {
	b.mu.Lock()
	o, ok := b.orders[id]
	var order Order
	if ok {
		order = o.clone()
	}
	b.mu.Unlock() // never hold the lock while waiting on a carrier
	if !ok {
		return Shipment{}, notFound(id)
	}
	return track(ctx, order, b.shipments[id])
}

// track is what the order's carrier reports about its parcel: sh completed
// with the order's carrier and tracking number. An order that has not
// shipped has nothing to track; SlowCarrier answers only after
// SlowCarrierDelay, unless ctx ends first.
func track(ctx context.Context, o Order, sh Shipment) (Shipment, error) {
	sh.OrderID, sh.Carrier, sh.Tracking = o.ID, o.Carrier, o.Tracking
	switch {
	case sh.Carrier == "":
		return Shipment{}, tool.NotFound(fmt.Sprintf("order %s has not shipped, so there is nothing to track", o.ID))
	case sh.Carrier == SlowCarrier:
		t := time.NewTimer(SlowCarrierDelay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return Shipment{}, ctx.Err()
		case <-t.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return Shipment{}, err
	}
	return sh, nil
}

// Refund pays back the rest of an order's total to the original payment
// and marks the order refunded. Only shipped or delivered orders can be
// refunded, and only once; anything else is an invalid_arguments error the
// model can read.
func (b *Book) Refund(_ context.Context, id, reason string) (Refund, error) {
	return b.refund(id, reason, ToPayment)
}

// Voucher pays back the rest of an order's total as a store voucher; it is
// a refund like any other (it counts in Refunds), only paid differently.
func (b *Book) Voucher(_ context.Context, id, reason string) (Refund, error) {
	return b.refund(id, reason, AsVoucher)
}

func (b *Book) refund(id, reason, method string) (Refund, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.orders[id]
	if !ok {
		return Refund{}, notFound(id)
	}
	r, err := applyRefund(o, len(b.refunds[id]), reason, method)
	if err != nil {
		return Refund{}, err
	}
	b.refunds[id] = append(b.refunds[id], r)
	return r, nil
}

// applyRefund applies a refund to o, which has had n refunds before, and
// returns it: the rest of the total is paid back and the order is marked
// refunded. Only a shipped or delivered order can be refunded.
func applyRefund(o *Order, n int, reason, method string) (Refund, error) {
	switch o.Status {
	case StatusShipped, StatusDelivered:
	case StatusPlaced:
		return Refund{}, invalid("order %s has not shipped yet; cancel it instead of refunding it", o.ID)
	default:
		return Refund{}, invalid("order %s is %s; there is nothing to refund", o.ID, o.Status)
	}
	amount := o.TotalCents - o.RefundedCents
	o.RefundedCents += amount
	o.Status = StatusRefunded
	prefix := "R"
	if method == AsVoucher {
		prefix = "V"
	}
	return Refund{RefundID: fmt.Sprintf("%s-%s-%d", prefix, o.ID, n+1), OrderID: o.ID,
		AmountCents: amount, Method: method, Reason: reason}, nil
}

// applyReversal takes refund r of order o back. sh is the order's
// shipment, which says what the order was before it was refunded.
func applyReversal(o *Order, r Refund, sh Shipment, reason string) (Reversal, error) {
	if o.Status != StatusRefunded || o.RefundedCents < r.AmountCents {
		return Reversal{}, invalid("order %s is %s; refund %s cannot be reversed", o.ID, o.Status, r.RefundID)
	}
	o.RefundedCents -= r.AmountCents
	if o.RefundedCents == 0 {
		o.Status = StatusShipped
		if sh.State == StatusDelivered {
			o.Status = StatusDelivered
		}
	}
	return Reversal{RefundID: r.RefundID, OrderID: o.ID, AmountCents: r.AmountCents, Reason: reason}, nil
}

// ReverseRefund implements OrderBook.
func (b *Book) ReverseRefund(_ context.Context, refundID, reason string) (Reversal, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, done := b.reversals[refundID]; done {
		return Reversal{}, invalid("refund %s is already reversed", refundID)
	}
	for id, rs := range b.refunds {
		for _, r := range rs {
			if r.RefundID != refundID {
				continue
			}
			rv, err := applyReversal(b.orders[id], r, b.shipments[id], reason)
			if err != nil {
				return Reversal{}, err
			}
			b.reversals[refundID] = rv
			return rv, nil
		}
	}
	return Reversal{}, tool.NotFound("no refund " + refundID)
}

// ReversalOf implements OrderBook.
func (b *Book) ReversalOf(_ context.Context, refundID string) (Reversal, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rv, ok := b.reversals[refundID]
	return rv, ok, nil
}

// ReversalCount implements OrderBook; it cannot fail.
func (b *Book) ReversalCount(_ context.Context, id string) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, rv := range b.reversals {
		if id == "" || rv.OrderID == id {
			n++
		}
	}
	return n, nil
}

// applyCancel cancels o, which must not have shipped yet.
func applyCancel(o *Order) error {
	if o.Status != StatusPlaced {
		return invalid("order %s is %s; only orders that have not shipped can be cancelled", o.ID, o.Status)
	}
	o.Status = StatusCancelled
	return nil
}

// RefundOf returns the order's latest refund paid by the given method, and
// whether there is one. It is what refund_order's status look-up asks.
func (b *Book) RefundOf(_ context.Context, id, method string) (Refund, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rs := b.refunds[id]
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Method == method {
			return rs[i], true, nil
		}
	}
	return Refund{}, false, nil
}

// HangAfterWrite makes every later write to the order apply and then not
// answer, like a payment provider that books the money and never replies:
// the write's handler blocks until its context ends (or SlowCarrierDelay
// passes) and then fails with the context's error, although the write
// happened. The sandbox uses it to leave a write's outcome unknown.
func (b *Book) HangAfterWrite(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hang[id] = true
}

// afterWrite is called by a write tool once the book applied its write: for
// an order set to hang it waits until ctx ends and returns ctx.Err().
func (b *Book) afterWrite(ctx context.Context, id string) error {
	b.mu.Lock()
	hang := b.hang[id]
	b.mu.Unlock()
	if !hang {
		return nil
	}
	t := time.NewTimer(SlowCarrierDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Cancel cancels an order that has not shipped yet.
func (b *Book) Cancel(_ context.Context, id string) (Order, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.orders[id]
	if !ok {
		return Order{}, notFound(id)
	}
	if err := applyCancel(o); err != nil {
		return Order{}, err
	}
	b.cancels[id]++
	return o.clone(), nil
}

// RefundCount implements OrderBook; it cannot fail.
func (b *Book) RefundCount(_ context.Context, id string) (int, error) {
	if id == "" {
		return b.TotalRefunds(), nil
	}
	return b.Refunds(id), nil
}

// Refunds returns how many refunds the book applied to the order, by any
// method.
func (b *Book) Refunds(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.refunds[id])
}

// TotalRefunds returns how many refunds the book applied to all orders.
func (b *Book) TotalRefunds() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, rs := range b.refunds {
		n += len(rs)
	}
	return n
}

// Cancels returns how many times the order was cancelled.
func (b *Book) Cancels(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cancels[id]
}

func notFound(id string) error { return tool.NotFound("no order " + id) }

func invalid(format string, args ...any) error {
	return &tool.Error{Kind: llm.KindInvalidArguments, Msg: fmt.Sprintf(format, args...)}
}
