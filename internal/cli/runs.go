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

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/internal/report"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
)

// usageErr is an error the person at the command line can fix; its text
// says how. Commands exit with exitUsage on it.
type usageErr struct{ msg string }

func (e *usageErr) Error() string { return e.msg }

// Is makes a usage error console.ErrNotHere: the console, which has no
// command line, cannot do what the message asks (resume a toolloop run
// run with its provider and tool flags), and leaves it to a person with
// one.
func (e *usageErr) Is(target error) bool { return target == console.ErrNotHere }

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
	if len(args) > 0 {
		switch args[0] {
		case "export":
			return c.runsExport(ctx, drv, args[1:])
		case "import":
			return c.runsImport(ctx, args[1:])
		}
	}
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
	valid := loop.ListStatuses()
	if *status != "" && !slices.Contains(valid, *status) {
		fmt.Fprintf(c.stderr, "toolloop runs: unknown status %q; want one of %s\n", *status, strings.Join(valid, ", "))
		return exitUsage
	}
	b, err := open(ctx, &Kit{c})
	if err != nil {
		return c.fail("runs", err)
	}
	defer c.closeBackend("runs", b)
	list, err := b.Runs(ctx, console.Filter{Status: *status, Limit: *limit})
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
	var answered []console.Run
	for _, r := range list {
		steps, calls, tokens := "-", "-", "-"
		if r.Counted {
			steps, calls, tokens = fmt.Sprint(r.Steps), fmt.Sprint(r.ToolCalls), fmt.Sprint(r.Tokens)
		}
		pending := loop.WaitingList(r.Pending)
		if r.Status == loop.AnsweredStatus {
			pending = "answered: " + answerList(r.Pending, false)
			answered = append(answered, r)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.RunID, r.Status, steps, calls, tokens,
			r.StartedAt.UTC().Format(time.RFC3339), orDash(r.SessionID), pending)
	}
	if err := tw.Flush(); err != nil {
		return c.fail("runs", err)
	}
	// An answered run goes on only once resumed: say with what, and what
	// the answers were, notes included.
	info := b.Info()
	for _, r := range answered {
		evs, err := b.Events(ctx, r.RunID)
		if err != nil {
			return c.fail("runs", err)
		}
		fmt.Fprintf(c.stdout, "run %s is answered (%s); resume it with: %s\n", r.RunID, answerList(r.Pending, true), resumeCommand(r.RunID, info, evs))
	}
	return exitOK
}

