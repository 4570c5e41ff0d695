package loop

import "github.com/toolloop/toolloop/store"

// ConfigForTest returns the runner's configuration with a store attached,
// for benchmarks that compare durable and in-memory runs.
func (r *Runner) ConfigForTest(st store.EventLog) Config {
	c := r.cfg
	c.Store = st
	return c
}

// FirstLogCap is a new run's first log capacity.
const FirstLogCap = firstLogCap
