package trace_test

import (
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/trace"
)

// big is a tool result of about 2,000 bytes.
var big = `"` + strings.Repeat("x", 2000) + `"`

// cached sets the usage of the log's last model turn.
func (b *logBuilder) cached(input, read, write, output int64) *logBuilder {
	for i := len(b.events) - 1; i >= 0; i-- {
		if ev := &b.events[i]; ev.Kind == loop.ModelResponded {
			ev.Response.Usage = llm.Usage{InputTokens: input, CachedInputTokens: read, CacheWriteTokens: write, OutputTokens: output}
			return b
		}
	}
	panic("no model turn")
}

// cachedRun is a run with context management whose turns read the prompt
// cache as a caching provider reports it: each turn reads what the one
// before wrote, until a clearing (seq 13) replaces call c1's result, so
// that the next turn reads only the prefix before it and writes the rest
// again.
func cachedRun() *logBuilder {
	b := newLog()
	b.events[0].Start.Context = &loop.ContextPolicy{Window: 60000, Margin: 6000, LowWater: 30000, KeepToolResults: 1}
	b.events[0].Start.Messages = []llm.Message{llm.SystemMessage("you read pages"), llm.UserMessage("read three pages")}
	b.turn(tool.ReadOnly, 0, call("c1", "fetch", `{"page":1}`)).cached(3000, 0, 2900, 40).stage(0, ok("c1", "fetch", big))
	b.turn(tool.ReadOnly, 0, call("c2", "fetch", `{"page":2}`)).cached(3600, 2900, 600, 40).stage(0, ok("c2", "fetch", big))
	b.turn(tool.ReadOnly, 0, call("c3", "fetch", `{"page":3}`)).cached(4200, 3500, 600, 40).stage(0, ok("c3", "fetch", big))
	b.add(loop.Event{Kind: loop.ContextEdited, Edit: &loop.ContextEdit{Reason: loop.EditForWindow,
		Cleared:      []loop.ClearedResult{{CallID: "c1", Tool: "fetch", Tokens: 520}, {CallID: "c2", Tool: "fetch", Tokens: 520}},
		TokensBefore: 55000, TokensAfter: 29000}})
	b.answer("three pages read", 0).cached(3300, 700, 2600, 20)
	return b
}

// TestShowTokens: each model turn has a line with its input split into
// cache reads, cache writes and new input, each context edit a line of
// its own between them, and the turn after the clearing names it as the
// expected cause of its cache miss; a total line sums the run.
func TestShowTokens(t *testing.T) {
	events := cachedRun().stop(loop.FinalAnswer, "done")
	out := show(t, events, nil)
	want := []string{
		"tokens and context edits",
		"  seq 2   step 1         turn            input  3000 = cache_read    0 + cache_write 2900 + new 100  output  40\n",
		"  seq 7   step 2         turn            input  3600 = cache_read 2900 + cache_write  600 + new 100  output  40\n",
		"  seq 12  step 3         turn            input  4200 = cache_read 3500 + cache_write  600 + new 100  output  40\n",
		"  seq 17  before step 4  window          cleared 2 result(s): c1(fetch) c2(fetch)  tokens 55000 -> 29000\n",
		"  seq 18  step 4         turn            input  3300 = cache_read  700 + cache_write 2600 + new   0  output  20" +
			"  cache rewritten, expected: the clearing at seq 17 replaced the result of call c1 (fetch) and 1 other(s), " +
			"so the request was written to the cache again from there\n",
		"  total                                  input 14100 = cache_read 7100 + cache_write 6700 + new 300  output 140\n",
	}
	at := 0
	for _, w := range want {
		i := strings.Index(out[at:], w)
		if i < 0 {
			t.Fatalf("output lacks, in order, %q:\n%s", w, out)
		}
		at += i + len(w)
	}
	// A run whose turns report no tokens and that made no edit has no
	// such section.
	if out := show(t, scenario(t, "normal").Events, nil); strings.Contains(out, "tokens and context edits") {
		t.Errorf("a run without tokens has a token section:\n%s", out)
	}
}

