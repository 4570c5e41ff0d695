package executor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

type noArgs struct{}

var testTool = tool.MustNew(tool.Spec[noArgs]{Name: "t"}, func(context.Context, noArgs) (any, error) { return nil, nil })

// newTestCallContext returns a call context for a running call, as
// runInline sets one up.
func newTestCallContext(parent context.Context) *callContext {
	return &callContext{Context: parent, deadline: time.Now().Add(time.Hour)}
}

// isClosed reports whether ch is closed, waiting a little for a closer
// that runs on another goroutine (the run's context's AfterFunc).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(time.Second):
		return false
	}
}

// A context whose Done is asked for only after the call returned is
// already over.
func TestCallContextDoneAfterReturn(t *testing.T) {
	c := newTestCallContext(context.Background())
	if why, ok := c.returned(); !ok || why != 0 {
		t.Fatalf("returned() = %v, %v; want 0, true", why, ok)
	}
	if !isClosed(c.Done()) {
		t.Error("Done is open after the call returned")
	}
	if !errors.Is(c.Err(), context.Canceled) {
		t.Errorf("Err() = %v, want Canceled", c.Err())
	}
	if c.abandon() {
		t.Error("abandon() won after the handler returned")
	}
}

// A context whose Done was asked for ends with the run's context, with the
// run's error, and a later return still wins over the watchdog.
func TestCallContextParentEnds(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Hour)
	c := newTestCallContext(parent)
	done := c.Done()
	if c.Done() != done {
		t.Fatal("Done returned two channels")
	}
	if c.Err() != nil {
		t.Fatalf("Err() = %v before anything ended", c.Err())
	}
	cancel()
	if !isClosed(done) {
		t.Fatal("Done is open after the run's context ended")
	}
	if !errors.Is(c.Err(), context.Canceled) || c.Err() != parent.Err() {
		t.Errorf("Err() = %v, want the run's %v", c.Err(), parent.Err())
	}
	if why, ok := c.returned(); !ok || why != endParent {
		t.Errorf("returned() = %v, %v; want endParent, true", why, ok)
	}
}

// An expired call is abandoned: its context reports DeadlineExceeded and
// the handler's late return loses.
func TestCallContextExpire(t *testing.T) {
	c := newTestCallContext(context.Background())
	done := c.Done()
	var got []Outcome
	w := watchedCall{cc: c, call: &Call{Tool: testTool}, attempt: 1, start: time.Now(), timeout: time.Second,
		takeover: takeoverFunc(func(o Outcome) { got = append(got, o) })}
	w.expire()
	if !isClosed(done) || !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Errorf("after expire: closed=%v Err()=%v", isClosed(done), c.Err())
	}
	if len(got) != 1 || !got[0].TimedOut {
		t.Errorf("takeover got %+v, want one timed-out outcome", got)
	}
	if _, ok := c.returned(); ok {
		t.Error("returned() won after the watchdog abandoned the call")
	}
	w.expire() // a second expiry finds the call settled
	if len(got) != 1 {
		t.Errorf("takeover called %d times", len(got))
	}
}

// Done, the handler's return and the run's end may race from any number
// of goroutines: every Done gives the same channel, it is closed exactly
// once (a second close would panic), and Err agrees.
func TestCallContextRaces(t *testing.T) {
	for range 500 {
		parent, cancel := context.WithCancel(context.Background())
		c := newTestCallContext(parent)
		var wg sync.WaitGroup
		chans := make([]<-chan struct{}, 4)
		for k := range chans {
			wg.Go(func() { chans[k] = c.Done() })
		}
		wg.Go(func() { c.returned() })
		wg.Go(cancel)
		wg.Wait()
		for _, ch := range chans {
			if ch != chans[0] {
				t.Fatal("Done returned different channels")
			}
		}
		if !isClosed(chans[0]) {
			t.Fatal("Done is open after the call and the run ended")
		}
		if err := c.Err(); err == nil {
			t.Fatal("Err() is nil after the call ended")
		}
		cancel()
	}
}

