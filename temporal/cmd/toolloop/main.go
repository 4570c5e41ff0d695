// Command toolloop, the Temporal build, is the toolloop program with one
// more place to keep and drive runs: a Temporal server. Every command of
// the core build (cmd/toolloop) is here, written once over the backend
// interface of package internal/cli; with --temporal HOST:PORT, demo, run,
// runs (and runs export), approve, deny, trace and replay work on the
// server's runs, driven by the workers of a task queue, and the worker
// command hosts the RunLoop workflow and its activities. Without --temporal every command behaves
// as in the core build.
//
//	toolloop worker --temporal HOST:PORT [--task-queue Q] --provider P [--tools orders] [--db PATH | --store URL]
//	toolloop run --temporal HOST:PORT [--task-queue Q] --model M [--detach] "prompt"
//	toolloop approve|deny --temporal HOST:PORT RUN_ID CALL_ID --by NAME [--note TEXT]
//	toolloop runs --temporal HOST:PORT [--status S]
//	toolloop trace show|diagnose --temporal HOST:PORT RUN_ID
//	toolloop runs export --temporal HOST:PORT [--db PATH | --store URL] RUN_ID
//	toolloop replay --temporal HOST:PORT [--db PATH | --store URL] RUN_ID
//	toolloop demo --temporal HOST:PORT [--mode NAME]
//
// This package holds only what is Temporal's: the backend (backend.go,
// demo.go), the connection flags (conn.go) and the worker command. It
// lives in the temporal module so that the core module does not carry the
// Temporal SDK.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolloop/toolloop/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv, extension())
	stop()
	os.Exit(code)
}

// extension is what this build adds to the core program.
func extension() *cli.Extension {
	return &cli.Extension{
		Flag:     temporalFlag,
		Driver:   driver{},
		Commands: map[string]func(context.Context, *cli.Kit, []string) int{"worker": workerCmd},
		Usage:    usage,
	}
}

// usage prints this build's part of the help of cmd.
func usage(w io.Writer, cmd string) bool {
	switch cmd {
	case "", "temporal":
		fmt.Fprint(w, `Running on Temporal (this build):
  toolloop worker --temporal HOST:PORT --provider P [--tools orders]   host the workflow and its activities
  toolloop run --temporal HOST:PORT --model M "prompt"                  start a run on the server and wait (--detach: don't)
  toolloop runs --temporal HOST:PORT                                    list the server's runs
  toolloop approve|deny --temporal HOST:PORT RUN_ID CALL_ID --by NAME   answer a call a run waits on
  toolloop trace show|diagnose --temporal HOST:PORT RUN_ID              render or check a run's log
  toolloop runs export --temporal HOST:PORT --db PATH RUN_ID            a run's whole log as JSON Lines
  toolloop replay --temporal HOST:PORT --db PATH RUN_ID                 re-decide a run with this configuration
  toolloop demo --temporal HOST:PORT                                    the sandbox, through the server

Every --temporal command also takes --namespace NS (default "default");
worker, run and demo take --task-queue Q (default "toolloop"). A dev server:
  temporal server start-dev --ip 127.0.0.1 --headless
`)
	case "worker":
		workerUsage(w)
	case "run":
		fmt.Fprint(w, `On Temporal: toolloop run --temporal HOST:PORT --model M [flags] "prompt"

Starts the run as a workflow on the server, to be driven by the workers of
the task queue (toolloop worker), which have the provider and the tools; the
provider, tool and recording flags (--provider, --tools, --log, ...) are
theirs. The run ID is the workflow ID (--id). --detach prints it and
returns at once; a run paused for confirmation goes on by itself once every
call is answered.
  --temporal HOST:PORT   the server; --namespace NS, --task-queue Q as for the worker
  --confirm-timeout D    how long a paused run waits for answers (default: for ever)
  --model-timeout D      how long a model request, or a stream, may be quiet before
                         it is tried again (default 5m)
  --db PATH, --store URL the workers' store, to print the whole log of a run
                         that continued as new (a long one)
`)
	case "runs":
		fmt.Fprint(w, `On Temporal: toolloop runs --temporal HOST:PORT [--namespace NS] [--status S] [--limit N]
             toolloop runs export --temporal HOST:PORT [--namespace NS] [--db PATH | --store URL] RUN_ID > run.jsonl

Lists the toolloop runs on the server, in the order the server's visibility
store gives them (on the dev server, not strictly by time). A running run's
status is asked of a worker; without one it shows as running, uncounted.

export writes a run's log as from the local store, the same file: it reads
the log as trace show does, from the workers' store (--db, --store) or
else from a worker. A run that continued as new, or that keeps tool results
over 8 KB by reference, is refused without the workers' store rather than
written in part. import takes no --temporal: it adds the file to a local
store (--db), where toolloop replay and trace read it.
`)
	case "replay":
		fmt.Fprint(w, `On Temporal: toolloop replay --temporal HOST:PORT [--namespace NS] [--db PATH | --store URL] RUN_ID... [flags]

Reads each RUN_ID's log from the server, as toolloop runs export does
(--db, --store: the workers' store, needed for a run that continued as new
or keeps large tool results by reference), and replays it here with the
flags' configuration. --all is the local store's only; FILE arguments are
read as without --temporal.
`)
	case "approve", "deny":
		fmt.Fprint(w, `On Temporal: toolloop approve|deny --temporal HOST:PORT [--namespace NS] RUN_ID CALL_ID --by NAME [--note TEXT]

Answers with the workflow's confirm update, which checks the answer again:
a call that is not pending is refused and nothing is recorded. Once every
pending call is answered, the run goes on by itself: no resume.
`)
	case "trace":
		fmt.Fprint(w, `On Temporal: toolloop trace show|diagnose --temporal HOST:PORT [--namespace NS] [--db PATH | --store URL] RUN_ID [--width N] [--json]

Reads the run's event log from the server (a running run's from a worker):
the same log, the same output as from a log file. A run that continued as
new (a long one) keeps its earlier events in the workers' store: name it
with --db PATH (SQLite) or --store URL (PostgreSQL), which also reads
large tool results kept there by reference and a closed run's log with no
worker running.
`)
	case "demo":
		fmt.Fprint(w, `On Temporal: toolloop demo --temporal HOST:PORT [--namespace NS] [--task-queue Q] [--mode NAME]

Runs every scenario as a workflow on the server, each with a worker of its
own in this process, and prints the same stop lines (--db does not apply;
confirm_refund needs workers that outlive the command: see 'toolloop help temporal').
`)
	case "resume":
		fmt.Fprintln(w, "On Temporal: no resume; a paused run goes on by itself once every call is answered.")
	case "serve":
		fmt.Fprint(w, `On Temporal: toolloop serve --temporal HOST:PORT [--namespace NS] [--db PATH | --store URL] --users FILE [--addr HOST:PORT]

Serves the web console over the server's runs: an approval goes to the
workflow, and the run goes on by itself once every call is answered. With
the workers' store (--db, --store) a run that continued as new shows its
whole log, as with toolloop trace.
`)
	default:
		return false
	}
	return true
}
