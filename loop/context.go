package loop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolloop/toolloop/llm"
)

// Context management keeps each model request inside the model's window.
// The decider estimates the next request's size before asking for it;
// when the estimate nears the window it clears old tool results, as an
// effect (EditContext) whose event (context_edited) the log keeps, so
// that a replay, a resumed run and a Temporal worker build the same
// requests. The estimate reads only the log: message sizes (bytes / 4)
// calibrated by the input tokens the provider reported for the previous
// request, so it is the same wherever the log is replayed.

// ContextPolicy configures context management for a run (Config.Context).
// The log records it in the Started event, its defaults filled in.
type ContextPolicy struct {
	// Window is the model's context window in tokens: no request is
	// sent whose estimate passes Window-Margin while old results remain
	// to clear. Zero leaves the window unknown: only a provider's "prompt
	// too long" makes the run clear, then everything it may.
	Window int `json:"window,omitempty"`
	// Margin is kept free of the window for the estimate's error and the
	// reply. Default: a tenth of Window.
	Margin int `json:"margin,omitempty"`
	// LowWater is what a clearing brings the estimate down to. Clearing
	// in one big chunk rather than a result a turn means the prompt
	// cache is written again once per chunk, not every turn. Default:
	// half of Window.
	LowWater int `json:"low_water,omitempty"`
	// KeepToolResults is how many of the latest tool results are never
	// cleared. Zero means the default, 3; negative keeps none (and stays
	// negative when normalized, so that normalizing twice changes
	// nothing).
	KeepToolResults int `json:"keep_tool_results,omitempty"`
	// ExcludeTools names tools whose results are never cleared.
	ExcludeTools []string `json:"exclude_tools,omitempty"`
}

// MinContextWindow is the smallest window a ContextPolicy takes: below
// it a number is not a model's window in tokens.
const MinContextWindow = 1000

// DefaultKeepToolResults is ContextPolicy.KeepToolResults's default.
const DefaultKeepToolResults = 3

// Normalized returns p with its defaults filled in, or an error naming
// the field that is wrong.
func (p ContextPolicy) Normalized() (ContextPolicy, error) {
	if p.Window < 0 || p.Margin < 0 || p.LowWater < 0 {
		return p, fmt.Errorf("context policy: window %d, margin %d and low water %d must not be negative", p.Window, p.Margin, p.LowWater)
	}
	if p.Window > 0 && p.Window < MinContextWindow {
		return p, fmt.Errorf("context policy: a window of %d tokens is smaller than any model's (at least %d); give it in tokens", p.Window, MinContextWindow)
	}
	if p.Margin == 0 {
		p.Margin = p.Window / 10
	}
	if p.LowWater == 0 {
		p.LowWater = p.Window / 2
	}
	if p.Window > 0 && p.LowWater >= p.Window-p.Margin {
		return p, fmt.Errorf("context policy: low water %d must be below the window %d less its margin %d", p.LowWater, p.Window, p.Margin)
	}
	if p.KeepToolResults == 0 {
		p.KeepToolResults = DefaultKeepToolResults
	}
	p.ExcludeTools = slices.Clone(p.ExcludeTools)
	return p, nil
}

// ResolveContextPolicy returns p as a run records it: a zero Window is
// model's known window (KnownWindow), and the defaults are filled in.
func ResolveContextPolicy(p ContextPolicy, model string) (ContextPolicy, error) {
	if p.Window == 0 {
		p.Window, _ = KnownWindow(model)
	}
	return p.Normalized()
}

// knownWindows holds the context windows of well-known models, in
// tokens; a model that is not here needs ContextPolicy.Window.
var knownWindows = map[string]int{
	"claude-opus-4-1":   200_000,
	"claude-opus-4-5":   200_000,
	"claude-sonnet-4-5": 200_000,
	"claude-sonnet-4-6": 200_000,
	"claude-haiku-4-5":  200_000,
	"gpt-4.1":           1_047_576,
	"gpt-4.1-mini":      1_047_576,
	"gpt-4o":            128_000,
	"gpt-4o-mini":       128_000,
	"gpt-5":             400_000,
	"gpt-5-mini":        400_000,
	"gemini-2.5-pro":    1_048_576,
	"gemini-2.5-flash":  1_048_576,
}

// KnownWindow returns the context window of a well-known model, in
// tokens, and whether it knows it. A dated name (claude-sonnet-4-5-20250929)
// is known by its undated one.
func KnownWindow(model string) (int, bool) {
	for name := model; name != ""; {
		if w, ok := knownWindows[name]; ok {
			return w, true
		}
		i := strings.LastIndexByte(name, '-')
		if i < 0 {
			break
		}
		name = name[:i]
	}
	return 0, false
}

