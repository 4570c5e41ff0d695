package orders_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
)

// deskRun runs the desk model on one customer message over book.
func deskRun(t *testing.T, book orders.OrderBook, ledger *executor.Options, ask string) *loop.Result {
	t.Helper()
	reg, err := orders.Tools(book)
	if err != nil {
		t.Fatal(err)
	}
	r, err := loop.NewRunner(loop.Config{Model: orders.DeskModel(), ModelName: orders.DeskModelName, Tools: reg,
		Executor: executor.New(ledger)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), orders.Messages(ask))
	if res == nil {
		t.Fatal(err)
	}
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestDeskModel drives the order desk with the rule-based model: refunds
// of orders added to a SQLite book, a look-up, a question back when no
// order is named, and the same refund asked again in a second run, which
// the refund's own idempotency key replays from the ledger.
func TestDeskModel(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "desk.db"))
	book := openSQLiteBook(t, st)
	extra := []orders.Order{
		{ID: "K001", Customer: "Test One", Status: orders.StatusDelivered,
			Items: []orders.Item{{SKU: "X", Name: "x", Quantity: 2, PriceCents: 500}}},
		{ID: "K002", Customer: "Test Two", Status: orders.StatusShipped,
			Items: []orders.Item{{SKU: "Y", Name: "y", Quantity: 1, PriceCents: 700}}},
	}
	if err := book.AddOrders(ctx, extra...); err != nil {
		t.Fatal(err)
	}
	extra[0].Customer = "changed"
	if err := book.AddOrders(ctx, extra[0]); err != nil {
		t.Fatal(err)
	}
	if o, err := book.Order(ctx, "K001"); err != nil || o.Customer != "Test One" || o.TotalCents != 1000 {
		t.Fatalf("K001 after adding it twice: %+v, %v", o, err)
	}
	opts := &executor.Options{Ledger: st}

	res := deskRun(t, book, opts, "Please refund K001 and K002, and K001 again.")
	if res.Status != loop.FinalAnswer || res.ToolCalls != 2 || res.Steps != 2 {
		t.Fatalf("refunds: %s (%s), %d calls, %d steps", res.Status, res.Detail, res.ToolCalls, res.Steps)
	}
	for _, id := range []string{"K001", "K002"} {
		if n, err := book.RefundCount(ctx, id); err != nil || n != 1 {
			t.Fatalf("%s: %d refunds, %v", id, n, err)
		}
	}
	if a := res.Answer(); strings.Count(a, "refund_order") != 2 || strings.Contains(a, "error") {
		t.Fatalf("answer %q", a)
	}

	again := deskRun(t, book, opts, "refund K001")
	if again.Status != loop.FinalAnswer || strings.Contains(again.Answer(), "error") {
		t.Fatalf("refund asked again: %s, %q", again.Status, again.Answer())
	}
	if n, _ := book.RefundCount(ctx, "K001"); n != 1 {
		t.Fatalf("K001 refunded %d times", n)
	}

	where := deskRun(t, book, opts, "Where is my parcel A100?")
	if c := where.Messages[2].ToolCalls; len(c) != 1 || c[0].Name != orders.TrackShipment {
		t.Fatalf("tracking: %+v", where.Messages[2])
	}
	none := deskRun(t, book, opts, "Hello?")
	if none.Status != loop.FinalAnswer || none.ToolCalls != 0 || !strings.Contains(none.Answer(), "Which order") {
		t.Fatalf("no order named: %s, %q", none.Status, none.Answer())
	}
	missing := deskRun(t, book, opts, "what about Z999")
	if missing.Status != loop.FinalAnswer || !strings.Contains(missing.Answer(), "not_found") {
		t.Fatalf("unknown order: %s, %q", missing.Status, missing.Answer())
	}
}

// TestSlowWrites: the refund is applied before the wait, and a done
// context ends the wait but not the refund.
func TestSlowWrites(t *testing.T) {
	book := orders.NewBook()
	slow := orders.SlowWrites(book, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := slow.Refund(ctx, "A103", "broken"); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 10*time.Second || book.Refunds("A103") != 1 {
		t.Fatalf("after %v: %d refunds", time.Since(start), book.Refunds("A103"))
	}
	if orders.SlowWrites(book, 0) != orders.OrderBook(book) {
		t.Fatal("no delay should give the book itself")
	}
}
