package llm

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"
)

// Model is the model-client boundary: it takes messages and tool
// definitions and returns a final answer or tool-call proposals. It never
// executes a tool.
//
// Generate must not modify req or anything it points to, and may keep them:
// the loop gives each turn a Request of its own and never changes a
// request, its messages or its tool definitions once sent.
type Model interface {
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// ModelFunc adapts a function to the Model interface.
type ModelFunc func(ctx context.Context, req *Request) (*Response, error)

// Generate calls f.
func (f ModelFunc) Generate(ctx context.Context, req *Request) (*Response, error) {
	return f(ctx, req)
}

// ToolDefinition is what the model is told about a tool.
type ToolDefinition struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Request is one model turn's input.
type Request struct {
	Model    string           `json:"model"`
	Messages []Message        `json:"messages"`
	Tools    []ToolDefinition `json:"tools,omitempty"`
	// Step is the 1-based number of this model turn within the run.
	Step int `json:"step"`
	// CacheKey, when set, names the run the request belongs to, for a
	// provider that routes the requests sharing a key to one prompt cache
	// (OpenAI's prompt_cache_key). Every turn of a run should carry the
	// same key, and other runs another. Empty lets an adapter that uses
	// one derive it from the conversation's start (see its doc).
	CacheKey string `json:"cache_key,omitempty"`
	// Output, when set, asks for the final answer as JSON that matches a
	// JSON Schema, through the provider's native structured output where
	// it has one (each adapter's doc says how, or that it has none). The
	// model may still call tools; the answer it gives with no calls is
	// the one held to the schema. A provider's constraint is a help, not
	// a proof: the loop validates the answer in any case.
	Output *OutputFormat `json:"output,omitempty"`
}

// OutputFormat is the JSON Schema a final answer must match.
type OutputFormat struct {
	// Name names the schema where a provider asks for one (OpenAI's
	// json_schema.name: letters, digits, '_' and '-', at most 64).
	Name string `json:"name"`
	// Schema is the JSON Schema (draft 2020-12), a JSON object.
	Schema json.RawMessage `json:"schema"`
	// Strict asks a provider that has a strict mode (OpenAI) to hold
	// its output to the schema exactly; such a mode accepts only a
	// subset of JSON Schema (every property required, no additional
	// properties), and refuses the request otherwise.
	Strict bool `json:"strict,omitempty"`
}

// Response is one model turn's output. Message has role assistant.
type Response struct {
	ID           string  `json:"id,omitempty"`
	Model        string  `json:"model,omitempty"`
	Message      Message `json:"message"`
	Usage        Usage   `json:"usage"`
	FinishReason string  `json:"finish_reason,omitempty"`
	// DroppedState counts the pieces of provider state (llm.ProviderState)
	// the request could not carry back: another provider's, which the
	// adapter leaves out on purpose (a history moved from one provider to
	// another keeps its text and calls but not the other's opaque state),
	// and, where an adapter says so in its doc, its own state that no
	// longer fits an edited message or a call that had none. It is
	// recorded with the response, so the run's log says so.
	DroppedState int `json:"dropped_state,omitempty"`
	// DroppedReasoning counts the reasoning blocks of earlier turns that
	// the provider dropped from the request instead of showing them to
	// the model, as it reported (Anthropic's input_transformations, for
	// thinking whose conversation changed since it was written): this
	// turn was made without that earlier reasoning.
	DroppedReasoning int `json:"dropped_reasoning,omitempty"`
	// Truncated is set when the reply stopped at the output token limit
	// (OpenAI's finish_reason "length" or a Responses reply incomplete for
	// max_output_tokens, Anthropic's stop_reason "max_tokens", Gemini's
	// finishReason MAX_TOKENS): its text is cut off. FinishReason keeps the
	// provider's own word; this is the same fact for every provider.
	Truncated bool `json:"truncated,omitempty"`
	// NotStreamed is set when a streamed request (llm.StreamingModel) was
	// answered with the whole reply as one JSON body, not an event stream:
	// a server or a proxy that does not stream. The turn is used as it
	// is (its deltas come all at once, at the end); the log records
	// that its progress could not be shown as it came.
	NotStreamed bool `json:"not_streamed,omitempty"`
}

// Usage counts tokens for one turn or, summed, for a run.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// CachedInputTokens are the input tokens read from the provider's
	// prompt cache, part of InputTokens.
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
	// CacheWriteTokens are the input tokens written to the provider's
	// prompt cache (Anthropic's cache_creation_input_tokens), part of
	// InputTokens; some providers charge more for them.
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// CacheWrite1hTokens are the cache writes to a cache that lives an
	// hour (Anthropic's ttl "1h", billed above its 5-minute writes),
	// part of CacheWriteTokens.
	CacheWrite1hTokens int64 `json:"cache_write_1h_tokens,omitempty"`
	// ReasoningTokens are the output tokens the model spent thinking,
	// part of OutputTokens.
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
}

