package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/internal/report"
	"github.com/toolloop/toolloop/loop"
)

// demo runs the "demo" subcommand: the sandbox's scenarios on the
// backend.
func (c *cli) demo(ctx context.Context, drv Driver, args []string) int {
	stdout, stderr := c.stdout, c.stderr
	fs := flag.NewFlagSet("toolloop demo", flag.ContinueOnError)
	mode := fs.String("mode", "", "run only the scenario `NAME` (default: all but the interactive ones, in order)")
	trace := fs.Bool("trace", false, "print each run's messages: tool calls with their call IDs and\narguments, and each result beside its call ID")
	plan := fs.Bool("plan", false, "print the planner's decision table of each batch the run planned")
	tf := addTraceFlags(fs)
	open := drv.Flags("demo", fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError("demo", err, nil)
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "toolloop demo: unexpected argument %q (did you mean --mode %s?)\n", pos[0], pos[0])
		return exitUsage
	}

	type indexed struct {
		orders.Scenario
		index int
	}
	var selected []indexed
	for i, s := range orders.Scenarios() {
		if (*mode == "" && !s.Interactive) || s.Name == *mode {
			selected = append(selected, indexed{s, i})
		}
	}
	if len(selected) == 0 {
		fmt.Fprintf(stderr, "toolloop demo: unknown mode %q; valid modes: %s\n", *mode, strings.Join(orders.Names(), ", "))
		return exitUsage
	}

	obs, shutdown, err := observersFromFlags(stdout, scriptedProvider, tf.logDir, tf.exporter, tf.otlpEndpoint)
	if err != nil {
		fmt.Fprintf(stderr, "toolloop demo: %v\n", err)
		return exitUsage
	}
	defer func() {
		if err := shutdown(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(stderr, "toolloop demo: %v\n", err)
		}
	}()
	b, err := open(ctx, &Kit{c})
	if err != nil {
		return c.fail("demo", err)
	}
	defer c.closeBackend("demo", b)
	runner, ok := b.(ScenarioRunner)
	if !ok {
		return c.fail("demo", &usageErr{"this backend cannot play the sandbox's scenarios; run toolloop demo without its flags"})
	}

	code := exitOK
	for n, s := range selected {
		res, book, err := runner.RunScenario(ctx, s.Scenario, obs)
		var ue *usageErr
		if errors.As(err, &ue) {
			// Every scenario would fail alike (no store, no server), or
			// this one cannot run here: the fix is the person's.
			return c.fail("demo", err)
		}
		if err != nil {
			fmt.Fprintf(stderr, "toolloop demo: mode %s: %v\n", s.Name, err)
			if ctx.Err() != nil {
				// Interrupted: the other scenarios would only fail alike.
				return exitFail
			}
			code = exitFail
			continue
		}
		if !report.Scenario(ctx, stdout, stderr, "toolloop demo", n == 0, s.Scenario, s.index, res, book,
			report.Shown{Trace: *trace, Plans: *plan}, s.Interactive) {
			code = exitFail
		}
		if s.Interactive {
			writeNextSteps(stdout, res, b.Info())
		}
		if res.Status != s.Want {
			fmt.Fprintf(stderr, "toolloop demo: mode %s ended with status %s, want %s (%s)\n",
				s.Name, string(res.Status), string(s.Want), res.Detail)
			code = exitFail
		}
	}
	return code
}

// scriptedProvider is gen_ai.provider.name for the sandbox's runs.
const scriptedProvider = "toolloop.scripted"

