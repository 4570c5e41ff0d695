package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/toolloop/toolloop/internal/report"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
)

// runCmd runs the "run" subcommand: start a run on the backend, and
// print its answer and stop line.
func (c *cli) runCmd(ctx context.Context, drv Driver, args []string) int {
	fs := flag.NewFlagSet("toolloop run", flag.ContinueOnError)
	model := fs.String("model", "", "the `MODEL` name the provider knows")
	bf := addBudgetFlags(fs)
	pricesFile := fs.String("prices", "", "model prices from the JSON `FILE` (added to the built-in ones)")
	identity := fs.String("identity", "cli", "the `NAME` the run acts for, as the policy sees it")
	system := fs.String("system", "", "a system prompt `TEXT` (with --tools orders, the order desk's by default)")
	id := fs.String("id", "", "the run's `ID` (default: a random one)")
	detach := fs.Bool("detach", false, "print the run's ID and return at once, where the backend runs runs elsewhere")
	noStream := fs.Bool("no-stream", false, "ask the model for whole turns, and print the answer once the run stops, without tool activity")
	outputSchema := fs.String("output-schema", "", "the final answer must be JSON matching the JSON Schema in `FILE`")
	outputRetries := fs.Int("output-retries", 0, "send an answer that does not match --output-schema back `N` times (default 2; -1: never)")
	window := fs.Int("context-window", 0, "the model's context window in `TOKENS` (default: the built-in table's, for well-known models)")
	keep := fs.Int("keep-tool-results", 0, "with context management, the `N` latest tool results never cleared (default 3)")
	noContext := fs.Bool("no-context-management", false, "send the whole history every turn, however long")
	compact := fs.Bool("compact", false, "when clearing old tool results is not enough, have the model summarize the earlier turns")
	noCount := fs.Bool("no-count-tokens", false, "near the window, decide on the estimate alone rather than the provider's token count")
	keepReasoning := fs.Bool("keep-reasoning", false, "never clear the reasoning of turns before the latest prompt when clearing for the window")
	compensate := fs.Bool("compensate", false, "undo the writes of an all-or-nothing group that failed, or of a run that stops without an answer, with their compensations (default: leave them and report them)")
	atomicBatches := fs.Bool("atomic-batches", false, "make the calls of each model turn an all-or-nothing group")
	open := drv.Flags("run", fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError("run", err, nil)
	}
	if len(pos) == 1 && strings.TrimSpace(pos[0]) == "" {
		// Sent on, it would reach the model as no message at all.
		fmt.Fprintf(c.stderr, "toolloop run: the prompt is empty; say what the run is to do: toolloop run [flags] \"your question\"\n")
		return exitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintf(c.stderr, "toolloop run: want one prompt, got %d argument(s); quote it: toolloop run [flags] \"your question\"\n", len(pos))
		return exitUsage
	}
	if *id != "" && c.badRunID("run", "--id", *id) {
		return exitUsage
	}
	budgets, err := bf.budgets()
	if err != nil {
		return c.fail("run", err)
	}
	prices, err := loadPrices(*pricesFile)
	if err != nil {
		return c.fail("run", &usageErr{err.Error()})
	}
	schema, err := readOutputSchema(*outputSchema, *outputRetries)
	if err != nil {
		return c.fail("run", err)
	}
	cp, err := contextPolicy(*model, *window, *keep, *compact, *noContext, *noCount, *keepReasoning)
	if err != nil {
		return c.fail("run", err)
	}
	req := &Request{ID: *id, Model: *model, System: *system, Prompt: pos[0], Identity: policy.Identity{Name: *identity},
		Budgets: budgets, Detach: *detach, NoStream: *noStream, Context: cp, prices: prices,
		OutputSchema: schema, OutputRetries: *outputRetries,
		Compensation: compensationPolicy(*compensate), AtomicBatches: *atomicBatches}
	var printer *streamPrinter
	if !*noStream && !*detach {
		printer = &streamPrinter{out: c.stdout, errw: c.stderr}
		req.Watch = printer.watch
	}
	b, err := open(ctx, &Kit{c})
	if err != nil {
		return c.fail("run", err)
	}
	defer c.closeBackend("run", b)
	res, err := b.Start(ctx, req)
	if err != nil {
		return c.fail("run", err)
	}
	if *detach {
		info := b.Info()
		fmt.Fprintf(c.stdout, "run=%s\n", res.RunID)
		fmt.Fprintf(c.stdout, "# follow it with: toolloop runs%s; toolloop trace show%s %s\n", info.Flags, info.Flags, shellQuote(res.RunID))
		return exitOK
	}
	return c.printResult(res, b.Info(), printer.answered(res))
}

