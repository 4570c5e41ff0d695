package cli

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	anthropicsdk "github.com/anthropics/anthropic-sdk-go/v2"
	anthropicopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	openaisdk "github.com/openai/openai-go/v3"
	openaiopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/anthropic"
	"github.com/toolloop/toolloop/llm/gemini"
	"github.com/toolloop/toolloop/llm/openai"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
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
	// mcpEnv names the variables --mcp servers get (NAME or NAME=VALUE).
	mcpEnv stringList
	// mcpConfig is the --mcp-config file: compensations, all-or-nothing
	// groups and trust for the servers' tools (readMCPConfig).
	mcpConfig     string
	confirmWrites bool
	// taintPolicy is --taint-policy: default, strict or off; "" when
	// not given, which is default (taintProfile).
	taintPolicy string
	// slowWrites widens the order desk's writes (orders.SlowWrites).
	slowWrites time.Duration
	// modelTimeout bounds one model request (loop.Config.ModelTimeout).
	modelTimeout time.Duration
	// maxResponseBytes caps one reply's body (the adapters'
	// MaxResponseBytes): 0 for llmhttp.DefaultMaxResponseBytes.
	maxResponseBytes int64
	// maxStreamBytes caps one streamed reply's body (the adapters'
	// MaxStreamBytes): 0 for llmhttp.DefaultMaxStreamBytes.
	maxStreamBytes int64
	// How the model thinks, fixed for the run (a provider such as
	// Anthropic refuses settings that change within a tool loop, so they
	// are part of the record resume checks): reasoningEffort for OpenAI
	// and Gemini 3, thinkingBudget for Anthropic and Gemini 2.5,
	// adaptiveThinking for Anthropic, showReasoning for summaries.
	reasoningEffort  string
	thinkingBudget   int64
	adaptiveThinking bool
	showReasoning    bool
	// noPromptCache turns prompt caching off: no cache_control breakpoints
	// for Anthropic, no prompt_cache_key for OpenAI. cacheTTL is
	// Anthropic's cache lifetime, "5m" or "1h". Neither changes what the
	// model sees, so neither is part of the record resume checks.
	noPromptCache bool
	cacheTTL      string
	// serverClear is the input tokens past which Anthropic clears old
	// tool results on its side (0: it does not).
	serverClear int64
}

// reasoningEfforts are the values --reasoning-effort takes: OpenAI's
// efforts (its SDK's list); Gemini takes minimal to high, and its
// adapter's Validate refuses the others.
var reasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// addSourceFlags defines the model and tool flags on fs; --model only if
// fs has none yet.
func addSourceFlags(fs *flag.FlagSet) *sourceFlags {
	f := &sourceFlags{}
	fs.StringVar(&f.provider, "provider", "", "the model's `PROVIDER`: "+providerList)
	if fs.Lookup("model") == nil { // toolloop run has its own, for every backend
		fs.StringVar(&f.model, "model", "", "the `MODEL` name the provider knows")
	}
	fs.Var(httpURLFlag{&f.baseURL}, "base-url", "the provider's API at another `URL` (an OpenAI-compatible server, a proxy)")
	fs.Var(&f.tools, "tools", "built-in tool `SET`s, comma-separated: orders")
	fs.Var(&f.mcp, "mcp", "add the tools of the MCP server started by `'CMD ARGS'` (stdio); repeatable")
	fs.Var(&f.mcpEnv, "mcp-env", "pass the variable `NAME` (or set NAME=VALUE) to the --mcp servers, which otherwise get only HOME, LOGNAME, PATH, SHELL, TERM and USER; repeatable")
	fs.Var(&f.mcpURL, "mcp-url", "add the tools of the MCP server at `URL` (streamable HTTP); repeatable")
	fs.StringVar(&f.mcpConfig, "mcp-config", "", "compensations, all-or-nothing groups and trust for the MCP servers' tools, from the JSON `FILE` (see toolloop help run)")
	fs.Var(durationFlag{&f.modelTimeout}, "model-timeout", "give up on a model request after `D` and try again, as for a rate limit (default 5m)")
	fs.Var(byteCapFlag{&f.maxResponseBytes}, "max-response-bytes", "fail a model reply larger than `N` bytes (default 8 MiB; -1 for no cap)")
	fs.Var(byteCapFlag{&f.maxStreamBytes}, "max-stream-bytes", "fail a streamed model reply larger than `N` bytes (default 64 MiB; -1 for no cap)")
	fs.Var(choiceFlag{&f.reasoningEffort, reasoningEfforts}, "reasoning-effort", "how hard a reasoning model thinks, `E`: "+strings.Join(reasoningEfforts, ", ")+" (openai, openai-responses; gemini's thinking level: minimal to high)")
	fs.Int64Var(&f.thinkingBudget, "thinking-budget", 0, "let the model think with up to `N` tokens a turn (anthropic: at least 1024, interleaved with tool calls; gemini: -1 lets the model decide)")
	fs.BoolVar(&f.adaptiveThinking, "adaptive-thinking", false, "anthropic: the model decides how much to think")
	fs.BoolVar(&f.showReasoning, "show-reasoning", false, "ask for summaries of the model's reasoning, kept in the log (openai-responses, gemini)")
	fs.BoolVar(&f.noPromptCache, "no-prompt-cache", false, "do not ask the provider to cache the prompt (caching is on: Anthropic cache breakpoints, an OpenAI prompt_cache_key per run)")
	fs.StringVar(&f.cacheTTL, "cache-ttl", "", "anthropic: keep the prompt cache `TTL` after its last use, 5m (the default; writes cost 1.25x input) or 1h (writes cost 2x)")
	fs.Int64Var(&f.serverClear, "server-clear-tool-uses", 0, "anthropic: have the API clear old tool results on its side once a request passes `TOKENS` input tokens (context editing, a beta; not in the run's log)")
	fs.BoolVar(&f.confirmWrites, "confirm-writes", false, "pause the run for a person's confirmation before any write")
	fs.Var(choiceFlag{&f.taintPolicy, []string{"default", "strict", "off"}}, "taint-policy", "pause for a person's confirmation where untrusted tool results (every --mcp server's) could steer a call, `P`: default (the default), strict or off")
	fs.Var(durationFlag{&f.slowWrites}, "slow-writes", "with --tools orders: every refund, voucher and cancellation answers `D` after it is applied (a drill for crashes and timeouts mid-write)")
	return f
}

