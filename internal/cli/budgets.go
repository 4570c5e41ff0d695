package cli

import (
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/toolloop/toolloop/loop"
)

// budgetFlags are the run's budgets as flags.
type budgetFlags struct {
	maxSteps, maxToolCalls   int
	maxArgBytes, maxArgDepth int
	deadline, toolTimeout    time.Duration
	maxTokens                int64
	maxCost                  float64
}

func addBudgetFlags(fs *flag.FlagSet) *budgetFlags {
	b := &budgetFlags{}
	fs.IntVar(&b.maxSteps, "max-steps", 0, "at most `N` model turns (default 10)")
	fs.Var(durationFlag{&b.deadline}, "deadline", "the run's total time `D`, e.g. 2m (default 10m)")
	fs.Var(durationFlag{&b.toolTimeout}, "tool-timeout", "every tool call's timeout `D` (default: each tool's own)")
	fs.IntVar(&b.maxToolCalls, "max-tool-calls", 0, "at most `N` tool calls (default 100)")
	fs.Int64Var(&b.maxTokens, "max-tokens", 0, "at most `N` input plus output tokens (default: no limit)")
	fs.Float64Var(&b.maxCost, "max-cost", 0, "at most `USD` dollars, priced by the model's price (default: no limit)")
	fs.IntVar(&b.maxArgBytes, "max-argument-bytes", 0, "refuse a tool call's arguments past `N` bytes (default 1 MiB)")
	fs.IntVar(&b.maxArgDepth, "max-argument-depth", 0, "refuse a tool call's arguments nested past `N` levels (default 64, at most 1000)")
	return b
}

func (b *budgetFlags) budgets() (loop.Budgets, error) {
	if math.IsNaN(b.maxCost) || math.IsInf(b.maxCost, 0) {
		return loop.Budgets{}, &usageErr{fmt.Sprintf("--max-cost %v: want a finite number of dollars", b.maxCost)}
	}
	for name, v := range map[string]float64{
		"max-steps": float64(b.maxSteps), "max-tool-calls": float64(b.maxToolCalls), "max-tokens": float64(b.maxTokens),
		"max-cost": b.maxCost, "deadline": float64(b.deadline), "tool-timeout": float64(b.toolTimeout),
		"max-argument-bytes": float64(b.maxArgBytes), "max-argument-depth": float64(b.maxArgDepth),
	} {
		if v < 0 {
			return loop.Budgets{}, &usageErr{fmt.Sprintf("--%s must not be negative (0, or leaving it out, means the default)", name)}
		}
	}
	return loop.Budgets{MaxSteps: b.maxSteps, Deadline: b.deadline, ToolTimeout: b.toolTimeout,
		MaxToolCalls: b.maxToolCalls, MaxTokens: b.maxTokens, MaxCost: b.maxCost,
		MaxArgumentBytes: b.maxArgBytes, MaxArgumentDepth: b.maxArgDepth}, nil
}
