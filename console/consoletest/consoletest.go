// Package consoletest gives tests of the web console (handler tests, and
// browser tests that drive a console started with httptest) runs to show:
// the order-desk sandbox's, recorded in any store, and a backend that
// resumes them as toolloop resume does.
package consoletest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// Log is a store the sandbox's runs can be recorded in and resumed from:
// an event log that is also the runs' idempotency ledger (store.Memory,
// store/sqlite's Store).
type Log interface {
	store.EventLog
	store.Ledger
}

// Backend returns the console's backend over log: runs answered with
// loop.Decide, and the sandbox's runs resumed with their scenario (the
// scripted model goes on where it paused) over log. Other runs it cannot
// resume (console.ErrNotHere).
func Backend(log Log) *console.LogBackend {
	return &console.LogBackend{Log: log, ResumeFunc: func(ctx context.Context, runID string) (*loop.Result, error) {
		events, err := loop.LoadEvents(ctx, log, runID)
		if err != nil {
			return nil, err
		}
		if len(events) == 0 || events[0].Start == nil {
			return nil, fmt.Errorf("run %s has no started event", runID)
		}
		s, ok := orders.LookupSession(events[0].Start.SessionID)
		if !ok {
			return nil, fmt.Errorf("%w: run %s is not a sandbox run (session %q)", console.ErrNotHere, runID, events[0].Start.SessionID)
		}
		res, _, err := s.Resume(ctx, runID, orders.RunOptions{Store: log, Ledger: log})
		return res, err
	}}
}

// Scenario plays the sandbox scenario name into log and returns its run
// ID. "confirmation_required" leaves a run paused on call call_r1 (a
// refund), for a person to approve or deny.
func Scenario(ctx context.Context, log Log, name string) (string, error) {
	s, ok := orders.Lookup(name)
	if !ok {
		return "", fmt.Errorf("consoletest: no scenario %q; have %v", name, orders.Names())
	}
	res, _, err := s.RunWith(ctx, orders.RunOptions{Store: log, Ledger: log})
	if err != nil {
		return "", err
	}
	return res.RunID, nil
}

// Answer records into log a run whose model answers text at once (and
// whose customer asked ask): for checking that pages show model output as
// text, however much it looks like HTML.
func Answer(ctx context.Context, log Log, ask, text string) (string, error) {
	s := orders.Scenario{Name: "answer", Want: loop.FinalAnswer, Ask: ask,
		Script: func(context.CancelFunc) []llmtest.Turn { return []llmtest.Turn{llmtest.Text(text)} }}
	res, _, err := s.RunWith(ctx, orders.RunOptions{Store: log, Ledger: log})
	if err != nil {
		return "", err
	}
	if res.Status != loop.FinalAnswer {
		return "", errors.New("consoletest: the answer run ended with " + string(res.Status))
	}
	return res.RunID, nil
}

// Cached records into log a run with context management whose model
// reports prompt-cache usage as a caching provider does: it reads pages
// of about 1,000 tokens in a window of 8,000, so that old results are
// cleared three times, and each turn's input is the request's bytes / 4,
// read from the cache as far as the request repeats the one before and
// written to it after that. For pages that show the token account.
func Cached(ctx context.Context, log Log) (string, error) {
	type pageIn struct {
		Page int `json:"page"`
	}
	fetch := tool.MustNew(tool.Spec[pageIn]{Name: "fetch_page", Description: "reads one page"},
		func(_ context.Context, in pageIn) (string, error) {
			return strings.Repeat(fmt.Sprintf("page %d says little. ", in.Page), 200), nil
		})
	reg, err := tool.NewRegistry(fetch)
	if err != nil {
		return "", err
	}
	const pages = 16
	var (
		mu   sync.Mutex
		prev []byte
		read int
	)
	model := llmtest.Repeating(llmtest.Turn{Func: func(req *llm.Request) (*llm.Response, error) {
		body, err := json.Marshal(req.Messages)
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
		msg := llm.Message{Role: llm.RoleAssistant, Text: "I have read every page."}
		if read < pages {
			read++
			msg.Text = ""
			msg.ToolCalls = []llm.ToolCall{llmtest.Call(fmt.Sprintf("c%d", read), "fetch_page", fmt.Sprintf(`{"page":%d}`, read))}
		}
		return &llm.Response{Message: msg, Usage: u}, nil
	}})
	res, err := loop.Run(ctx, loop.Config{Model: model, ModelName: "cached-model", Tools: reg, Store: log,
		Context:  &loop.ContextPolicy{Window: 8000, KeepToolResults: 2},
		Budgets:  loop.Budgets{MaxSteps: pages + 5, MaxToolCalls: pages + 5},
		NewRunID: func() string { return "run-cached" }},
		[]llm.Message{llm.SystemMessage("You read pages."), llm.UserMessage("Read every page.")})
	if err != nil {
		return "", fmt.Errorf("consoletest: the cached run: %w", err)
	}
	return res.RunID, nil
}
