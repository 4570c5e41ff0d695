// Package consoletest gives tests of the web console (handler tests, and
// browser tests that drive a console started with httptest) runs to show:
// the order-desk sandbox's, recorded in any store, and a backend that
// resumes them as toolloop resume does.
package consoletest

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
)

// Log is a store the sandbox's runs can be recorded in and resumed from:
// an event log that is also the runs' idempotency ledger (store.Memory,
// store/sqlite's Store).
type Log interface {
	store.EventLog
	store.Ledger
}

// Backend returns the console's backend over log: runs answered with
// loop.Decide, and the sandbox's runs resumed with their scenario (the
// scripted model goes on where it paused) over log. Other runs it cannot
// resume (console.ErrNotHere).
func Backend(log Log) *console.LogBackend {
	return &console.LogBackend{Log: log, ResumeFunc: func(ctx context.Context, runID string) (*loop.Result, error) {
		events, err := loop.LoadEvents(ctx, log, runID)
		if err != nil {
			return nil, err
		}
		if len(events) == 0 || events[0].Start == nil {
			return nil, fmt.Errorf("run %s has no started event", runID)
		}
		s, ok := orders.LookupSession(events[0].Start.SessionID)
		if !ok {
			return nil, fmt.Errorf("%w: run %s is not a sandbox run (session %q)", console.ErrNotHere, runID, events[0].Start.SessionID)
		}
		res, _, err := s.Resume(ctx, runID, orders.RunOptions{Store: log, Ledger: log})
		return res, err
	}}
}

// Scenario plays the sandbox scenario name into log and returns its run
// ID. "confirmation_required" leaves a run paused on call call_r1 (a
// refund), for a person to approve or deny.
func Scenario(ctx context.Context, log Log, name string) (string, error) {
	s, ok := orders.Lookup(name)
	if !ok {
		return "", fmt.Errorf("consoletest: no scenario %q; have %v", name, orders.Names())
	}
	res, _, err := s.RunWith(ctx, orders.RunOptions{Store: log, Ledger: log})
	if err != nil {
		return "", err
	}
	return res.RunID, nil
}

// Answer records into log a run whose model answers text at once (and
// whose customer asked ask): for checking that pages show model output as
// text, however much it looks like HTML.
func Answer(ctx context.Context, log Log, ask, text string) (string, error) {
	s := orders.Scenario{Name: "answer", Want: loop.FinalAnswer, Ask: ask,
		Script: func(context.CancelFunc) []llmtest.Turn { return []llmtest.Turn{llmtest.Text(text)} }}
	res, _, err := s.RunWith(ctx, orders.RunOptions{Store: log, Ledger: log})
	if err != nil {
		return "", err
	}
	if res.Status != loop.FinalAnswer {
		return "", errors.New("consoletest: the answer run ended with " + string(res.Status))
	}
	return res.RunID, nil
}
