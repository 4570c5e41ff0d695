package otel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/trace"
	traceotel "github.com/toolloop/toolloop/trace/otel"
)

// editedLog is the log of a run with context management: two turns that
// read a page each (cache writes, then a read of the first turn's prefix),
// a clearing of the first page, a compaction by the summary model, and a
// final answer that reads little of the cache after them.
func editedLog() []loop.Event {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	var events []loop.Event
	add := func(ev loop.Event) {
		ev.Seq, ev.At = len(events)+1, at.Add(time.Duration(len(events))*time.Millisecond)
		events = append(events, ev)
	}
	add(loop.Event{Kind: loop.Started, Start: &loop.StartInfo{RunID: "run-edits", Model: "big-m", SessionID: "s1",
		Budgets:  loop.Budgets{MaxSteps: 5, MaxToolCalls: 5, Deadline: time.Hour},
		Context:  &loop.ContextPolicy{Window: 60000, Margin: 6000, LowWater: 30000, KeepToolResults: 1, Compact: true, SummaryModel: "small-m"},
		Messages: []llm.Message{llm.UserMessage("read two pages")}}})
	page := func(id string, usage llm.Usage) {
		add(loop.Event{Kind: loop.ModelResponded, Latency: 300 * time.Microsecond, Attempts: 1, Response: &llm.Response{Usage: usage,
			Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: "fetch", Arguments: json.RawMessage(`{}`)}}}}})
		add(loop.Event{Kind: loop.CallsValidated, Checks: []loop.CallCheck{{Known: true, Key: uint64(len(events))}}})
		add(loop.Event{Kind: loop.PolicyDecided, Decisions: []policy.Decision{{Verdict: policy.Allow}}})
		add(loop.Event{Kind: loop.StagePlanned, Plan: &executor.Plan{Stages: [][]int{{0}},
			Table: []executor.Row{{CallID: id, Tool: "fetch", Effect: "read_only", Mode: executor.Serial}}}})
		add(loop.Event{Kind: loop.StageFinished, Outcomes: []executor.Outcome{{Attempts: 1, Duration: 100 * time.Microsecond,
			Result: llm.ToolResult{CallID: id, Name: "fetch", Status: llm.StatusOK, Content: json.RawMessage(`"a long page"`)}}}})
	}
	page("c1", llm.Usage{InputTokens: 3000, CacheWriteTokens: 2900, OutputTokens: 40})
	page("c2", llm.Usage{InputTokens: 5000, CachedInputTokens: 2900, CacheWriteTokens: 2000, OutputTokens: 40})
	add(loop.Event{Kind: loop.ContextEdited, Edit: &loop.ContextEdit{Reason: loop.EditForWindow,
		Cleared: []loop.ClearedResult{{CallID: "c1", Tool: "fetch", Tokens: 2500}}, TokensBefore: 56000, TokensAfter: 29000}})
	add(loop.Event{Kind: loop.ContextSummarized, Latency: 500 * time.Microsecond, Attempts: 1,
		Response: &llm.Response{Model: "small-m-2026", Usage: llm.Usage{InputTokens: 4000, CachedInputTokens: 100, OutputTokens: 200}},
		Edit:     &loop.ContextEdit{Reason: loop.EditCompaction, From: 1, Through: 3, Summary: "page one was read", TokensBefore: 57000, TokensAfter: 20000}})
	add(loop.Event{Kind: loop.ModelResponded, Latency: 300 * time.Microsecond, Attempts: 1, Response: &llm.Response{
		Message: llm.Message{Role: llm.RoleAssistant, Text: "both read"},
		Usage:   llm.Usage{InputTokens: 2000, CachedInputTokens: 50, CacheWriteTokens: 1900, OutputTokens: 20}}})
	add(loop.Event{Kind: loop.Stopped, Status: loop.FinalAnswer, Detail: "the model answered"})
	return events
}