// policy is the policy the flags ask for (nil: allow every tool).
func (f *sourceFlags) policy() policy.Policy {
	var ps []policy.Policy
	if f.confirmWrites {
		ps = append(ps, policy.ConfirmWrites())
	}
	if p := f.taintProfile(); p != policy.ProfileOff {
		ps = append(ps, policy.TaintRules(p))
	}
	switch len(ps) {
	case 0:
		return nil
	case 1:
		return ps[0]
	}
	return policy.Chain(ps...)
}

// taintProfile is the taint policy's profile: the flag's, or default
// when it was not given, since a tool's untrusted result (an MCP
// server's) should never steer a run unnoticed.
func (f *sourceFlags) taintProfile() policy.Profile {
	if f.taintPolicy == "" {
		return policy.ProfileDefault
	}
	p, _ := policy.ParseProfile(f.taintPolicy)
	return p
}

// given reports whether any of the flags was set.
func (f *sourceFlags) given() bool {
	return f.provider != "" || f.model != "" || f.baseURL != "" || len(f.tools) > 0 || len(f.mcp) > 0 ||
		len(f.mcpEnv) > 0 || len(f.mcpURL) > 0 || f.mcpConfig != "" || f.confirmWrites || f.taintPolicy != "" || f.slowWrites != 0 ||
		f.reasoningEffort != "" || f.thinkingBudget != 0 || f.adaptiveThinking || f.showReasoning
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
	for _, e := range f.mcpEnv {
		name, _, _ := strings.Cut(e, "=") // a value may be a secret
		add("mcp-env", name)
	}
	for _, u := range f.mcpURL {
		add("mcp-url", redactURL(u))
	}
	if f.mcpConfig != "" {
		// The path: a resumed run reads the file again, for the
		// compensations and trust its tools declare; made absolute, so
		// that a run resumed from another directory finds it.
		path := f.mcpConfig
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		add("mcp-config", path)
	}
	if f.confirmWrites {
		b.WriteString(" --confirm-writes")
	}
	// Always recorded, so that a resumed run keeps the profile it began
	// with whatever the default becomes.
	add("taint-policy", string(f.taintProfile()))
	if f.slowWrites > 0 {
		add("slow-writes", f.slowWrites.String())
	}
	if f.reasoningEffort != "" {
		add("reasoning-effort", f.reasoningEffort)
	}
	if f.thinkingBudget != 0 {
		add("thinking-budget", strconv.FormatInt(f.thinkingBudget, 10))
	}
	if f.adaptiveThinking {
		b.WriteString(" --adaptive-thinking")
	}
	if f.showReasoning {
		b.WriteString(" --show-reasoning")
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

// noStreamFlag begins the recorded flags of a run that asked for whole
// turns. The canonical flags always begin with --provider, so nothing
// else can be taken for it.
const noStreamFlag = " --no-stream"

// recordedFlags returns what a toolloop run run records of its flags:
// --no-stream if it does not stream, then the canonical source flags.
// Resume takes them all, and follows the run's choice unless told
// otherwise.
func recordedFlags(f *sourceFlags, stream bool) string {
	if stream {
		return f.canonical()
	}
	return noStreamFlag + f.canonical()
}

// splitRecorded splits a run's recorded flags (see recordedFlags) into the
// source flags and whether the run streamed. Runs recorded before the
// choice was (which resumed with whole turns) count as streamed, as toolloop
// run's default is.
func splitRecorded(recorded string) (source string, stream bool) {
	source, noStream := strings.CutPrefix(recorded, noStreamFlag)
	return source, !noStream
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
	if err := f.checkReasoning(); err != nil {
		return nil, "", err
	}
	if err := f.checkCache(); err != nil {
		return nil, "", err
	}
	if err := f.checkServerClear(); err != nil {
		return nil, "", err
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
				return openai.NewCompatible(f.baseURL, k, f.chatOptions()), "openai", nil
			}
			ro := openAIOptions("https://api.openai.com/v1/", k)
			return openai.NewChat(openaisdk.Client{Options: ro, Chat: openaisdk.NewChatService(ro...)},
				f.chatOptions()), "openai", nil
		}
		base := f.baseURL
		if base == "" {
			base = "https://api.openai.com/v1/"
		}
		if k == "" {
			k = "unused" // a compatible server that checks no key
		}
		ro := openAIOptions(base, k)
		opts := &openai.ResponsesOptions{MaxResponseBytes: f.maxResponseBytes, MaxStreamBytes: f.maxStreamBytes, ReasoningEffort: f.reasoningEffort,
			CacheKeyPerRun: !f.noPromptCache}
		if f.showReasoning {
			opts.ReasoningSummary = "auto"
		}
		return openai.NewResponses(openaisdk.Client{Options: ro, Responses: responses.NewResponseService(ro...)}, opts), "openai", nil
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
		opts := anthropic.Options{MaxResponseBytes: f.maxResponseBytes, MaxStreamBytes: f.maxStreamBytes, ThinkingBudget: f.thinkingBudget,
			AdaptiveThinking: f.adaptiveThinking, InterleavedThinking: f.thinkingBudget > 0,
			PromptCaching: !f.noPromptCache, CacheTTL: f.cacheTTL}
		if err := opts.Validate(); err != nil {
			return nil, "", &usageErr{fmt.Sprintf("--thinking-budget %d: %v", f.thinkingBudget, err)}
		}
		if f.serverClear > 0 {
			opts.ServerClearToolUses = &anthropic.ServerClearToolUses{TriggerTokens: f.serverClear}
		}
		return anthropic.New(anthropicsdk.NewClient(ro...), &opts), "anthropic", nil
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
		opts := gemini.Options{MaxResponseBytes: f.maxResponseBytes, MaxStreamBytes: f.maxStreamBytes, ThinkingLevel: f.reasoningEffort, IncludeThoughts: f.showReasoning}
		if f.thinkingBudget != 0 {
			opts.ThinkingBudget = new(int32(f.thinkingBudget))
		}
		if err := opts.Validate(); err != nil {
			return nil, "", &usageErr{err.Error()}
		}
		return gemini.New(client, &opts), "gcp.gemini", nil
	case providerSandbox:
		return piecewise{orders.DeskModel()}, scriptedProvider, nil
	case "":
		return nil, "", &usageErr{"--provider is missing; want one of " + providerList}
	default:
		return nil, "", &usageErr{fmt.Sprintf("--provider %q: unknown provider; want one of %s", f.provider, providerList)}
	}
}

