package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/toolloop/toolloop/replay"
	"github.com/toolloop/toolloop/trace"
)

// Redaction modes of toolloop runs export.
const (
	redactNone    = "none"
	redactSecrets = "secrets"
	redactAll     = "all"
)

// runsExport runs "runs export": a run's log to standard output as JSON
// Lines, self-contained, redacted when asked.
func (c *cli) runsExport(ctx context.Context, drv Driver, args []string) int {
	fs := flag.NewFlagSet("toolloop runs export", flag.ContinueOnError)
	mode := fs.String("redact", redactNone, "`MODE`: none (the whole log), secrets (secret keys and values masked), all (arguments and results summarized too, as run logs are)")
	text := fs.Bool("summarize-text", false, "replace message text by its length")
	open := drv.Flags("runs export", fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError("runs export", err, runsUsage)
	}
	if len(pos) != 1 {
		fmt.Fprintf(c.stderr, "toolloop runs export: want one RUN_ID, got %d argument(s): toolloop runs export RUN_ID > run.jsonl\n", len(pos))
		return exitUsage
	}
	if c.badRunID("runs export", "RUN_ID", pos[0]) {
		return exitUsage
	}
	var red *trace.Redactor
	switch *mode {
	case redactNone:
		if *text {
			red = trace.NewRedactor(&trace.RedactOptions{FullContent: true, NoDefaultPatterns: true, SummarizeText: true})
		}
	case redactSecrets:
		red = trace.NewRedactor(&trace.RedactOptions{FullContent: true, SummarizeText: *text})
	case redactAll:
		red = trace.NewRedactor(&trace.RedactOptions{SummarizeText: *text})
	default:
		fmt.Fprintf(c.stderr, "toolloop runs export: --redact %q: want none, secrets or all\n", *mode)
		return exitUsage
	}
	b, err := open(ctx, &Kit{c})
	if err != nil {
		return c.fail("runs export", err)
	}
	defer c.closeBackend("runs export", b)
	evs, err := events(ctx, b, pos[0])
	if err != nil {
		return c.fail("runs export", err)
	}
	if err := replay.Export(c.stdout, evs, red); err != nil {
		return c.fail("runs export", err)
	}
	return exitOK
}

// runsImport runs "runs import": a run's log from an export into the
// SQLite store, as a new run.
func (c *cli) runsImport(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("toolloop runs import", flag.ContinueOnError)
	db := fs.String("db", "", "the SQLite store at `PATH` (made if missing)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError("runs import", err, runsUsage)
	}
	if len(pos) != 1 {
		fmt.Fprintf(c.stderr, "toolloop runs import: want one run log FILE, got %d argument(s): toolloop runs import run.jsonl\n", len(pos))
		return exitUsage
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return c.fail("runs import", &usageErr{err.Error()})
	}
	evs, err := trace.ReadLog(f)
	f.Close()
	if err != nil {
		// A cut last line is refused too: an import is the whole run.
		return c.fail("runs import", fmt.Errorf("%s: %w", pos[0], err))
	}
	path, err := c.dbPath(*db)
	if err != nil {
		return c.fail("runs import", &usageErr{err.Error()})
	}
	st, err := openStore(path, storeCreate)
	if err != nil {
		return c.fail("runs import", err)
	}
	defer st.Close()
	if err := replay.Import(ctx, st, evs); err != nil {
		if errors.Is(err, replay.ErrRunExists) {
			return c.fail("runs import", &usageErr{err.Error() + "; it is left as it was"})
		}
		return c.fail("runs import", err)
	}
	fmt.Fprintf(c.stdout, "imported run %s (%d events) into %s\n", evs[0].Start.RunID, len(evs), path)
	return exitOK
}
