package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"time"

	anthropicsdk "github.com/anthropics/anthropic-sdk-go/v2"
	anthropicopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	openaisdk "github.com/openai/openai-go/v3"
	openaiopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/anthropic"
	"github.com/toolloop/toolloop/llm/gemini"
	"github.com/toolloop/toolloop/llm/openai"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/tool/mcp"
)

// Providers toolloop run can drive.
const (
	providerOpenAI          = "openai"           // Chat Completions, also any OpenAI-compatible server
	providerOpenAIResponses = "openai-responses" // the Responses API, stateless
	providerAnthropic       = "anthropic"
	providerGemini          = "gemini"
	// providerSandbox is the order desk's rule-based model
	// (orders.DeskModel): no key, no network.
	providerSandbox = "sandbox"
)

// providerList names the providers, for messages.
const providerList = providerOpenAI + ", " + providerOpenAIResponses + ", " + providerAnthropic + ", " + providerGemini +
	", " + providerSandbox

// Tool sets --tools knows.
const toolsOrders = "orders"

// runSessionPrefix starts the session ID of a toolloop run run:
// "run:PROVIDER:MODEL". Its prompt version records the flags that rebuild
// the run's model and tools, "toolloop run --provider ...", which resume
// compares with its own.
const (
	runSessionPrefix = "run:"
	runPromptPrefix  = "toolloop run"
)

// sourceFlags say which model and tools a toolloop run run uses. run takes
// them; resume needs them again for such a run.
type sourceFlags struct {
	provider, model, baseURL string
	tools, mcp, mcpURL       stringList
	confirmWrites            bool
	// slowWrites widens the order desk's writes (orders.SlowWrites).
	slowWrites time.Duration
}

func addSourceFlags(fs *flag.FlagSet) *sourceFlags {
	f := &sourceFlags{}
	fs.StringVar(&f.provider, "provider", "", "the model's `PROVIDER`: "+providerList)
	fs.StringVar(&f.model, "model", "", "the `MODEL` name the provider knows")
	fs.StringVar(&f.baseURL, "base-url", "", "the provider's API at another `URL` (an OpenAI-compatible server, a proxy)")
	fs.Var(&f.tools, "tools", "built-in tool `SET`s, comma-separated: orders")
	fs.Var(&f.mcp, "mcp", "add the tools of the MCP server started by `'CMD ARGS'` (stdio); repeatable")
	fs.Var(&f.mcpURL, "mcp-url", "add the tools of the MCP server at `URL` (streamable HTTP); repeatable")
	fs.BoolVar(&f.confirmWrites, "confirm-writes", false, "pause the run for a person's confirmation before any write")
	fs.DurationVar(&f.slowWrites, "slow-writes", 0, "with --tools orders: every refund, voucher and cancellation answers `D` after it is applied (a drill for crashes and timeouts mid-write)")
	return f
}

// given reports whether any of the flags was set.
func (f *sourceFlags) given() bool {
	return f.provider != "" || f.model != "" || f.baseURL != "" || len(f.tools) > 0 || len(f.mcp) > 0 ||
		len(f.mcpURL) > 0 || f.confirmWrites || f.slowWrites != 0
}

// toolSets returns the --tools values, split at commas, checked.
func (f *sourceFlags) toolSets() ([]string, error) {
	var sets []string
	for _, v := range f.tools {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if name != toolsOrders {
				return nil, &usageErr{fmt.Sprintf("--tools %q: unknown tool set; want %s (add others with --mcp or --mcp-url)", name, toolsOrders)}
			}
			if !slices.Contains(sets, name) {
				sets = append(sets, name)
			}
		}
	}
	return sets, nil
}

// canonical returns the flags as one would type them again, quoted, each
// introduced by a space: the record a run keeps of them. A base URL is
// kept without credentials, query or fragment.
func (f *sourceFlags) canonical() string {
	var b strings.Builder
	add := func(name, value string) { fmt.Fprintf(&b, " --%s %s", name, shellQuote(value)) }
	add("provider", f.provider)
	add("model", f.model)
	if f.baseURL != "" {
		add("base-url", redactURL(f.baseURL))
	}
	if sets, _ := f.toolSets(); len(sets) > 0 {
		add("tools", strings.Join(sets, ","))
	}
	for _, m := range f.mcp {
		add("mcp", m)
	}
	for _, u := range f.mcpURL {
		add("mcp-url", redactURL(u))
	}
	if f.confirmWrites {
		b.WriteString(" --confirm-writes")
	}
	if f.slowWrites > 0 {
		add("slow-writes", f.slowWrites.String())
	}
	return b.String()
}

// redactURL drops what a URL may carry that a log must not: user info, the
// query, the fragment.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// resumeFlagsOf returns the flags resume needs besides --db for the run
// that start opens: the recorded provider and tool flags of a toolloop run
// run, nothing for others.
func resumeFlagsOf(start *loop.StartInfo) string {
	if start == nil || !strings.HasPrefix(start.SessionID, runSessionPrefix) {
		return ""
	}
	return strings.TrimPrefix(start.PromptVersion, runPromptPrefix)
}

