package orders

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/toolloop/toolloop/tool"
)

// Names of the sandbox's tools.
const (
	QueryOrder    = "query_order"
	TrackShipment = "track_shipment"
	ListOrders    = "list_orders"
	RefundOrder   = "refund_order"
	CancelOrder   = "cancel_order"
	IssueVoucher  = "issue_voucher"
	ReverseRefund = "reverse_refund"
)

// TrackTimeout is track_shipment's own timeout. Scenarios that want a
// quicker timeout set loop.Budgets.ToolTimeout, which overrides it.
const TrackTimeout = 2 * time.Second

// PageSize is how many orders one list_orders page holds.
const PageSize = 2

// orderRef is the input of the tools that act on one order.
type orderRef struct {
	OrderID string `json:"order_id" jsonschema:"the order's ID, for example A100"`
}

// pageRef is the input of list_orders.
type pageRef struct {
	Page int `json:"page,omitempty" jsonschema:"1-based page number; defaults to 1"`
}

// reverseRef is the input of reverse_refund.
type reverseRef struct {
	RefundID string `json:"refund_id" jsonschema:"the refund's ID, for example R-A103-1"`
	Reason   string `json:"reason,omitempty" jsonschema:"why the refund is taken back"`
}

// refundRef is the input of refund_order.
type refundRef struct {
	OrderID string `json:"order_id" jsonschema:"the order's ID, for example A100"`
	Reason  string `json:"reason,omitempty" jsonschema:"why the customer wants the money back"`
}

// orderSummary is one line of a list_orders page.
type orderSummary struct {
	ID         string `json:"id"`
	Customer   string `json:"customer"`
	Status     string `json:"status"`
	TotalCents int64  `json:"total_cents"`
}

// orderPage is the output of list_orders.
type orderPage struct {
	Page   int            `json:"page"`
	Orders []orderSummary `json:"orders"`
	// More says whether a later page holds more orders.
	More bool `json:"more"`
}

func (r orderRef) resources() []string  { return []string{"order:" + r.OrderID} }
func (r refundRef) resources() []string { return []string{"order:" + r.OrderID} }

