package llm_test

import (
	"math"
	"testing"

	"github.com/toolloop/toolloop/llm"
)

func TestUsageAddSaturates(t *testing.T) {
	big := llm.Usage{InputTokens: math.MaxInt64 - 1, OutputTokens: math.MaxInt64, CachedInputTokens: 5, ReasoningTokens: 7}
	got := big.Add(llm.Usage{InputTokens: 10, OutputTokens: 1, CachedInputTokens: 5, ReasoningTokens: 1})
	want := llm.Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64, CachedInputTokens: 10, ReasoningTokens: 8}
	if got != want {
		t.Fatalf("Add = %+v, want %+v", got, want)
	}
	if tot := got.Total(); tot != math.MaxInt64 {
		t.Fatalf("Total = %d, want the largest int64", tot)
	}
	neg := llm.Usage{InputTokens: math.MinInt64 + 1}.Add(llm.Usage{InputTokens: -10})
	if neg.InputTokens != math.MinInt64 {
		t.Fatalf("a negative sum wrapped round: %d", neg.InputTokens)
	}
}

func TestUsageClamped(t *testing.T) {
	for _, tc := range []struct{ in, want llm.Usage }{
		{llm.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 30, ReasoningTokens: 5},
			llm.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 30, ReasoningTokens: 5}},
		{llm.Usage{InputTokens: -5, OutputTokens: -10, CachedInputTokens: -1, ReasoningTokens: -2}, llm.Usage{}},
		{llm.Usage{InputTokens: 10, CachedInputTokens: 50}, llm.Usage{InputTokens: 10, CachedInputTokens: 10}},
		{llm.Usage{InputTokens: -10, CachedInputTokens: 50}, llm.Usage{}},
		// Reasoning past the output is counted on top of it, as xAI bills
		// it, never cut down to it.
		{llm.Usage{InputTokens: 307, OutputTokens: 26, ReasoningTokens: 227},
			llm.Usage{InputTokens: 307, OutputTokens: 253, ReasoningTokens: 227}},
		{llm.Usage{OutputTokens: -3, ReasoningTokens: 9}, llm.Usage{OutputTokens: 9, ReasoningTokens: 9}},
		// Hour-long writes are part of the writes.
		{llm.Usage{InputTokens: 100, CacheWriteTokens: 40, CacheWrite1hTokens: 70}, llm.Usage{InputTokens: 100, CacheWriteTokens: 40, CacheWrite1hTokens: 40}},
		{llm.Usage{InputTokens: 100, CacheWriteTokens: 40, CacheWrite1hTokens: -7}, llm.Usage{InputTokens: 100, CacheWriteTokens: 40}},
	} {
		if got := tc.in.Clamped(); got != tc.want {
			t.Errorf("%+v.Clamped() = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// The total a provider reports is what it billed: parts that fall short
// of it give the difference to the output (xAI's usage, whose
// completion_tokens leaves the reasoning out), and clamping that keeps
// every token; a total the parts reach, or none, changes nothing.
func TestUsageWithTotal(t *testing.T) {
	xai := llm.Usage{InputTokens: 307, OutputTokens: 26, ReasoningTokens: 227}
	for _, tc := range []struct {
		in    llm.Usage
		total int64
		want  llm.Usage
	}{
		{xai, 560, llm.Usage{InputTokens: 307, OutputTokens: 253, ReasoningTokens: 227}},
		{xai, 0, xai},
		{xai, 333, xai},
		{xai, 100, xai}, // a total below the parts is not believed over them
		{llm.Usage{InputTokens: 100, OutputTokens: 20, ReasoningTokens: 5}, 120, llm.Usage{InputTokens: 100, OutputTokens: 20, ReasoningTokens: 5}},
	} {
		got := tc.in.WithTotal(tc.total)
		if got != tc.want {
			t.Errorf("%+v.WithTotal(%d) = %+v, want %+v", tc.in, tc.total, got, tc.want)
		}
		if c := got.Clamped(); c.Total() < max(tc.total, tc.in.Total()) {
			t.Errorf("%+v.WithTotal(%d).Clamped() counts %d tokens, fewer than billed", tc.in, tc.total, c.Total())
		}
	}
}

func TestForeignState(t *testing.T) {
	msgs := []llm.Message{
		{Role: llm.RoleAssistant, State: &llm.ProviderState{Provider: "anthropic"},
			ToolCalls: []llm.ToolCall{{ID: "c1", State: &llm.ProviderState{Provider: "gemini"}}, {ID: "c2"}}},
		{Role: llm.RoleAssistant, State: &llm.ProviderState{Provider: "gemini"}},
	}
	for provider, want := range map[string]int{"anthropic": 2, "gemini": 1, "openai-responses": 3} {
		if got := llm.ForeignState(msgs, provider); got != want {
			t.Errorf("ForeignState(%s) = %d, want %d", provider, got, want)
		}
	}
}