// chatOptions are the Chat Completions adapter's options from the flags.
func (f *sourceFlags) chatOptions() *openai.ChatOptions {
	return &openai.ChatOptions{MaxResponseBytes: f.maxResponseBytes, MaxStreamBytes: f.maxStreamBytes, ReasoningEffort: f.reasoningEffort,
		CacheKeyPerRun: !f.noPromptCache}
}

// checkCache refuses a --cache-ttl that is not a lifetime Anthropic
// offers, or that is given where it would do nothing.
func (f *sourceFlags) checkCache() error {
	switch {
	case f.cacheTTL == "":
		return nil
	case f.cacheTTL != anthropic.CacheTTL5m && f.cacheTTL != anthropic.CacheTTL1h:
		return &usageErr{fmt.Sprintf("--cache-ttl %q: want 5m or 1h", f.cacheTTL)}
	case f.provider != providerAnthropic:
		return &usageErr{fmt.Sprintf("--cache-ttl: only Anthropic's prompt cache takes a lifetime; --provider %s keeps its cache as it sees fit", f.provider)}
	case f.noPromptCache:
		return &usageErr{"--cache-ttl and --no-prompt-cache: the lifetime is for a cache that --no-prompt-cache turns off; drop one"}
	}
	return nil
}

// checkServerClear refuses a --server-clear-tool-uses that is negative or
// given for a provider without server-side clearing.
func (f *sourceFlags) checkServerClear() error {
	switch {
	case f.serverClear < 0:
		return &usageErr{fmt.Sprintf("--server-clear-tool-uses is %d; want the input tokens past which the API clears (0: it does not)", f.serverClear)}
	case f.serverClear > 0 && f.provider != providerAnthropic:
		return &usageErr{fmt.Sprintf("--server-clear-tool-uses: only Anthropic's API clears tool results on its side; --provider %s has no such edit (the run's own clearing, on by default, works with every provider)", f.provider)}
	}
	return nil
}

