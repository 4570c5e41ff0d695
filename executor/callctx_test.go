package executor

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A callContext reports what context.WithDeadline would, whether or not
// the real context has been made: before and after its deadline, after
// its parent ends, and after release.
func TestCallContextLikeWithDeadline(t *testing.T) {
	t.Run("before the deadline", func(t *testing.T) {
		d := time.Now().Add(time.Hour)
		c := newCallContext(context.Background(), d)
		defer c.release()
		if err := c.Err(); err != nil {
			t.Fatalf("Err = %v, want nil", err)
		}
		if got, ok := c.Deadline(); !ok || !got.Equal(d) {
			t.Fatalf("Deadline = %v, %v; want %v, true", got, ok, d)
		}
		select {
		case <-c.Done():
			t.Fatal("Done closed before the deadline")
		default:
		}
	})
	t.Run("past the deadline, never made real", func(t *testing.T) {
		c := newCallContext(context.Background(), time.Now().Add(-time.Millisecond))
		defer c.release()
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err = %v, want DeadlineExceeded", err)
		}
		// Made real now, it is done at once, for the same reason.
		select {
		case <-c.Done():
		case <-time.After(time.Second):
			t.Fatal("Done not closed past the deadline")
		}
		if err := context.Cause(c); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Cause = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("made real, ends at the deadline", func(t *testing.T) {
		c := newCallContext(context.Background(), time.Now().Add(20*time.Millisecond))
		defer c.release()
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed at the deadline")
		}
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("the parent ends", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		c := newCallContext(parent, time.Now().Add(time.Hour))
		defer c.release()
		cancel()
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want Canceled", err)
		}
		<-c.Done()
	})
	t.Run("the parent's deadline is earlier", func(t *testing.T) {
		pd := time.Now().Add(time.Minute)
		parent, cancel := context.WithDeadline(context.Background(), pd)
		defer cancel()
		c := newCallContext(parent, time.Now().Add(time.Hour))
		defer c.release()
		if got, _ := c.Deadline(); !got.Equal(pd) {
			t.Fatalf("Deadline = %v, want the parent's %v", got, pd)
		}
	})
	t.Run("released before it was made real", func(t *testing.T) {
		c := newCallContext(context.Background(), time.Now().Add(time.Hour))
		c.release()
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want Canceled", err)
		}
		<-c.Done() // a context made after release is done already
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err after Done = %v, want Canceled", err)
		}
	})
	t.Run("released after it was made real", func(t *testing.T) {
		c := newCallContext(context.Background(), time.Now().Add(time.Hour))
		done := c.Done()
		c.release()
		<-done
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want Canceled", err)
		}
	})
	t.Run("values come from the parent", func(t *testing.T) {
		type key struct{}
		c := newCallContext(context.WithValue(context.Background(), key{}, "v"), time.Now().Add(time.Hour))
		defer c.release()
		if got := c.Value(key{}); got != "v" {
			t.Fatalf("Value = %v, want v", got)
		}
	})
}
