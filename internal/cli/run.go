package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
)

// runCmd runs the "run" subcommand: the loop on a real provider.
func (c *cli) runCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("toolloop run", flag.ContinueOnError)
	src := addSourceFlags(fs)
	bf := addBudgetFlags(fs)
	pricesFile := fs.String("prices", "", "model prices from the JSON `FILE` (added to the built-in ones)")
	identity := fs.String("identity", "cli", "the `NAME` the run acts for, as the policy sees it")
	system := fs.String("system", "", "a system prompt `TEXT` (with --tools orders, the order desk's by default)")
	db := fs.String("db", "", "record the run in the SQLite store at `PATH`")
	tf := addTraceFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError("run", err, runUsage)
	}
	if len(pos) != 1 || strings.TrimSpace(pos[0]) == "" {
		fmt.Fprintf(c.stderr, "toolloop run: want one prompt, got %d argument(s); quote it: toolloop run --provider P --model M \"your question\"\n", len(pos))
		return exitUsage
	}
	if src.model == "" && src.provider == providerSandbox {
		src.model = orders.DeskModelName
	}
	if src.model == "" {
		return c.fail("run", &usageErr{"--model is missing: name the model, e.g. --model gpt-4.1"})
	}
	budgets, err := bf.budgets()
	if err != nil {
		return c.fail("run", err)
	}
	sets, err := src.toolSets()
	if err != nil {
		return c.fail("run", err)
	}
	prices, err := loadPrices(*pricesFile)
	if err != nil {
		return c.fail("run", &usageErr{err.Error()})
	}
	if p, ok := priceFor(prices, src.model); ok {
		budgets.Prices = loop.Prices{src.model: p}
	} else if budgets.MaxCost > 0 {
		return c.fail("run", &usageErr{fmt.Sprintf(`--max-cost needs the price of model %q, which is not built in: pass --prices FILE with {%q: {"input_per_mtok": N, "cached_input_per_mtok": N, "output_per_mtok": N}}`, src.model, src.model)})
	}
	model, provName, err := c.modelFor(ctx, src)
	if err != nil {
		return c.fail("run", err)
	}
	path, err := c.dbPath(*db)
	if err != nil {
		return c.fail("run", &usageErr{err.Error()})
	}
	logDir := c.runLogDir("run", tf.logDir)
	obs, shutdown, err := observersFromFlags(c.stdout, provName, logDir, tf.exporter, tf.otlpEndpoint)
	if err != nil {
		return c.fail("run", &usageErr{err.Error()})
	}
	defer func() {
		if err := shutdown(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(c.stderr, "toolloop run: %v\n", err)
		}
	}()
	st, err := openStore(path, true)
	if err != nil {
		return c.fail("run", err)
	}
	defer st.Close()
	box, err := c.toolsFor(ctx, src, st)
	if err != nil {
		return c.fail("run", err)
	}
	defer box.close()
	var msgs []llm.Message
	switch {
	case *system != "":
		msgs = append(msgs, llm.SystemMessage(*system))
	case slices.Contains(sets, toolsOrders):
		msgs = append(msgs, llm.SystemMessage(orders.SystemPrompt))
	}
	msgs = append(msgs, llm.UserMessage(pos[0]))
	cfg := c.runConfig(src, model, box.reg, st, obs)
	cfg.Identity = policy.Identity{Name: *identity}
	cfg.Budgets = budgets
	runner, err := loop.NewRunner(cfg)
	if err != nil {
		return c.fail("run", &usageErr{err.Error()})
	}
	res, err := runner.Run(ctx, msgs)
	if res == nil {
		return c.fail("run", err)
	}
	return c.printRun(res, path, src.canonical())
}

// runLogDir is where a toolloop run run's log goes: flagValue, else the
// default directory. Without either the run goes on unlogged, and says so.
func (c *cli) runLogDir(cmd, flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	dir, err := c.defaultLogDir()
	if err != nil {
		fmt.Fprintf(c.stderr, "toolloop %s: writing no run log: %v; pass --log DIR for one\n", cmd, err)
		return ""
	}
	return dir
}

// runConfig is the configuration of a toolloop run run that its flags
// decide; the caller adds identity and budgets.
func (c *cli) runConfig(src *sourceFlags, model llm.Model, reg *tool.Registry, st *sqlite.Store, obs loop.Observer) loop.Config {
	var pol policy.Policy
	if src.confirmWrites {
		pol = policy.ConfirmWrites()
	}
	return loop.Config{
		Model:         model,
		ModelName:     src.model,
		Tools:         reg,
		Policy:        pol,
		Executor:      executor.New(&executor.Options{Ledger: st}),
		SessionID:     runSessionPrefix + src.provider + ":" + src.model,
		PromptVersion: runPromptPrefix + src.canonical(),
		Store:         st,
		Observer:      obs,
	}
}

// printRun prints a toolloop run run's outcome: the final answer, if any,
// then the stop line, then for a paused run the commands that go on.
func (c *cli) printRun(res *loop.Result, db, flags string) int {
	if res.Status == loop.FinalAnswer {
		fmt.Fprintln(c.stdout, res.Answer())
	}
	fmt.Fprintln(c.stdout, summaryLine("", res, -1, true, true))
	writeNextSteps(c.stdout, res, db, flags)
	return okStatus(res.Status)
}

