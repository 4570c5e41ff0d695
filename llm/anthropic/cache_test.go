package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// pageTool is fetch_page: it returns about 2,000 tokens (8,000 bytes) of
// text a call, different for each page.
func pageTool(t *testing.T) *tool.Registry {
	type pageIn struct {
		Page int `json:"page"`
	}
	type pageOut struct {
		Text string `json:"text"`
	}
	fetch := tool.MustNew(tool.Spec[pageIn]{Name: "fetch_page", Description: "returns one page of the report"},
		func(ctx context.Context, in pageIn) (pageOut, error) {
			var b strings.Builder
			for b.Len() < 8000 {
				fmt.Fprintf(&b, "Page %d, line %d: the quarterly figures went up again. ", in.Page, b.Len()/60)
			}
			return pageOut{Text: b.String()}, nil
		})
	reg, err := tool.NewRegistry(fetch)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// cachePrice is the fake's rates as the loop prices them.
var cachePrice = loop.Price{InputPerMTok: rateInput, CachedInputPerMTok: rateCacheRead, CacheWriteInputPerMTok: rateWrite5m, OutputPerMTok: rateOutput}

// cacheRun drives a whole run of turns through the adapter against a fake
// API that bills like the real one.
func cacheRun(t *testing.T, turns int, opts *Options, thinking bool) (*loop.Result, *cacheAPI) {
	api := newCacheAPI(t, turns)
	api.thinking = thinking
	return cacheRunOn(t, api, turns, opts)
}

// cacheRunOn is cacheRun against api.
func cacheRunOn(t *testing.T, api *cacheAPI, turns int, opts *Options) (*loop.Result, *cacheAPI) {
	calls := turns * max(api.calls, 1)
	res, err := loop.Run(context.Background(), loop.Config{
		Model:     New(api.client(), opts),
		ModelName: "claude-sonnet-4-6",
		Tools:     pageTool(t),
		Budgets:   loop.Budgets{MaxSteps: turns + 5, MaxToolCalls: calls + 5, Prices: loop.Prices{"claude-sonnet-4-6": cachePrice}},
	}, []llm.Message{
		llm.SystemMessage("You read reports page by page and summarize them. Call fetch_page for each page in turn."),
		llm.UserMessage("Read the whole report, one page at a time, then say so."),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != loop.FinalAnswer || res.Steps != turns {
		t.Fatalf("status %s after %d steps, want final_answer after %d (%s)", res.Status, res.Steps, turns, res.Detail)
	}
	return res, api
}

// The figure: a 40-turn run whose tool returns about 2,000 tokens a
// turn is billed at most 0.25 times its uncached cost, and the tokens and
// cost toolloop reports agree with the bill within 1%. Without the
// breakpoints (PromptCaching off, or the old top-level marker alone when
// turns add more than 20 blocks) the bill is the uncached cost.
//
//	go test ./llm/anthropic -run TestPromptCachingLongRun -v
//
// prints the figures.
func TestPromptCachingLongRun(t *testing.T) {
	const turns = 40
	plain, plainAPI := cacheRun(t, turns, &Options{}, false)
	cached, api := cacheRun(t, turns, &Options{PromptCaching: true}, false)

	bill, uncached := api.totals(), plainAPI.totals()
	if uncached.CacheRead != 0 || uncached.CacheWrite != 0 {
		t.Fatalf("without PromptCaching the fake cached something: %+v", uncached)
	}
	ratio := bill.Dollars / uncached.Dollars
	t.Logf("%d turns, 2,000-token results: uncached $%.4f (%d input tokens); cached $%.4f = %.3fx "+
		"(%d new, %d cache reads, %d cache writes, %d output tokens)",
		turns, uncached.Dollars, uncached.Input, bill.Dollars, ratio, bill.Input, bill.CacheRead, bill.CacheWrite, bill.Out)
	t.Logf("toolloop reports: %d input tokens (%d cached, %d written), %d output, $%.4f; the bill: $%.4f",
		cached.Usage.InputTokens, cached.Usage.CachedInputTokens, cached.Usage.CacheWriteTokens, cached.Usage.OutputTokens, cached.Cost, bill.Dollars)
	if ratio > 0.25 {
		t.Errorf("the cached run cost %.3fx the uncached one; want at most 0.25x", ratio)
	}
	if math.Abs(bill.Uncached-uncached.Dollars) > 1e-9 {
		t.Errorf("the same run priced without its cache is $%.6f, but the run without caching cost $%.6f: the runs differ", bill.Uncached, uncached.Dollars)
	}
	within := func(what string, got, want float64) {
		if want == 0 || math.Abs(got-want)/want > 0.01 {
			t.Errorf("toolloop reports %s %v; the bill says %v (want within 1%%)", what, got, want)
		}
	}
	within("cost", cached.Cost, bill.Dollars)
	within("input tokens", float64(cached.Usage.InputTokens), float64(bill.Input+bill.CacheRead+bill.CacheWrite))
	within("cached input tokens", float64(cached.Usage.CachedInputTokens), float64(bill.CacheRead))
	within("cache-write tokens", float64(cached.Usage.CacheWriteTokens), float64(bill.CacheWrite))
	within("output tokens", float64(cached.Usage.OutputTokens), float64(bill.Out))
	within("uncached cost", plain.Cost, uncached.Dollars)
}

// With CacheTTL1h every breakpoint asks for the hour-long cache, which
// survives a pause the five-minute one does not: a run that waits six
// minutes between turns reads its prefix back with the hour-long cache and
// writes it all again with the default one.
func TestPromptCachingTTL(t *testing.T) {
	for _, tc := range []struct {
		ttl      string
		wantRead bool
	}{{"", false}, {CacheTTL1h, true}} {
		t.Run("ttl="+tc.ttl, func(t *testing.T) {
			api := newCacheAPI(t, 3)
			api.step = 6 * time.Minute
			res, err := loop.Run(context.Background(), loop.Config{
				Model:     New(api.client(), &Options{PromptCaching: true, CacheTTL: tc.ttl}),
				ModelName: "claude-sonnet-4-6",
				Tools:     pageTool(t),
				Budgets:   loop.Budgets{MaxSteps: 5},
			}, []llm.Message{llm.UserMessage("Read two pages.")})
			if err != nil || res.Status != loop.FinalAnswer {
				t.Fatalf("run: %v %+v", err, res)
			}
			reqs := api.requests()
			wantMarker := `"cache_control":{"type":"ephemeral"}`
			if tc.ttl == CacheTTL1h {
				wantMarker = `"cache_control":{"ttl":"1h","type":"ephemeral"}`
			}
			for i, body := range reqs {
				if n := bytes.Count(body, []byte(`"cache_control"`)); n == 0 || n != bytes.Count(body, []byte(wantMarker)) {
					t.Fatalf("request %d: want every marker to be %s:\n%s", i+1, wantMarker, body)
				}
			}
			if got := res.Usage.CachedInputTokens > 0; got != tc.wantRead {
				t.Fatalf("after six-minute pauses, cache reads = %d; want reads: %v", res.Usage.CachedInputTokens, tc.wantRead)
			}
		})
	}
}

func TestCacheTTLValidate(t *testing.T) {
	err := Options{PromptCaching: true, CacheTTL: "10m"}.Validate()
	if err == nil || !strings.Contains(err.Error(), `CacheTTL is "10m"`) {
		t.Fatalf("Validate = %v, want an error naming CacheTTL", err)
	}
	for _, ok := range []string{"", CacheTTL5m, CacheTTL1h} {
		if err := (Options{CacheTTL: ok}).Validate(); err != nil {
			t.Errorf("CacheTTL %q: %v", ok, err)
		}
	}
}

// breakpoints lists where a request's cache_control markers are: "system",
// "tool" or "m<i>.<j>" (block j of message i).
func breakpoints(t *testing.T, body []byte) []string {
	t.Helper()
	var req struct {
		Tools    []map[string]json.RawMessage `json:"tools"`
		System   []map[string]json.RawMessage `json:"system"`
		Messages []struct {
			Content []map[string]json.RawMessage `json:"content"`
		} `json:"messages"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var out []string
	if req.CacheControl != nil {
		out = append(out, "top-level")
	}
	for i, b := range req.Tools {
		if b["cache_control"] != nil {
			out = append(out, fmt.Sprintf("tool%d", i))
		}
	}
	for i, b := range req.System {
		if b["cache_control"] != nil {
			out = append(out, fmt.Sprintf("system%d", i))
		}
	}
	for i, m := range req.Messages {
		for j, b := range m.Content {
			if b["cache_control"] != nil {
				out = append(out, fmt.Sprintf("m%d.%d", i, j))
			}
		}
	}
	return out
}

// The breakpoints of a turn: the head (the last system block, else the last
// tool), the end of the previous turn's request, and the end of this one;
// thinking blocks never carry one.
func TestBreakpointPlacement(t *testing.T) {
	calls := func(ids ...string) llm.Message {
		m := llm.Message{Role: llm.RoleAssistant}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: id, Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)})
		}
		return m
	}
	result := func(id string) llm.Message {
		return llm.ToolMessage(llm.ToolResult{CallID: id, Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":12}`)})
	}
	thinking := calls("c")
	thinking.State = &llm.ProviderState{Provider: provider, Data: []byte(`{"v":1,"blocks":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"tool_use","id":"c"}]}`)}
	for _, tc := range []struct {
		name    string
		history []llm.Message
		tools   bool
		want    string
	}{
		{"first turn", []llm.Message{llm.SystemMessage("Be brief."), llm.UserMessage("Hi.")}, true, "system0 m0.0"},
		{"no system: the last tool", []llm.Message{llm.UserMessage("Hi.")}, true, "tool1 m0.0"},
		{"neither", []llm.Message{llm.UserMessage("Hi.")}, false, "m0.0"},
		{"second turn", []llm.Message{llm.SystemMessage("S."), llm.UserMessage("Hi."), calls("a"), result("a")}, true,
			"system0 m0.0 m2.0"},
		{"a batch of 25 calls", append([]llm.Message{llm.SystemMessage("S."), llm.UserMessage("Hi."), calls("a"), result("a"),
			calls(ids(25)...)}, results(25)...), true, "system0 m2.0 m4.24"},
		{"thinking turn last: its tool_use", []llm.Message{llm.UserMessage("Hi."), thinking}, false, "m0.0 m1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, ok("final_answer.json"))
			m := New(s.client(), &Options{Model: "claude-sonnet-4-6", PromptCaching: true})
			req := &llm.Request{Messages: tc.history}
			if tc.tools {
				req.Tools = weatherTools()
			}
			if _, err := m.Generate(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(breakpoints(t, s.last()), " "); got != tc.want {
				t.Fatalf("breakpoints at %q, want %q:\n%s", got, tc.want, s.last())
			}
		})
	}
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("b%02d", i)
	}
	return out
}

