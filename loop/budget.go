package loop

import (
	"fmt"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// Budgets bound a run. Zero fields take the defaults below; a negative
// value switches that bound off (MaxSteps cannot be switched off: a loop
// needs at least one hard exit).
type Budgets struct {
	// MaxSteps is the most model turns a run may take. Default 10.
	MaxSteps int `json:"max_steps"`
	// Deadline is the run's total time. Default 10 minutes.
	Deadline time.Duration `json:"deadline"`
	// ToolTimeout, when positive, overrides every tool's own timeout.
	ToolTimeout time.Duration `json:"tool_timeout,omitempty"`
	// MaxToolCalls is the most tool calls a run may request. Default 100.
	MaxToolCalls int `json:"max_tool_calls"`
	// MaxTokens caps input plus output tokens over the run. Default off.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// MaxCost caps the run's cost in US dollars, priced by Prices. Default
	// off.
	MaxCost float64 `json:"max_cost,omitempty"`
	// MaxArgumentBytes and MaxArgumentDepth bound each tool call's
	// arguments (tool.Limits): a call past either gets an invalid_arguments
	// result naming the limit, as any other invalid call does, and the
	// model may try again. Defaults 1 MiB and 64 levels. A negative
	// MaxArgumentBytes switches the size limit off; the depth limit cannot
	// be, and is at most MaxArgumentDepthCeiling.
	MaxArgumentBytes int `json:"max_argument_bytes,omitempty"`
	MaxArgumentDepth int `json:"max_argument_depth,omitempty"`
	// Prices turns usage into cost, keyed by model name.
	Prices Prices `json:"-"`
}

// Defaults for Budgets.
const (
	DefaultMaxSteps     = 10
	DefaultDeadline     = 10 * time.Minute
	DefaultMaxToolCalls = 100
	// DefaultMaxArgumentBytes and DefaultMaxArgumentDepth are far above
	// what a tool's arguments need, and far below what hurts.
	DefaultMaxArgumentBytes = 1 << 20
	DefaultMaxArgumentDepth = 64
	// MaxArgumentDepthCeiling is the deepest MaxArgumentDepth may allow:
	// a call that passes validation is copied into documents (a pending
	// call in a run's summary, a workflow's payloads) that encoding/json
	// must still decode, and it refuses anything nested past 10000 levels.
	MaxArgumentDepthCeiling = 1000
)

// Normalized returns the budgets with the defaults above filled in and
// switched-off bounds set to zero, as a Runner uses them; a MaxSteps below
// zero is an error. Drivers outside this package use it to run with the
// same bounds.
func (b Budgets) Normalized() (Budgets, error) {
	switch {
	case b.MaxSteps == 0:
		b.MaxSteps = DefaultMaxSteps
	case b.MaxSteps < 0:
		return b, fmt.Errorf("budgets: MaxSteps is %d; it must be positive (a loop needs a hard exit)", b.MaxSteps)
	}
	switch {
	case b.Deadline == 0:
		b.Deadline = DefaultDeadline
	case b.Deadline < 0:
		b.Deadline = 0
	}
	switch {
	case b.MaxToolCalls == 0:
		b.MaxToolCalls = DefaultMaxToolCalls
	case b.MaxToolCalls < 0:
		b.MaxToolCalls = 0
	}
	if b.MaxTokens < 0 {
		b.MaxTokens = 0
	}
	if b.MaxCost < 0 {
		b.MaxCost = 0
	}
	if b.ToolTimeout < 0 {
		b.ToolTimeout = 0
	}
	switch {
	case b.MaxArgumentBytes == 0:
		b.MaxArgumentBytes = DefaultMaxArgumentBytes
	case b.MaxArgumentBytes < 0:
		b.MaxArgumentBytes = 0
	}
	switch {
	case b.MaxArgumentDepth == 0:
		b.MaxArgumentDepth = DefaultMaxArgumentDepth
	case b.MaxArgumentDepth < 0 || b.MaxArgumentDepth > MaxArgumentDepthCeiling:
		return b, fmt.Errorf("budgets: MaxArgumentDepth is %d; it must be from 1 to %d (0 for the default, %d)",
			b.MaxArgumentDepth, MaxArgumentDepthCeiling, DefaultMaxArgumentDepth)
	}
	return b, nil
}

// ArgumentLimits returns the bounds on each call's arguments that
// MaxArgumentBytes and MaxArgumentDepth set, for CheckCalls. Call it on
// Normalized budgets: on others a zero field means no limit.
func (b Budgets) ArgumentLimits() tool.Limits {
	return tool.Limits{MaxBytes: b.MaxArgumentBytes, MaxDepth: b.MaxArgumentDepth}
}

// Price is what a model charges, in US dollars per million tokens.
type Price struct {
	InputPerMTok float64 `json:"input_per_mtok"`
	// CachedInputPerMTok is the rate of input read from the provider's
	// prompt cache (zero: free).
	CachedInputPerMTok float64 `json:"cached_input_per_mtok,omitempty"`
	// CacheWriteInputPerMTok is the rate of input written to the
	// provider's prompt cache, which some providers charge more for
	// (Anthropic: 1.25 times the input rate for its 5-minute cache). Zero
	// means the input rate: no provider writes its cache for less than
	// plain input, and prices recorded before this field priced writes as
	// input.
	CacheWriteInputPerMTok float64 `json:"cache_write_input_per_mtok,omitempty"`
	// CacheWrite1hInputPerMTok is the rate of the writes to a cache that
	// lives an hour (llm.Usage.CacheWrite1hTokens; Anthropic: 2 times the
	// input rate). Zero means CacheWriteInputPerMTok's rate. The provider
	// reports which writes were which, so a run is priced right whoever
	// chose the cache's lifetime (a Temporal worker, say, which the
	// client that recorded the price does not know).
	CacheWrite1hInputPerMTok float64 `json:"cache_write_1h_input_per_mtok,omitempty"`
	// OutputPerMTok is the rate of output, reasoning tokens included.
	OutputPerMTok float64 `json:"output_per_mtok"`
}

// Prices maps a model name to its price.
type Prices map[string]Price

// Cost prices one turn's usage. Cached input tokens and cache writes,
// both part of the input count, are charged at their own rates; reasoning
// tokens, part of the output count, at the output rate.
func (p Price) Cost(u llm.Usage) float64 {
	uncached := max(u.InputTokens-u.CachedInputTokens-u.CacheWriteTokens, 0)
	write := p.CacheWriteInputPerMTok
	if write == 0 {
		write = p.InputPerMTok
	}
	write1h := p.CacheWrite1hInputPerMTok
	if write1h == 0 {
		write1h = write
	}
	hour := min(max(u.CacheWrite1hTokens, 0), u.CacheWriteTokens)
	return (float64(uncached)*p.InputPerMTok +
		float64(u.CachedInputTokens)*p.CachedInputPerMTok +
		float64(u.CacheWriteTokens-hour)*write +
		float64(hour)*write1h +
		float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
}