// answerList renders the answers of calls as "CALL_ID approved by NAME,
// ...", with their notes quoted when withNotes.
func answerList(calls []loop.Pending, withNotes bool) string {
	var parts []string
	for _, p := range calls {
		if c := p.Confirmation; c != nil {
			part := fmt.Sprintf("%s %s by %s", p.CallID, c.Verb(), c.By)
			if withNotes && c.Note != "" {
				part += fmt.Sprintf(" note=%q", c.Note)
			}
			parts = append(parts, part)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// decide runs "approve" and "deny": record a person's answer to a call a
// run paused for. The backend checks the answer (loop.CheckAnswer); each
// reason of a refusal (loop.ErrNotPaused, ...) gets its own message with
// the fix, alike on every backend.
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
	answer := loop.Confirmation{CallID: callID, Approved: verb == "approve", By: *by, Note: *note}
	// What is wrong with the answer itself is said before the backend is
	// reached; the backend checks it again with the rest.
	if err := loop.CheckAnswerInput(runID, answer); err != nil {
		return c.fail(verb, refusal(ctx, nil, verb, answer, runID, err))
	}
	b, err := open(ctx, &Kit{c})
	if err != nil {
		return c.fail(verb, err)
	}
	defer c.closeBackend(verb, b)
	if err := b.Decide(ctx, runID, answer); err != nil {
		return c.fail(verb, refusal(ctx, b, verb, answer, runID, err))
	}
	info := b.Info()
	head := fmt.Sprintf("%s call %s of run %s (by %s)", answer.Verb(), callID, runID, *by)
	evs, err := events(ctx, b, runID)
	if err != nil {
		fmt.Fprintf(c.stdout, "%s\n", head)
		return c.fail(verb, fmt.Errorf("the answer is recorded, but the run's log could not be read to say what comes next: %w", err))
	}
	var still []string
	for _, p := range loop.PendingAfter(evs, callID) {
		still = append(still, p.CallID)
	}
	if len(still) > 0 {
		then := "answer them, then: " + resumeCommand(runID, info, evs)
		if info.GoesOn {
			then = "the run goes on once they are answered"
		}
		fmt.Fprintf(c.stdout, "%s; still pending: %s; %s\n", head, strings.Join(still, ", "), then)
		return exitOK
	}
	fmt.Fprintf(c.stdout, "%s; %s\n", head, nextAfterAnswers(runID, info, evs))
	return exitOK
}

// nextAfterAnswers says what carries on a run whose calls are all
// answered: toolloop resume, or nothing on a backend whose runs go on by
// themselves.
func nextAfterAnswers(runID string, info Info, evs []loop.Event) string {
	if info.GoesOn {
		return "the run goes on; follow it with: toolloop trace show" + info.Flags + " " + shellQuote(runID)
	}
	return "go on with: " + resumeCommand(runID, info, evs)
}

// refusal words the error of an answer to call answer.CallID of run runID
// that b (nil before the backend is opened) did not record: for each
// reason of a *loop.AnswerError a usageErr that says the fix, and for a
// run b does not have the command that lists its runs.
func refusal(ctx context.Context, b Backend, verb string, answer loop.Confirmation, runID string, err error) error {
	var ae *loop.AnswerError
	if b != nil && errors.Is(err, store.ErrUnknownRun) {
		return unknownRun(b, runID)
	}
	if !errors.As(err, &ae) {
		return err
	}
	callID := answer.CallID
	var info Info
	if b != nil {
		info = b.Info()
	}
	// The run's log, for the resume command (a toolloop run run's
	// recorded flags); without it the command has the backend's flags
	// only.
	log := func() []loop.Event {
		if b == nil {
			return nil
		}
		evs, _ := b.Events(ctx, runID)
		return evs
	}
	switch {
	case errors.Is(err, loop.ErrNoAnswerer) && ae.Detail != "":
		return &usageErr{"--by: " + ae.Detail + ": give a name on one line"}
	case errors.Is(err, loop.ErrNoAnswerer):
		return &usageErr{fmt.Sprintf("--by NAME is missing: say who decides, e.g. toolloop %s %s %s --by alice", verb, shellQuote(runID), shellQuote(callID))}
	case errors.Is(err, loop.ErrNoteTooLong):
		return &usageErr{fmt.Sprintf("--note is too long (%s): say why in fewer words", ae.Detail)}
	case errors.Is(err, loop.ErrAlreadyAnswered):
		was := "answered"
		if a := ae.Answer; a != nil {
			was = a.Verb() + " by " + a.By
		}
		return &usageErr{fmt.Sprintf("call %s of run %s was already %s; an answer cannot change: %s",
			callID, runID, was, strings.Replace(nextAfterAnswers(runID, info, log()), "go on with: ", "resume the run with: ", 1))}
	case errors.Is(err, loop.ErrNotPaused):
		if ae.Status == loop.AnsweredStatus && !info.GoesOn {
			return &usageErr{fmt.Sprintf("run %s is not waiting for confirmation (status %s): every call it paused for is answered; resume it with: %s",
				runID, loop.AnsweredStatus, resumeCommand(runID, info, log()))}
		}
		return &usageErr{fmt.Sprintf("%v; list the runs that are with: toolloop runs --status %s%s", ae, loop.ConfirmationRequired, info.Flags)}
	}
	return &usageErr{ae.Error()}
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
	fmt.Fprintln(c.stdout, report.StopLine(s.Name, res, false, refunds, true))
	writeNextSteps(c.stdout, res, b.Info())
	return okStatus(res.Status)
}

func runsUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop runs [--status S] [--limit N] [--db PATH]
       toolloop runs export RUN_ID [--redact none|secrets|all] [--summarize-text] [--db PATH] > run.jsonl
       toolloop runs import FILE [--db PATH]

Lists the runs recorded in the store, newest first, one line each: run ID,
status, model turns, tool calls, tokens, start time (UTC), session
(demo:MODE for the sandbox's runs, run:PROVIDER:MODEL for toolloop run's)
and the calls awaiting confirmation, with their tools.

The status is the one the run stopped with, or "running" for a run that has
not stopped, or "answered" for a run that paused for confirmation, has an
answer to every call it paused for, and waits for 'toolloop resume': its
line shows the answers, and a line after the table gives them with their
notes and the command that resumes it.

Flags:
  --status S  list only the runs with status S: confirmation_required for
              the runs with calls awaiting an answer, answered for those
              answered and waiting to be resumed, running, final_answer, ...
  --limit N   list at most N runs (default 50)
  --db PATH   the SQLite store (default: toolloop.db in $XDG_DATA_HOME/toolloop
              or ~/.local/share/toolloop)

export writes a run's log to standard output as JSON Lines, one event a line,
self-contained: the first event holds the run's configuration and first
messages. The log is whole unless --redact asks otherwise, by the trace's
rules: secrets masks secret-looking keys and values (passwords, tokens, card
numbers, API keys) and keeps the rest; all also summarizes arguments and
results as keys, types and lengths, as run logs do. --summarize-text replaces
message text by its length. A whole export (or one with secrets masked)
replays (toolloop replay FILE) and imports; one redacted with all is for
reading only.

import adds a run from such a file to the store as a new run, all of it or
nothing; a run the store already has, a log with a hole, a cut last line, an
event kind this version does not know, or arguments the trace summarized are
refused.
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
  --note TEXT  why (at most 16 KiB); for a denial, the model is told
  --db PATH    the SQLite store (default: toolloop.db in $XDG_DATA_HOME/toolloop
               or ~/.local/share/toolloop)

Exit status: 0 when the answer is recorded, 2 when it cannot be (no such
run or call, the call is not pending or was answered, the run does not
wait for answers, --by is missing, the note is too long). A run whose
every call is answered is listed with status answered until it is
resumed (toolloop runs --status answered).
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
