// Command sandbox runs the order-desk sandbox (package examples/orders) in
// this process: a scripted model, no API key, no network, no server, one
// stop line per scenario. It is the README's first command.
//
// It plays the same scenarios and prints the same lines as 'toolloop demo'
// (cmd/toolloop), but it imports only the loop, the sandbox and the trace
// package: none of the provider SDKs, the SQLite driver, the MCP SDK or
// OpenTelemetry, which toolloop needs for its other commands and which make
// up most of its cold build (docs/BENCHMARKS.md). Its test keeps it that
// way. What needs those stays with toolloop demo: --db, --exporter,
// the interactive confirm_refund (it pauses in a SQLite store) and
// Temporal.
//
// Usage:
//
//	go run ./cmd/sandbox [--mode NAME] [--trace] [--plan] [--log DIR]
//
// The exit status is toolloop demo's: 0 when every scenario ended with its
// expected status, 1 when one did not, 2 for a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/internal/report"
	"github.com/toolloop/toolloop/trace"
)

// Exit statuses, as toolloop demo's.
const (
	exitOK    = 0 // every scenario ended with its expected status
	exitFail  = 1 // a scenario did not, or could not run
	exitUsage = 2 // the command line was wrong; the message names the fix
)

// fullDemo is the command that has what this one leaves out.
const fullDemo = "go run ./cmd/toolloop demo"

func main() {
	// SIGTERM ends the runs as Ctrl-C does: recorded as canceled.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command on its arguments and streams; it returns the exit
// status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	mode := fs.String("mode", "", "")
	showTrace := fs.Bool("trace", false, "")
	plan := fs.Bool("plan", false, "")
	logDir := fs.String("log", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "sandbox: %v (the sandbox alone has --mode, --trace, --plan and --log; "+
			"--db and --exporter are toolloop demo's: %s --help)\n", err, fullDemo)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sandbox: unexpected argument %q (did you mean --mode %s?)\n", fs.Arg(0), fs.Arg(0))
		return exitUsage
	}

	type indexed struct {
		orders.Scenario
		index int
	}
	var selected []indexed
	for i, s := range orders.Scenarios() {
		switch {
		case s.Name == *mode && s.Interactive:
			fmt.Fprintf(stderr, "sandbox: mode %s pauses in a SQLite store until a person answers; run it with %s --mode %s\n",
				s.Name, fullDemo, s.Name)
			return exitUsage
		case (*mode == "" && !s.Interactive) || s.Name == *mode:
			selected = append(selected, indexed{s, i})
		}
	}
	if len(selected) == 0 {
		fmt.Fprintf(stderr, "sandbox: unknown mode %q; valid modes: %s\n", *mode, strings.Join(orders.Names(), ", "))
		return exitUsage
	}

	var opts orders.RunOptions
	if *logDir != "" {
		fl := trace.FileObserver(*logDir, nil)
		defer func() {
			if err := fl.Close(); err != nil {
				fmt.Fprintf(stderr, "sandbox: %v\n", err)
			}
		}()
		opts.Observer = fl
	}

	code := exitOK
	for n, s := range selected {
		res, book, err := s.RunWith(ctx, opts)
		if err != nil {
			fmt.Fprintf(stderr, "sandbox: mode %s: %v\n", s.Name, err)
			if ctx.Err() != nil {
				// Interrupted: the other scenarios would only fail alike.
				return exitFail
			}
			code = exitFail
			continue
		}
		if !report.Scenario(ctx, stdout, stderr, "sandbox", n == 0, s.Scenario, s.index, res, book,
			report.Shown{Trace: *showTrace, Plans: *plan}, false) {
			code = exitFail
		}
		if res.Status != s.Want {
			fmt.Fprintf(stderr, "sandbox: mode %s ended with status %s, want %s (%s)\n",
				s.Name, string(res.Status), string(s.Want), res.Detail)
			code = exitFail
		}
	}
	return code
}

// usage explains the flags and lists the modes.
func usage(w io.Writer) {
	fmt.Fprintf(w, `Usage: go run ./cmd/sandbox [--mode NAME] [--trace] [--plan] [--log DIR]

Runs the order-desk sandbox in this process: a scripted model (no API key, no
network) drives the tool loop over an in-memory order book, once per
scenario, and prints one stop line per run, "mode=NAME status=STATUS". The
first three lines are exactly that; the others add the run's steps, tool
calls, tokens and stop detail, and for the scenarios about writes, the number
of refunds in the book afterwards. The lines are toolloop demo's; this command
compiles only the loop and the sandbox. For --db, --exporter, the interactive
confirm_refund and Temporal, run %s.

Flags:
  --mode NAME   run only the named scenario (default: all of the list below,
                in its order)
  --trace       before each stop line, print the run's messages: every tool
                call with its call ID and arguments, and every result beside
                its call ID, with status, error kind and content; a write's
                result also shows its idempotency key and what the ledger
                made of it (executed, replayed, reconciled, outcome_unknown)
  --plan        before each stop line, print the execution plan of every batch
                of tool calls the run made: one aligned table per batch, with
                each call's ID, tool, effect, resources, stage, mode and the
                planner's reason; try --mode parallel --plan
  --log DIR     write each run's log to DIR/RUN_ID.jsonl as it goes; read it
                with 'toolloop trace show RUN_ID --log DIR'
  -h, --help    show this help

Exit status: 0 when every scenario ended with its expected status, 1 when one
did not, 2 for a usage error.

Modes (name, expected status, what happens):
`, fullDemo)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range orders.Defaults() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Name, string(s.Want), s.Description)
	}
	tw.Flush()
}
