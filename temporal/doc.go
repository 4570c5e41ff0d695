// Package temporal runs the toolloop loop as a Temporal workflow: one of
// the two drivers of docs/DESIGN.md §2, beside the in-process runner of
// package loop (which makes a run durable when given a store).
//
// The decider (loop.Next) runs unchanged as workflow code, so budgets, spin
// detection and statuses behave exactly as in-process, and the run's event
// log has the same shape (loop.Event), so the trace tools read it as they
// read any other. The effects are performed the Temporal way:
//
//	RequestModel    an activity (ModelActivity); Temporal retries retryable
//	                model errors (llm.IsRetryable), the others fail at once
//	ValidateCalls,  one local activity (PrepareActivity): it needs the tool
//	AuthorizeCalls, registry, policy and planner, and its answers are
//	PlanBatch       recorded in the history; it asks the policy and the
//	                planner about exactly the calls the decider will ask
//	                about (it feeds a copy of the decider). A policy that
//	                does I/O (Config.RemotePolicy) is asked in an activity
//	                of its own (AuthorizeActivity) instead
//	ExecuteStage    one activity per call (ToolActivity), all of a stage
//	                started at once and collected in call order; a write
//	                carries its idempotency key, so an activity retried
//	                after a worker crash replays the ledger instead of
//	                writing twice
//	Stop            the Stopped event
//
// A run that pauses with confirmation_required waits durably for answers:
// the ConfirmUpdate update (validated: answering a call that is not pending
// is rejected) or the ConfirmSignal signal. The StatusQuery and EventsQuery
// queries show the run's status and its log (paged, EventsPage) at any
// time; after a continuation as new, the events query holds the events
// since, the rest is in the blob store (ReadLog).
//
// The workflow function is RunLoop; the worker side (model client, tools,
// policy, executor) is an *Activities. Both are registered under fixed
// names (WorkflowName, ...) by RegisterWorkflow and Activities.Register.
//
// This package is a module of its own (github.com/toolloop/toolloop/temporal)
// so that the core module does not carry the Temporal SDK.
package temporal
