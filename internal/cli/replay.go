package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/replay"
	"github.com/toolloop/toolloop/trace"
)

// replayCmd runs the "replay" subcommand: re-decide recorded runs with
// the configuration the flags give and report the first decision of each
// that differs.
func (c *cli) replayCmd(ctx context.Context, drv Driver, args []string) int {
	fs := flag.NewFlagSet("toolloop replay", flag.ContinueOnError)
	// The runs named by ID are read from the local store, or, when the
	// command line selects an extension's backend (--temporal), through
	// it, with the flags it defines for reading runs.
	db := new(string)
	var open Opener
	if _, local := drv.(localDriver); local {
		fs.StringVar(db, "db", "", "read runs from the SQLite store at `PATH`")
	} else {
		open = drv.Flags("replay", fs)
	}
	all := fs.Bool("all", false, "replay every run in the store")
	src := addSourceFlags(fs)
	liveModel := fs.Bool("live-model", false, "ask the model the provider flags name for every turn, instead of the recorded answers")
	system := fs.String("system", "", "with --live-model: a system prompt `TEXT` in place of the recorded one")
	pricesFile := fs.String("prices", "", "with --live-model: model prices from the JSON `FILE` (added to the built-in ones)")
	var allow stringList
	fs.Var(&allow, "allow", "allow only the tools `NAME,...` (comma-separated, repeatable); any other is not allowed")
	identity := fs.String("identity", "", "the `NAME` the run acts for (default: the recorded identity)")
	bf := addBudgetFlags(fs)
	outputSchema := fs.String("output-schema", "", "the final answer must match the JSON Schema in `FILE`")
	outputRetries := fs.Int("output-retries", 0, "send a non-matching answer back `N` times (default 2; -1: never)")
	liveTools := fs.Bool("live-tools", false, "run a read-only tool for real where the new run makes a call the recorded one never made")
	asJSON := fs.Bool("json", false, "print each run's report as one line of JSON")
	refs, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError("replay", err, replayUsage)
	}
	if len(refs) == 0 && !*all {
		fmt.Fprintf(c.stderr, "toolloop replay: name a RUN_ID or a run log FILE (or --all for every run in the store)\n")
		return exitUsage
	}
	if *all && open != nil {
		fmt.Fprintf(c.stderr, "toolloop replay: --all replays every run in the local store only: with --%s name the RUN_IDs "+
			"(toolloop runs --%s ... lists them) or replay files written by toolloop runs export\n", c.ext.Flag, c.ext.Flag)
		return exitUsage
	}
	if len(refs) > 0 && *all {
		fmt.Fprintf(c.stderr, "toolloop replay: --all replays every run in the store: give it or RUN_IDs, not both\n")
		return exitUsage
	}
	for _, ref := range refs {
		if !looksLikeFile(ref) && !isFile(ref) && c.badRunID("replay", "RUN_ID", ref) {
			return exitUsage
		}
	}
	budgets, err := bf.budgets()
	if err != nil {
		return c.fail("replay", err)
	}
	schema, err := readOutputSchema(*outputSchema, *outputRetries)
	if err != nil {
		return c.fail("replay", err)
	}
	live, err := c.liveModel(ctx, src, *liveModel, *system, *pricesFile)
	if err != nil {
		return c.fail("replay", err)
	}
	logs, err := c.replayLogs(ctx, *db, open, refs, *all)
	if err != nil {
		return c.fail("replay", err)
	}
	var table []*replay.Report
	var closers []func()
	defer func() {
		for _, f := range closers {
			f()
		}
	}()
	code := exitOK
	for _, events := range logs {
		cfg, done, err := c.replayConfig(ctx, events[0].Start, src)
		if done != nil {
			closers = append(closers, done)
		}
		if err != nil {
			return c.fail("replay", err)
		}
		if len(allow) > 0 {
			cfg.Policy = allowOnly(allow, cfg.Policy)
		}
		if *identity != "" {
			cfg.Identity = &policy.Identity{Name: *identity}
		}
		b := overBudgets(events[0].Start.Budgets, budgets)
		cfg.Budgets = &b
		cfg.OutputSchema, cfg.OutputRetries = schema, *outputRetries
		cfg.LiveTools = *liveTools
		if live != nil {
			cfg.Model, cfg.ModelName, cfg.Price, cfg.System = live.Model, live.ModelName, live.Price, live.System
		}
		rep, err := replay.Run(ctx, events, cfg)
		if err != nil {
			var ce *replay.CannotReplayError
			if errors.As(err, &ce) {
				fmt.Fprintf(c.stderr, "toolloop replay: run %s: %v\n", events[0].Start.RunID, err)
				code = exitFail
				continue
			}
			return c.fail("replay", err)
		}
		switch {
		case *asJSON:
			line, _ := json.Marshal(rep)
			fmt.Fprintf(c.stdout, "%s\n", line)
		case live != nil:
			table = append(table, rep)
		default:
			_ = rep.Format(c.stdout)
		}
		if !rep.Equal() {
			code = exitFail
		}
	}
	if len(table) > 0 {
		c.liveTable(table)
	}
	return code
}

