package orders_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
)

// openStore opens (creating) the SQLite store at path and closes it when
// the test ends.
func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(path, &sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openSQLiteBook(t *testing.T, st *sqlite.Store) *orders.SQLiteBook {
	t.Helper()
	book, err := orders.OpenSQLiteBook(context.Background(), st.DB())
	if err != nil {
		t.Fatal(err)
	}
	return book
}

// TestBooksAgree runs the same operations on the in-memory book, the
// SQLite book and the Postgres book: all apply the same rules and fail the
// same way.
func TestBooksAgree(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		open func(t *testing.T) orders.OrderBook
	}{
		{"memory", func(*testing.T) orders.OrderBook { return orders.NewBook() }},
		{"sqlite", func(t *testing.T) orders.OrderBook {
			return openSQLiteBook(t, openStore(t, filepath.Join(t.TempDir(), "book.db")))
		}},
		{"postgres", func(t *testing.T) orders.OrderBook {
			return openPostgresBook(t, openPostgresDB(t, freshSchema(t)))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			book := c.open(t)
			all, err := book.Orders(ctx)
			if err != nil || len(all) != 6 || all[0].ID != "A100" || all[5].ID != "A105" {
				t.Fatalf("Orders() = %v, %v", all, err)
			}
			o, err := book.Order(ctx, "A103")
			if err != nil || o.TotalCents != 6400 || o.Status != orders.StatusDelivered || len(o.Items) != 1 || o.Items[0].SKU != "MA-07" {
				t.Errorf("Order(A103) = %+v, %v", o, err)
			}
			if _, err := book.Order(ctx, "A999"); tool.KindOf(err) != llm.KindNotFound {
				t.Errorf("Order(A999): %v, want not_found", err)
			}
			r, err := book.Refund(ctx, "A103", "broken")
			if err != nil || r != (orders.Refund{RefundID: "R-A103-1", OrderID: "A103", AmountCents: 6400, Method: orders.ToPayment, Reason: "broken"}) {
				t.Errorf("Refund(A103) = %+v, %v", r, err)
			}
			if _, err := book.Refund(ctx, "A103", "again"); tool.KindOf(err) != llm.KindInvalidArguments {
				t.Errorf("second refund: %v, want invalid_arguments", err)
			}
			if _, err := book.Refund(ctx, "A102", ""); tool.KindOf(err) != llm.KindInvalidArguments || !strings.Contains(err.Error(), "cancel it instead") {
				t.Errorf("refund of an unshipped order: %v", err)
			}
			if _, err := book.Refund(ctx, "A999", ""); tool.KindOf(err) != llm.KindNotFound {
				t.Errorf("refund of A999: %v, want not_found", err)
			}
			v, err := book.Voucher(ctx, "A101", "credit")
			if err != nil || v.RefundID != "V-A101-1" || v.AmountCents != 2400 || v.Method != orders.AsVoucher {
				t.Errorf("Voucher(A101) = %+v, %v", v, err)
			}
			if got, ok, err := book.RefundOf(ctx, "A103", orders.ToPayment); !ok || err != nil || got != r {
				t.Errorf("RefundOf(A103) = %+v %v %v", got, ok, err)
			}
			if _, ok, err := book.RefundOf(ctx, "A101", orders.ToPayment); ok || err != nil {
				t.Errorf("RefundOf(A101, payment) found a refund: %v", err)
			}
			for id, want := range map[string]int{"A103": 1, "A101": 1, "A100": 0, "": 2} {
				if n, err := book.RefundCount(ctx, id); n != want || err != nil {
					t.Errorf("RefundCount(%q) = %d, %v; want %d", id, n, err, want)
				}
			}
			if _, err := book.Cancel(ctx, "A100"); tool.KindOf(err) != llm.KindInvalidArguments {
				t.Errorf("cancel of a shipped order: %v", err)
			}
			if c, err := book.Cancel(ctx, "A102"); err != nil || c.Status != orders.StatusCancelled {
				t.Errorf("Cancel(A102) = %+v, %v", c, err)
			}
			if o, _ := book.Order(ctx, "A103"); o.Status != orders.StatusRefunded || o.RefundedCents != 6400 {
				t.Errorf("A103 after its refund: %+v", o)
			}
			// A reversal takes the refund back once: A103 is delivered
			// again, with nothing refunded.
			if rv, err := book.ReverseRefund(ctx, "R-A103-1", "undo"); err != nil ||
				rv != (orders.Reversal{RefundID: "R-A103-1", OrderID: "A103", AmountCents: 6400, Reason: "undo"}) {
				t.Errorf("ReverseRefund(R-A103-1) = %+v, %v", rv, err)
			}
			if o, _ := book.Order(ctx, "A103"); o.Status != orders.StatusDelivered || o.RefundedCents != 0 {
				t.Errorf("A103 after the reversal: %+v", o)
			}
			if _, err := book.ReverseRefund(ctx, "R-A103-1", "again"); tool.KindOf(err) != llm.KindInvalidArguments {
				t.Errorf("second reversal: %v, want invalid_arguments", err)
			}
			if _, err := book.ReverseRefund(ctx, "R-A999-1", ""); tool.KindOf(err) != llm.KindNotFound {
				t.Errorf("reversal of no refund: %v, want not_found", err)
			}
			if rv, ok, err := book.ReversalOf(ctx, "R-A103-1"); !ok || err != nil || rv.AmountCents != 6400 {
				t.Errorf("ReversalOf(R-A103-1) = %+v %v %v", rv, ok, err)
			}
			if _, ok, err := book.ReversalOf(ctx, "V-A101-1"); ok || err != nil {
				t.Errorf("ReversalOf(V-A101-1) found one: %v", err)
			}
			if n, err := book.ReversalCount(ctx, ""); n != 1 || err != nil {
				t.Errorf("ReversalCount = %d, %v; want 1", n, err)
			}
			if sh, err := book.Track(ctx, "A100"); err != nil || sh.Carrier != "DHL" || sh.Tracking != "DHL-100-7731" || sh.State != "in_transit" {
				t.Errorf("Track(A100) = %+v, %v", sh, err)
			}
			if _, err := book.Track(ctx, "A105"); tool.KindOf(err) != llm.KindNotFound {
				t.Errorf("Track(A105), never shipped: %v", err)
			}
			short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			if _, err := book.Track(short, "A104"); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Track(A104) on the slow carrier: %v", err)
			}
		})
	}
}