// resumeRun resumes a toolloop run run: with the same provider and tool
// flags, the budgets, identity and price its log recorded, and its API key
// read again.
func (c *cli) resumeRun(ctx context.Context, st *sqlite.Store, db string, events []loop.Event, src *sourceFlags, pricesFile string, tf *traceFlags) int {
	start := events[0].Start
	recorded := resumeFlagsOf(start)
	if s := loop.Replay(events); s.Done {
		// Ended, or still waiting for answers: nothing to drive, so no
		// provider is needed.
		return c.printRun(resultOf(events), db, recorded)
	}
	runID := start.RunID
	if !src.given() {
		return c.fail("resume", &usageErr{fmt.Sprintf("run %s was started by toolloop run; resume it with the flags it ran with: toolloop resume %s --db %s%s",
			runID, shellQuote(runID), shellQuote(db), recorded)})
	}
	if got := src.canonical(); got != recorded {
		return c.fail("resume", &usageErr{fmt.Sprintf("run %s ran with%s, not%s; resume it with: toolloop resume %s --db %s%s",
			runID, recorded, got, shellQuote(runID), shellQuote(db), recorded)})
	}
	if pricesFile != "" {
		return c.fail("resume", &usageErr{"--prices does not apply to resume: a run keeps the price its log recorded"})
	}
	model, provName, err := c.modelFor(ctx, src)
	if err != nil {
		return c.fail("resume", err)
	}
	box, err := c.toolsFor(ctx, src, st)
	if err != nil {
		return c.fail("resume", err)
	}
	defer box.close()
	if v := box.reg.Version(); v != start.ToolsVersion {
		return c.fail("resume", &usageErr{fmt.Sprintf("run %s: its tools have changed since it started (tools version %s, now %s): an MCP server offers other tools, or other flags were given; the run cannot go on safely",
			runID, start.ToolsVersion, v)})
	}
	logDir := c.runLogDir("resume", tf.logDir)
	obs, shutdown, err := observersFromFlags(c.stdout, provName, logDir, tf.exporter, tf.otlpEndpoint)
	if err != nil {
		return c.fail("resume", &usageErr{err.Error()})
	}
	cfg := c.runConfig(src, model, box.reg, st, obs)
	cfg.Identity = start.Identity
	cfg.Budgets = start.Budgets
	if start.Price != nil {
		cfg.Budgets.Prices = loop.Prices{start.Model: *start.Price}
	}
	runner, err := loop.NewRunner(cfg)
	if err != nil {
		_ = shutdown(context.WithoutCancel(ctx))
		return c.fail("resume", err)
	}
	res, err := runner.Resume(ctx, runID)
	if serr := shutdown(context.WithoutCancel(ctx)); serr != nil {
		fmt.Fprintf(c.stderr, "toolloop resume: %v\n", serr)
	}
	if res == nil {
		return c.fail("resume", err)
	}
	return c.printRun(res, db, recorded)
}

func runUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop run --provider P --model M [flags] "prompt"

Runs the tool loop once on a real provider and prints the final answer, then
the stop line: status, model turns, tool calls, tokens, cost, run ID and stop
detail. The run is recorded in the store as it goes (resume it, or answer its
confirmations, with toolloop approve/deny/resume) and its log is written to
DIR/RUN_ID.jsonl (toolloop trace show RUN_ID).

Providers and their API keys (read from the environment):
  openai            Chat Completions       OPENAI_API_KEY (not needed with --base-url)
  openai-responses  the Responses API      OPENAI_API_KEY (not needed with --base-url)
  anthropic         the Messages API       ANTHROPIC_API_KEY
  gemini            the Gemini API         GEMINI_API_KEY, else GOOGLE_API_KEY
  sandbox           the order desk's rule-based model (no key, no network; use
                    with --tools orders: "refund A101", "where is A100")
An OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio) is
--provider openai --base-url http://localhost:11434/v1. The SDKs' own retries
are off: the loop retries, and logs each attempt.

Model and tools:
  --provider P           one of openai, openai-responses, anthropic, gemini, sandbox
  --model M              the model name, e.g. gpt-4.1, claude-sonnet-4-6, gemini-2.5-flash
  --base-url URL         the provider's API somewhere else
  --tools orders         the order-desk tools over the order book in the store
  --mcp 'CMD ARGS'       the tools of an MCP server run as a command (stdio); repeatable
  --mcp-url URL          the tools of an MCP server over streamable HTTP; repeatable
                         (MCP tools are named mcp1_..., mcp2_... in flag order, commands first)
  --confirm-writes       pause before every write until a person approves it
  --slow-writes D        with --tools orders: each write answers D after it is applied
                         (a drill: the window where a crash leaves a write's outcome unknown)
  --system TEXT          a system prompt
  --identity NAME        who the run acts for (default cli)

Budgets (0 or absent means the default):
  --max-steps N          model turns (default 10)
  --deadline D           total time, e.g. 90s, 5m (default 10m)
  --tool-timeout D       every tool call's timeout (default: each tool's own)
  --max-tool-calls N     tool calls (default 100)
  --max-tokens N         input plus output tokens (default: no limit)
  --max-cost USD         dollars (default: no limit); needs the model's price
  --prices FILE          prices as JSON, added to the built-in table:
                         {"MODEL": {"input_per_mtok": 2, "cached_input_per_mtok": 0.5, "output_per_mtok": 8}}
                         (cached input defaults to the input price)

Recording:
  --db PATH              the SQLite store (default: toolloop.db in $XDG_DATA_HOME/toolloop
                         or ~/.local/share/toolloop)
  --log DIR              run logs (default: the runs directory beside the default store)
  --exporter E           none (default), stdout or otlp: OpenTelemetry spans
  --otlp-endpoint URL    where --exporter otlp sends them

Exit status: 0 for a final answer or a pause for confirmation, 1 for any
other stop, 2 for a usage error (a bad flag, a missing API key).
`)
}