// ContextEdit is what one context edit did (Event.Edit, Effect.Edit).
type ContextEdit struct {
	// Reason is "window" when the estimate neared the window, or
	// "prompt_too_long" when the provider refused the request.
	Reason string `json:"reason"`
	// Cleared lists the tool results replaced by a note, oldest first.
	Cleared []ClearedResult `json:"cleared"`
	// TokensBefore and TokensAfter are the next request's estimate.
	TokensBefore int `json:"tokens_before"`
	TokensAfter  int `json:"tokens_after"`
}

// ClearedResult is one tool result a context edit replaced.
type ClearedResult struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Tokens is the result's estimate before it was cleared.
	Tokens int `json:"tokens"`
}

// Edit reasons.
const (
	EditForWindow        = "window"
	EditForPromptTooLong = "prompt_too_long"
)

// ClearedNote is the content that replaces a cleared tool result: it
// names the call and the tool, and tells the model it may call again.
func ClearedNote(callID, tool string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Cleared string `json:"cleared"`
	}{fmt.Sprintf("the result of call %s (%s) was cleared to keep the conversation inside the model's context window; call %s again if you need it", callID, tool, tool)})
	return b
}

// contextMemory is the decider's memory for context management: the
// policy, the history's size estimate and the results it still holds
// whole. It reads no message content, so a state that carries no
// messages (a workflow continued as new) decides the same.
type contextMemory struct {
	Policy ContextPolicy `json:"policy"`
	// Tokens estimates the history's messages (messageTokens).
	Tokens int `json:"tokens"`
	// Overhead is what the provider counted for the previous request
	// beyond Tokens (the system prompt, the tools, the estimate's error),
	// never negative.
	Overhead int `json:"overhead,omitempty"`
	// Held lists the history's tool results not yet cleared, in order.
	Held []heldResult `json:"held,omitempty"`
	// Retried is set by an edit made for a prompt too long, until a
	// response comes: a second refusal means the history cannot fit.
	Retried bool `json:"retried,omitempty"`
}

type heldResult struct {
	CallID string `json:"id"`
	Tool   string `json:"tool"`
	Tokens int    `json:"n"`
}

// estimate is the next request's estimated size in tokens.
func (c *contextMemory) estimate() int { return c.Tokens + c.Overhead }

// add counts a message appended to the history.
func (c *contextMemory) add(m *llm.Message) {
	n := messageTokens(m)
	c.Tokens += n
	if m.Result != nil {
		c.Held = append(c.Held, heldResult{CallID: m.Result.CallID, Tool: m.Result.Name, Tokens: n})
	}
}

// messageTokens estimates a message's tokens: its JSON's bytes / 4, a
// tool result's content counted at its full size even where a driver
// keeps it by reference (a Temporal workflow), so that every driver
// counts the same.
func messageTokens(m *llm.Message) int {
	if r := m.Result; r != nil {
		size := len(r.Content)
		if n, ok := referencedSize(r.Content); ok {
			size = n
		}
		return (len(r.CallID) + len(r.Name) + len(r.Status) + len(r.ErrorKind) + size + 64 + 3) / 4
	}
	b, err := json.Marshal(m)
	if err != nil {
		return 0
	}
	return (len(b) + 3) / 4
}

// referencedSize reads the size a result stored by reference records
// (the Temporal driver's {"$toolloop_blob": digest, "size": n}).
func referencedSize(content json.RawMessage) (int, bool) {
	if len(content) > 256 || !bytes.Contains(content, []byte(`"$toolloop_blob"`)) {
		return 0, false
	}
	var r struct {
		Blob string `json:"$toolloop_blob"`
		Size int    `json:"size"`
	}
	if json.Unmarshal(content, &r) != nil || r.Blob == "" || r.Size <= 0 {
		return 0, false
	}
	return r.Size, true
}

// calibrate learns the overhead from a response's reported input tokens.
func (c *contextMemory) calibrate(u llm.Usage) {
	if u.InputTokens > 0 {
		c.Overhead = max(0, int(min(u.InputTokens, 1<<40))-c.Tokens)
	}
}

