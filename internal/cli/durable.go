package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/sqlite"
)

// openStore opens the SQLite store at path. With create, a missing file
// (and its directory) is made; without, a missing file is an error that
// says where runs come from.
func openStore(path string, create bool) (*sqlite.Store, error) {
	if create {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
	} else if _, err := os.Stat(path); err != nil {
		return nil, &usageErr{fmt.Sprintf("no store at %s (toolloop demo --mode confirm_refund and toolloop run record runs); pass --db PATH of the store the run is in", path)}
	}
	st, err := sqlite.Open(path, nil)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// usageErr is an error the person at the command line can fix; its text
// says how. Commands exit with exitUsage on it.
type usageErr struct{ msg string }

func (e *usageErr) Error() string { return e.msg }

// fail reports err on one line, prefixed with the command, and returns
// exitUsage for a usageErr and exitFail otherwise.
func (c *cli) fail(cmd string, err error) int {
	fmt.Fprintf(c.stderr, "toolloop %s: %v\n", cmd, err)
	var ue *usageErr
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFail
}

// loadRun reads a run's log from the store; an unknown run is a usageErr
// naming the command that lists runs.
func loadRun(ctx context.Context, st store.EventLog, runID, db string) ([]loop.Event, error) {
	if _, err := st.Events(ctx, runID); errors.Is(err, store.ErrUnknownRun) {
		return nil, &usageErr{fmt.Sprintf("no run %s in %s; list the runs with: toolloop runs --db %s", runID, db, shellQuote(db))}
	} else if err != nil {
		return nil, err
	}
	events, err := loop.LoadEvents(ctx, st, runID)
	if err != nil {
		return nil, err
	}
	if len(events) == 0 || events[0].Start == nil {
		return nil, fmt.Errorf("run %s: its log does not begin with its started event", runID)
	}
	return events, nil
}

// resultOf rebuilds a run's result from its log without driving it.
func resultOf(events []loop.Event) *loop.Result {
	s := loop.Replay(events)
	return &loop.Result{
		RunID: s.RunID, Status: s.Status, Detail: s.Detail, Steps: s.Steps, ToolCalls: s.ToolCalls,
		Usage: s.Usage, Cost: s.Cost, Messages: s.History(), Pending: s.Pending, Events: events,
		Duration: events[len(events)-1].At.Sub(events[0].At),
	}
}

// okStatus is the exit code for a run that stopped with st: a final
// answer, or a pause for a person, is what a run should come to.
func okStatus(st loop.Status) int {
	if st == loop.FinalAnswer || st == loop.ConfirmationRequired {
		return exitOK
	}
	return exitFail
}

// runs runs the "runs" subcommand: list the runs in the store.
func (c *cli) runs(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("toolloop runs", flag.ContinueOnError)
	status := fs.String("status", "", "list only runs with status `S`")
	db := fs.String("db", "", "the SQLite store at `PATH`")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError("runs", err, runsUsage)
	}
	if len(pos) > 0 {
		fmt.Fprintf(c.stderr, "toolloop runs: unexpected argument %q; filter with --status S\n", pos[0])
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
	path, err := c.dbPath(*db)
	if err != nil {
		return c.fail("runs", &usageErr{err.Error()})
	}
	st, err := openStore(path, false)
	if err != nil {
		return c.fail("runs", err)
	}
	defer st.Close()
	list, err := st.Runs(ctx, *status)
	if err != nil {
		return c.fail("runs", err)
	}
	if len(list) == 0 {
		if *status != "" {
			fmt.Fprintf(c.stdout, "no runs with status %s in %s\n", *status, path)
		} else {
			fmt.Fprintf(c.stdout, "no runs in %s\n", path)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN_ID\tSTATUS\tSTEPS\tTOOL_CALLS\tTOKENS\tSTARTED\tSESSION\tPENDING")
	for _, r := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", r.RunID, r.Status, r.Steps, r.ToolCalls,
			r.InputTokens+r.OutputTokens, r.StartedAt.UTC().Format(time.RFC3339), orDash(r.SessionID), pendingList(r.Pending))
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

// pendingList renders a run summary's pending calls as
// "CALL_ID (TOOL), ...", or "-".
func pendingList(raw json.RawMessage) string {
	var pending []loop.Pending
	if len(raw) == 0 || json.Unmarshal(raw, &pending) != nil || len(pending) == 0 {
		return "-"
	}
	parts := make([]string, len(pending))
	for i, p := range pending {
		parts[i] = fmt.Sprintf("%s (%s)", p.CallID, p.Tool)
	}
	return strings.Join(parts, ", ")
}

// decide runs "approve" and "deny": record a person's answer to a call a
// run paused for.
func (c *cli) decide(ctx context.Context, verb string, args []string) int {
	fs := flag.NewFlagSet("toolloop "+verb, flag.ContinueOnError)
	by := fs.String("by", "", "who decides (`NAME`); recorded in the run's log")
	note := fs.String("note", "", "why (`TEXT`); recorded, and for a denial shown to the model")
	db := fs.String("db", "", "the SQLite store at `PATH`")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError(verb, err, decideUsage)
	}
	if len(pos) != 2 {
		fmt.Fprintf(c.stderr, "toolloop %s: want RUN_ID CALL_ID, got %d argument(s): toolloop %s RUN_ID CALL_ID --by NAME [--note TEXT] [--db PATH]\n", verb, len(pos), verb)
		return exitUsage
	}
	runID, callID := pos[0], pos[1]
	if strings.TrimSpace(*by) == "" {
		fmt.Fprintf(c.stderr, "toolloop %s: --by NAME is missing: say who decides, e.g. toolloop %s %s %s --by alice\n", verb, verb, shellQuote(runID), shellQuote(callID))
		return exitUsage
	}
	path, err := c.dbPath(*db)
	if err != nil {
		return c.fail(verb, &usageErr{err.Error()})
	}
	st, err := openStore(path, false)
	if err != nil {
		return c.fail(verb, err)
	}
	defer st.Close()
	events, err := loadRun(ctx, st, runID, path)
	if err != nil {
		return c.fail(verb, err)
	}
	resume := "toolloop resume " + shellQuote(runID) + " --db " + shellQuote(path) + resumeFlagsOf(events[0].Start)
	s := loop.Replay(events)
	// The same checks loop.Decide makes, worded with the fix.
	for _, p := range append(slices.Clone(s.Answered), s.Pending...) {
		if p.CallID == callID && p.Confirmation != nil {
			was := "denied"
			if p.Confirmation.Approved {
				was = "approved"
			}
			return c.fail(verb, &usageErr{fmt.Sprintf("call %s of run %s was already %s by %s; an answer cannot change: resume the run with: %s",
				callID, runID, was, p.Confirmation.By, resume)})
		}
	}
	if s.Status != loop.ConfirmationRequired || s.Batch == nil {
		status := string(s.Status)
		if !s.Done {
			status = loop.RunningStatus
		}
		return c.fail(verb, &usageErr{fmt.Sprintf("run %s is not waiting for confirmation (status %s); list the runs that are with: toolloop runs --status %s --db %s",
			runID, status, loop.ConfirmationRequired, shellQuote(path))})
	}
	if !slices.ContainsFunc(s.Pending, func(p loop.Pending) bool { return p.CallID == callID }) {
		var waiting []string
		for _, p := range s.Pending {
			if p.Confirmation == nil {
				waiting = append(waiting, fmt.Sprintf("%s (%s)", p.CallID, p.Tool))
			}
		}
		return c.fail(verb, &usageErr{fmt.Sprintf("call %s is not pending in run %s; pending: %s", callID, runID, strings.Join(waiting, ", "))})
	}
	answer := loop.Confirmation{CallID: callID, Approved: verb == "approve", By: *by, Note: *note}
	if err := loop.Decide(ctx, st, runID, answer, time.Now()); err != nil {
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
		fmt.Fprintf(c.stdout, "%s call %s of run %s (by %s); still pending: %s; answer them, then: %s\n",
			done, callID, runID, *by, strings.Join(still, ", "), resume)
		return exitOK
	}
	fmt.Fprintf(c.stdout, "%s call %s of run %s (by %s); go on with: %s\n", done, callID, runID, *by, resume)
	return exitOK
}

// resume runs the "resume" subcommand: carry a run on from the store.
func (c *cli) resume(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("toolloop resume", flag.ContinueOnError)
	db := fs.String("db", "", "the SQLite store at `PATH`")
	tf := addTraceFlags(fs)
	src := addSourceFlags(fs)
	pricesFile := fs.String("prices", "", "")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError("resume", err, resumeUsage)
	}
	if len(pos) != 1 {
		fmt.Fprintf(c.stderr, "toolloop resume: want one RUN_ID, got %d argument(s): toolloop resume RUN_ID [--db PATH]\n", len(pos))
		return exitUsage
	}
	runID := pos[0]
	path, err := c.dbPath(*db)
	if err != nil {
		return c.fail("resume", &usageErr{err.Error()})
	}
	st, err := openStore(path, false)
	if err != nil {
		return c.fail("resume", err)
	}
	defer st.Close()
	events, err := loadRun(ctx, st, runID, path)
	if err != nil {
		return c.fail("resume", err)
	}
	start := events[0].Start
	if s, ok := orders.LookupSession(start.SessionID); ok {
		if src.given() || *pricesFile != "" {
			return c.fail("resume", &usageErr{fmt.Sprintf("run %s is a sandbox run (%s): its model and tools come from the scenario; drop the provider and tool flags", runID, start.SessionID)})
		}
		return c.resumeDemo(ctx, s, st, path, runID, tf)
	}
	if strings.HasPrefix(start.SessionID, runSessionPrefix) {
		return c.resumeRun(ctx, st, path, events, src, *pricesFile, tf)
	}
	return c.fail("resume", &usageErr{fmt.Sprintf("run %s has session %q: toolloop can resume the runs of toolloop demo and toolloop run, whose configuration it knows how to rebuild; resume others from the program that started them", runID, start.SessionID)})
}

// resumeDemo resumes a sandbox run. An interactive scenario's run goes on
// over the store's book and ledger; the others get a fresh book, as every
// run of theirs does.
func (c *cli) resumeDemo(ctx context.Context, s orders.Scenario, st *sqlite.Store, path, runID string, tf *traceFlags) int {
	opts := orders.RunOptions{Store: st}
	if s.Interactive {
		book, err := orders.OpenSQLiteBook(ctx, st.DB())
		if err != nil {
			return c.fail("resume", err)
		}
		opts.Book, opts.Ledger = book, st
	}
	obs, shutdown, err := observersFromFlags(c.stdout, scriptedProvider, tf.logDir, tf.exporter, tf.otlpEndpoint)
	if err != nil {
		return c.fail("resume", &usageErr{err.Error()})
	}
	opts.Observer = obs
	res, book, err := s.Resume(ctx, runID, opts)
	if serr := shutdown(context.WithoutCancel(ctx)); serr != nil {
		fmt.Fprintf(c.stderr, "toolloop resume: %v\n", serr)
	}
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
	writeNextSteps(c.stdout, res, path, "")
	return okStatus(res.Status)
}

func runsUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop runs [--status S] [--db PATH]

Lists the runs recorded in the store, newest first, one line each: run ID,
status ("running" for a run that has not stopped), model turns, tool calls,
tokens, start time (UTC), session (demo:MODE for the sandbox's runs,
run:PROVIDER:MODEL for toolloop run's) and the calls awaiting confirmation,
with their tools.

Flags:
  --status S  list only the runs with status S, e.g. confirmation_required
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
                          --base-url, --tools, --mcp, --mcp-url,
                          --confirm-writes); the error for missing or
                          different flags lists them. Its API key is read
                          again; budgets, identity and price come from the log

Flags:
  --db PATH   the SQLite store (default: toolloop.db in $XDG_DATA_HOME/toolloop
              or ~/.local/share/toolloop)
  --log DIR   write the run's log (all of it, then the resumed part as it
              goes) to DIR/RUN_ID.jsonl; a 'toolloop run' run logs to the
              default runs directory without it
  --exporter none|stdout|otlp, --otlp-endpoint URL
              export the resumed part as OpenTelemetry spans

Exit status: 0 when the run ends with a final answer or pauses for a
person, 1 for any other status, 2 for a usage error.
`)
}
