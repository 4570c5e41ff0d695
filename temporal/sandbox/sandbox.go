// Package sandbox runs the order desk's scenarios (package examples/orders)
// on Temporal: the worker side of one scenario's run, and the run's input,
// configured as the in-process runner configures them, so that a
// scenario's run ends the same way on both drivers. The Temporal build of
// toolloop (demo --temporal) and the tests use it.
package sandbox

import (
	"context"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
)

// Store is what the workers of a run share: the idempotency ledger, and
// the blobs that hold the runs' logs and large tool results.
type Store interface {
	store.Ledger
	store.Blobs
}

// Activities builds the worker side of a run of s: its scripted model, its
// tools over book, its policy and the sandbox's executor over st's
// ledger, with st's blobs. cancel is what the script calls to play a
// caller who gives up; on Temporal it should cancel the run's workflow.
func Activities(s orders.Scenario, book orders.OrderBook, st Store, cancel context.CancelFunc) (*temporal.Activities, error) {
	parts, err := s.Parts(book, st, cancel)
	if err != nil {
		return nil, err
	}
	return temporal.NewActivities(temporal.Config{
		Model: parts.Model, Tools: parts.Tools, Policy: s.Policy, Executor: parts.Executor, Blobs: st,
	})
}

// Book returns a fresh in-memory book prepared by the scenario's Setup.
func Book(s orders.Scenario) *orders.Book {
	b := orders.NewBook()
	if s.Setup != nil {
		s.Setup(b)
	}
	return b
}

// Input is the workflow input of a run of s with the given run ID (empty:
// the workflow ID): its conversation, identity and budgets, and the names
// the in-process runner records (model, session, prompt version).
func Input(s orders.Scenario, runID string) temporal.RunInput {
	return temporal.RunInput{
		RunID: runID, SessionID: s.SessionID(), Model: orders.ModelName, PromptVersion: orders.PromptVersion,
		Identity: s.Identity, Budgets: s.Budgets, Context: s.Context, Messages: orders.Messages(s.Ask),
		ModelRetryBackoff: orders.ModelRetryBackoff, OutputSchema: s.OutputSchema,
		Compensation: s.Compensation, AtomicBatches: s.AtomicBatches,
	}
}