// Tools returns a registry of the sandbox's tools, all working on book:
//
//	query_order     read   one order's items, total and status
//	track_shipment  read   where the parcel is (times out for SlowPost orders)
//	list_orders     read   all orders, PageSize per page
//	refund_order    write  refunds an order to the original payment
//	cancel_order    write  cancels an order that has not shipped
//	issue_voucher   write  refunds an order as a store voucher
//	reverse_refund  write  takes a refund back (refund_order's compensation)
//
// Every tool that takes an order ID declares the resource "order:ID".
//
// refund_order is an idempotent write in the sense of docs/DESIGN.md §7: its key
// is the business action, "refund:" + the order ID, so the same refund asked
// for again (with the same arguments, under any call ID, in any run sharing
// the ledger) is done once, and its status look-up asks the book whether
// the order was already refunded, so a refund whose answer was lost is
// settled rather than repeated. cancel_order and issue_voucher have
// neither: they get the runner's default key (run ID + call ID), and a
// write of theirs whose answer was lost stops the run with
// tool_outcome_unknown. Writes to an order set with Book.HangAfterWrite
// apply and then do not answer.
//
// refund_order declares its compensation (docs/DESIGN.md §7.1):
// reverse_refund, with the refund's ID from the result, which a run whose
// policy is to compensate calls when the refund's all-or-nothing group
// fails. reverse_refund has a status look-up (the book's ReversalOf), so a
// reversal whose answer was lost is settled, not repeated.
func Tools(book OrderBook) (*tool.Registry, error) {
	if book == nil {
		return nil, fmt.Errorf("orders: Tools needs a book")
	}
	query, err := tool.New(tool.Spec[orderRef]{
		Name:        QueryOrder,
		Description: "Look up one order by its ID: customer, items, total in cents, status, carrier and tracking number.",
		Resources:   orderRef.resources,
	}, func(ctx context.Context, in orderRef) (Order, error) {
		if err := checkID(in.OrderID); err != nil {
			return Order{}, err
		}
		return book.Order(ctx, in.OrderID)
	})
	if err != nil {
		return nil, err
	}
	track, err := tool.New(tool.Spec[orderRef]{
		Name:        TrackShipment,
		Description: "Ask the carrier where an order's parcel is and when it should arrive. Only shipped orders can be tracked.",
		Timeout:     TrackTimeout,
		Resources:   orderRef.resources,
	}, func(ctx context.Context, in orderRef) (Shipment, error) {
		if err := checkID(in.OrderID); err != nil {
			return Shipment{}, err
		}
		return book.Track(ctx, in.OrderID)
	})
	if err != nil {
		return nil, err
	}
	list, err := tool.New(tool.Spec[pageRef]{
		Name:        ListOrders,
		Description: fmt.Sprintf("List all orders, %d per page, sorted by ID. The result says whether more pages follow.", PageSize),
	}, func(ctx context.Context, in pageRef) (orderPage, error) {
		return listPage(ctx, book, in.Page)
	})
	if err != nil {
		return nil, err
	}
	refund, err := tool.New(tool.Spec[refundRef]{
		Name:        RefundOrder,
		Description: "Refund the rest of an order's total to the customer. Only shipped or delivered orders can be refunded, once.",
		Effect:      tool.Write,
		Resources:   refundRef.resources,
		IdempotencyKey: func(in refundRef) string {
			return "refund:" + in.OrderID
		},
		Compensation: &tool.Compensation{Tool: ReverseRefund, Args: map[string]string{
			"refund_id": "result.refund_id",
			"reason":    `="the rest of the request failed"`,
		}},
		Lookup: func(ctx context.Context, in refundRef) (any, bool, error) {
			r, ok, err := book.RefundOf(ctx, in.OrderID, ToPayment)
			if err != nil || !ok {
				return nil, false, err
			}
			return r, true, nil
		},
	}, refunding(book, book.Refund))
	if err != nil {
		return nil, err
	}
	voucher, err := tool.New(tool.Spec[refundRef]{
		Name: IssueVoucher,
		Description: "Refund the rest of an order's total as a store voucher instead of to the original payment. " +
			"Only shipped or delivered orders can be refunded, once.",
		Effect:    tool.Write,
		Resources: refundRef.resources,
	}, refunding(book, book.Voucher))
	if err != nil {
		return nil, err
	}
	cancel, err := tool.New(tool.Spec[orderRef]{
		Name:        CancelOrder,
		Description: "Cancel an order that has not shipped yet.",
		Effect:      tool.Write,
		Resources:   orderRef.resources,
	}, func(ctx context.Context, in orderRef) (Order, error) {
		if err := checkID(in.OrderID); err != nil {
			return Order{}, err
		}
		o, err := book.Cancel(ctx, in.OrderID)
		if err != nil {
			return Order{}, err
		}
		if err := afterWrite(ctx, book, in.OrderID); err != nil {
			return Order{}, err
		}
		return o, nil
	})
	if err != nil {
		return nil, err
	}
	reverse, err := tool.New(tool.Spec[reverseRef]{
		Name:        ReverseRefund,
		Description: "Take a refund back: the money returns to the shop and the order is as before the refund. Each refund can be reversed once.",
		Effect:      tool.Write,
		Lookup: func(ctx context.Context, in reverseRef) (any, bool, error) {
			rv, ok, err := book.ReversalOf(ctx, in.RefundID)
			if err != nil || !ok {
				return nil, false, err
			}
			return rv, true, nil
		},
	}, func(ctx context.Context, in reverseRef) (Reversal, error) {
		if strings.TrimSpace(in.RefundID) == "" {
			return Reversal{}, invalid("refund_id is empty; refund IDs look like R-A103-1")
		}
		return book.ReverseRefund(ctx, in.RefundID, in.Reason)
	})
	if err != nil {
		return nil, err
	}
	return tool.NewRegistry(query, track, list, refund, cancel, voucher, reverse)
}

func checkID(id string) error {
	if strings.TrimSpace(id) == "" {
		return invalid("order_id is empty; order IDs look like A100")
	}
	return nil
}

// afterWrite lets a book that simulates faults (Book.HangAfterWrite) act
// once a write has applied; other books have nothing to do.
func afterWrite(ctx context.Context, book OrderBook, id string) error {
	if h, ok := book.(interface {
		afterWrite(ctx context.Context, id string) error
	}); ok {
		return h.afterWrite(ctx, id)
	}
	return nil
}

func listPage(ctx context.Context, book OrderBook, page int) (orderPage, error) {
	switch {
	case page == 0:
		page = 1
	case page < 0:
		return orderPage{}, invalid("page %d: pages are numbered from 1", page)
	}
	all, err := book.Orders(ctx)
	if err != nil {
		return orderPage{}, err
	}
	out := orderPage{Page: page, Orders: []orderSummary{}}
	if page-1 > len(all)/PageSize {
		return out, nil // past the last page; checked first so start cannot overflow
	}
	start := (page - 1) * PageSize
	for i := start; i < len(all) && i < start+PageSize; i++ {
		o := all[i]
		out.Orders = append(out.Orders, orderSummary{ID: o.ID, Customer: o.Customer, Status: o.Status, TotalCents: o.TotalCents})
	}
	out.More = start+PageSize < len(all)
	return out, nil
}

// refunding makes a write handler of one of the book's ways to refund.
func refunding(book OrderBook, apply func(ctx context.Context, id, reason string) (Refund, error)) func(context.Context, refundRef) (Refund, error) {
	return func(ctx context.Context, in refundRef) (Refund, error) {
		if err := checkID(in.OrderID); err != nil {
			return Refund{}, err
		}
		r, err := apply(ctx, in.OrderID, in.Reason)
		if err != nil {
			return Refund{}, err
		}
		if err := afterWrite(ctx, book, in.OrderID); err != nil {
			return Refund{}, err
		}
		return r, nil
	}
}