// liveModel is the live model the flags name, or nil without
// --live-model.
func (c *cli) liveModel(ctx context.Context, src *sourceFlags, on bool, system, pricesFile string) (*replay.Config, error) {
	if !on {
		if src.provider != "" || src.model != "" || system != "" || pricesFile != "" {
			return nil, &usageErr{"--provider, --model, --system and --prices choose the live model: add --live-model (without it the recorded answers are used)"}
		}
		return nil, nil
	}
	if src.provider == "" {
		return nil, &usageErr{"--live-model needs the model: --provider P --model M (as for toolloop run)"}
	}
	if src.model == "" && src.provider == providerSandbox {
		src.model = orders.DeskModelName
	}
	if src.model == "" {
		return nil, &usageErr{"--model is missing: name the model, e.g. --model gpt-4.1"}
	}
	prices, err := loadPrices(pricesFile)
	if err != nil {
		return nil, &usageErr{err.Error()}
	}
	model, _, err := c.modelFor(ctx, src)
	if err != nil {
		return nil, err
	}
	cfg := &replay.Config{Model: model, ModelName: src.model, System: system}
	if p, ok := priceFor(prices, src.model); ok {
		p = src.cachePrice(p)
		cfg.Price = &p
	}
	return cfg, nil
}

// liveTable prints the reports of runs answered by a live model, one
// line each, then where each replay stopped short.
func (c *cli) liveTable(reps []*replay.Report) {
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN_ID\tRECORDED\tNEW\tSTATUS\tCALLS\tTOKENS\tCOST")
	for _, r := range reps {
		l := r.Live
		newStatus, same, calls := string(r.NewStatus), "same", "same"
		if newStatus == "" {
			newStatus = "-"
		}
		if !l.SameStatus {
			same = "differs"
		}
		if !l.SameCalls {
			calls = fmt.Sprintf("%d -> %d, differ", len(l.RecordedCalls), len(l.NewCalls))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d -> %d\t$%.4f -> $%.4f\n", r.RunID, orDash(string(r.RecordedStatus)), newStatus,
			same, calls, l.RecordedTokens, l.NewTokens, l.RecordedCost, l.NewCost)
	}
	tw.Flush()
	for _, r := range reps {
		if r.Gap != nil {
			fmt.Fprintf(c.stdout, "run %s: replay stopped at turn %d: %s\n", r.RunID, r.Gap.Step, r.Gap.Reason)
		}
	}
}

