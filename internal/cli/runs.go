package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
)

// usageErr is an error the person at the command line can fix; its text
// says how. Commands exit with exitUsage on it.
type usageErr struct{ msg string }

func (e *usageErr) Error() string { return e.msg }

// fail reports err on one line, prefixed with the command, and returns
// exitUsage for a usageErr, exitBusy for a run another process drives,
// and exitFail otherwise.
func (c *cli) fail(cmd string, err error) int {
	var held *store.LeaseHeldError
	if errors.As(err, &held) {
		fmt.Fprintf(c.stderr, "toolloop %s: %s\n", cmd, leaseLine(held, time.Now()))
		return exitBusy
	}
	fmt.Fprintf(c.stderr, "toolloop %s: %v\n", cmd, err)
	var ue *usageErr
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFail
}

// leaseLine says which process drives a run and until when its lease
// holds, for a driver refused (or cut off) at now: whom to wait for, and
// how long at most if that process has died.
func leaseLine(held *store.LeaseHeldError, now time.Time) string {
	when := "until " + held.Expires.UTC().Format(time.RFC3339)
	if left := held.Expires.Sub(now).Round(time.Second); left > 0 {
		when += fmt.Sprintf(", %v from now", left)
	}
	if held.Lost != "" {
		return fmt.Sprintf("run %s was taken over by %s while this process drove it (its lease is held %s); nothing more was recorded here, and %s goes on with the run",
			held.RunID, held.Owner, when, held.Owner)
	}
	return fmt.Sprintf("run %s is being driven by %s (its lease is held %s, and renewed while it drives); try again once it has stopped, or once the lease has run out if that process died",
		held.RunID, held.Owner, when)
}

// events reads a run's log from b for cmd; an unknown run is a usageErr
// naming the command that lists the runs.
func events(ctx context.Context, b Backend, runID string) ([]loop.Event, error) {
	events, err := b.Events(ctx, runID)
	if errors.Is(err, store.ErrUnknownRun) {
		return nil, unknownRun(b, runID)
	}
	if err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("run %s has no events yet", runID)
	}
	return events, nil
}

// unknownRun is the error for a run b does not have: it names the command
// that lists b's runs.
func unknownRun(b Backend, runID string) error {
	info := b.Info()
	return &usageErr{fmt.Sprintf("no run %s %s; list the runs with: toolloop runs%s", runID, info.Where, info.Flags)}
}

