package trace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/trace"
)

// cachingModel answers as a provider with a prompt cache reports usage: a
// request's input is its tools' and messages' JSON bytes / 4, of which the
// bytes it shares from the start with the request before are read from the
// cache and the rest written to it. It asks for page after page until it
// has read pages, then answers; a compaction's summary request gets a
// summary.
func cachingModel(pages int) *llmtest.Model {
	var (
		mu   sync.Mutex
		prev []byte
		read int
	)
	return llmtest.Repeating(llmtest.Turn{Func: func(req *llm.Request) (*llm.Response, error) {
		body, err := json.Marshal(struct {
			Tools    []llm.ToolDefinition
			Messages []llm.Message
		}{req.Tools, req.Messages})
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		shared := 0
		for shared < len(body) && shared < len(prev) && body[shared] == prev[shared] {
			shared++
		}
		prev = body
		u := llm.Usage{InputTokens: int64(len(body) / 4), CachedInputTokens: int64(shared / 4), OutputTokens: 20}
		u.CacheWriteTokens = u.InputTokens - u.CachedInputTokens
		msg := llm.Message{Role: llm.RoleAssistant}
		switch last := req.Messages[len(req.Messages)-1]; {
		case strings.Contains(last.Text, loop.SummaryInstruction):
			msg.Text = fmt.Sprintf("Pages 1 to %d were read; each says little.", read)
		case read < pages:
			read++
			msg.ToolCalls = []llm.ToolCall{llmtest.Call(fmt.Sprintf("c%d", read), "fetch_page", fmt.Sprintf(`{"page":%d}`, read))}
		default:
			msg.Text = "I have read every page."
		}
		return &llm.Response{Message: msg, Usage: u}, nil
	}})
}

// pagedRun runs cachingModel over pages of about 1,000 tokens each in a
// window of 8,000 tokens, with the context policy p.
func pagedRun(t *testing.T, pages int, p *loop.ContextPolicy) *loop.Result {
	t.Helper()
	type pageIn struct {
		Page int `json:"page"`
	}
	fetch := tool.MustNew(tool.Spec[pageIn]{Name: "fetch_page", Description: "reads one page"},
		func(_ context.Context, in pageIn) (string, error) {
			return strings.Repeat(fmt.Sprintf("page %d says little. ", in.Page), 200), nil
		})
	reg, err := tool.NewRegistry(fetch)
	if err != nil {
		t.Fatal(err)
	}
	res, err := loop.Run(context.Background(), loop.Config{Model: cachingModel(pages), ModelName: "m", Tools: reg, Context: p,
		Budgets: loop.Budgets{MaxSteps: pages + 5, MaxToolCalls: pages + 5}},
		[]llm.Message{llm.SystemMessage("You read pages."), llm.UserMessage("Read every page.")})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// TestTokensOfARun: the token account of a run that cleared old results,
// and of one that compacted its history, adds up to what the run counted;
// the turns after each edit read less from the cache, and every such miss
// is named as the edit's expected cost, none reported by diagnose.
func TestTokensOfARun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy loop.ContextPolicy
		kind   loop.EventKind
		span   trace.SpanKind
		line   string
	}{
		{"clearing", loop.ContextPolicy{Window: 8000, KeepToolResults: 2}, loop.ContextEdited, trace.SpanEditContext, "cleared"},
		{"compaction", loop.ContextPolicy{Window: 8000, KeepToolResults: 2, ExcludeTools: []string{"fetch_page"}, Compact: true},
			loop.ContextSummarized, trace.SpanSummarize, "summarized messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := pagedRun(t, 16, &tc.policy)
			var sum llm.Usage
			turns, edits := 0, 0
			for _, l := range trace.Tokens(res.Events) {
				sum = sum.Add(l.Usage)
				switch l.Kind {
				case loop.ModelResponded:
					turns++
				case tc.kind:
					edits++
				}
			}
			if sum != res.Usage || turns != res.Steps || edits == 0 {
				t.Fatalf("the account sums to %+v over %d turns and %d edits; the run counted %+v over %d turns",
					sum, turns, edits, res.Usage, res.Steps)
			}
			drops := trace.CacheDrops(res.Events)
			if len(drops) == 0 {
				t.Fatalf("no cache miss after %d edit(s)", edits)
			}
			for _, d := range drops {
				if !d.Expected() {
					t.Errorf("a miss no edit explains: %+v", d)
				}
			}
			// Nor are the results a compaction summarized away lost.
			for _, f := range trace.Diagnose(res.Events) {
				if f.Kind == trace.CacheMiss || f.Kind == trace.LostResults {
					t.Errorf("diagnose: %v", f)
				}
			}
			// Each edit is a span of the timeline; a summary request is a
			// model request, and the budgets are checked after it.
			spans, checks := 0, 0
			for _, s := range trace.Spans(res.Events) {
				switch {
				case s.Kind == tc.span && s.Event.Kind == tc.kind:
					spans++
					if s.Kind == trace.SpanSummarize && s.Name != "chat m" {
						t.Errorf("a summary request's span is named %q, want chat m", s.Name)
					}
				case s.Kind == trace.SpanBudget && s.Budget.Point == trace.AfterSummary:
					checks++
				}
			}
			if spans != edits || (tc.kind == loop.ContextSummarized) != (checks == edits) {
				t.Errorf("%d edits, %d %s spans, %d after_summary checks", edits, spans, tc.span, checks)
			}
			out := show(t, res.Events, nil)
			if !strings.Contains(out, tc.line) || !strings.Contains(out, "cache rewritten, expected: the "+map[loop.EventKind]string{
				loop.ContextEdited: "clearing", loop.ContextSummarized: "compaction"}[tc.kind]) {
				t.Errorf("show lacks the edit or its cost:\n%s", out)
			}
		})
	}
}

// TestShowNotesFollowTheirTurnAfterCompaction: a compaction takes earlier
// assistant messages out of the history, and a note on what a response's
// adapter dropped still goes under that response's own message, not
// under the message that took its place by position.
func TestShowNotesFollowTheirTurnAfterCompaction(t *testing.T) {
	res := pagedRun(t, 16, &loop.ContextPolicy{Window: 8000, KeepToolResults: 2, ExcludeTools: []string{"fetch_page"}, Compact: true})
	events := slices.Clone(res.Events)
	compacted, last := false, -1
	for i := range events {
		compacted = compacted || events[i].Kind == loop.ContextSummarized
		if events[i].Kind == loop.ModelResponded {
			last = i
		}
	}
	if !compacted || last < 0 {
		t.Fatalf("the run did not compact (%v) or answer (%d)", compacted, last)
	}
	resp := *events[last].Response
	resp.DroppedReasoning = 3
	events[last].Response = &resp
	out := show(t, events, nil)
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, "dropped 3 reasoning block(s)") {
			if i == 0 || !strings.Contains(lines[i-1], strconv.Quote(resp.Message.Text)) {
				t.Fatalf("the note follows %q, not the final answer %q:\n%s", lines[max(i-1, 0)], resp.Message.Text, out)
			}
			return
		}
	}
	t.Fatalf("no note on the final answer:\n%s", out)
}