// modelFor builds the provider's SDK client and the adapter over it. The
// clients read nothing from the environment but what getenv gives (the
// API keys), and never retry: the loop does, and logs each attempt. The
// second result is gen_ai.provider.name.
func (c *cli) modelFor(ctx context.Context, f *sourceFlags) (llm.Model, string, error) {
	key := func(names ...string) (string, error) {
		for _, n := range names {
			if v := c.getenv(n); v != "" {
				return v, nil
			}
		}
		fix := "export " + names[0] + "=..."
		if len(names) > 1 {
			fix += " (or " + strings.Join(names[1:], ", ") + ")"
		}
		return "", &usageErr{fmt.Sprintf("%s is not set: %s with your %s API key", names[0], fix, f.provider)}
	}
	switch f.provider {
	case providerOpenAI, providerOpenAIResponses:
		k, err := key("OPENAI_API_KEY")
		if err != nil && f.baseURL == "" {
			return nil, "", &usageErr{err.Error() + ", or pass --base-url URL for an OpenAI-compatible server that needs none"}
		}
		if f.provider == providerOpenAI {
			if f.baseURL != "" {
				// NewCompatible builds a client that reads no OPENAI_*
				// variables and does not retry; an empty key sends a
				// placeholder.
				return openai.NewCompatible(f.baseURL, k, nil), "openai", nil
			}
			ro := openAIOptions("https://api.openai.com/v1/", k)
			return openai.NewChat(openaisdk.Client{Options: ro, Chat: openaisdk.NewChatService(ro...)}, nil), "openai", nil
		}
		base := f.baseURL
		if base == "" {
			base = "https://api.openai.com/v1/"
		}
		if k == "" {
			k = "unused" // a compatible server that checks no key
		}
		ro := openAIOptions(base, k)
		return openai.NewResponses(openaisdk.Client{Options: ro, Responses: responses.NewResponseService(ro...)}, nil), "openai", nil
	case providerAnthropic:
		k, err := key("ANTHROPIC_API_KEY")
		if err != nil {
			return nil, "", err
		}
		ro := []anthropicopt.RequestOption{
			anthropicopt.WithoutEnvironmentDefaults(), // no ANTHROPIC_BASE_URL or ANTHROPIC_CUSTOM_HEADERS behind our back
			anthropicopt.WithAPIKey(k),
			anthropicopt.WithMaxRetries(0),
		}
		if f.baseURL != "" {
			ro = append(ro, anthropicopt.WithBaseURL(f.baseURL))
		}
		return anthropic.New(anthropicsdk.NewClient(ro...), nil), "anthropic", nil
	case providerGemini:
		k, err := key("GEMINI_API_KEY", "GOOGLE_API_KEY")
		if err != nil {
			return nil, "", err
		}
		base := f.baseURL
		if base == "" {
			// Set, so that GOOGLE_GEMINI_BASE_URL cannot redirect the key.
			base = "https://generativelanguage.googleapis.com/"
		}
		// genai.NewClient still looks at GOOGLE_* variables (and logs a
		// warning when both keys are set), but the explicit key, backend
		// and base URL take precedence. It does not retry unless asked to.
		client, err := genai.NewClient(ctx, &genai.ClientConfig{
			APIKey:      k,
			Backend:     genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: base},
		})
		if err != nil {
			return nil, "", fmt.Errorf("gemini client: %w", err)
		}
		return gemini.New(client, nil), "gcp.gemini", nil
	case providerSandbox:
		return orders.DeskModel(), scriptedProvider, nil
	case "":
		return nil, "", &usageErr{"--provider is missing; want one of " + providerList}
	default:
		return nil, "", &usageErr{fmt.Sprintf("--provider %q: unknown provider; want one of %s", f.provider, providerList)}
	}
}

// openAIOptions configure an OpenAI SDK client without its environment
// defaults (OPENAI_BASE_URL, OPENAI_ORG_ID, ...) and without retries.
func openAIOptions(base, key string) []openaiopt.RequestOption {
	return []openaiopt.RequestOption{openaiopt.WithBaseURL(base), openaiopt.WithAPIKey(key), openaiopt.WithMaxRetries(0)}
}

// toolBox is the tools of a toolloop run run and what they hold open.
type toolBox struct {
	reg     *tool.Registry
	sources []*mcp.Source
}

func (b *toolBox) close() {
	for _, s := range b.sources {
		_ = s.Close()
	}
}

