package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmhttp"
)

// DefaultMaxTokens is the max_tokens sent when Options.MaxTokens is not
// set. The API requires the field.
const DefaultMaxTokens = 4096

// Options configure a Model. The zero value is usable once a model name
// arrives with each request.
type Options struct {
	// Model is the model used when llm.Request.Model is empty, for
	// example "claude-sonnet-4-6".
	Model string
	// MaxTokens caps each response's output tokens; zero or negative
	// means DefaultMaxTokens.
	MaxTokens int64
	// DisableParallelToolUse asks the model for at most one tool call per
	// response (tool_choice auto with disable_parallel_tool_use). It is sent
	// only with requests that carry tools.
	DisableParallelToolUse bool
	// PromptCaching puts cache_control breakpoints in each request so
	// that every turn of a tool loop reads the prompt the turn before it
	// wrote from Anthropic's prompt cache: one after the tools and system
	// prompt, one at the end of the previous turn's request, one at the
	// end of this one (see the package documentation, Prompt caching). A
	// loop resends its whole history each turn, which is what the cache is
	// for: reads cost a tenth of the input rate, writes 1.25 times it (2
	// times for CacheTTL1h). Reads show up in Usage.CachedInputTokens,
	// writes in Usage.CacheWriteTokens.
	PromptCaching bool
	// CacheTTL is how long a cache entry lives after its last use:
	// CacheTTL5m (also "", the API's default) or CacheTTL1h. It applies
	// only with PromptCaching.
	CacheTTL string
	// StopSequences end generation when the model writes one of them
	// (stop_reason "stop_sequence").
	StopSequences []string
	// UserID is sent as metadata.user_id: an opaque identifier of the end
	// user, for Anthropic's abuse detection. Never put personal data in it.
	UserID string
	// RequestOptions are passed to every Messages.New and NewStreaming
	// call, after the client's own options: per-request headers, a request
	// timeout, or option.WithJSONSet for a field Options does not cover.
	RequestOptions []option.RequestOption
	// Now is the clock used to read an HTTP-date Retry-After; nil means
	// time.Now.
	Now func() time.Time
	// MaxResponseBytes caps the body of each reply: 0 means
	// llmhttp.DefaultMaxResponseBytes, negative no cap. A larger reply fails
	// with a non-retryable llm.KindBadResponse that names the cap.
	MaxResponseBytes int64
	// MaxStreamBytes caps the body of each streamed reply (Stream): 0
	// means llmhttp.DefaultMaxStreamBytes, negative no cap. An event stream
	// repeats its framing with every piece of text, so it needs a larger
	// cap than the same reply as JSON. A larger reply fails with a
	// non-retryable llm.KindBadResponse that names the cap.
	MaxStreamBytes int64

	// ThinkingBudget turns on extended thinking with a fixed budget
	// (thinking type "enabled", budget_tokens): the most output tokens the
	// model may spend thinking before it answers. 0 leaves thinking off;
	// otherwise it must be at least MinThinkingBudget and, as thinking
	// counts toward max_tokens, less than MaxTokens (unless
	// InterleavedThinking is set). Newer models take only
	// AdaptiveThinking and refuse this with a 400.
	ThinkingBudget int64
	// AdaptiveThinking turns on adaptive thinking (thinking type
	// "adaptive"): the model decides whether and how much to think, and
	// thinks between tool calls too. It excludes ThinkingBudget. Older
	// models (before the 4.6 generation) refuse it with a 400.
	AdaptiveThinking bool
	// NoOutputFormat leaves llm.Request.Output out of the request: no
	// output_config.format (structured outputs), the answer held to its
	// schema by the loop's validation alone. For models without
	// structured outputs (before Claude Sonnet 4.5, Opus 4.1 and Haiku
	// 4.5), and for schemas using what structured outputs refuse (see
	// Anthropic's list of supported JSON Schema features), which would
	// otherwise be a 400.
	NoOutputFormat bool
	// InterleavedThinking lets a model with a ThinkingBudget think between
	// tool calls as well as before its first, by sending the beta header
	// anthropic-beta: interleaved-thinking-2025-05-14; the budget may then
	// exceed MaxTokens. Adaptive thinking interleaves without it.
	InterleavedThinking bool
	// ServerClearToolUses, when set, has the API clear old tool results
	// on its side (context editing, a beta); see ServerClearToolUses.
	ServerClearToolUses *ServerClearToolUses
}

// MinThinkingBudget is the smallest ThinkingBudget the API accepts.
const MinThinkingBudget = 1024

// interleavedThinkingBeta is the beta name that lets a thinking budget
// interleave thinking with tool calls.
const interleavedThinkingBeta = anthropic.AnthropicBetaInterleavedThinking2025_05_14

