package temporal

import (
	"errors"
	"fmt"
	"time"

	"github.com/toolloop/toolloop/loop"
)

// This file mirrors two unexported pieces of package loop that a driver in
// another module needs: the budget defaults (loop's Budgets.normalized) and
// the check of a human's answer (loop's checkAnswer). Tests compare both
// with loop's own behaviour, so a change there fails here.

// normalizeBudgets fills in the defaults of loop.Budgets exactly as
// loop.NewRunner does.
func normalizeBudgets(b loop.Budgets) (loop.Budgets, error) {
	switch {
	case b.MaxSteps == 0:
		b.MaxSteps = loop.DefaultMaxSteps
	case b.MaxSteps < 0:
		return b, fmt.Errorf("budgets: MaxSteps is %d; it must be positive (a loop needs a hard exit)", b.MaxSteps)
	}
	switch {
	case b.Deadline == 0:
		b.Deadline = loop.DefaultDeadline
	case b.Deadline < 0:
		b.Deadline = 0
	}
	switch {
	case b.MaxToolCalls == 0:
		b.MaxToolCalls = loop.DefaultMaxToolCalls
	case b.MaxToolCalls < 0:
		b.MaxToolCalls = 0
	}
	if b.MaxTokens < 0 {
		b.MaxTokens = 0
	}
	if b.MaxCost < 0 {
		b.MaxCost = 0
	}
	if b.ToolTimeout < 0 {
		b.ToolTimeout = 0
	}
	// Prices do not travel in a workflow's input (they are not encoded);
	// RunInput.Price does.
	b.Prices = nil
	return b, nil
}

// checkAnswer verifies that answer matches a call the run is waiting on.
func checkAnswer(s *loop.State, answer loop.Confirmation) error {
	if answer.By == "" {
		return errors.New("loop: a confirmation must say who decided (By)")
	}
	for _, p := range append(append([]loop.Pending(nil), s.Answered...), s.Pending...) {
		if p.CallID == answer.CallID && p.Confirmation != nil {
			verb := "denied"
			if p.Confirmation.Approved {
				verb = "approved"
			}
			return fmt.Errorf("loop: call %s of run %s was already %s by %s", answer.CallID, s.RunID, verb, p.Confirmation.By)
		}
	}
	if s.Status != loop.ConfirmationRequired || s.Batch == nil {
		st := s.Status
		if !s.Done {
			st = loop.RunningStatus
		}
		return fmt.Errorf("loop: run %s is not waiting for confirmation (status %s)", s.RunID, st)
	}
	for _, p := range s.Pending {
		if p.CallID == answer.CallID {
			return nil
		}
	}
	var ids []string
	for _, p := range s.Pending {
		ids = append(ids, p.CallID)
	}
	return fmt.Errorf("loop: call %s is not pending in run %s (pending: %v)", answer.CallID, s.RunID, ids)
}

// remaining is the time left before deadline at now; zero deadline means
// no bound (ok=false).
func remaining(deadline, now time.Time) (d time.Duration, ok bool) {
	if deadline.IsZero() {
		return 0, false
	}
	return deadline.Sub(now), true
}