// contextPolicy is the run's context management as its flags ask: on
// when the model's window is given or built in (or --keep-tool-results
// is given), unless --no-context-management; near the window the
// provider counts the request, unless --no-count-tokens; a clearing
// clears the reasoning of earlier cycles too, unless --keep-reasoning.
func contextPolicy(model string, window, keep int, compact, off, noCount, keepReasoning bool) (*loop.ContextPolicy, error) {
	switch {
	case window < 0:
		return nil, &usageErr{fmt.Sprintf("--context-window is %d; want a number of tokens (or leave it out for the model's known window)", window)}
	case off && (window > 0 || keep != 0 || compact || noCount || keepReasoning):
		return nil, &usageErr{"--no-context-management turns context management off; --context-window, --keep-tool-results, --compact, --no-count-tokens and --keep-reasoning tune it: give one or the other"}
	case off:
		return nil, nil
	}
	if _, known := loop.KnownWindow(model); window == 0 && !known && keep == 0 && !compact {
		return nil, nil
	}
	p, err := loop.ResolveContextPolicy(loop.ContextPolicy{Window: window, KeepToolResults: keep, Compact: compact, CountTokens: !noCount, ClearReasoning: !keepReasoning}, model)
	if err != nil {
		return nil, &usageErr{err.Error()}
	}
	return &p, nil
}

// closeBackend closes b, reporting an error for cmd on standard error.
func (c *cli) closeBackend(cmd string, b Backend) {
	if err := b.Close(); err != nil {
		fmt.Fprintf(c.stderr, "toolloop %s: %v\n", cmd, err)
	}
}

// printResult prints a run's outcome: the final answer, if any and not
// printed already as it streamed, then the stop line, then for a paused
// run the commands that answer it.
func (c *cli) printResult(res *loop.Result, info Info, streamed bool) int {
	if res.Status == loop.FinalAnswer && !streamed {
		fmt.Fprintln(c.stdout, res.Answer())
	}
	if res.Truncated() {
		fmt.Fprintln(c.stderr, "toolloop: warning: the answer is truncated: the model hit its output token limit")
	}
	fmt.Fprintln(c.stdout, report.SummaryLine("", res, -1, true, true))
	writeNextSteps(c.stdout, res, info)
	return okStatus(res.Status)
}

// okStatus is the exit code for a run that stopped with st: a final
// answer, or a pause for a person, is what a run should come to.
func okStatus(st loop.Status) int {
	if st == loop.FinalAnswer || st == loop.ConfirmationRequired {
		return exitOK
	}
	return exitFail
}

func runUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop run --provider P --model M [flags] "prompt"

