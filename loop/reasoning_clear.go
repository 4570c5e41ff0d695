package loop

import (
	"slices"

	"github.com/toolloop/toolloop/llm"
)

// Clearing old reasoning (ContextPolicy.ClearReasoning). A reasoning
// model's assistant messages carry its thinking (Message.Reasoning) and
// the opaque state its provider needs back (Message.State: Anthropic's
// signed thinking blocks, the Responses API's encrypted reasoning items,
// Gemini's signed thought parts). Each provider needs that state back
// only for the current tool-use cycle, the messages after the latest user
// message (a tool loop's whole run after its prompt is one cycle):
// Anthropic requires the thinking of the cycle's assistant turn, which a
// tool loop is, and ignores or may drop older thinking; the Responses API
// uses reasoning items of the current cycle's calls; Gemini 3 validates
// thought signatures only within the current turn. So only the
// reasoning of messages before the current cycle is cleared: the
// opening messages of a session that goes on from earlier runs, the
// turns before a compaction's summary or before a corrected answer. Its
// calls' state goes too (Gemini's signatures on function calls), which
// Gemini does not validate before the current turn.

// ClearedReasoning is one assistant message whose reasoning a context
// edit cleared (ContextEdit.Reasoning).
type ClearedReasoning struct {
	// At is the message's index in the history when it was cleared.
	At int `json:"at"`
	// Tokens is the estimate of what was cleared.
	Tokens int `json:"tokens"`
}

// heldThought is an assistant message that still has reasoning or
// provider state, and what clearing it would save.
type heldThought struct {
	At     int `json:"at"`
	Tokens int `json:"n"`
}

// noteMessage records, for clearing reasoning, the message appended at
// index at: a user message opens a new cycle; an assistant message with
// reasoning or provider state is one whose reasoning may be cleared once
// its cycle is over.
func (c *contextMemory) noteMessage(at int, m *llm.Message) {
	switch m.Role {
	case llm.RoleUser:
		c.Cycle = at
	case llm.RoleAssistant:
		if m.State != nil || len(m.Reasoning) > 0 || slices.ContainsFunc(m.ToolCalls, func(c llm.ToolCall) bool { return c.State != nil }) {
			bare := withoutReasoning(m)
			if n := messageTokens(m) - messageTokens(&bare); n > 0 {
				c.Thoughts = append(c.Thoughts, heldThought{At: at, Tokens: n})
			}
		}
	}
}

// withoutReasoning is m without its reasoning and provider state, its
// calls' included; m is not changed.
func withoutReasoning(m *llm.Message) llm.Message {
	out := *m
	out.Reasoning, out.State = nil, nil
	if slices.ContainsFunc(m.ToolCalls, func(c llm.ToolCall) bool { return c.State != nil }) {
		out.ToolCalls = slices.Clone(m.ToolCalls)
		for i := range out.ToolCalls {
			out.ToolCalls[i].State = nil
		}
	}
	return out
}

// planReasoning adds to e the reasoning of messages before the current
// cycle, oldest first, while the estimate est is above target, and
// returns the estimate after.
func (c *contextMemory) planReasoning(e *ContextEdit, est, target int) int {
	if !c.Policy.ClearReasoning {
		return est
	}
	for _, t := range c.Thoughts {
		if t.At >= c.Cycle || est <= target {
			break
		}
		est -= t.Tokens
		e.Reasoning = append(e.Reasoning, ClearedReasoning(t))
	}
	return est
}

// clearReasoning applies the reasoning part of an edit to the history
// (already copied by the caller) and to the memory.
func (c *contextMemory) clearReasoning(s *State, e *ContextEdit) {
	if len(e.Reasoning) == 0 {
		return
	}
	for _, r := range e.Reasoning {
		if r.At < len(s.Messages) {
			s.Messages[r.At] = withoutReasoning(&s.Messages[r.At])
		}
		if r.At < len(c.Sizes) {
			c.Sizes[r.At] -= r.Tokens
		}
		c.Tokens -= r.Tokens
	}
	c.Thoughts = slices.DeleteFunc(c.Thoughts, func(t heldThought) bool {
		return slices.ContainsFunc(e.Reasoning, func(r ClearedReasoning) bool { return r.At == t.At })
	})
}

// shiftThoughts follows a compaction that replaced messages from to
// through (exclusive) by one: the reasoning summarized away is gone, the
// later messages move up, and the summary, a user message, opens the
// cycle the kept turns are in unless a later user message did.
func (c *contextMemory) shiftThoughts(from, through int) {
	shift := through - from - 1
	var kept []heldThought
	for _, t := range c.Thoughts {
		switch {
		case t.At < from:
			kept = append(kept, t)
		case t.At >= through:
			t.At -= shift
			kept = append(kept, t)
		}
	}
	c.Thoughts = kept
	if c.Cycle >= through {
		c.Cycle -= shift
	} else {
		c.Cycle = from
	}
}