// Add returns the sum of u and v, each count saturating at the largest
// int64 rather than wrapping round to a negative number.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:        addSat(u.InputTokens, v.InputTokens),
		OutputTokens:       addSat(u.OutputTokens, v.OutputTokens),
		CachedInputTokens:  addSat(u.CachedInputTokens, v.CachedInputTokens),
		CacheWriteTokens:   addSat(u.CacheWriteTokens, v.CacheWriteTokens),
		CacheWrite1hTokens: addSat(u.CacheWrite1hTokens, v.CacheWrite1hTokens),
		ReasoningTokens:    addSat(u.ReasoningTokens, v.ReasoningTokens),
	}
}

// Total is input plus output tokens (cached and reasoning tokens are already
// part of those two counts), saturating like Add.
func (u Usage) Total() int64 { return addSat(u.InputTokens, u.OutputTokens) }

// Clamped returns u with what no provider can mean made possible, never
// counting fewer tokens than the report does: a negative count is zero,
// cached and cache-write input tokens are at most the input tokens
// (together), and reasoning tokens more than the output tokens are read as
// a provider that counts them apart from the output (xAI's
// completion_tokens leaves them out), so the output becomes the sum. A
// provider's report is not trusted to keep a budget honest: a negative
// count would otherwise offset real usage, so that a token or cost budget
// never trips, and cutting the reasoning down to the output would drop
// tokens the provider billed.
func (u Usage) Clamped() Usage {
	u.InputTokens = max(u.InputTokens, 0)
	u.OutputTokens = max(u.OutputTokens, 0)
	u.CachedInputTokens = min(max(u.CachedInputTokens, 0), u.InputTokens)
	u.CacheWriteTokens = min(max(u.CacheWriteTokens, 0), u.InputTokens-u.CachedInputTokens)
	u.CacheWrite1hTokens = min(max(u.CacheWrite1hTokens, 0), u.CacheWriteTokens)
	u.ReasoningTokens = max(u.ReasoningTokens, 0)
	if u.ReasoningTokens > u.OutputTokens {
		u.OutputTokens = addSat(u.OutputTokens, u.ReasoningTokens)
	}
	return u
}

// WithTotal reconciles u with the total the provider reported for the
// same turn (OpenAI's total_tokens, Gemini's totalTokenCount): when the
// total is larger than input plus output, the parts left tokens out, and
// the output becomes the total less the input, since a count that
// leaves something out leaves out the output's reasoning (xAI reports
// prompt 307, completion 26, reasoning 227, total 560: the output is 253).
// The tokens the provider billed are what the budgets must see. A total
// of zero or less (none reported), or one the parts already reach,
// changes nothing.
func (u Usage) WithTotal(total int64) Usage {
	if total > u.Total() {
		u.OutputTokens = total - max(u.InputTokens, 0)
	}
	return u
}

// addSat adds two counts, saturating at the int64 range's ends.
func addSat(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// Error is a failed model request, classified so the loop knows whether a
// retry can help. Adapters return it; any other error is treated as
// non-retryable.
type Error struct {
	// Kind classifies the failure, from the model-request and shared
	// groups of ErrorKind; it leads the error's text.
	Kind ErrorKind
	// StatusCode is the HTTP status, when there was one.
	StatusCode int
	// Retryable is true for failures a later attempt may not meet
	// (rate limits, overload, 5xx).
	Retryable bool
	// RetryAfter is the provider's requested wait, if it gave one.
	RetryAfter time.Duration
	// Err is the underlying failure.
	Err error
}

func (e *Error) Error() string {
	msg := "model request failed"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Kind != "" {
		return string(e.Kind) + ": " + msg
	}
	return msg
}

// Unwrap returns the underlying failure.
func (e *Error) Unwrap() error { return e.Err }

// IsRetryable reports whether err is a model failure worth retrying.
func IsRetryable(err error) bool {
	var me *Error
	return errors.As(err, &me) && me.Retryable
}
