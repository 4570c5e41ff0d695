package otel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	traceotel "github.com/toolloop/toolloop/trace/otel"
)

// Chat spans carry each turn's cache reads, cache writes and reasoning
// tokens under the GenAI conventions' names, and the state an adapter
// dropped under toolloop's own; the run span carries the totals.
func TestUsageDetailAttributes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	obs := traceotel.NewObserver(tp, &traceotel.Options{ProviderName: "anthropic", AgentName: "desk"})
	first := llmtest.Calls(llmtest.Call("c1", "slow_a", `{"key":"1"}`))
	first.Response.Usage = llm.Usage{InputTokens: 1000, OutputTokens: 300, CachedInputTokens: 600, CacheWriteTokens: 200, ReasoningTokens: 250}
	first.Response.DroppedState = 2
	last := llmtest.Text("done")
	last.Response.Usage = llm.Usage{InputTokens: 1200, OutputTokens: 10, CachedInputTokens: 800}
	res := runWith(context.Background(), t, obs, first, last)
	if res.Status != loop.FinalAnswer {
		t.Fatalf("status %s: %s", res.Status, res.Detail)
	}
	spans := rec.Ended()
	chats := byName(spans, "chat")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2", len(chats))
	}
	requireAttrs(t, chats[0], map[attribute.Key]any{
		"gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 300,
		"gen_ai.usage.cache_read.input_tokens": 600, "gen_ai.usage.cache_creation.input_tokens": 200,
		"gen_ai.usage.reasoning.output_tokens": 250, "toolloop.response.dropped_state": 2,
	})
	second := attrs(chats[1])
	for _, k := range []attribute.Key{"gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.reasoning.output_tokens", "toolloop.response.dropped_state"} {
		if v, ok := second[k]; ok {
			t.Errorf("second chat span has %s = %v, want none for a zero count", k, v.AsInterface())
		}
	}
	requireAttrs(t, one(t, spans, "invoke_agent"), map[attribute.Key]any{
		"gen_ai.usage.input_tokens": 2200, "gen_ai.usage.output_tokens": 310,
		"gen_ai.usage.cache_read.input_tokens": 1400, "gen_ai.usage.cache_creation.input_tokens": 200,
		"gen_ai.usage.reasoning.output_tokens": 250,
	})
}
