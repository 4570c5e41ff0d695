package loop_test

import (
	"context"
	"math"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func withHour(p loop.Price, rate float64) loop.Price {
	p.CacheWrite1hInputPerMTok = rate
	return p
}

// Cost charges each part of the input at its own rate: plain input,
// cache reads, cache writes (at the input rate unless the price says
// otherwise); reasoning is output and costs nothing on top of it.
func TestPriceCost(t *testing.T) {
	sonnet := loop.Price{InputPerMTok: 3, CachedInputPerMTok: 0.30, CacheWriteInputPerMTok: 3.75, OutputPerMTok: 15}
	flat := sonnet
	flat.CacheWriteInputPerMTok = 0
	u := llm.Usage{InputTokens: 1_000_000, CachedInputTokens: 200_000, CacheWriteTokens: 300_000, OutputTokens: 100_000, ReasoningTokens: 60_000}
	for _, c := range []struct {
		name  string
		price loop.Price
		usage llm.Usage
		want  float64
	}{
		// 500k plain at $3, 200k cached at $0.30, 300k written at $3.75,
		// 100k out at $15.
		{"cache write rate", sonnet, u, 1.5 + 0.06 + 1.125 + 1.5},
		// Without a write rate, writes cost what plain input does.
		{"writes at the input rate", flat, u, 1.5 + 0.06 + 0.9 + 1.5},
		{"no cache at all", sonnet, llm.Usage{InputTokens: 1_000_000, OutputTokens: 100_000}, 3 + 1.5},
		// Reasoning tokens are part of the output count: no extra charge.
		{"reasoning is output", sonnet, llm.Usage{OutputTokens: 100_000, ReasoningTokens: 100_000}, 1.5},
		// A report whose parts exceed the input charges no negative
		// plain input.
		// The hour-long cache's writes at their own rate, the rest at
		// the 5-minute rate; without a 1h rate, all at the write rate.
		{"hour-long writes", withHour(sonnet, 6), llm.Usage{InputTokens: 1_000_000, CacheWriteTokens: 1_000_000, CacheWrite1hTokens: 600_000}, 0.4*3.75 + 0.6*6},
		{"no 1h rate", sonnet, llm.Usage{InputTokens: 1_000_000, CacheWriteTokens: 1_000_000, CacheWrite1hTokens: 600_000}, 3.75},
		{"1h writes beyond the writes", withHour(sonnet, 6), llm.Usage{InputTokens: 100, CacheWriteTokens: 100, CacheWrite1hTokens: 500}, 100 * 6 / 1e6},
		{"parts beyond the input", sonnet, llm.Usage{InputTokens: 100, CachedInputTokens: 100, CacheWriteTokens: 100}, (100*0.30 + 100*3.75) / 1e6},
	} {
		if got := c.price.Cost(c.usage); !near(got, c.want) {
			t.Errorf("%s: cost %v, want %v", c.name, got, c.want)
		}
	}
}

// A run's cost and its cost budget count cache writes at their rate: a
// turn that writes the cache costs more than one that reads it.
func TestRunCostCountsCacheWrites(t *testing.T) {
	price := loop.Price{InputPerMTok: 3, CachedInputPerMTok: 0.30, CacheWriteInputPerMTok: 3.75, OutputPerMTok: 15}
	// A turn that asks for a call: the budget is checked before it runs.
	turn := func(u llm.Usage) llmtest.Turn {
		tt := llmtest.Calls(call("c1", "lookup", `{"q":"a"}`))
		tt.Response.Usage = u
		return tt
	}
	reg, err := tool.NewRegistry(readTool())
	if err != nil {
		t.Fatal(err)
	}
	run := func(u llm.Usage, maxCost float64) *loop.Result {
		res, _ := loop.Run(context.Background(), loop.Config{Model: llmtest.New(turn(u), llmtest.Text("ok")), ModelName: "m", Tools: reg,
			Budgets: loop.Budgets{MaxCost: maxCost, Prices: loop.Prices{"m": price}}}, user("q"))
		return res
	}
	writes := llm.Usage{InputTokens: 100_000, CacheWriteTokens: 100_000, OutputTokens: 1000}
	res := run(writes, 0)
	if want := 0.375 + 0.015; !near(res.Cost, want) {
		t.Fatalf("cost %v, want %v", res.Cost, want)
	}
	// $0.315 as plain input; $0.39 with the writes' premium.
	if res := run(writes, 0.35); res.Status != loop.CostBudgetExceeded {
		t.Errorf("a $0.35 budget: status %s (cost %v), want cost_budget_exceeded", res.Status, res.Cost)
	}
	if res := run(llm.Usage{InputTokens: 100_000, CacheWriteTokens: 10_000, CachedInputTokens: 90_000, OutputTokens: 1000}, 0.35); res.Status != loop.FinalAnswer {
		t.Errorf("reads within budget: status %s (cost %v)", res.Status, res.Cost)
	}
}
