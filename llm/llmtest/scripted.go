package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

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
	// OnDelta, when set, is called by Stream before it yields delta i
	// (from 0) of the turn's reply, with the request's context: a hook to
	// pace a stream (it may block, and should then honour ctx) or to break
	// it. An error ends the stream there, as a connection that failed:
	// the consumer has the deltas before i, then the error. Generate does
	// not call it.
	OnDelta func(ctx context.Context, i int) error
}

// BreakAfter returns a copy of t whose stream fails with err after n
// deltas: with n == 0 before the first, like a request that failed, and
// otherwise part-way through the reply. Generate still answers in full.
func (t Turn) BreakAfter(n int, err error) Turn {
	t.OnDelta = func(_ context.Context, i int) error {
		if i == n {
			return err
		}
		return nil
	}
	return t
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

	mu        sync.Mutex
	next      int
	requests  []llm.Request
	abandoned int
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
	resp, _, err := m.answer(ctx, req)
	return resp, err
}

// answer plays the next turn: it records req, waits the turn's delay and
// returns its reply, with the turn.
func (m *Model) answer(ctx context.Context, req *llm.Request) (*llm.Response, Turn, error) {
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
			return nil, Turn{}, ErrScriptExhausted
		}
		i = len(m.turns) - 1
	}
	t := m.turns[i]
	if t.Delay > 0 {
		timer := time.NewTimer(t.Delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, t, ctx.Err()
		case <-timer.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, t, err
	}
	switch {
	case t.Func != nil:
		resp, err := t.Func(req)
		return resp, t, err
	case t.Err != nil:
		return nil, t, t.Err
	case t.Response != nil:
		// A fresh copy each time, so a caller that edits its answer cannot
		// change what the script plays next (Repeating replays the turn).
		r := *t.Response
		r.Message = cloneMessage(r.Message)
		return &r, t, nil
	}
	return nil, t, fmt.Errorf("llmtest: turn %d is empty", i+1)
}

// Stream plays the next scripted turn as a stream, which makes Model an
// llm.StreamingModel. It answers as Generate does (it records the request,
// waits the turn's delay, and a turn's error, an exhausted script or an
// ended context fail the stream before its first delta) and then yields
// the reply as Deltas splits it, calling the turn's OnDelta before each.
// If the consumer stops early, or the context ends part-way, the stream
// stops at once: the scripted counterpart of closing the connection,
// which Abandoned counts.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		resp, t, err := m.answer(ctx, req)
		if err == nil && resp == nil {
			err = errors.New("llmtest: the turn's Func returned neither a response nor an error")
		}
		if err != nil {
			yield(llm.Delta{}, err)
			return
		}
		for i, d := range Deltas(resp) {
			if t.OnDelta != nil {
				err = t.OnDelta(ctx, i)
			}
			if err == nil {
				err = ctx.Err()
			}
			if err != nil {
				if ctx.Err() != nil {
					m.abandon()
				}
				yield(llm.Delta{}, err)
				return
			}
			if !yield(d, nil) {
				m.abandon()
				return
			}
		}
	}
}

func (m *Model) abandon() {
	m.mu.Lock()
	m.abandoned++
	m.mu.Unlock()
}

// Abandoned counts the streams that stopped part-way because their
// consumer stopped ranging over them or their context ended: a test of
// cancellation checks with it that the connection would have been
// closed.
func (m *Model) Abandoned() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.abandoned
}

// pieceBytes is the most text or argument bytes one scripted delta
// carries: small, so that a reply of a few words streams in several
// pieces.
const pieceBytes = 8

// Deltas splits resp into the deltas a provider might stream it as, which
// an llm.Accumulator assembles back into resp: each reasoning part, the
// input usage, the text in pieces of a few bytes, the tool calls with
// their arguments in pieces, interleaved when there are several (call 1
// starts before call 0's arguments are complete), the full usage, and
// the finish. A reasoning part's provider is the first part's (the
// stream's Finish carries one for all); a call's arguments are exactly
// its bytes, so a call without any assembles with empty arguments.
func Deltas(resp *llm.Response) []llm.Delta {
	msg := &resp.Message
	var ds []llm.Delta
	for i, r := range msg.Reasoning {
		pieces := split(r.Text)
		if len(pieces) == 0 {
			pieces = []string{""}
		}
		for _, p := range pieces {
			ds = append(ds, llm.Delta{Kind: llm.DeltaReasoning, Index: i, Text: p, Hidden: r.Hidden})
		}
	}
	if u := resp.Usage; u != (llm.Usage{}) {
		ds = append(ds, llm.Delta{Kind: llm.DeltaUsage, Usage: &llm.Usage{
			InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens, CacheWriteTokens: u.CacheWriteTokens}})
	}
	for _, p := range split(msg.Text) {
		ds = append(ds, llm.Delta{Kind: llm.DeltaText, Text: p})
	}
	args := make([][]string, len(msg.ToolCalls))
	for i, c := range msg.ToolCalls {
		args[i] = split(string(c.Arguments))
	}
	for round := 0; ; round++ {
		more := false
		for i, c := range msg.ToolCalls {
			if round == 0 {
				ds = append(ds, llm.Delta{Kind: llm.DeltaToolCallStart, Index: i, Call: &llm.ToolCall{ID: c.ID, Name: c.Name}})
			}
			switch {
			case round < len(args[i]):
				ds = append(ds, llm.Delta{Kind: llm.DeltaToolCallArguments, Index: i, Text: args[i][round]})
				more = true
			case round == len(args[i]):
				end := llm.Delta{Kind: llm.DeltaToolCallEnd, Index: i}
				if c.State != nil {
					end.Call = &llm.ToolCall{State: c.State}
				}
				ds = append(ds, end)
				more = true
			}
		}
		if !more {
			break
		}
	}
	if u := resp.Usage; u != (llm.Usage{}) {
		ds = append(ds, llm.Delta{Kind: llm.DeltaUsage, Usage: &u})
	}
	f := &llm.Finish{ID: resp.ID, Model: resp.Model, FinishReason: resp.FinishReason, Truncated: resp.Truncated,
		DroppedState: resp.DroppedState, DroppedReasoning: resp.DroppedReasoning, State: msg.State}
	if len(msg.Reasoning) > 0 {
		f.Provider = msg.Reasoning[0].Provider
	}
	return append(ds, llm.Delta{Kind: llm.DeltaFinish, Finish: f})
}

// split cuts s into pieces of at most pieceBytes, on rune boundaries.
func split(s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(pieceBytes, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
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
