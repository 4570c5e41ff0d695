// Package store holds what a run keeps beyond its own memory: the run's
// append-only event log and the idempotency ledger that stops a retried
// write from happening twice. Memory, store/sqlite and store/postgres
// implement both, so one store can keep a run's progress and its writes
// together (docs/DESIGN.md §7).
//
// It takes encoded records and gives them back; it never interprets them.
// An EventLog stores a run's events as opaque JSON (EventRecord) beside a
// RunSummary for listing, and a Ledger stores one Record per idempotency
// key. Neither knows about models, tools or the decider: the loop encodes
// its events (loop.LoadEvents decodes them), and the executor owns the
// ledger's protocol (claim, run, finish or release).
//
// What every implementation guarantees:
//   - EventLog.Append is atomic (events and summary, all or none) and
//     accepts only the events whose Seq continues the log exactly, else
//     ErrSeqConflict: of two processes driving one run, one fails.
//   - Ledger.Claim is atomic: of two claims of one key exactly one wins,
//     and an in-flight record is never pruned, since it is a write whose
//     outcome is not known yet.
//   - Methods are safe for concurrent use; stores on disk also across
//     processes.
//
// The sequence check keeps a log from forking, but only once both of two
// drivers append, and by then both may have acted on the world. Stores
// that can also implement Leaser: a lease per run, held by one owner until
// it expires on the store's clock, renewed while the owner drives, and
// checked by AppendLeased in the same atomic step as the append. A driver
// takes the lease before it reads the log, so two never overlap; a second
// one is refused with a *LeaseHeldError naming the holder and its expiry,
// and a crashed holder's run is taken over once its lease has expired.
//
// Start with EventLog and Ledger, then Memory, the in-memory store for
// tests and single-process runs. store/sqlite is the store on disk,
// store/postgres the one that workers on many machines share, and
// store/storetest is the conformance suite (TestEventLog, TestLedger)
// every implementation runs. Optional abilities are optional interfaces:
// ClaimReleaser, which the executor uses when a ledger has it, and
// Leaser, which the durable runner uses when an event log has it (with
// TestLeaser as its suite).
//
// A store that freezes (a stopped server, a partition that drops packets)
// must not hold a run past its deadline: BoundEventLog and BoundLedger
// wrap a store so that each call ends within its own timeout and by the
// call deadline its context carries (WithCallDeadline; Detach gives a
// run's deadline plus DeadlineGrace to what is recorded after it ends),
// whether or not the store honours its context. A call given up on is a
// *CallTimeoutError, with an outcome not known; it is left to finish on
// its own. loop.Runner and the executor bound their stores so.
//
// In the terms of docs/DESIGN.md §1 a store is an adapter beside the five
// boundaries: the loop controller's durable runs append to the log, the
// tool executor reads and writes the ledger, and the package imports
// nothing from either.
package store
