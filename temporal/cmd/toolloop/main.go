// Command toolloop, the Temporal build, is the toolloop program with the
// loop also running on a Temporal server: the worker command hosts the
// RunLoop workflow and its activities, and demo, run, runs, approve, deny
// and trace take --temporal HOST:PORT to work on the server's runs. Without
// --temporal every command behaves as in the core build (cmd/toolloop).
//
//	toolloop worker --temporal HOST:PORT [--task-queue Q] --provider P [--tools orders] [--db PATH]
//	toolloop run --temporal HOST:PORT [--task-queue Q] --model M [--detach] "prompt"
//	toolloop approve|deny --temporal HOST:PORT RUN_ID CALL_ID --by NAME [--note TEXT]
//	toolloop runs --temporal HOST:PORT [--status S]
//	toolloop trace show|diagnose --temporal HOST:PORT RUN_ID
//	toolloop demo --temporal HOST:PORT [--mode NAME]
//
// It lives in the temporal module so that the core module does not carry
// the Temporal SDK.
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
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv, extension{})
	stop()
	os.Exit(code)
}

// extension adds the worker command and the --temporal variants.
type extension struct{}

// Run implements cli.Extension.
func (extension) Run(ctx context.Context, k *cli.Kit, args []string) (int, bool) {
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "worker":
		return workerCmd(ctx, k, rest), true
	case "help", "-h", "-help", "--help":
		switch {
		case len(rest) == 0:
			cli.Usage(k.Stdout())
			fmt.Fprintln(k.Stdout())
			temporalUsage(k.Stdout())
			return cli.ExitOK, true
		case rest[0] == "worker":
			workerUsage(k.Stdout())
			return cli.ExitOK, true
		case rest[0] == "temporal":
			temporalUsage(k.Stdout())
			return cli.ExitOK, true
		}
		return 0, false
	}
	if !hasTemporalFlag(rest) {
		return 0, false
	}
	switch cmd {
	case "demo":
		return demo(ctx, k, rest), true
	case "run":
		return run(ctx, k, rest), true
	case "runs":
		return runs(ctx, k, rest), true
	case "approve", "deny":
		return decide(ctx, k, cmd, rest), true
	case "trace":
		return traceCmd(ctx, k, rest), true
	case "resume":
		fmt.Fprintf(k.Stderr(), "toolloop resume: a run on Temporal needs no resume: its workflow goes on by itself once a worker "+
			"serves its task queue (and, when it waits for confirmation, once every call is answered with toolloop approve or deny --temporal)\n")
		return cli.ExitUsage, true
	}
	fmt.Fprintf(k.Stderr(), "toolloop %s: --temporal does not apply; it applies to worker, demo, run, runs, approve, deny and trace\n", cmd)
	return cli.ExitUsage, true
}

// hasTemporalFlag reports whether args carry --temporal before any "--".
func hasTemporalFlag(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if name, ok := cli.FlagName(a); ok && name == cli.TemporalFlag {
			return true
		}
	}
	return false
}

func temporalUsage(w io.Writer) {
	fmt.Fprint(w, `Running on Temporal (this build):
  toolloop worker --temporal HOST:PORT --provider P [--tools orders]   host the workflow and its activities
  toolloop run --temporal HOST:PORT --model M "prompt"                  start a run on the server and wait (--detach: don't)
  toolloop runs --temporal HOST:PORT                                    list the server's runs
  toolloop approve|deny --temporal HOST:PORT RUN_ID CALL_ID --by NAME   answer a call a run waits on
  toolloop trace show|diagnose --temporal HOST:PORT RUN_ID              render or check a run's log
  toolloop demo --temporal HOST:PORT                                    the sandbox, through the server

Every --temporal command also takes --namespace NS (default "default");
worker, run and demo take --task-queue Q (default "toolloop"). A dev server:
  temporal server start-dev --ip 127.0.0.1 --headless
`)
}