// toolsFor builds the run's tools: the built-in sets over the store's
// order book, then each MCP server's, its names prefixed "mcpN_" in the
// order the flags give the servers (commands first), so that servers
// never collide with each other or with the built-in tools.
func (c *cli) toolsFor(ctx context.Context, f *sourceFlags, st *sqlite.Store) (*toolBox, error) {
	sets, err := f.toolSets()
	if err != nil {
		return nil, err
	}
	if f.slowWrites < 0 {
		return nil, &usageErr{"--slow-writes must not be negative"}
	}
	if f.slowWrites > 0 && !slices.Contains(sets, toolsOrders) {
		return nil, &usageErr{"--slow-writes applies to the order desk's tools: add --tools orders"}
	}
	box := &toolBox{}
	var all []*tool.Tool
	if slices.Contains(sets, toolsOrders) {
		book, err := orders.OpenSQLiteBook(ctx, st.DB())
		if err != nil {
			return nil, err
		}
		reg, err := orders.Tools(orders.SlowWrites(book, f.slowWrites))
		if err != nil {
			return nil, err
		}
		for _, name := range reg.Names() {
			t, _ := reg.Lookup(name)
			all = append(all, t)
		}
	}
	n := 0
	connect := func(what string, dial func(ctx context.Context, opts *mcp.Options) (*mcp.Source, error)) error {
		n++
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		src, err := dial(cctx, &mcp.Options{Prefix: fmt.Sprintf("mcp%d_", n)})
		if err != nil {
			return fmt.Errorf("MCP server %s: %w", what, err)
		}
		box.sources = append(box.sources, src)
		tools, err := src.Tools(cctx)
		if err != nil {
			return fmt.Errorf("MCP server %s: %w", what, err)
		}
		all = append(all, tools...)
		return nil
	}
	for _, line := range f.mcp {
		argv, err := splitCommand(line)
		if err != nil || len(argv) == 0 {
			box.close()
			return nil, &usageErr{fmt.Sprintf("--mcp %q: want a command and its arguments, e.g. --mcp 'npx -y @modelcontextprotocol/server-everything'", line)}
		}
		err = connect(shellQuote(line), func(ctx context.Context, opts *mcp.Options) (*mcp.Source, error) {
			// The server outlives the handshake's context: no CommandContext.
			return mcp.ConnectCommand(ctx, exec.Command(argv[0], argv[1:]...), opts)
		})
		if err != nil {
			box.close()
			return nil, err
		}
	}
	for _, u := range f.mcpURL {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			box.close()
			return nil, &usageErr{fmt.Sprintf("--mcp-url %q: want an http or https URL", u)}
		}
		err := connect(redactURL(u), func(ctx context.Context, opts *mcp.Options) (*mcp.Source, error) {
			return mcp.ConnectURL(ctx, u, opts)
		})
		if err != nil {
			box.close()
			return nil, err
		}
	}
	reg, err := tool.NewRegistry(all...)
	if err != nil {
		box.close()
		return nil, err
	}
	box.reg = reg
	return box, nil
}

// splitCommand splits a command line into words as a POSIX shell would
// for simple cases: blanks separate words; single quotes keep everything,
// double quotes keep all but \" and \\, a backslash outside quotes keeps
// the next character.
func splitCommand(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // inside a word
		quote rune
	)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case quote == '"':
			switch {
			case r == '"':
				quote = 0
			case r == '\\' && i+1 < len(rs) && (rs[i+1] == '"' || rs[i+1] == '\\'):
				i++
				cur.WriteRune(rs[i])
			default:
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == '\\':
			if i+1 == len(rs) {
				return nil, errors.New("trailing backslash")
			}
			i++
			cur.WriteRune(rs[i])
			in = true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// budgetFlags are the run's budgets as flags.
type budgetFlags struct {
	maxSteps, maxToolCalls int
	deadline, toolTimeout  time.Duration
	maxTokens              int64
	maxCost                float64
}

func addBudgetFlags(fs *flag.FlagSet) *budgetFlags {
	b := &budgetFlags{}
	fs.IntVar(&b.maxSteps, "max-steps", 0, "at most `N` model turns (default 10)")
	fs.DurationVar(&b.deadline, "deadline", 0, "the run's total time `D`, e.g. 2m (default 10m)")
	fs.DurationVar(&b.toolTimeout, "tool-timeout", 0, "every tool call's timeout `D` (default: each tool's own)")
	fs.IntVar(&b.maxToolCalls, "max-tool-calls", 0, "at most `N` tool calls (default 100)")
	fs.Int64Var(&b.maxTokens, "max-tokens", 0, "at most `N` input plus output tokens (default: no limit)")
	fs.Float64Var(&b.maxCost, "max-cost", 0, "at most `USD` dollars, priced by the model's price (default: no limit)")
	return b
}

func (b *budgetFlags) budgets() (loop.Budgets, error) {
	for name, v := range map[string]float64{
		"max-steps": float64(b.maxSteps), "max-tool-calls": float64(b.maxToolCalls), "max-tokens": float64(b.maxTokens),
		"max-cost": b.maxCost, "deadline": float64(b.deadline), "tool-timeout": float64(b.toolTimeout),
	} {
		if v < 0 {
			return loop.Budgets{}, &usageErr{fmt.Sprintf("--%s must not be negative (0, or leaving it out, means the default)", name)}
		}
	}
	return loop.Budgets{MaxSteps: b.maxSteps, Deadline: b.deadline, ToolTimeout: b.toolTimeout,
		MaxToolCalls: b.maxToolCalls, MaxTokens: b.maxTokens, MaxCost: b.maxCost}, nil
}

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