func results(n int) []llm.Message {
	out := make([]llm.Message, n)
	for i, id := range ids(n) {
		out[i] = llm.ToolMessage(llm.ToolResult{CallID: id, Name: "get_weather", Status: llm.StatusOK, Content: json.RawMessage(`{"temp_c":12}`)})
	}
	return out
}

// A run whose every turn makes 12 parallel calls (24 new blocks a turn,
// more than the API's 20-block lookback) still reads each turn's prefix
// from the cache. The API's automatic caching (one top-level
// cache_control, a breakpoint on the last block) misses every time and
// pays for writing the whole prompt again each turn, more than no cache
// at all.
//
//	go test ./llm/anthropic -run TestPromptCachingBatchRun -v
//
// prints the figures.
func TestPromptCachingBatchRun(t *testing.T) {
	const turns, calls = 15, 12
	run := func(opts *Options) (*loop.Result, cacheBill) {
		api := newCacheAPI(t, turns)
		api.calls = calls
		res, _ := cacheRunOn(t, api, turns, opts)
		return res, api.totals()
	}
	_, plain := run(&Options{})
	auto := option.WithJSONSet("cache_control", map[string]string{"type": "ephemeral"})
	_, top := run(&Options{RequestOptions: []option.RequestOption{auto}})
	res, bill := run(&Options{PromptCaching: true})
	t.Logf("%d turns of %d calls: uncached $%.4f; top-level cache_control $%.4f = %.3fx (%d cache reads); breakpoints $%.4f = %.3fx (%d cache reads)",
		turns, calls, plain.Dollars, top.Dollars, top.Dollars/plain.Dollars, top.CacheRead, bill.Dollars, bill.Dollars/plain.Dollars, bill.CacheRead)
	if top.CacheRead != 0 {
		t.Fatalf("the fake let the top-level marker read across 24 blocks: %+v", top)
	}
	// Each turn writes its 24,000 new tokens at 1.25x; over 15 turns that
	// comes to about a quarter of the uncached bill.
	if r := bill.Dollars / plain.Dollars; r > 0.3 {
		t.Fatalf("the batch run cost %.3fx its uncached bill; want at most 0.3x", r)
	}
	if res.Usage.CachedInputTokens != bill.CacheRead {
		t.Fatalf("the run reports %d cached tokens; the bill says %d", res.Usage.CachedInputTokens, bill.CacheRead)
	}
}