// Alarms are pooled: a callback that arrives early, or for a watchdog
// that has since closed, must neither expire a call before its deadline
// nor keep it from expiring at its deadline; closing twice is harmless.
func TestWatchdogStrayAlarm(t *testing.T) {
	e := New(nil)
	old := e.NewWatchdog(context.Background())
	stale := old.alarm
	old.Close()
	old.Close()
	stale.fire() // its watchdog closed: reaches nobody, or a fresh one
	// A stray callback racing with the alarm's next watchdog being made
	// (the pool most likely hands it the same alarm).
	for range 200 {
		w := e.NewWatchdog(context.Background())
		a := w.alarm
		w.Close()
		done := make(chan struct{})
		go func() { a.fire(); close(done) }()
		e.NewWatchdog(context.Background()).Close()
		<-done
	}

	w := e.NewWatchdog(context.Background())
	defer w.Close()
	release := make(chan struct{})
	stuck := tool.MustNew(tool.Spec[noArgs]{Name: "stuck", Timeout: 30 * time.Millisecond, OnTimeout: tool.TimeoutReport},
		func(context.Context, noArgs) (any, error) { <-release; return nil, nil })
	start := time.Now()
	took := make(chan Outcome, 1)
	returned := make(chan bool, 1)
	go func() {
		_, ok := New(nil).RunInline(context.Background(), Call{Tool: stuck}, w, func(o Outcome) { took <- o })
		returned <- ok
	}()
	for range 5 {
		time.Sleep(2 * time.Millisecond)
		w.alarm.fire() // early: nothing is due yet
	}
	select {
	case o := <-took:
		if elapsed := time.Since(start); !o.TimedOut || elapsed < 30*time.Millisecond {
			t.Errorf("taken over after %v with %+v, want a timeout after 30ms", elapsed, o)
		}
	case <-time.After(time.Second):
		t.Fatal("the call was never given up on")
	}
	close(release)
	if <-returned {
		t.Error("RunInline reported ok=true after the watchdog took over")
	}
}

// A watchdog registers with the run's context only once a call has run
// for about registerAfter; a run of quick calls never does. A handler
// that ignores its context is still given up on when the context ends
// before the registration.
func TestWatchdogRegistersLate(t *testing.T) {
	registered := func(w *Watchdog) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.stopParent != nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewWatchdog(ctx)
	defer w.Close()
	quick := tool.MustNew(tool.Spec[noArgs]{Name: "quick"}, func(context.Context, noArgs) (any, error) { return nil, nil })
	start := time.Now()
	_, ok := New(nil).RunInline(ctx, Call{Tool: quick}, w, func(Outcome) { t.Error("takeover") })
	// The timer can only have fired during the call if it took that long
	// (a stall on a loaded machine).
	if took := time.Since(start); !ok || registered(w) && took < registerAfter {
		t.Fatalf("after a quick call (%v): ok=%v, registered=%v", took, ok, registered(w))
	}

	release := make(chan struct{})
	started := make(chan struct{})
	stuck := tool.MustNew(tool.Spec[noArgs]{Name: "stuck", Timeout: time.Hour},
		func(context.Context, noArgs) (any, error) { close(started); <-release; return nil, nil })
	took := make(chan Outcome, 1)
	returned := make(chan bool, 1)
	go func() {
		_, ok := New(nil).RunInline(ctx, Call{Tool: stuck}, w, func(o Outcome) { took <- o })
		returned <- ok
	}()
	<-started
	cancel() // most likely before the registration
	select {
	case o := <-took:
		if !o.StopRun || o.Result.ErrorKind != llm.ErrCanceled {
			t.Errorf("outcome = %+v", o)
		}
	case <-time.After(time.Second):
		t.Fatal("the stuck call was not given up on after the run's context ended")
	}
	close(release)
	if <-returned {
		t.Error("RunInline reported ok=true after the watchdog took over")
	}
	if !registered(w) {
		t.Error("not registered after a call ran past registerAfter")
	}
}
