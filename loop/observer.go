package loop

import "context"

// Observer is told about each event of a run once it is committed, in
// order, on the goroutine that drives the run: right after it is appended
// to the log, or, for a durable run (Config.Store), right after the store
// accepted it. An observer never sees an event the store lost or refused,
// so a log it writes agrees with the store. It must not modify the event,
// must copy what it keeps, and should be quick: the run waits for it. ctx
// is the run's context (it carries the caller's trace span).
type Observer interface {
	Observe(ctx context.Context, ev *Event)
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(ctx context.Context, ev *Event)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, ev *Event) { f(ctx, ev) }

// ResumeObserver is an Observer that wants to know when a run is picked up
// again from its log (Runner.Resume, Runner.Continue): before the Resumed
// event, it is given the run's whole log so far, including events other
// processes appended (answers recorded with Decide) and without events a
// crashed process saw but never stored.
type ResumeObserver interface {
	Observer
	ObserveResume(ctx context.Context, history []Event)
}

// Observers returns an Observer that tells each of obs in turn; nil
// entries are skipped. It passes ObserveResume on to those that want it.
func Observers(obs ...Observer) Observer {
	var list multiObserver
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	return list
}

type multiObserver []Observer

func (m multiObserver) Observe(ctx context.Context, ev *Event) {
	for _, o := range m {
		o.Observe(ctx, ev)
	}
}

func (m multiObserver) ObserveResume(ctx context.Context, history []Event) {
	for _, o := range m {
		if ro, ok := o.(ResumeObserver); ok {
			ro.ObserveResume(ctx, history)
		}
	}
}

type runIDKey struct{}

// RunID returns the ID of the run whose context ctx is, as observers
// receive it; "" for any other context.
func RunID(ctx context.Context) string {
	id, _ := ctx.Value(runIDKey{}).(string)
	return id
}