// A turn that adds more than the API's 20-block lookback (a batch of 12
// parallel calls and their results is 24 blocks) still reads the previous
// turn's prefix: the breakpoint on the previous request's end finds it
// where the tail's lookback cannot.
func TestPromptCachingLongBatch(t *testing.T) {
	api := newCacheAPI(t, 99)
	m := New(api.client(), &Options{Model: "claude-sonnet-4-6", PromptCaching: true})
	page := strings.Repeat("The figures went up again. ", 300)
	history := []llm.Message{llm.SystemMessage("S."), llm.UserMessage("Read the report. " + page)}
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: history}); err != nil {
		t.Fatal(err)
	}
	batch := llm.Message{Role: llm.RoleAssistant}
	history = append(history, llm.Message{})
	for i := range 12 {
		id := fmt.Sprintf("toolu_%02d", i)
		batch.ToolCalls = append(batch.ToolCalls, llm.ToolCall{ID: id, Name: "fetch_page", Arguments: json.RawMessage(fmt.Sprintf(`{"page":%d}`, i))})
		history = append(history, llm.ToolMessage(llm.ToolResult{CallID: id, Name: "fetch_page", Status: llm.StatusOK,
			Content: json.RawMessage(fmt.Sprintf(`{"text":%q}`, page))}))
	}
	history[2] = batch
	resp, err := m.Generate(context.Background(), &llm.Request{Messages: history})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.CachedInputTokens == 0 {
		t.Fatalf("the turn after a 24-block batch read nothing from the cache: %+v", resp.Usage)
	}
}