// TestSQLiteBookShared checks that the book outlives its opener: another
// store on the same file sees the refund, opening the book again keeps it,
// and concurrent refunds from two stores apply once.
func TestSQLiteBookShared(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shop.db")
	a, b := openStore(t, path), openStore(t, path)
	checkShared(t, openSQLiteBook(t, a), openSQLiteBook(t, b), func() orders.OrderBook { return openSQLiteBook(t, a) })
	if _, err := orders.OpenSQLiteBook(context.Background(), nil); err == nil {
		t.Error("OpenSQLiteBook(nil) succeeded")
	}
}

// checkShared checks two books on one database, as two processes (or
// machines) have them: concurrent refunds of one order, half from each,
// apply once, and both books, and a third opened by reopen after the
// refund, see it.
func checkShared(t *testing.T, bookA, bookB orders.OrderBook, reopen func() orders.OrderBook) {
	t.Helper()
	ctx := context.Background()
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		ok int
	)
	for i := range 8 {
		book := bookA
		if i%2 == 1 {
			book = bookB
		}
		wg.Go(func() {
			if _, err := book.Refund(ctx, "A100", "race"); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			} else if tool.KindOf(err) != llm.KindInvalidArguments {
				t.Errorf("refund: %v", err)
			}
		})
	}
	wg.Wait()
	if ok != 1 {
		t.Errorf("%d refunds of A100 succeeded, want exactly one", ok)
	}
	again := reopen() // seeding again changes nothing
	for _, book := range []orders.OrderBook{bookA, bookB, again} {
		if n, err := book.RefundCount(ctx, "A100"); n != 1 || err != nil {
			t.Errorf("RefundCount(A100) = %d, %v; want 1", n, err)
		}
		if o, _ := book.Order(ctx, "A100"); o.Status != orders.StatusRefunded {
			t.Errorf("A100 is %s", o.Status)
		}
	}
}

// TestScripted checks that the sandbox's model answers by the request's
// step, not by how many requests it saw.
func TestScripted(t *testing.T) {
	ctx := context.Background()
	m := orders.Scripted([]llmtest.Turn{llmtest.Text("one"), llmtest.Text("two")}, false)
	for _, c := range []struct {
		step int
		want string
	}{{2, "two"}, {1, "one"}, {2, "two"}} {
		resp, err := m.Generate(ctx, &llm.Request{Step: c.step})
		if err != nil || resp.Message.Text != c.want {
			t.Errorf("step %d: %v %v, want %q", c.step, resp, err, c.want)
		}
	}
	if _, err := m.Generate(ctx, &llm.Request{Step: 3}); !errors.Is(err, llmtest.ErrScriptExhausted) {
		t.Errorf("step 3: %v, want ErrScriptExhausted", err)
	}
	if _, err := m.Generate(ctx, &llm.Request{}); err == nil {
		t.Error("a request without a step was answered")
	}
	rep := orders.Scripted([]llmtest.Turn{llmtest.Text("one"), llmtest.Text("last")}, true)
	if resp, err := rep.Generate(ctx, &llm.Request{Step: 9}); err != nil || resp.Message.Text != "last" {
		t.Errorf("repeating, step 9: %v %v", resp, err)
	}
}

