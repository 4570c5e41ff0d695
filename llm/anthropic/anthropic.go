package anthropic

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
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
	// PromptCaching sets the request's top-level cache_control, so the API
	// caches the prompt up to its last cacheable block. A loop resends a
	// growing history every turn, which is what the cache is for; cache
	// reads show up in Usage.CachedInputTokens.
	PromptCaching bool
	// StopSequences end generation when the model writes one of them
	// (stop_reason "stop_sequence").
	StopSequences []string
	// UserID is sent as metadata.user_id: an opaque identifier of the end
	// user, for Anthropic's abuse detection. Never put personal data in it.
	UserID string
	// RequestOptions are passed to every Messages.New call, after the
	// client's own options: per-request headers, a request timeout, or
	// option.WithJSONSet for a field Options does not cover.
	RequestOptions []option.RequestOption
	// Now is the clock used to read an HTTP-date Retry-After; nil means
	// time.Now.
	Now func() time.Time
	// MaxResponseBytes caps the body of each reply: 0 means
	// llm.DefaultMaxResponseBytes, negative no cap. A larger reply fails
	// with a non-retryable llm.ErrorBadResponse that names the cap.
	MaxResponseBytes int64
}

// Model is an llm.Model backed by the Anthropic Messages API. It is
// immutable and safe for concurrent use.
type Model struct {
	client anthropic.Client
	opts   Options
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
	}
	if m.opts.MaxTokens <= 0 {
		m.opts.MaxTokens = DefaultMaxTokens
	}
	if m.opts.Now == nil {
		m.opts.Now = time.Now
	}
	// The guard is the innermost middleware (request options come after
	// the client's), so it checks a body before any other reads it.
	guard := llm.ResponseGuard{Provider: "anthropic", MaxBytes: m.opts.MaxResponseBytes}
	m.reqOpts = slices.Clip(append(slices.Clone(m.opts.RequestOptions),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			res, err := next(req)
			return guard.Check(res), err
		})))
	return m
}

// Generate sends one Messages API request and maps the reply. Failures are
// *llm.Error values classified for the loop's retry decision, except the
// caller's own cancellation, which is returned as is.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	msg, err := m.client.Messages.New(ctx, params, m.reqOpts...)
	if err != nil {
		return nil, classify(ctx, err, m.opts.Now())
	}
	return response(msg)
}

var _ llm.Model = (*Model)(nil)