// TestCacheDrops: a turn that reads far less than the turn before left
// in the cache is a cache miss, named as the clearing's expected cost
// when a clearing or a compaction changed the prefix, and otherwise with
// what the log shows between the requests; diagnose reports only the
// latter, as cache_miss.
func TestCacheDrops(t *testing.T) {
	for _, tc := range []struct {
		name     string
		events   func() []loop.Event
		expected bool
		cause    string // "" for no miss at all
	}{
		{"steady", func() []loop.Event {
			b := newLog()
			b.turn(tool.ReadOnly, 0, call("c1", "fetch", `{}`)).cached(3000, 0, 2900, 10).stage(0, ok("c1", "fetch", big))
			return b.answer("done", 0).cached(3600, 2900, 600, 10).stop(loop.FinalAnswer, "done")
		}, false, ""},
		{"small", func() []loop.Event {
			// Below what providers cache at all: nothing to miss.
			b := newLog()
			b.turn(tool.ReadOnly, 0, call("c1", "fetch", `{}`)).cached(900, 0, 800, 10).stage(0, ok("c1", "fetch", big))
			return b.answer("done", 0).cached(1500, 0, 1400, 10).stop(loop.FinalAnswer, "done")
		}, false, ""},
		{"clearing", func() []loop.Event { return cachedRun().stop(loop.FinalAnswer, "done") }, true,
			"expected: the clearing at seq 17 replaced the result of call c1 (fetch) and 1 other(s)"},
		{"compaction", func() []loop.Event {
			b := cachedRun()
			// The same run, compacted instead of cleared.
			b.events = b.events[:16]
			b.step = 3
			b.add(loop.Event{Kind: loop.ContextSummarized, Response: &llm.Response{Usage: llm.Usage{InputTokens: 3000, OutputTokens: 200}},
				Edit: &loop.ContextEdit{Reason: loop.EditCompaction, From: 2, Through: 6, Summary: "pages 1 and 2 hold x's", TokensBefore: 55000, TokensAfter: 20000}})
			return b.answer("three pages read", 0).cached(1900, 300, 1600, 20).stop(loop.FinalAnswer, "done")
		}, true, "expected: the compaction at seq 17 replaced messages 2-5 by a summary, so the request differs from message 2 on"},
		{"expired", func() []loop.Event {
			b := newLog()
			b.turn(tool.ReadOnly, 0, call("c1", "fetch", `{}`)).cached(3000, 0, 2900, 10).stage(0, ok("c1", "fetch", big))
			b.at = b.at.Add(7 * time.Minute)
			return b.answer("done", 0).cached(3600, 0, 3500, 10).stop(loop.FinalAnswer, "done")
		}, false, "the request begins with all of the previous one, but it came 7m0.00"},
		{"resumed", func() []loop.Event {
			b := newLog()
			b.turn(tool.ReadOnly, 0, call("c1", "fetch", `{}`)).cached(3000, 0, 2900, 10).stage(0, ok("c1", "fetch", big))
			b.add(loop.Event{Kind: loop.Resumed})
			return b.answer("done", 0).cached(3600, 100, 3400, 10).stop(loop.FinalAnswer, "done")
		}, false, "the run was resumed in between (seq 7)"},
		{"unexplained", func() []loop.Event {
			b := newLog()
			b.turn(tool.ReadOnly, 0, call("c1", "fetch", `{}`)).cached(3000, 0, 2900, 10).stage(0, ok("c1", "fetch", big))
			return b.answer("done", 0).cached(3600, 1000, 2500, 10).stop(loop.FinalAnswer, "done")
		}, false, "the request begins with all of the previous one, so what changed is not in the log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := tc.events()
			drops := trace.CacheDrops(events)
			var found []trace.Finding
			for _, f := range trace.Diagnose(events) {
				if f.Kind == trace.CacheMiss {
					found = append(found, f)
				}
			}
			if tc.cause == "" {
				if len(drops) != 0 || len(found) != 0 {
					t.Fatalf("misses %+v, findings %v; want none", drops, found)
				}
				return
			}
			if len(drops) != 1 {
				t.Fatalf("misses %+v; want one", drops)
			}
			d := drops[0]
			last := events[len(events)-2]
			if d.Seq != last.Seq || d.Expected() != tc.expected || !strings.Contains(d.Cause, tc.cause) {
				t.Errorf("miss %+v; want seq %d, expected %v, cause %q", d, last.Seq, tc.expected, tc.cause)
			}
			if tc.expected {
				if len(found) != 0 {
					t.Errorf("diagnose reports the run's own edit as a fault: %v", found)
				}
				return
			}
			if len(found) != 1 || found[0].Seq != last.Seq || !strings.Contains(found[0].Message, tc.cause) ||
				!strings.Contains(found[0].Message, "where the turn before (step 1) left 2900 there") {
				t.Errorf("findings %v; want one cache_miss at seq %d naming %q", found, last.Seq, tc.cause)
			}
		})
	}
}

