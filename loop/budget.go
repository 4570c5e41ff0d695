package loop

import (
	"fmt"
	"time"

	"github.com/toolloop/toolloop/llm"
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
	// Prices turns usage into cost, keyed by model name.
	Prices Prices `json:"-"`
}

// Defaults for Budgets.
const (
	DefaultMaxSteps     = 10
	DefaultDeadline     = 10 * time.Minute
	DefaultMaxToolCalls = 100
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
	return b, nil
}

// Price is what a model charges, in US dollars per million tokens.
type Price struct {
	InputPerMTok       float64 `json:"input_per_mtok"`
	CachedInputPerMTok float64 `json:"cached_input_per_mtok,omitempty"`
	OutputPerMTok      float64 `json:"output_per_mtok"`
}

// Prices maps a model name to its price.
type Prices map[string]Price

// Cost prices one turn's usage. Cached input tokens, part of the input
// count, are charged at the cached rate.
func (p Price) Cost(u llm.Usage) float64 {
	uncached := u.InputTokens - u.CachedInputTokens
	if uncached < 0 {
		uncached = 0
	}
	return (float64(uncached)*p.InputPerMTok +
		float64(u.CachedInputTokens)*p.CachedInputPerMTok +
		float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
}
