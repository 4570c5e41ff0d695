package orders

import (
	"context"
	"time"
)

// SlowWrites returns book with every refund, voucher and cancellation
// answering d after it is applied, like a payment service whose reply is
// slow to come back: the write is done, its caller does not know it yet.
// It is the window in which a crash or a timeout leaves a write's outcome
// unknown, widened so that tests and drills can hit it. The wait ends
// early when ctx is done; the write stays applied.
func SlowWrites(book OrderBook, d time.Duration) OrderBook {
	if d <= 0 {
		return book
	}
	return slowWrites{OrderBook: book, d: d}
}

type slowWrites struct {
	OrderBook
	d time.Duration
}

func (s slowWrites) wait(ctx context.Context) {
	t := time.NewTimer(s.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (s slowWrites) Refund(ctx context.Context, id, reason string) (Refund, error) {
	r, err := s.OrderBook.Refund(ctx, id, reason)
	s.wait(ctx)
	return r, err
}

func (s slowWrites) Voucher(ctx context.Context, id, reason string) (Refund, error) {
	r, err := s.OrderBook.Voucher(ctx, id, reason)
	s.wait(ctx)
	return r, err
}

func (s slowWrites) Cancel(ctx context.Context, id string) (Order, error) {
	o, err := s.OrderBook.Cancel(ctx, id)
	s.wait(ctx)
	return o, err
}
