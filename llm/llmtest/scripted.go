package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/toolloop/toolloop/llm"
)

// Turn is one scripted model turn. Exactly one of Response, Err or Func
// decides the answer; Delay is waited first (honouring the context).
type Turn struct {
	Response *llm.Response
	Err      error
	// Func computes the answer from the request, for scripts whose replies
	// depend on what the loop sent.
	Func  func(req *llm.Request) (*llm.Response, error)
	Delay time.Duration
}

// Text returns a turn that answers with text and no tool calls.
func Text(s string) Turn {
	return Turn{Response: &llm.Response{
		Message:      llm.Message{Role: llm.RoleAssistant, Text: s},
		FinishReason: "stop",
	}}
}

// Calls returns a turn that proposes the given tool calls.
func Calls(calls ...llm.ToolCall) Turn {
	return Turn{Response: &llm.Response{
		Message:      llm.Message{Role: llm.RoleAssistant, ToolCalls: calls},
		FinishReason: "tool_calls",
	}}
}

// Call builds a tool call whose arguments are args encoded as JSON; args may
// also be a string or json.RawMessage used verbatim.
func Call(id, name string, args any) llm.ToolCall {
	var raw json.RawMessage
	switch a := args.(type) {
	case string:
		raw = json.RawMessage(a)
	case json.RawMessage:
		raw = a
	default:
		b, err := json.Marshal(a)
		if err != nil {
			panic(fmt.Sprintf("llmtest.Call: %v", err))
		}
		raw = b
	}
	return llm.ToolCall{ID: id, Name: name, Arguments: raw}
}

// WithUsage returns a copy of t whose response reports the given usage.
func (t Turn) WithUsage(in, out int64) Turn {
	if t.Response != nil {
		r := *t.Response
		r.Usage = llm.Usage{InputTokens: in, OutputTokens: out}
		t.Response = &r
	}
	return t
}

// Model plays a script. When the script runs out it repeats the last turn if
// Repeat is set, and otherwise fails the request with ErrScriptExhausted.
// It is safe for concurrent use.
type Model struct {
	turns  []Turn
	repeat bool

	mu       sync.Mutex
	next     int
	requests []llm.Request
}

// ErrScriptExhausted is returned when a request arrives after the last turn.
var ErrScriptExhausted = errors.New("llmtest: script exhausted")

// New returns a model that plays turns in order.
func New(turns ...Turn) *Model { return &Model{turns: turns} }

// Repeating returns a model that plays turns in order and then repeats the
// last one forever.
func Repeating(turns ...Turn) *Model { return &Model{turns: turns, repeat: true} }

// Generate answers with the next scripted turn.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	// Record a deep copy of the messages: the loop never changes a request
	// once sent, but other callers of a test model may edit theirs, and a
	// test comparing provider state byte for byte needs what was sent.
	rec := *req
	if req.Messages != nil {
		rec.Messages = make([]llm.Message, len(req.Messages))
		for i := range req.Messages {
			rec.Messages[i] = cloneMessage(req.Messages[i])
		}
	}
	m.mu.Lock()
	m.requests = append(m.requests, rec)
	i := m.next
	m.next++
	m.mu.Unlock()

	if i >= len(m.turns) {
		if !m.repeat || len(m.turns) == 0 {
			return nil, ErrScriptExhausted
		}
		i = len(m.turns) - 1
	}
	t := m.turns[i]
	if t.Delay > 0 {
		timer := time.NewTimer(t.Delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case t.Func != nil:
		return t.Func(req)
	case t.Err != nil:
		return nil, t.Err
	case t.Response != nil:
		// A fresh copy each time, so a caller that edits its answer cannot
		// change what the script plays next (Repeating replays the turn).
		r := *t.Response
		r.Message = cloneMessage(r.Message)
		return &r, nil
	}
	return nil, fmt.Errorf("llmtest: turn %d is empty", i+1)
}

// cloneMessage returns a copy of m that shares no memory with it: its
// calls with their arguments and provider state, its result, reasoning and
// provider state.
func cloneMessage(m llm.Message) llm.Message {
	if m.ToolCalls != nil {
		calls := make([]llm.ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			c.Arguments = slices.Clone(c.Arguments)
			c.State = cloneState(c.State)
			calls[i] = c
		}
		m.ToolCalls = calls
	}
	if m.Result != nil {
		r := *m.Result
		r.Content = slices.Clone(r.Content)
		m.Result = &r
	}
	m.Reasoning = slices.Clone(m.Reasoning)
	m.State = cloneState(m.State)
	return m
}

func cloneState(s *llm.ProviderState) *llm.ProviderState {
	if s == nil {
		return nil
	}
	return &llm.ProviderState{Provider: s.Provider, Data: slices.Clone(s.Data)}
}

// Requests returns the requests received so far, oldest first.
func (m *Model) Requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llm.Request(nil), m.requests...)
}
