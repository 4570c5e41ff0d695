// Package orders is the order-desk sandbox: an order book (in memory, Book,
// in a SQLite file shared with a run store, SQLiteBook, or in PostgreSQL,
// PostgresBook, shared by workers on several machines), the tools a
// support assistant uses on it, and a fixed set of scenarios that drive the
// tool loop with a scripted model (no API key, no network).
//
// Each scenario ends with a known status, so together they show every exit
// of the loop: a final answer, the errors the run must not hand to the model,
// and each budget running out. The sandbox command (cmd/sandbox) and toolloop
// demo run them and print one stop line per scenario. One more scenario, confirm_refund, is
// interactive: it pauses for a person's approval in a durable store, and
// goes on in another process (toolloop approve, deny, resume).
//
// The package takes nothing from the environment and needs no provider:
// its models are scripted (Scenario.Script, Scripted) or rule-based
// (DeskModel), and its model answers depend on the request's step and
// messages alone, so a run resumed in another process, or on another
// Temporal worker, goes on as an uninterrupted one would. What it
// guarantees is that each scenario ends with its Want status (every status
// of docs/DESIGN.md §5 is reached by at least one); the tests hold it to that.
// Start with Scenarios and Scenario.Run for the
// runs, Tools for the tool set (reads, writes with idempotency keys and a
// status look-up, and refund_order's compensation, reverse_refund, which
// the refund_reversed scenario shows undoing a refund whose voucher
// failed), and Book for the data.
//
// It is a user of the library, not a part of it: it wires a model, a
// tool.Registry, a policy, an executor and a store into loop.Config as an
// application would. Only the command lines (cmd/sandbox, internal/cli, and
// the Temporal build's sandbox) and tests import it. It imports no store
// driver (a SQLiteBook takes its *sql.DB from the caller), so that
// cmd/sandbox compiles without one; cmd/sandbox's test holds it to that.
package orders