// Consecutive requests of a run share their prefix byte for byte once the
// cache_control markers are taken out: the next request is the previous
// one with the new turn appended, nothing before it re-ordered or
// re-encoded. The markers themselves move (the previous tail's marker
// goes to the new tail), which changes bytes but not the cache's key: the
// API matches cached prefixes by content and reads a marker only as the
// place to look (see placeBreakpoints).
//
// With thinking on, the assistant turns go back with their signed thinking
// blocks, unchanged and where they stood, and the run reads its cache as
// well as without.
func TestRequestsShareTheirPrefix(t *testing.T) {
	for _, thinking := range []bool{false, true} {
		t.Run(fmt.Sprintf("thinking=%v", thinking), func(t *testing.T) { testSharedPrefix(t, thinking) })
	}
}

func testSharedPrefix(t *testing.T, thinking bool) {
	res, api := cacheRun(t, 5, &Options{PromptCaching: true}, thinking)
	reqs := api.requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests, want 5", len(reqs))
	}
	for i := 1; i < len(reqs); i++ {
		prev, next := withoutCacheControl(reqs[i-1]), withoutCacheControl(reqs[i])
		if bytes.Contains(prev, []byte("cache_control")) {
			t.Fatalf("request %d still has a marker after taking them out:\n%s", i, prev)
		}
		// The SDK writes max_tokens, then the messages, then the other
		// fields: the messages sent before must open the next request's
		// messages byte for byte, and all that follows them must be the
		// same.
		pm, pr := splitMessages(t, prev)
		nm, nr := splitMessages(t, next)
		if !bytes.HasPrefix(nm, pm) || nm[len(pm)] != ',' {
			t.Fatalf("request %d's messages do not begin with request %d's:\n%s\n---\n%s", i+1, i, pm, nm)
		}
		if !bytes.Equal(pr, nr) {
			t.Fatalf("request %d's fields after the messages differ from request %d's:\n%s\n---\n%s", i+1, i, pr, nr)
		}
	}
	if thinking && !bytes.Contains(reqs[4], []byte(`{"signature":"sig-003","thinking":"Page 3 comes next.","type":"thinking"}`)) {
		t.Fatalf("the last request does not send the third turn's thinking back:\n%s", reqs[4])
	}
	if bill := api.totals(); bill.CacheRead == 0 || res.Usage.CachedInputTokens != bill.CacheRead {
		t.Fatalf("the run read %d tokens from the cache, reporting %d; want reads", bill.CacheRead, res.Usage.CachedInputTokens)
	}
}

// splitMessages splits a request body at the end of its messages array:
// the body up to its last message's closing brace, and what follows the
// array.
func splitMessages(t *testing.T, body []byte) (msgs, rest []byte) {
	t.Helper()
	end := bytes.Index(body, []byte(`}],"model":`))
	if end < 0 || !bytes.HasPrefix(body, []byte(`{"max_tokens":`)) {
		t.Fatalf("cannot find the messages of:\n%s", body)
	}
	return body[:end+1], body[end+2:]
}
