// Package executor is the tool-executor boundary: it plans a batch of
// authorized calls and runs it, stage by stage, and gives back one
// classified Outcome per call. It never decides what happens next: whether
// a failure goes back to the model or stops the run is the loop's reading
// of the outcome.
//
// Planning. A Planner turns a batch into a Plan: stages of call indexes,
// run one after another, and a decision table (call, tool, effect,
// resources, stage, mode, reason) that the loop writes into the run's log.
// RulePlanner applies docs/DESIGN.md §6 (confirmed calls alone, writes one at a
// time in the model's order, a read of a written resource after the
// write, exclusive groups serial, independent reads in parallel up to
// MaxParallel); SerialPlanner runs every call alone. Plans must be
// deterministic, so that a replayed run gets the same one; PlanPart falls
// back to serial when a planner places a call twice or not at all.
//
// Running. Run executes one Call; RunStage a stage, at most MaxParallel at
// once, with outcomes in the stage's order whatever order the calls
// finished in. Each call gets its timeout (the tool's, the run's override,
// or Options.DefaultTimeout); rate-limited and unavailable failures are
// retried a bounded number of times with backoff that honours
// Retry-After; a panic becomes an internal error; a handler that ignores
// its context is abandoned at its timeout, and the Outcome says whether
// the run must stop (StopRun). This is the one engine: the in-process
// runner and the Temporal tool activity both run calls through Run. A
// handler runs on a goroutine other than the caller's (of its own, or a
// stage's worker that runs its quick calls one after another), which the
// caller stops waiting for at the timeout; a tool that declares
// tool.Spec.HonorsContext runs on the caller's goroutine instead. Either way a behaviour is classified
// alike.
//
// Writes. A write Call with an IdempotencyKey goes through the ledger
// (Options.Ledger, a store.Ledger): a key already done is replayed, not
// executed (Outcome.Replayed), unless a compensation undid it (its record
// under UndoKey): then it is an idempotency_conflict, neither replayed nor
// run again; the same key with other arguments is an idempotency_conflict; a key left in flight by a crash or a timeout is
// settled by the tool's status look-up (Reconciled) or reported as
// OutcomeUnknown, which stops the run with tool_outcome_unknown.
//
// Start with Executor, Call, Outcome and Plan. The package depends on
// llm, tool and store; the loop drives it and nothing here calls a model
// or the policy engine.
package executor
