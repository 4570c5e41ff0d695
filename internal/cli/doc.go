// Package cli is the command line of toolloop: every subcommand of the
// toolloop program (demo, run, runs, approve, deny, resume, trace, replay, serve), behind
// Main. cmd/toolloop is Main on the process's arguments; the Temporal
// build (temporal/cmd/toolloop) is Main with an Extension that adds its
// backend, chosen by --temporal, and the worker command.
//
// Usage:
//
//	toolloop demo [--mode NAME] [--trace] [--plan] [--db PATH] [--log DIR] [--exporter none|stdout|otlp]
//	toolloop run --provider P --model M [flags] "prompt"
//	toolloop runs [--status S] [--limit N] [--db PATH]
//	toolloop approve RUN_ID CALL_ID --by NAME [--note TEXT] [--db PATH]
//	toolloop deny RUN_ID CALL_ID --by NAME [--note TEXT] [--db PATH]
//	toolloop resume RUN_ID [--db PATH] [provider flags]
//	toolloop trace show|diagnose FILE|RUN_ID [--log DIR]
//	toolloop serve --users FILE [--db PATH] [--addr HOST:PORT] [--allow-remote] [--secure-cookies]
//	toolloop help [COMMAND]
//
// The demo subcommand runs the order-desk sandbox (package
// examples/orders): a scripted model, no API key, one stop line per
// scenario. run drives a real provider. Runs are recorded in a SQLite store
// (by default toolloop.db in the data directory), where runs lists them,
// approve and deny answer their confirmations and resume carries them on;
// serve shows them in the web console (package console), where signed-in
// people answer confirmations too.
//
// Each command is written once over a Backend, the place its runs are
// kept and driven: the local one (local.go: the SQLite store, the loop in
// this process) or an Extension's. A backend's own flags (--db, --log and
// the provider flags here; --temporal and its kin in the Temporal build)
// come from its Driver, which the command asks before parsing its command
// line.
//
// This package is the only one that reads the command line or the
// environment; everything else takes its configuration as arguments. Even
// here the environment comes in through Main's getenv, so that tests never
// touch the process's.
//
// Main takes the arguments, the standard streams, a getenv function and an
// optional Extension, and returns an exit code: 0 when the command did what
// was asked (for demo, every scenario ended as expected), 1 when a run
// ended otherwise or something failed, 2 for a command line that is wrong,
// with a message naming the fix. It wires the library's packages together
// (a provider adapter, the tools, a policy, the executor, a store, trace
// observers) and holds no state between calls to Main. Start with Main,
// then Backend and the file of each command (demo.go, run.go, runs.go,
// trace.go, serve.go); Kit is what an Extension shares with the core commands.
package cli