// runs runs the "runs" subcommand: list the backend's runs.
func (c *cli) runs(ctx context.Context, drv Driver, args []string) int {
	fs := flag.NewFlagSet("toolloop runs", flag.ContinueOnError)
	status := fs.String("status", "", "list only runs with status `S`")
	limit := fs.Int("limit", 50, "list at most `N` runs")
	open := drv.Flags("runs", fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError("runs", err, nil)
	}
	if len(pos) > 0 {
		fmt.Fprintf(c.stderr, "toolloop runs: unexpected argument %q; filter with --status S\n", pos[0])
		return exitUsage
	}
	if *limit < 1 {
		fmt.Fprintf(c.stderr, "toolloop runs: --limit %d: want at least 1\n", *limit)
		return exitUsage
	}
	valid := []string{loop.RunningStatus}
	for _, s := range loop.Statuses() {
		valid = append(valid, string(s))
	}
	if *status != "" && !slices.Contains(valid, *status) {
		fmt.Fprintf(c.stderr, "toolloop runs: unknown status %q; want one of %s\n", *status, strings.Join(valid, ", "))
		return exitUsage
	}
	b, err := open(ctx, &Kit{c})
	if err != nil {
		return c.fail("runs", err)
	}
	defer c.closeBackend("runs", b)
	list, err := b.Runs(ctx, Filter{Status: *status, Limit: *limit})
	if err != nil {
		return c.fail("runs", err)
	}
	if len(list) == 0 {
		if *status != "" {
			fmt.Fprintf(c.stdout, "no runs with status %s %s\n", *status, b.Info().Where)
		} else {
			fmt.Fprintf(c.stdout, "no runs %s\n", b.Info().Where)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN_ID\tSTATUS\tSTEPS\tTOOL_CALLS\tTOKENS\tSTARTED\tSESSION\tPENDING")
	for _, r := range list {
		steps, calls, tokens := "-", "-", "-"
		if r.Counted {
			steps, calls, tokens = fmt.Sprint(r.Steps), fmt.Sprint(r.ToolCalls), fmt.Sprint(r.Tokens)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.RunID, r.Status, steps, calls, tokens,
			r.StartedAt.UTC().Format(time.RFC3339), orDash(r.SessionID), pendingList(r.Pending))
	}
	if err := tw.Flush(); err != nil {
		return c.fail("runs", err)
	}
	return exitOK
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// pendingList renders the calls that await an answer as
// "CALL_ID (TOOL), ...", or "-".
func pendingList(pending []loop.Pending) string {
	var parts []string
	for _, p := range pending {
		if p.Confirmation == nil {
			parts = append(parts, fmt.Sprintf("%s (%s)", p.CallID, p.Tool))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// decide runs "approve" and "deny": record a person's answer to a call a
// run paused for. The checks loop.Decide (or a workflow) makes are made
// here first, on the run's log, so that every backend words them alike,
// with the fix.
func (c *cli) decide(ctx context.Context, drv Driver, verb string, args []string) int {
	fs := flag.NewFlagSet("toolloop "+verb, flag.ContinueOnError)
	by := fs.String("by", "", "who decides (`NAME`); recorded in the run's log")
	note := fs.String("note", "", "why (`TEXT`); recorded, and for a denial shown to the model")
	open := drv.Flags(verb, fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError(verb, err, nil)
	}
	if len(pos) != 2 {
		fmt.Fprintf(c.stderr, "toolloop %s: want RUN_ID CALL_ID, got %d argument(s): toolloop %s RUN_ID CALL_ID --by NAME [--note TEXT]\n", verb, len(pos), verb)
		return exitUsage
	}
	runID, callID := pos[0], pos[1]
	if c.badRunID(verb, "RUN_ID", runID) {
		return exitUsage
	}
	if strings.TrimSpace(*by) == "" {
		fmt.Fprintf(c.stderr, "toolloop %s: --by NAME is missing: say who decides, e.g. toolloop %s %s %s --by alice\n", verb, verb, shellQuote(runID), shellQuote(callID))
		return exitUsage
	}
	b, err := open(ctx, &Kit{c})
	if err != nil {
		return c.fail(verb, err)
	}
	defer c.closeBackend(verb, b)
	evs, err := events(ctx, b, runID)
	if err != nil {
		return c.fail(verb, err)
	}
	info := b.Info()
	next := "go on with: " + resumeCommand(runID, info, evs)
	if info.GoesOn {
		next = "the run goes on; follow it with: toolloop trace show" + info.Flags + " " + shellQuote(runID)
	}
	// An answer someone gave first, found here or by Decide (when it
	// lands between this check and ours), gets one message and exit 2.
	answered := func(e *loop.AnsweredError) int {
		was := "denied"
		if e.Approved {
			was = "approved"
		}
		return c.fail(verb, &usageErr{fmt.Sprintf("call %s of run %s was already %s by %s; an answer cannot change: %s",
			callID, runID, was, e.By, strings.Replace(next, "go on with: ", "resume the run with: ", 1))})
	}
	s := loop.Replay(evs)
	for _, p := range append(slices.Clone(s.Answered), s.Pending...) {
		if p.CallID == callID && p.Confirmation != nil {
			return answered(&loop.AnsweredError{RunID: runID, CallID: callID, Approved: p.Confirmation.Approved, By: p.Confirmation.By})
		}
	}
	if s.Status != loop.ConfirmationRequired || s.Batch == nil {
		status := string(s.Status)
		if !s.Done {
			status = loop.RunningStatus
		}
		return c.fail(verb, &usageErr{fmt.Sprintf("run %s is not waiting for confirmation (status %s); list the runs that are with: toolloop runs --status %s%s",
			runID, status, loop.ConfirmationRequired, info.Flags)})
	}
	if !slices.ContainsFunc(s.Pending, func(p loop.Pending) bool { return p.CallID == callID }) {
		return c.fail(verb, &usageErr{fmt.Sprintf("call %s is not pending in run %s; pending: %s", callID, runID, pendingList(s.Pending))})
	}
	answer := loop.Confirmation{CallID: callID, Approved: verb == "approve", By: *by, Note: *note}
	if err := b.Decide(ctx, runID, answer); err != nil {
		if ae := (*loop.AnsweredError)(nil); errors.As(err, &ae) {
			return answered(ae)
		}
		return c.fail(verb, err)
	}
	var still []string
	for _, p := range s.Pending {
		if p.Confirmation == nil && p.CallID != callID {
			still = append(still, p.CallID)
		}
	}
	done := "approved"
	if verb == "deny" {
		done = "denied"
	}
	if len(still) > 0 {
		then := "answer them, then: " + resumeCommand(runID, info, evs)
		if info.GoesOn {
			then = "the run goes on once they are answered"
		}
		fmt.Fprintf(c.stdout, "%s call %s of run %s (by %s); still pending: %s; %s\n",
			done, callID, runID, *by, strings.Join(still, ", "), then)
		return exitOK
	}
	fmt.Fprintf(c.stdout, "%s call %s of run %s (by %s); %s\n", done, callID, runID, *by, next)
	return exitOK
}

// scenarioResumer is a backend that resumes the sandbox's runs, whose
// configuration comes from their scenario.
type scenarioResumer interface {
	resumeScenario(ctx context.Context, s orders.Scenario, runID string) (*loop.Result, orders.OrderBook, error)
}

// resume runs the "resume" subcommand: carry a run on.
func (c *cli) resume(ctx context.Context, drv Driver, args []string) int {
	fs := flag.NewFlagSet("toolloop resume", flag.ContinueOnError)
	open := drv.Flags("resume", fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError("resume", err, nil)
	}
	if len(pos) != 1 {
		fmt.Fprintf(c.stderr, "toolloop resume: want one RUN_ID, got %d argument(s): toolloop resume RUN_ID [--db PATH]\n", len(pos))
		return exitUsage
	}
	runID := pos[0]
	if c.badRunID("resume", "RUN_ID", runID) {
		return exitUsage
	}
	b, err := open(ctx, &Kit{c})
	if err != nil {
		return c.fail("resume", err)
	}
	defer c.closeBackend("resume", b)
	evs, err := events(ctx, b, runID)
	if err != nil {
		return c.fail("resume", err)
	}
	sr, ok := b.(scenarioResumer)
	s, sandbox := orders.LookupSession(evs[0].Start.SessionID)
	if !ok || !sandbox {
		res, err := b.Resume(ctx, runID)
		if err != nil {
			return c.fail("resume", err)
		}
		return c.printResult(res, b.Info(), false)
	}
	res, book, err := sr.resumeScenario(ctx, s, runID)
	if err != nil {
		return c.fail("resume", err)
	}
	refunds := -1
	if s.ShowRefunds {
		if refunds, err = book.RefundCount(ctx, ""); err != nil {
			return c.fail("resume", err)
		}
	}
	fmt.Fprintln(c.stdout, stopLine(s.Name, res, false, refunds, true))
	writeNextSteps(c.stdout, res, b.Info())
	return okStatus(res.Status)
}

func runsUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop runs [--status S] [--limit N] [--db PATH]

Lists the runs recorded in the store, newest first, one line each: run ID,
status ("running" for a run that has not stopped), model turns, tool calls,
tokens, start time (UTC), session (demo:MODE for the sandbox's runs,
run:PROVIDER:MODEL for toolloop run's) and the calls awaiting confirmation,
with their tools.

Flags:
  --status S  list only the runs with status S, e.g. confirmation_required
  --limit N   list at most N runs (default 50)
  --db PATH   the SQLite store (default: toolloop.db in $XDG_DATA_HOME/toolloop
              or ~/.local/share/toolloop)
`)
}

func decideUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop approve RUN_ID CALL_ID --by NAME [--note TEXT] [--db PATH]
       toolloop deny    RUN_ID CALL_ID --by NAME [--note TEXT] [--db PATH]

Records a person's answer to a call a run paused for (status
confirmation_required): who decided, when, and why go into the run's log.
Once every pending call of the run is answered, 'toolloop resume RUN_ID'
carries it on: an approved call runs, a denied one gets an error result the
model reads (with the note) and reacts to. An answer is final; a call
cannot be answered twice.

Flags:
  --by NAME    who decides (required)
  --note TEXT  why; for a denial, the model is told
  --db PATH    the SQLite store (default: toolloop.db in $XDG_DATA_HOME/toolloop
               or ~/.local/share/toolloop)

Exit status: 0 when the answer is recorded, 2 when it cannot be (no such
run or call, the call is not pending or was answered, --by is missing).
`)
}

func resumeUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop resume RUN_ID [--db PATH] [--log DIR] [--exporter E]
                       [--provider P --model M ...same flags as the run]

Carries a run on from its log in the store: the run's events are replayed,
which rebuilds its state exactly, and the run goes on from where it stopped
(after approve/deny, from its paused calls). No tool that finished runs
again. A run that has ended, or that still waits for answers, prints its
stop line unchanged.

The run's configuration is rebuilt from its session:
  demo:MODE               the sandbox scenario MODE: its scripted model (which
                          goes on at the run's next step), tools and policy,
                          over the order book and ledger in the store
  run:PROVIDER:MODEL      a 'toolloop run' run: pass the provider and tool
                          flags it ran with again (--provider, --model,
                          --base-url, --tools, --mcp, --mcp-env, --mcp-url,
                          --confirm-writes); the error for missing or
                          different flags lists them. Its API key is read
                          again; budgets, identity and price come from the log.
                          It streams the model's turns if the run did

Flags:
  --db PATH   the SQLite store (default: toolloop.db in $XDG_DATA_HOME/toolloop
              or ~/.local/share/toolloop)
  --log DIR   write the run's log (all of it, then the resumed part as it
              goes) to DIR/RUN_ID.jsonl; a 'toolloop run' run logs to the
              default runs directory without it
  --exporter none|stdout|otlp, --otlp-endpoint URL
              export the resumed part as OpenTelemetry spans
  --stream, --no-stream
              a 'toolloop run' run: ask the model for each turn as a stream,
              or for whole turns, whatever the run did (the answer is printed
              once the run stops either way)

Exit status: 0 when the run ends with a final answer or pauses for a
person, 1 for any other status, 2 for a usage error, 3 when another process
is driving the run (it holds the run's lease; the message names it and when
the lease runs out): try again later.
`)
}