// replayLogs reads the logs refs name (files, or run IDs in the store),
// or every run in the store with all. With open (an extension's backend)
// the runs named by ID come from that backend instead of the store.
func (c *cli) replayLogs(ctx context.Context, db string, open Opener, refs []string, all bool) ([][]loop.Event, error) {
	var logs [][]loop.Event
	var ids []string
	for _, ref := range refs {
		if looksLikeFile(ref) || isFile(ref) {
			f, err := os.Open(ref)
			if err != nil {
				return nil, &usageErr{err.Error()}
			}
			events, err := trace.ReadLog(f)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ref, err)
			}
			if len(events) == 0 || events[0].Start == nil {
				return nil, fmt.Errorf("%s: not a run log: it does not begin with a started event", ref)
			}
			logs = append(logs, events)
			continue
		}
		ids = append(ids, ref)
	}
	if len(ids) == 0 && !all {
		return logs, nil
	}
	if open != nil {
		return c.backendLogs(ctx, open, logs, ids)
	}
	path, err := c.dbPath(db)
	if err != nil {
		return nil, &usageErr{err.Error()}
	}
	st, err := openStore(path, storeReadOnly)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if all {
		list, err := st.Runs(ctx, "")
		if err != nil {
			return nil, err
		}
		for i := len(list) - 1; i >= 0; i-- { // oldest first
			ids = append(ids, list[i].RunID)
		}
	}
	for _, id := range ids {
		events, err := loadRun(ctx, st, id)
		if err != nil {
			return nil, err
		}
		logs = append(logs, events)
	}
	return logs, nil
}

// backendLogs adds to logs the logs of the runs ids names, read through
// the backend open opens.
func (c *cli) backendLogs(ctx context.Context, open Opener, logs [][]loop.Event, ids []string) ([][]loop.Event, error) {
	b, err := open(ctx, &Kit{c})
	if err != nil {
		return nil, err
	}
	defer c.closeBackend("replay", b)
	for _, id := range ids {
		evs, err := events(ctx, b, id)
		if err != nil {
			return nil, err
		}
		logs = append(logs, evs)
	}
	return logs, nil
}

// replayConfig is the configuration a run is replayed with before the
// flags that change it: the tools and policy the flags name, else, for a
// sandbox run, its scenario's. done, when not nil, closes what it opened.
func (c *cli) replayConfig(ctx context.Context, start *loop.StartInfo, src *sourceFlags) (replay.Config, func(), error) {
	given := len(src.tools) > 0 || len(src.mcp) > 0 || len(src.mcpURL) > 0
	if !given {
		s, ok := orders.LookupSession(start.SessionID)
		if !ok {
			return replay.Config{}, nil, &usageErr{fmt.Sprintf(
				"run %s: name the tools to replay it with (--tools, --mcp, --mcp-url; it ran with%s)", start.RunID, recordedToolFlags(start))}
		}
		reg, err := orders.Tools(orders.NewBook())
		if err != nil {
			return replay.Config{}, nil, err
		}
		pol := s.Policy
		if src.confirmWrites {
			pol = policy.ConfirmWrites()
		}
		return replay.Config{Tools: reg, Policy: pol}, nil, nil
	}
	// The order desk's tools over a fresh book of their own: a replay
	// writes nothing, and live tools read the sandbox's orders.
	box, err := c.toolsFor(ctx, src, func(context.Context) (orders.OrderBook, error) { return orders.NewBook(), nil })
	if err != nil {
		return replay.Config{}, nil, err
	}
	return replay.Config{Tools: box.reg, Policy: src.policy()}, box.close, nil
}

// recordedToolFlags is what a toolloop run run's log says its flags were,
// or a note that it does not say.
func recordedToolFlags(start *loop.StartInfo) string {
	if flags, ok := strings.CutPrefix(start.PromptVersion, runPromptPrefix); ok {
		return flags
	}
	return " a configuration its log does not name"
}

// overBudgets is the recorded budgets with the ones the flags set (not
// zero) in their place.
func overBudgets(rec, flags loop.Budgets) loop.Budgets {
	b := rec
	set := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	set(&b.MaxSteps, flags.MaxSteps)
	set(&b.MaxToolCalls, flags.MaxToolCalls)
	set(&b.MaxArgumentBytes, flags.MaxArgumentBytes)
	set(&b.MaxArgumentDepth, flags.MaxArgumentDepth)
	if flags.Deadline != 0 {
		b.Deadline = flags.Deadline
	}
	if flags.ToolTimeout != 0 {
		b.ToolTimeout = flags.ToolTimeout
	}
	if flags.MaxTokens != 0 {
		b.MaxTokens = flags.MaxTokens
	}
	if flags.MaxCost != 0 {
		b.MaxCost = flags.MaxCost
	}
	return b
}