// Each model turn's span carries its cache reads and writes under the
// GenAI conventions' names; a clearing is an edit_context span naming the
// calls it cleared, with an event per cleared result; a compaction's
// summary request is a chat span to the summary model with its usage and
// what it summarized; the run's totals include the summary's tokens.
func TestContextEditSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	obs := traceotel.NewObserver(tp, &traceotel.Options{ProviderName: "anthropic"})
	events := editedLog()
	for i := range events {
		obs.Observe(context.Background(), &events[i])
	}
	spans := rec.Ended()

	turns := byName(spans, "chat big-m")
	if len(turns) != 3 {
		t.Fatalf("%d chat big-m spans, want 3", len(turns))
	}
	requireAttrs(t, turns[1], map[attribute.Key]any{"gen_ai.usage.input_tokens": 5000,
		"gen_ai.usage.cache_read.input_tokens": 2900, "gen_ai.usage.cache_creation.input_tokens": 2000})
	for _, s := range turns {
		if _, ok := attrs(s)["toolloop.context.reason"]; ok {
			t.Errorf("a model turn's span %s carries a context edit", s.Name())
		}
	}

	edit := one(t, spans, "edit_context")
	requireAttrs(t, edit, map[attribute.Key]any{"toolloop.context.reason": "window", "toolloop.context.cleared": 1,
		"toolloop.context.cleared.call_ids": []string{"c1"}, "toolloop.context.tokens_before": 56000,
		"toolloop.context.tokens_after": 29000, "toolloop.step": 2, "toolloop.seq": 12})
	if ev := edit.Events(); len(ev) != 1 || ev[0].Name != "cleared_result" {
		t.Errorf("edit_context events %v, want one cleared_result", ev)
	} else {
		got := map[attribute.Key]string{}
		for _, kv := range ev[0].Attributes {
			got[kv.Key] = kv.Value.Emit()
		}
		if got["gen_ai.tool.call.id"] != "c1" || got["gen_ai.tool.name"] != "fetch" || got["toolloop.context.result_tokens"] != "2500" {
			t.Errorf("cleared_result attributes %v", got)
		}
	}

	summary := one(t, spans, "chat small-m")
	if summary.SpanKind() != oteltrace.SpanKindClient {
		t.Errorf("the summary request's span is of kind %v, want client", summary.SpanKind())
	}
	requireAttrs(t, summary, map[attribute.Key]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "small-m",
		"gen_ai.response.model": "small-m-2026", "gen_ai.usage.input_tokens": 4000, "gen_ai.usage.output_tokens": 200,
		"gen_ai.usage.cache_read.input_tokens": 100, "toolloop.context.reason": "compaction",
		"toolloop.context.summarized.from": 1, "toolloop.context.summarized.through": 3, "toolloop.context.summary.bytes": 17,
		"toolloop.context.tokens_before": 57000, "toolloop.context.tokens_after": 20000})
	if _, ok := attrs(summary)["toolloop.context.summary"]; ok {
		t.Errorf("the summary's text is recorded without full content opted in")
	}
	if d := summary.EndTime().Sub(summary.StartTime()); d != 500*time.Microsecond {
		t.Errorf("the summary request's span lasts %v, want its latency", d)
	}

	requireAttrs(t, one(t, spans, "invoke_agent"), map[attribute.Key]any{
		"gen_ai.usage.input_tokens": 14000, "gen_ai.usage.output_tokens": 300,
		"gen_ai.usage.cache_read.input_tokens": 3050, "gen_ai.usage.cache_creation.input_tokens": 6800})
}

// With full content opted in, the summary a compaction made is recorded
// on its span, masked as any text is.
func TestContextSummaryFullContent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	obs := traceotel.NewObserver(tp, &traceotel.Options{Redactor: trace.NewRedactor(&trace.RedactOptions{FullContent: true})})
	events := editedLog()
	events[12].Edit.Summary = "page one was read; the card is 4111 1111 1111 1111"
	for i := range events {
		obs.Observe(context.Background(), &events[i])
	}
	got := attrs(one(t, rec.Ended(), "chat small-m"))["toolloop.context.summary"].AsString()
	if got == "" || !strings.HasPrefix(got, "page one was read; the card is ") || strings.Contains(got, "4111 1111 1111 1111") {
		t.Errorf("toolloop.context.summary = %q; want the summary with the card number masked", got)
	}
}
