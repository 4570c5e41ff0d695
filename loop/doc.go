// Package loop is the loop controller: a pure decider that says what to do
// next, and the drivers that do it. It takes the first messages, a
// configuration (model, tools, policy, executor, budgets) and gives a
// Result with exactly one Status, the final history and the run's event
// log, which shows how the run got there.
//
// The decider is Next(state, event) -> effect. It does no I/O, reads no
// clock (each Event carries the time its driver read) and never writes
// into an event it is given, so the same events always rebuild the same
// State: Replay does exactly that, and a run's log serves as its
// checkpoint, trace, audit record and test fixture. The effects are
// RequestModel, ValidateCalls, AuthorizeCalls, PlanBatch, ExecuteStage and
// Stop, and with context management EditContext, CountTokens and
// Summarize, and with compensation Compensate; the events are Started,
// ModelResponded or ModelFailed, CallsValidated, PolicyDecided,
// StagePlanned, StageFinished, Interrupted, Stopped, ContextEdited,
// TokensCounted, ContextSummarized, Compensated, and for paused runs
// ConfirmationDecided and Resumed. The transcripts in testdata/decider
// show each status reached event by event.
//
// What a run guarantees: it ends with one Status of docs/DESIGN.md §5, and
// Result.Err is nil only for final_answer (a budget stop never looks like
// success); Budgets (steps, deadline, tool calls, tokens, money) are
// checked by the decider and recorded in the Started event; every tool
// call in the history has exactly one result, linked by ID, with skipped
// results for calls that never ran; recoverable failures (invalid
// arguments, not found, a transient error) go back to the model, the
// others stop the run; a model that repeats itself is stopped with
// spin_detected before the hard limits are reached.
//
// Runner is the in-process driver: Run, and with Config.Store a durable
// run whose events reach the store before the run acts on them; Resume
// continues such a run from its log, Decide records a person's answer to a
// paused call, Continue does both without a store. On a store with run
// leases (store.Leaser) one driver at a time drives a run: the others are
// refused with a *store.LeaseHeldError naming it. A Temporal workflow
// (package temporal) drives the same decider. Both drivers run the same
// loop, Drive, each implementing Driver to say how an effect's I/O
// happens, and do the work behind the effects with the same handlers:
// ModelTurn, CheckCalls, Authorize, PlanCalls and StageCalls, then
// executor.Executor.Run. The decider's memory is State, whose JSON
// encoding a driver carries when it starts again from it rather than from
// the log (a Temporal continuation). Observers see each
// event as it is appended; they change nothing in the run or its log.
//
// The Runner streams a model that can (llm.StreamingModel) when
// Config.Stream is set, and records the assembled turn, never its
// deltas, so a streamed run's log is the same run's unstreamed. A stream
// is retried like a request while it has shown nothing; one that breaks
// after its first delta stops the run with model_error (protocol_error
// for an inconsistent one), what it received kept in the model_failed
// event. Config.Watch shows a run as it goes (Update): the deltas, each
// call validated, authorized, started and finished, the plans, each
// step's end with its usage, and the stop.
//
// Start with Run and Config, then Next, State and Event. The loop is the
// one boundary that uses the other four (llm, tool, policy, executor)
// and store; it goes around none of them, and nothing it imports depends
// on it.
package loop