// allowOnly is a policy that refuses every tool not in names (each value
// comma-separated) as not allowed, and asks next about the others.
func allowOnly(values []string, next policy.Policy) policy.Policy {
	allowed := map[string]bool{}
	for _, v := range values {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				allowed[name] = true
			}
		}
	}
	gate := policy.Func(func(_ context.Context, req policy.Request) (policy.Decision, error) {
		if !allowed[req.Call.Name] {
			return policy.Decision{Verdict: policy.NotAllowed, Rule: "allow",
				Reason: fmt.Sprintf("tool %q is not on the --allow list", req.Call.Name)}, nil
		}
		return policy.Decision{Verdict: policy.Allow, Rule: "allow", Reason: "on the --allow list"}, nil
	})
	if next == nil {
		return gate
	}
	return policy.Chain(gate, next)
}

func replayUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop replay RUN_ID... | FILE.jsonl... | --all [flags]

Re-decides recorded runs with this version of toolloop and the configuration
the flags give, without network or side effects: the model answers from the
run's recorded turns and the tools from its recorded results, while
validation, authorization, the plan, the budgets, spin detection and the
status are decided anew. For each run it prints the first decision that
differs, recorded beside new with the call IDs, and how each run ended.
Where the new configuration leads to a call the recorded run never made, or
to a model turn asked with another history, the replay stops there and says
so (--live-tools runs read-only tools for such calls).

A run is a RUN_ID in the store (--db), or a run log FILE written whole
(toolloop runs export); a log whose arguments the trace summarized is
refused, as is a log with an event this version does not know.

What the flags leave out is the recorded run's: its budgets, identity and
output schema. A sandbox run (toolloop demo) is replayed with its scenario's
tools and policy unless --tools, --mcp or --mcp-url name others; a toolloop
run run needs its tool flags again.

Flags:
  --db PATH              the SQLite store the runs are in (default: the default store)
  --all                  replay every run in the store
  --tools orders         the order desk's tools (over a fresh sandbox book)
  --mcp 'CMD ARGS'       the tools of an MCP server run as a command; repeatable
  --mcp-env NAME         pass NAME (or NAME=VALUE) to the --mcp servers; repeatable
  --mcp-url URL          the tools of an MCP server over streamable HTTP; repeatable
  --confirm-writes       writes need a person's confirmation
  --allow NAME,...       allow only these tools; any other call is not allowed
  --identity NAME        who the run acts for, as the policy sees it
  --max-steps N, --deadline D, --tool-timeout D, --max-tool-calls N,
  --max-tokens N, --max-cost USD, --max-argument-bytes N, --max-argument-depth N
                         budgets in place of the recorded ones
  --output-schema FILE   the final answer must match this JSON Schema
  --output-retries N     how many times a non-matching answer goes back
  --live-tools           run read-only tools for calls the recorded run never made
  --json                 one line of JSON per run

A new model or prompt (a real provider, network and API key as for toolloop run):
  --live-model           ask the model for every turn instead of using the recorded
                         answers; a tool call is answered from the recorded call of the
                         same tool with the same arguments, and the replay stops at one
                         with none (or runs it, read-only, with --live-tools). Per run:
                         the status and the calls, the same or not, and the tokens and
                         cost before and after, as a table (or --json)
  --provider P --model M the live model, e.g. --provider anthropic --model claude-sonnet-4-6;
                         also --base-url URL, --model-timeout D, --max-response-bytes N,
                         --max-stream-bytes N, --reasoning-effort E, --thinking-budget N,
                         --adaptive-thinking, --show-reasoning, --no-prompt-cache,
                         --cache-ttl TTL (see 'toolloop help run')
  --system TEXT          a system prompt in place of the recorded one
  --prices FILE          prices as JSON, added to the built-in table, for the cost column
  --slow-writes D        with --tools orders and --live-tools: no effect (a replay never writes)

Exit status: 0 when every run's decisions are the recorded ones (with
--live-model: the same status after the same calls), 1 when a decision
differs or a log cannot be replayed, 2 for a usage error.
`)
}