// Validate reports the first setting of o that the API would refuse, or
// that makes no sense with another, so that a command line can say so
// before its first request. New takes any Options; a Model built from
// invalid ones fails each Generate with this error.
func (o Options) Validate() error {
	if err := checkCacheTTL(o.CacheTTL); err != nil {
		return err
	}
	if err := o.ServerClearToolUses.validate(); err != nil {
		return err
	}
	maxTokens := o.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	switch b := o.ThinkingBudget; {
	case b < 0 || (b > 0 && b < MinThinkingBudget):
		return fmt.Errorf("anthropic: Options.ThinkingBudget is %d; it must be 0 (thinking off) or at least %d", b, MinThinkingBudget)
	case b > 0 && o.AdaptiveThinking:
		return errors.New("anthropic: Options.ThinkingBudget and AdaptiveThinking are both set; set one: adaptive thinking chooses its own budget")
	case b >= maxTokens && !o.InterleavedThinking:
		return fmt.Errorf("anthropic: Options.ThinkingBudget (%d) must be less than MaxTokens (%d), which counts the thinking too: raise MaxTokens or lower the budget", b, maxTokens)
	case o.InterleavedThinking && b == 0:
		if o.AdaptiveThinking {
			return errors.New("anthropic: Options.InterleavedThinking is for a ThinkingBudget; adaptive thinking already thinks between tool calls")
		}
		return errors.New("anthropic: Options.InterleavedThinking needs thinking on: set ThinkingBudget (or use AdaptiveThinking, which interleaves by itself)")
	}
	return nil
}

// Model is an llm.Model backed by the Anthropic Messages API. It is
// immutable and safe for concurrent use.
type Model struct {
	client anthropic.Client
	opts   Options
	// err is what Options.Validate said of opts: every Generate fails
	// with it, before anything is sent.
	err error
	// reqOpts are the options of every request: the caller's, then the
	// response guard.
	reqOpts []option.RequestOption
}

// New returns a Model that sends its requests through client. opts may be
// nil; it is copied, so later changes to it have no effect.
func New(client anthropic.Client, opts *Options) *Model {
	m := &Model{client: client}
	if opts != nil {
		m.opts = *opts
		m.opts.StopSequences = slices.Clone(opts.StopSequences)
		// Clip so that the SDK's appends to the variadic slice can never
		// write into a backing array shared by concurrent calls.
		m.opts.RequestOptions = slices.Clip(slices.Clone(opts.RequestOptions))
		if sc := opts.ServerClearToolUses; sc != nil {
			c := *sc
			c.ExcludeTools = slices.Clone(sc.ExcludeTools)
			m.opts.ServerClearToolUses = &c
		}
	}
	if m.opts.MaxTokens <= 0 {
		m.opts.MaxTokens = DefaultMaxTokens
	}
	if m.opts.Now == nil {
		m.opts.Now = time.Now
	}
	m.err = m.opts.Validate()
	// The guard is the innermost middleware (request options come after
	// the client's), so it checks a body before any other reads it.
	guard := llmhttp.ResponseGuard{Provider: "anthropic", MaxBytes: m.opts.MaxResponseBytes, MaxStreamBytes: m.opts.MaxStreamBytes}
	m.reqOpts = slices.Clip(append(slices.Clone(m.opts.RequestOptions),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			res, err := next(req)
			return guard.Check(res), err
		})))
	if m.opts.InterleavedThinking {
		m.reqOpts = append(m.reqOpts, option.WithMiddleware(addBeta(interleavedThinkingBeta)))
	}
	if sc := m.opts.ServerClearToolUses; sc != nil && m.err == nil {
		m.reqOpts = append(m.reqOpts, sc.requestOptions()...)
	}
	m.reqOpts = slices.Clip(m.reqOpts)
	return m
}

// addBeta adds name to a request's anthropic-beta header, joined by commas
// with the names the client or the caller's options already put there (as
// the SDK does for its beta calls).
func addBeta(name string) option.Middleware {
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		names := req.Header.Values("anthropic-beta")
		for _, v := range names {
			for n := range strings.SplitSeq(v, ",") {
				if strings.TrimSpace(n) == name {
					return next(req)
				}
			}
		}
		req.Header.Set("anthropic-beta", strings.Join(append(names, name), ","))
		return next(req)
	}
}

// Generate sends one Messages API request and maps the reply. Failures are
// *llm.Error values classified for the loop's retry decision, except the
// caller's own cancellation, which is returned as is.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	bind := &requestBinding{req: req}
	msg, err := m.client.Messages.New(ctx, params, m.requestOptions(bind, &params)...)
	if err != nil {
		return nil, classify(ctx, err, m.opts.Now())
	}
	resp, err := response(msg, bind.replyPrefix)
	if err != nil {
		return nil, err
	}
	resp.DroppedState = llm.ForeignState(req.Messages, provider)
	return resp, nil
}

// requestOptions are the options of the request for req: the model's,
// and when the history changed under thinking it sends back, those that
// ask the API to drop that thinking (binding.go).
func (m *Model) requestOptions(bind *requestBinding, p *anthropic.MessageNewParams) []option.RequestOption {
	if !bind.prefixChanged() {
		return m.reqOpts
	}
	return append(slices.Clip(m.reqOpts), m.dropBlockOptions(p)...)
}

var _ llm.Model = (*Model)(nil)