Runs the tool loop once on a real provider and prints the final answer, then
the stop line: status, model turns, tool calls, tokens, cost, run ID and stop
detail. The model's text is printed as it streams (each turn's, the answer
last), and each tool call gets a line on standard error once it has run (name,
call ID, status, duration) or was refused, and each compensation a line per
write it undid or left; --no-stream asks for whole turns and
prints only the answer, at the end. The run is recorded in the store as it goes (resume it, or answer its
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
  --max-response-bytes N fail a model reply larger than N bytes (default 8 MiB; -1: no cap)
  --max-stream-bytes N   fail a streamed model reply larger than N bytes
                         (default 64 MiB; -1: no cap)
  --model-timeout D      give up on a model request after D and try again, as for a rate
                         limit (default 5m)
  --tools orders         the order-desk tools over the order book in the store
  --mcp 'CMD ARGS'       the tools of an MCP server run as a command (stdio); repeatable
  --mcp-env NAME         pass NAME (or set NAME=VALUE) to the --mcp servers, which get
                         only HOME, LOGNAME, PATH, SHELL, TERM and USER otherwise; repeatable
  --mcp-url URL          the tools of an MCP server over streamable HTTP; repeatable
                         (MCP tools are named mcp1_..., mcp2_... in flag order, commands first)
  --reasoning-effort E   none, minimal, low, medium, high, xhigh or max: how hard a reasoning
                         model thinks (openai, openai-responses; gemini's thinking level,
                         minimal to high)
  --thinking-budget N    let the model think with up to N tokens a turn (anthropic: at
                         least 1024, interleaved with tool calls; gemini: -1 lets it decide)
  --adaptive-thinking    anthropic: the model decides how much to think
  --show-reasoning       ask for summaries of the reasoning (openai-responses, gemini)
                         (a reasoning model's state goes back to it every turn and is kept
                         in the store, so a resumed run thinks on where it left off; these
                         flags are recorded with the run and resume needs the same)
  --no-prompt-cache      do not ask the provider to cache the prompt (on by default:
                         Anthropic cache breakpoints, an OpenAI prompt_cache_key per run)
  --cache-ttl TTL        anthropic: keep the cache 5m after its last use (the default;
                         writes cost 1.25x input) or 1h (writes cost 2x); a run started
                         with 5m is resumed without it
  --server-clear-tool-uses TOKENS  anthropic: the API clears old tool results on its side once
                         a request passes TOKENS input tokens (context editing, a beta);
                         these edits are not in the run's log
  --confirm-writes       pause before every write until a person approves it
  --taint-policy P       follow untrusted tool results (every --mcp server's) through the
                         run and pause where they could steer a call: default (a recipient,
                         URL or account only untrusted content named, a link sent out,
                         credentials, private data going out; the default), strict (also
                         every write once the run is tainted) or off
  --slow-writes D        with --tools orders: each write answers D after it is applied
                         (a drill: the window where a crash leaves a write's outcome unknown)
  --system TEXT          a system prompt
  --identity NAME        who the run acts for (default cli)
  --id ID                the run's ID (default: a random one): 1 to 128 letters, digits,
                         '-', '_' and '.', not starting with '.'; an ID in use is refused
  --detach               print the run's ID and return at once (on a backend whose runs
                         outlive the command, such as the Temporal build's --temporal)
  --no-stream            ask the model for whole turns; print the answer once the run
                         stops, and no tool activity
  --output-schema FILE   the final answer must be JSON matching the JSON Schema (draft
                         2020-12) in FILE: asked for through the provider's structured
                         output, validated in any case; an answer that does not match goes
                         back to the model with what was wrong, and the run stops with
                         invalid_output when it still does not
  --output-retries N     how many times such an answer goes back (default 2; -1: never)

Compensation (writes that must all happen or none):
  --atomic-batches       the calls of each model turn are all or nothing (a tool may also
                         name a group of its own, e.g. in --mcp-config)
  --compensate           when a call of such a group fails for good, or the run stops
                         without an answer after some of its writes took effect, undo
                         them, latest first, with their compensations (through the
                         idempotency ledger, once); without it they are left and reported.
                         A compensation that fails stops the run with compensation_failed,
                         naming what is left for a person. The stop line's writes= says
                         what the writes ended as: all done, partial (naming what was done
                         and what was not), undone, or none
  --mcp-config FILE      compensations, groups and trust for the MCP servers' tools, which MCP
                         cannot declare, as JSON keyed by server (mcp1, mcp2, ... in flag
                         order) and the server's tool names, checked when the tools load:
                         {"mcp1": {"atomic_group": "money",
                                   "tools": {"refund": {"compensation": {"tool": "reverse",
                                     "args": {"refund_id": "result.refund_id",
                                              "reason": "=\"undo\""}}}}}}
                         an argument comes from "args.FIELD", "result.FIELD" (dotted paths),
                         "args", "result", or a JSON literal after '='; atomic_group puts
                         the server's writes (or one tool) in a named group; "trust" (per
                         server, or per tool) says what MCP cannot for --taint-policy:
                         "trusted": true|false, "reads_private", "outward", "credentials",
                         and per tool "untrusted_fields"/"trusted_fields" (result paths)
                         and "destinations" (argument paths; [] for none). A write whose
                         destinations nobody declared has every string argument taken for
                         one: a value found only in untrusted results needs confirmation

Context (on by default when the model's window is known or given):
  --context-window N     the model's window in tokens (default: built in for well-known
                         models, e.g. claude-sonnet-4-6, gpt-4.1, gemini-2.5-flash); before
                         a request would near it, the oldest tool results are cleared, each
                         replaced by a note naming the call; a provider's "prompt too long"
                         clears and retries once; a history that cannot fit stops the run
                         with context_exhausted
  --keep-tool-results N  the N latest tool results are never cleared (default 3; -1: none)
  --compact              when clearing is not enough, the model summarizes the earlier turns
                         (a request of its own, counted in the run's tokens and cost) and the
                         run goes on from the prompt, the summary and the latest turns
  --no-count-tokens      near the window, decide on the estimate alone (by default a request
                         that may near it is first counted by the provider: Anthropic,
                         Gemini and OpenAI Responses; a count that fails leaves the estimate)
  --keep-reasoning       never clear old reasoning (by default a clearing also drops the
                         reasoning state of turns before the latest prompt, which no
                         provider needs back)
  --no-context-management  send the whole history every turn

Budgets (0 or absent means the default):
  --max-steps N          model turns (default 10)
  --deadline D           total time, e.g. 90s, 5m (default 10m)
  --tool-timeout D       every tool call's timeout (default: each tool's own)
  --max-tool-calls N     tool calls (default 100)
  --max-tokens N         input plus output tokens (default: no limit)
  --max-cost USD         dollars (default: no limit); needs the model's price
  --max-argument-bytes N a tool call's arguments, in bytes (default 1 MiB)
  --max-argument-depth N how deep a tool call's arguments nest (default 64, at most 1000)
  --prices FILE          prices as JSON, added to the built-in table:
                         {"MODEL": {"input_per_mtok": 2, "cached_input_per_mtok": 0.5, "output_per_mtok": 8}}
                         optional "cache_write_input_per_mtok": N, for prompt-cache writes
                         (cached input and cache writes default to the input price;
                         a regular file of at most 1 MiB, each price 0 to 1e6)

Recording:
  --db PATH              the SQLite store (default: toolloop.db in $XDG_DATA_HOME/toolloop
                         or ~/.local/share/toolloop)
  --log DIR              run logs (default: the runs directory beside the default store)
  --exporter E           none (default), stdout or otlp: OpenTelemetry spans
  --otlp-endpoint URL    where --exporter otlp sends them

Exit status: 0 for a final answer or a pause for confirmation, 1 for any
other stop (compensation_failed too), 2 for a usage error (a bad flag, a missing API key), 3 when
another process holds the lease of a run with the same --id (both started
it at once): try another --id.
`)
}
