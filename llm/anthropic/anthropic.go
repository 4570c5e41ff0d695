// Package anthropic adapts the official Anthropic Go SDK
// (github.com/anthropics/anthropic-sdk-go/v2) to llm.Model, over the
// Messages API.
//
// The adapter takes an SDK client that the caller has already built; it never
// reads the environment (anthropic.NewClient does, even when given a key: it
// reads ANTHROPIC_BASE_URL and ANTHROPIC_CUSTOM_HEADERS unless passed
// option.WithoutEnvironmentDefaults). Build the client with
// option.WithMaxRetries(0): the loop owns retries (it honours Retry-After and
// the run's deadline, and logs every attempt), and an SDK that retries on
// its own hides those attempts and multiplies the loop's.
//
// # Mapping
//
// Going out, system messages become the top-level system field (in order,
// wherever they stood in the history); user and assistant text become text
// blocks; assistant tool calls become tool_use blocks whose input is the
// call's raw arguments; tool results become tool_result blocks linked by
// tool_use_id, with is_error set for error and skipped results and the
// result's JSON content sent as text. Consecutive messages of one role are
// merged into one message, so all results of a turn go back in a single user
// message, and tool_result blocks are placed before any text in it, as the
// API requires.
//
// Arguments that are not a JSON object (the model sent something broken and
// the loop reported it back as an invalid-arguments result) cannot be sent
// as tool_use input, which must be an object: the adapter sends {} for them
// instead, and the call's result still tells the model what went wrong.
//
// Coming back, text blocks are joined; tool_use blocks become llm.ToolCall
// values whose Arguments are the input's JSON exactly as it arrived; thinking
// and server-tool blocks are dropped. Usage.InputTokens counts the whole
// prompt (input_tokens plus cache reads plus cache writes) and
// CachedInputTokens the cache reads; ReasoningTokens comes from
// output_tokens_details.thinking_tokens. A stop_reason of "refusal" is an
// *llm.Error of kind llm.ErrorRefusal.
//
// # Errors
//
// API errors are classified by llm.HTTPError: 429 is rate_limited, 529
// (overloaded_error) and other 5xx are unavailable, both retryable with the
// server's Retry-After; 401 and 403 are authentication; 404 is an unknown
// model; "prompt is too long" is context_length_exceeded. A 429 for a spent
// budget (error code *_spend_limit_reached), or any error the server marks
// with x-should-retry: false, is not retryable. Connection failures are
// retryable unavailable errors; the caller's own cancellation is returned
// as is.
//
// # Limits
//
// The SDK v2 speaks API version 2026-10-21, which rejects temperature, top_p
// and top_k, so Options has no sampling settings. Extended thinking is not
// supported: the API needs the thinking blocks (with their signatures) sent
// back alongside tool calls, and llm.Message does not carry them. Requests
// are not streamed; the SDK refuses a non-streaming request whose MaxTokens
// implies more than ten minutes of generation (about 21,000 tokens) unless
// RequestOptions sets option.WithRequestTimeout.
//
// The package shares its name with the SDK's; import one of them under
// another name when a file needs both.
package anthropic

import (
	"context"
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
}

// Model is an llm.Model backed by the Anthropic Messages API. It is
// immutable and safe for concurrent use.
type Model struct {
	client anthropic.Client
	opts   Options
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
	msg, err := m.client.Messages.New(ctx, params, m.opts.RequestOptions...)
	if err != nil {
		return nil, classify(ctx, err, m.opts.Now())
	}
	return response(msg)
}

var _ llm.Model = (*Model)(nil)