// TestDiagnoseCallAgainAfterClearing: a call made again after a clearing
// took its first result away is what the clearing's note invites, not a
// repeated call; without the clearing it is one.
func TestDiagnoseCallAgainAfterClearing(t *testing.T) {
	for _, cleared := range []bool{false, true} {
		b := newLog()
		b.events[0].Start.Context = &loop.ContextPolicy{Window: 60000, Margin: 6000, LowWater: 30000, KeepToolResults: 1}
		b.turn(tool.ReadOnly, 0, call("c1", "fetch", `{"page":1}`)).stage(0, ok("c1", "fetch", big))
		b.turn(tool.ReadOnly, 0, call("c2", "fetch", `{"page":2}`)).stage(0, ok("c2", "fetch", big))
		if cleared {
			b.add(loop.Event{Kind: loop.ContextEdited, Edit: &loop.ContextEdit{Reason: loop.EditForWindow,
				Cleared: []loop.ClearedResult{{CallID: "c1", Tool: "fetch", Tokens: 520}}, TokensBefore: 55000, TokensAfter: 29000}})
		}
		b.turn(tool.ReadOnly, 0, call("c3", "fetch", `{"page":1}`)).stage(0, ok("c3", "fetch", big))
		events := b.answer("read", 0).stop(loop.FinalAnswer, "done")
		var repeats []trace.Finding
		for _, f := range trace.Diagnose(events) {
			if f.Kind == trace.RepeatedCall {
				repeats = append(repeats, f)
			}
		}
		if cleared && len(repeats) != 0 {
			t.Errorf("c3 after the clearing of c1's result: %v", repeats)
		}
		if !cleared && (len(repeats) != 1 || repeats[0].CallIDs[0] != "c1" || repeats[0].CallIDs[1] != "c3") {
			t.Errorf("c3 repeats c1, nothing cleared: %v", repeats)
		}
	}
}

// TestTokensFailedRequest: a request that failed after it was paid for in
// part (a stream that broke) has a line of its own in the account, whose
// usages then add up to the run's.
func TestTokensFailedRequest(t *testing.T) {
	b := newLog()
	b.turn(tool.ReadOnly, 0, call("c1", "fetch", `{}`)).cached(3000, 0, 2900, 40).stage(0, ok("c1", "fetch", big))
	b.add(loop.Event{Kind: loop.ModelFailed, Latency: time.Millisecond, Attempts: 1, Failure: &loop.Failure{Kind: loop.FailModel, Message: "the stream broke"},
		Response: &llm.Response{Usage: llm.Usage{InputTokens: 3600, CachedInputTokens: 2900, CacheWriteTokens: 600, OutputTokens: 7}}})
	events := b.stop(loop.ModelError, "the stream broke")
	var sum llm.Usage
	for _, l := range trace.Tokens(events) {
		sum = sum.Add(l.Usage)
	}
	if run := loop.Replay(events).Usage; sum != run || run.InputTokens != 6600 {
		t.Errorf("the account sums to %+v, the run counted %+v", sum, run)
	}
	want := "  seq 7   step 2         failed          input 3600 = cache_read 2900 + cache_write  600 + new 100  output  7  the request failed (model): the stream broke\n"
	if out := show(t, events, nil); !strings.Contains(out, want) {
		t.Errorf("show lacks %q:\n%s", want, out)
	}
}