// cachePrice returns p as the run's cache is billed: with --cache-ttl 1h,
// Anthropic charges twice the input rate for a cache write instead of the
// 1.25 times that the price table gives for the five-minute cache. A
// higher write price (from a --prices file) is kept: it is what the user
// says they are billed.
func (f *sourceFlags) cachePrice(p loop.Price) loop.Price {
	if f.provider == providerAnthropic && !f.noPromptCache && f.cacheTTL == anthropic.CacheTTL1h {
		p.CacheWriteInputPerMTok = max(p.CacheWriteInputPerMTok, 2*p.InputPerMTok)
	}
	return p
}

// checkReasoning refuses the reasoning flags the provider has no use for,
// rather than running without what was asked.
func (f *sourceFlags) checkReasoning() error {
	refuse := func(flag, why string) error {
		return &usageErr{fmt.Sprintf("%s: %s", flag, why)}
	}
	switch f.provider {
	case providerOpenAI, providerOpenAIResponses:
		if f.thinkingBudget != 0 || f.adaptiveThinking {
			return refuse("--thinking-budget/--adaptive-thinking", "OpenAI models take --reasoning-effort instead")
		}
		if f.showReasoning && f.provider == providerOpenAI {
			return refuse("--show-reasoning", "Chat Completions shows no reasoning; use --provider openai-responses")
		}
	case providerAnthropic:
		if f.reasoningEffort != "" {
			return refuse("--reasoning-effort", "Anthropic models take --thinking-budget N or --adaptive-thinking instead")
		}
		if f.showReasoning {
			return refuse("--show-reasoning", "Anthropic shows its models' thinking whenever thinking is on")
		}
	case providerGemini:
		if f.adaptiveThinking {
			return refuse("--adaptive-thinking", "for Gemini, --thinking-budget -1 lets the model decide")
		}
		if f.thinkingBudget < math.MinInt32 || f.thinkingBudget > math.MaxInt32 {
			return refuse("--thinking-budget", fmt.Sprintf("%d is out of range", f.thinkingBudget))
		}
	case providerSandbox:
		if f.reasoningEffort != "" || f.thinkingBudget != 0 || f.adaptiveThinking || f.showReasoning {
			return refuse("--reasoning-effort/--thinking-budget/--adaptive-thinking/--show-reasoning", "the sandbox's model does not think")
		}
	}
	return nil
}

// openAIOptions configure an OpenAI SDK client without its environment
// defaults (OPENAI_BASE_URL, OPENAI_ORG_ID, ...) and without retries.
func openAIOptions(base, key string) []openaiopt.RequestOption {
	return []openaiopt.RequestOption{openaiopt.WithBaseURL(base), openaiopt.WithAPIKey(key), openaiopt.WithMaxRetries(0)}
}
