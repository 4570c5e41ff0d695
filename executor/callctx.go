package executor

import (
	"context"
	"sync"
	"time"
)

// callContext is the context a handler runs under: its parent's with the
// call's deadline. It behaves as context.WithDeadline(parent, deadline)
// would, but makes that context (a timer, a channel and a place in the
// parent's list of children) only when the handler asks for Done or a
// Value, or passes it on to something that does. Most handlers of quick
// tools never do; checking Err or Deadline costs them nothing.
//
// The deadline still binds a handler that never looks at its context:
// the executor stops waiting at the deadline on a timer of its own
// (attempt), whatever the handler does with this context.
type callContext struct {
	parent   context.Context
	deadline time.Time

	mu     sync.Mutex
	real   context.Context // made by materialize
	cancel context.CancelFunc
	// ended is the error of a context released before it was made real:
	// what it would have reported at that moment.
	ended error
}

// newCallContext returns a context for one attempt that ends at deadline,
// or when parent ends if that comes first. Call release when the attempt
// is over, as with a context.CancelFunc.
func newCallContext(parent context.Context, deadline time.Time) *callContext {
	return &callContext{parent: parent, deadline: deadline}
}

// init readies c, not yet used, as newCallContext would: for a context
// that lives in a larger allocation (a stage's prepared calls).
func (c *callContext) init(parent context.Context, deadline time.Time) {
	c.parent, c.deadline = parent, deadline
}

// materialize returns the real context, making it on first use. A context
// made after release is canceled at once, as it would have been.
func (c *callContext) materialize() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real == nil {
		c.real, c.cancel = context.WithDeadline(c.parent, c.deadline)
		if c.ended != nil {
			c.cancel()
		}
	}
	return c.real
}

// release ends the context, as a context.CancelFunc does.
func (c *callContext) release() { c.end() }

// end ends the context, as a context.CancelFunc does, and returns the
// error it reported just before: nil if it was still live. The executor
// learns from it whether the handler answered in time, and so reads the
// clock once for both.
func (c *callContext) end() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		err := c.real.Err()
		c.cancel()
		return err
	}
	if c.ended != nil {
		return c.ended
	}
	err := c.errNow()
	c.ended = err
	if err == nil {
		c.ended = context.Canceled
	}
	return err
}

// Deadline returns the earlier of the call's deadline and the parent's.
func (c *callContext) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done returns the real context's channel, making it if need be.
func (c *callContext) Done() <-chan struct{} { return c.materialize().Done() }

// Err is the real context's error once there is one. Before that it is
// worked out as the real one would report it: the parent's error, then
// DeadlineExceeded once the deadline has passed; after release, what it
// was then, or Canceled.
func (c *callContext) Err() error {
	c.mu.Lock()
	real, ended := c.real, c.ended
	c.mu.Unlock()
	switch {
	case ended != nil:
		return ended
	case real != nil:
		return real.Err()
	}
	return c.errNow()
}

// errNow is the error of a context not made real, from its parent and the
// clock.
func (c *callContext) errNow() error {
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value asks the real context, so that context.Cause and the context
// package's own look-ups see the deadline's cancellation as theirs.
func (c *callContext) Value(key any) any { return c.materialize().Value(key) }
