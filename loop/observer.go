package loop

import "context"

// Observer is told about each event of a run right after it is appended to
// the log, on the goroutine that drives the run. It must not modify the
// event, must copy what it keeps, and should be quick: the run waits for
// it. ctx is the run's context (it carries the caller's trace span).
type Observer interface {
	Observe(ctx context.Context, ev *Event)
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(ctx context.Context, ev *Event)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, ev *Event) { f(ctx, ev) }

// Observers returns an Observer that tells each of obs in turn; nil
// entries are skipped.
func Observers(obs ...Observer) Observer {
	var list []Observer
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	return ObserverFunc(func(ctx context.Context, ev *Event) {
		for _, o := range list {
			o.Observe(ctx, ev)
		}
	})
}
