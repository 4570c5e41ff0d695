package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/replay"
	"github.com/toolloop/toolloop/tool"
)

// pageTool returns a long page of text for any page number.
func pageTool(t testing.TB) *tool.Registry {
	t.Helper()
	type in struct {
		Page int `json:"page"`
	}
	tl, err := tool.New(tool.Spec[in]{Name: "read_page", HonorsContext: true}, func(_ context.Context, a in) (string, error) {
		return fmt.Sprintf("page %d: %s", a.Page, strings.Repeat("lorem ipsum dolor sit amet ", 120)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(tl)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// contextRun runs a loop whose history outgrows a small window, so that
// old results are cleared and, with compact, the earlier turns summarized.
func contextRun(t *testing.T, compact bool) []loop.Event {
	t.Helper()
	model := llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		used := 0
		for _, m := range req.Messages {
			b, _ := json.Marshal(m)
			used += len(b) / 4
		}
		u := llm.Usage{InputTokens: int64(used), OutputTokens: 10}
		if req.Step > 5 || len(req.Tools) == 0 {
			return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Text: "done reading"}, Usage: u, FinishReason: "stop"}, nil
		}
		args, _ := json.Marshal(map[string]int{"page": req.Step})
		return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
			{ID: fmt.Sprintf("c%d", req.Step), Name: "read_page", Arguments: args}}}, Usage: u, FinishReason: "tool_calls"}, nil
	})
	cp := &loop.ContextPolicy{Window: 2500, KeepToolResults: 1}
	if compact {
		// Nothing may be cleared: only a summary makes room.
		cp.Compact, cp.ExcludeTools = true, []string{"read_page"}
	}
	res, err := loop.Run(context.Background(), loop.Config{
		Model: model, ModelName: "pager", Tools: pageTool(t), NewRunID: func() string { return "run-pager" }, Context: cp,
	}, []llm.Message{llm.UserMessage("read the pages")})
	if res == nil {
		t.Fatal(err)
	}
	return res.Events
}

func kinds(events []loop.Event) map[loop.EventKind]int {
	n := map[loop.EventKind]int{}
	for _, ev := range events {
		n[ev.Kind]++
	}
	return n
}

// TestReplayContextEdits: a run whose context was cleared replays with no
// difference, the edits decided anew and matched; a recorded edit other
// than the one the decider makes now is reported as a context difference.
func TestReplayContextEdits(t *testing.T) {
	events := contextRun(t, false)
	if kinds(events)[loop.ContextEdited] == 0 {
		t.Fatalf("the run made no context edit: %v", kinds(events))
	}
	rep, err := replay.Run(context.Background(), events, replay.Config{Tools: pageTool(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Equal() || kinds(rep.Events)[loop.ContextEdited] != kinds(events)[loop.ContextEdited] {
		t.Fatalf("same configuration:\n%s", format(rep))
	}
	tampered := append([]loop.Event(nil), events...)
	for i := range tampered {
		if tampered[i].Kind == loop.ContextEdited {
			tampered[i].Edit = &loop.ContextEdit{}
			break
		}
	}
	rep, err = replay.Run(context.Background(), tampered, replay.Config{Tools: pageTool(t)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Diff == nil || rep.Diff.Aspect != replay.Context || !strings.HasPrefix(rep.Diff.New, "edits the context: ") {
		t.Fatalf("another recorded edit:\n%s", format(rep))
	}
	// The edits are the decider's: with a lower budget the run stops
	// before them, and the report says so, not that the context differs.
	b := events[0].Start.Budgets
	b.MaxSteps = 2
	rep, err = replay.Run(context.Background(), events, replay.Config{Tools: pageTool(t), Budgets: &b})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Diff == nil || rep.Diff.Aspect != replay.Budget {
		t.Fatalf("MaxSteps 2:\n%s", format(rep))
	}
}

// TestReplaySummaries: a run compacted by a summary replays with no
// difference, the summary answered from the log.
func TestReplaySummaries(t *testing.T) {
	events := contextRun(t, true)
	if kinds(events)[loop.ContextSummarized] == 0 {
		t.Fatalf("the run made no summary: %v", kinds(events))
	}
	rep, err := replay.Run(context.Background(), events, replay.Config{Tools: pageTool(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Equal() || kinds(rep.Events)[loop.ContextSummarized] != kinds(events)[loop.ContextSummarized] {
		t.Fatalf("same configuration:\n%s", format(rep))
	}
}