// plan chooses the results to clear, oldest first, to bring the estimate
// down to target; the latest KeepToolResults and excluded tools stay.
func (c *contextMemory) plan(reason string, target int) *ContextEdit {
	p := &c.Policy
	e := &ContextEdit{Reason: reason, TokensBefore: c.estimate()}
	est := e.TokensBefore
	clearable := len(c.Held) - max(p.KeepToolResults, 0)
	for i := 0; i < clearable && est > target; i++ {
		h := c.Held[i]
		if slices.Contains(p.ExcludeTools, h.Tool) {
			continue
		}
		note := noteTokens(h.CallID, h.Tool)
		if note >= h.Tokens {
			continue
		}
		est -= h.Tokens - note
		e.Cleared = append(e.Cleared, ClearedResult{CallID: h.CallID, Tool: h.Tool, Tokens: h.Tokens})
	}
	e.TokensAfter = est
	if len(e.Cleared) == 0 {
		return nil
	}
	return e
}

func noteTokens(callID, tool string) int {
	m := llm.Message{Role: llm.RoleTool, Result: clearedResult(callID, tool)}
	return messageTokens(&m)
}

func clearedResult(callID, tool string) *llm.ToolResult {
	return &llm.ToolResult{CallID: callID, Name: tool, Status: llm.StatusOK, Content: ClearedNote(callID, tool)}
}

// beforeRequest is the effect before the next model request: a context
// edit when the estimate nears the window, a stop when it is past the
// window with nothing left to clear, else RequestModel.
func beforeRequest(s *State) Effect {
	c := s.ctx
	if c == nil || c.Policy.Window <= 0 || c.estimate() <= c.Policy.Window-c.Policy.Margin {
		return Effect{Kind: RequestModel}
	}
	if e := c.plan(EditForWindow, c.Policy.LowWater); e != nil {
		return Effect{Kind: EditContext, Edit: e}
	}
	if c.estimate() > c.Policy.Window {
		return stop(s, ContextExhausted, fmt.Sprintf(
			"the next request is estimated at %d tokens, past the window of %d, and no tool result is left to clear", c.estimate(), c.Policy.Window))
	}
	return Effect{Kind: RequestModel}
}

// promptTooLong answers a provider's refusal of a request too long for
// the window: one edit and a retry, or a stop when that was done already
// or nothing is left to clear.
func promptTooLong(s *State, ev *Event) Effect {
	c := s.ctx
	if c.Retried {
		return stop(s, ContextExhausted, "still too long after old tool results were cleared: "+ev.Failure.Message)
	}
	target := 0
	if w := c.Policy.Window; w > 0 {
		// The provider counted more than the window: the estimate was
		// low by at least the difference.
		c.Overhead = max(c.Overhead, w+1-c.Tokens)
		target = c.Policy.LowWater
	}
	e := c.plan(EditForPromptTooLong, target)
	if e == nil {
		return stop(s, ContextExhausted, "no tool result is left to clear: "+ev.Failure.Message)
	}
	c.Retried = true
	return Effect{Kind: EditContext, Edit: e}
}

// contextEdited applies an edit: each cleared result is replaced by its
// note in the history (the event's results are not touched).
func contextEdited(s *State, ev *Event) Effect {
	c, e := s.ctx, ev.Edit
	if c == nil || e == nil {
		return stop(s, ProtocolError, "driver error: a context edit in a run without context management")
	}
	cleared := make(map[string]bool, len(e.Cleared))
	for _, r := range e.Cleared {
		cleared[r.CallID] = true
	}
	// The history is copied before the edit: a caller may still hold
	// the history of the request before (State.History).
	s.Messages = slices.Clone(s.Messages)
	for i := range s.Messages {
		m := &s.Messages[i]
		if m.Result != nil && cleared[m.Result.CallID] {
			m.Result = clearedResult(m.Result.CallID, m.Result.Name)
		}
	}
	var held []heldResult
	for _, h := range c.Held {
		if cleared[h.CallID] {
			c.Tokens += noteTokens(h.CallID, h.Tool) - h.Tokens
			continue
		}
		held = append(held, h)
	}
	c.Held = held
	return Effect{Kind: RequestModel}
}

// String is the edit in one line, for trace tools.
func (e *ContextEdit) String() string {
	ids := make([]string, len(e.Cleared))
	for i, r := range e.Cleared {
		ids[i] = r.CallID
	}
	return "cleared " + strconv.Itoa(len(e.Cleared)) + " tool result(s) (" + strings.Join(ids, ", ") + "), tokens " +
		strconv.Itoa(e.TokensBefore) + " -> " + strconv.Itoa(e.TokensAfter) + " (" + e.Reason + ")"
}