// pause plays confirm_refund into a new store file and returns the file,
// the run's ID and the paused result, with the store closed as a process
// would leave it.
func pause(t *testing.T) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "toolloop.db")
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	book := openSQLiteBook(t, st)
	s, _ := orders.Lookup("confirm_refund")
	res, used, err := s.RunWith(context.Background(), orders.RunOptions{Book: book, Store: st, Ledger: st})
	if err != nil {
		t.Fatal(err)
	}
	if used != book {
		t.Error("RunWith did not use the book it was given")
	}
	if res.Status != loop.ConfirmationRequired || len(res.Pending) != 1 || res.Pending[0].CallID != "call_r1" {
		t.Fatalf("status %s pending %+v, want confirmation_required on call_r1", string(res.Status), res.Pending)
	}
	if !strings.HasPrefix(res.RunID, "run-confirm_refund-") || len(res.RunID) != len("run-confirm_refund-")+8 {
		t.Errorf("run ID %q, want run-confirm_refund- and eight hex digits", res.RunID)
	}
	if n, _ := book.RefundCount(context.Background(), ""); n != 0 {
		t.Errorf("%d refunds before anyone decided", n)
	}
	runs, err := st.Runs(context.Background(), string(loop.ConfirmationRequired))
	if err != nil || len(runs) != 1 || runs[0].RunID != res.RunID || runs[0].SessionID != "demo:confirm_refund" {
		t.Errorf("stored runs %+v, %v", runs, err)
	}
	return path, res.RunID
}

// resume reopens the store at path, as the next process would, and resumes
// the run; it returns the result and the book's refund count.
func resume(t *testing.T, path, runID string) (*loop.Result, int) {
	t.Helper()
	st := openStore(t, path)
	s, ok := orders.LookupSession("demo:confirm_refund")
	if !ok {
		t.Fatal("no scenario for the session")
	}
	book := openSQLiteBook(t, st)
	res, _, err := s.Resume(context.Background(), runID, orders.RunOptions{Book: book, Store: st, Ledger: st})
	if err != nil {
		t.Fatal(err)
	}
	n, err := book.RefundCount(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return res, n
}

func decide(t *testing.T, path, runID string, c loop.Confirmation) {
	t.Helper()
	st := openStore(t, path)
	if err := loop.Decide(context.Background(), st, runID, c, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestConfirmRefundApproved pauses confirm_refund, approves the refund in
// "another process" and resumes in a third: the scripted model continues
// at step 3 and reports the one refund the SQLite book holds.
func TestConfirmRefundApproved(t *testing.T) {
	path, runID := pause(t)
	decide(t, path, runID, loop.Confirmation{CallID: "call_r1", Approved: true, By: "dana"})
	res, refunds := resume(t, path, runID)
	if res.Status != loop.FinalAnswer || refunds != 1 || res.Steps != 3 {
		t.Fatalf("status %s (%s) after %d steps with %d refunds; want final_answer after 3 with 1", string(res.Status), res.Detail, res.Steps, refunds)
	}
	if want := "Order A103 is refunded: 64.00 EUR back to your original payment, refund R-A103-1."; res.Answer() != want {
		t.Errorf("answer %q, want %q", res.Answer(), want)
	}
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Error(err)
	}
	// Resuming a run that has ended changes nothing.
	again, refunds := resume(t, path, runID)
	if again.Status != loop.FinalAnswer || len(again.Events) != len(res.Events) || refunds != 1 {
		t.Errorf("second resume: status %s, %d events (was %d), %d refunds", string(again.Status), len(again.Events), len(res.Events), refunds)
	}
}

// TestConfirmRefundDenied denies the refund: the model reads the denial
// and answers without refunding.
func TestConfirmRefundDenied(t *testing.T) {
	path, runID := pause(t)
	decide(t, path, runID, loop.Confirmation{CallID: "call_r1", By: "dana", Note: "the arm was bent by the customer"})
	res, refunds := resume(t, path, runID)
	if res.Status != loop.FinalAnswer || refunds != 0 {
		t.Fatalf("status %s with %d refunds, want final_answer with none", string(res.Status), refunds)
	}
	for _, want := range []string{"not refunded", "dana", "the arm was bent by the customer"} {
		if !strings.Contains(res.Answer(), want) {
			t.Errorf("answer %q lacks %q", res.Answer(), want)
		}
	}
	r, _ := result(t, res.Messages, "call_r1")
	if r.ErrorKind != llm.KindPermissionDenied {
		t.Errorf("refund result %+v, want permission_denied", r)
	}
}

func TestResumeNeedsStore(t *testing.T) {
	s, _ := orders.Lookup("confirm_refund")
	if _, _, err := s.Resume(context.Background(), "run-x", orders.RunOptions{}); err == nil {
		t.Error("Resume without a store succeeded")
	}
}