// writeNextSteps prints, for a run paused for confirmation, the commands
// that answer its pending calls and, on a backend where a paused run does
// not go on by itself, carry it on, ready to paste once NAME (who decides)
// and TEXT (why, for a denial) are filled in.
func writeNextSteps(w io.Writer, res *loop.Result, info Info) {
	if res.Status != loop.ConfirmationRequired || len(res.Pending) == 0 {
		return
	}
	resume := ""
	if !info.GoesOn {
		resume = resumeCommand(res.RunID, info, res.Events)
		fmt.Fprintln(w, "# to approve and go on:")
	} else {
		fmt.Fprintf(w, "# the run waits %s; to approve (it goes on once every call is answered):\n", info.Where)
	}
	for _, p := range res.Pending {
		fmt.Fprintf(w, "toolloop approve %s %s --by NAME%s\n", shellQuote(res.RunID), shellQuote(p.CallID), info.Flags)
	}
	if resume != "" {
		fmt.Fprintln(w, resume)
		fmt.Fprintln(w, "# or to deny (the model is told, with the note) and go on:")
	} else {
		fmt.Fprintln(w, "# or to deny (the model is told, with the note):")
	}
	for _, p := range res.Pending {
		fmt.Fprintf(w, "toolloop deny %s %s --by NAME --note TEXT%s\n", shellQuote(res.RunID), shellQuote(p.CallID), info.Flags)
	}
	if resume != "" {
		fmt.Fprintln(w, resume)
	}
}

// resumeCommand is the command that resumes the run events begin: the
// backend's flags, then those the run recorded (a toolloop run run's
// provider and tool flags).
func resumeCommand(runID string, info Info, events []loop.Event) string {
	var start *loop.StartInfo
	if len(events) > 0 {
		start = events[0].Start
	}
	return "toolloop resume " + shellQuote(runID) + info.Flags + resumeFlagsOf(start)
}

// demoUsage explains the demo's flags and lists its modes.
func demoUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop demo [--mode NAME] [--trace] [--plan] [--db PATH] [--log DIR]
                     [--exporter none|stdout|otlp] [--otlp-endpoint URL]

Runs the order-desk sandbox: a scripted model (no API key, no network) drives
the tool loop over an in-memory order book, once per scenario, and prints one
stop line per run, "mode=NAME status=STATUS". The first three lines are exactly
that; the others add the run's steps, tool calls, tokens and stop detail, and
for the scenarios about writes, the number of refunds in the book afterwards.

The interactive scenario, confirm_refund, runs only when named. Its run
pauses in a SQLite store until a person answers: its stop line carries
run=RUN_ID call=CALL_ID, and the commands that approve or deny the call and
resume the run follow it. Its order book lives in the store's file too, so
the refund a resumed run makes (or does not make) is there to count.

Flags:
  --mode NAME   run only the named scenario (default: all but the interactive
                ones, in the order below)
  --trace       before each stop line, print the run's messages: every tool
                call with its call ID and arguments, and every result beside
                its call ID, with status, error kind and content; a write's
                result also shows its idempotency key and what the ledger
                made of it (executed, replayed, reconciled, outcome_unknown)
  --plan        before each stop line, print the execution plan of every batch
                of tool calls the run made, from the run's log: one aligned
                table per batch, with each call's ID, tool, effect (read_only
                or write), resources, stage (from 0; a stage runs after the
                one before it), mode (parallel or serial) and the planner's
                reason; try --mode parallel --plan
  --db PATH     record the runs, as they go, in the SQLite store at PATH
                (created if missing), where 'toolloop runs' lists them. Only
                confirm_refund keeps its order book and ledger there; the
                other scenarios still play on a fresh book each. Without
                --db, only confirm_refund uses a store: toolloop.db in
                $XDG_DATA_HOME/toolloop (or ~/.local/share/toolloop)
  --log DIR     write each run's log to DIR/RUN_ID.jsonl as it goes; read it
                with 'toolloop trace show RUN_ID --log DIR'
  --exporter E  export each run as OpenTelemetry spans: none (default),
                stdout (printed as they end), or otlp (OTLP/HTTP)
  --otlp-endpoint URL
                where --exporter otlp sends spans (default: the exporter's,
                OTEL_EXPORTER_OTLP_ENDPOINT or http://localhost:4318)
  -h, --help    show this help

Exit status: 0 when every scenario ended with its expected status, 1 when one
did not, 2 for a usage error.

Modes (name, expected status, what happens):
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range orders.Scenarios() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Name, string(s.Want), s.Description)
	}
	tw.Flush()
}
