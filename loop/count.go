package loop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolloop/toolloop/llm"
)

// Measuring the next request. The decider's estimate (bytes / 4,
// calibrated by the previous response) is free but can be off by a
// fifth either way for text that tokenizes unlike English prose. When
// the estimate comes near the window (within two margins) and the
// policy asks for it (ContextPolicy.CountTokens), the decider asks the
// driver to have the provider count the request (effect CountTokens),
// and decides on that count: the tokens_counted event records it, so a
// replay, a resumed run and a Temporal worker decide the same. Far from
// the window no turn pays for a count. A count that fails, or a model
// that cannot count, leaves the decision to the estimate: the run never
// stops for it.

// CountTokens asks the driver to have the provider count the next
// request's input tokens (llm.TokenCounter); the driver records the
// answer as a tokens_counted event (CountEvent).
const CountTokens EffectKind = "count_tokens"

// TokensCounted records the provider's count of the next request
// (Event.Count), or why there is none.
const TokensCounted EventKind = "tokens_counted"

// CountTimeout bounds one count request: a count is advice, and a slow
// one is not worth waiting for.
const CountTimeout = 30 * time.Second

// TokenCount is what a tokens_counted event records.
type TokenCount struct {
	// Tokens is the provider's count of the request; 0 when there is none.
	Tokens int `json:"tokens,omitempty"`
	// Error says why there is no count: the estimate stands.
	Error string `json:"error,omitempty"`
	// Unsupported is set when the model cannot count at all: the run does
	// not ask again.
	Unsupported bool `json:"unsupported,omitempty"`
}

// CountRequest has m count req's tokens, bounded by CountTimeout, and
// returns the event that records the count or why there is none. Every
// driver counts through it.
func CountRequest(ctx context.Context, m llm.Model, req *llm.Request) Event {
	c, ok := m.(llm.TokenCounter)
	if !ok {
		return Event{Kind: TokensCounted, Count: &TokenCount{Unsupported: true, Error: fmt.Sprintf("the model (%T) cannot count tokens: the estimate stands", m)}}
	}
	ctx, cancel := context.WithTimeout(ctx, CountTimeout)
	defer cancel()
	n, err := c.CountTokens(ctx, req)
	return CountEvent(n, err)
}

// CountEvent is the tokens_counted event of a count of n tokens, or of a
// count that failed with err. A failure that says the model cannot count
// (errors.ErrUnsupported, or a server that has no such endpoint: HTTP
// 404, 405 or 501, as an OpenAI-compatible server without
// responses/input_tokens answers) marks the model as one not to ask
// again in the run.
func CountEvent(n int64, err error) Event {
	switch {
	case err != nil:
		return Event{Kind: TokensCounted, Count: &TokenCount{Error: "counting failed, the estimate stands: " + err.Error(), Unsupported: cannotCount(err)}}
	case n <= 0:
		return Event{Kind: TokensCounted, Count: &TokenCount{Error: fmt.Sprintf("the provider counted %d tokens, which cannot be: the estimate stands", n)}}
	}
	return Event{Kind: TokensCounted, Count: &TokenCount{Tokens: int(min(n, 1<<40))}}
}

func cannotCount(err error) bool {
	var le *llm.Error
	if errors.As(err, &le) {
		// Not Found, Method Not Allowed, Not Implemented: written as
		// numbers, since importing net/http for its constants would
		// compile HTTP into every program that runs a loop.
		switch le.StatusCode {
		case 404, 405, 501:
			return true
		}
	}
	return errors.Is(err, errors.ErrUnsupported)
}

// shouldCount says whether the next request is to be counted before the
// decider decides on it: the policy asks for counts, the model can
// count, this history has not been counted, and the request could pass
// the window less its margin were the estimate low by a margin, or by
// as much again as the messages added since the provider last counted
// (the only part of the estimate that is a guess; a tokenizer can find
// twice the tokens in text full of numbers and identifiers).
func (c *contextMemory) shouldCount() bool {
	p := &c.Policy
	return p.CountTokens && !c.NoCounter && !c.CountAsked && p.Window > 0 &&
		c.estimate()+max(p.Margin, c.Fresh) > p.Window-p.Margin
}

// changed forgets the count of the history, which has just changed.
func (c *contextMemory) changed() {
	c.Counted, c.CountAsked = 0, false
}

// tokensCounted takes the provider's count of the next request, or its
// failure, and decides on it as beforeRequest does on the estimate.
func tokensCounted(s *State, ev *Event) Effect {
	c := s.ctx
	if c == nil || ev.Count == nil {
		return stop(s, ProtocolError, "driver error: a token count in a run without context management")
	}
	c.CountAsked = true
	switch {
	case ev.Count.Unsupported:
		c.NoCounter = true
	case ev.Count.Tokens > 0:
		c.Counted = ev.Count.Tokens
		// What the count shows beyond the messages' estimate (the system
		// prompt, the tools, the estimate's error) stays after an edit.
		c.Overhead = max(0, c.Counted-c.Tokens)
	}
	return beforeRequest(s)
}
