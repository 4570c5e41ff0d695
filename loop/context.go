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
	// Compact, when clearing cannot bring the next request inside the
	// window, has the model summarize the earlier turns (a request of
	// its own, whose usage counts toward the run's budgets); the run goes
	// on from its opening messages, the summary and the latest turns.
	Compact bool `json:"compact,omitempty"`
	// SummaryModel is the model name sent with the summary request;
	// empty for the run's model.
	SummaryModel string `json:"summary_model,omitempty"`
	// CountTokens has the provider count the next request
	// (llm.TokenCounter) once the estimate comes within two margins of
	// the window, and decides on the count rather than the estimate
	// (count.go). A model that cannot count, or a count that fails,
	// leaves the estimate to decide.
	CountTokens bool `json:"count_tokens,omitempty"`
	// ClearReasoning lets an edit clear the reasoning (and the provider's
	// reasoning state) of assistant messages before the current tool-use
	// cycle, before any tool result (reasoning_clear.go).
	ClearReasoning bool `json:"clear_reasoning,omitempty"`
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
	// Reasoning lists the assistant messages whose reasoning was
	// cleared, oldest first (ContextPolicy.ClearReasoning).
	Reasoning []ClearedReasoning `json:"reasoning,omitempty"`
	// TokensBefore and TokensAfter are the next request's estimate.
	TokensBefore int `json:"tokens_before"`
	TokensAfter  int `json:"tokens_after"`
	// A compaction (Reason "compaction") replaced the history's messages
	// From to Through (exclusive) by one user message with Summary.
	From    int    `json:"from,omitempty"`
	Through int    `json:"through,omitempty"`
	Summary string `json:"summary,omitempty"`
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
	EditCompaction       = "compaction"
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
	// Compacted is set by a compaction until a response comes: a second
	// one in a row would summarize the summary.
	Compacted bool `json:"compacted,omitempty"`
	// Lead is the number of opening messages, never summarized; Sizes the
	// estimate of each message of the history; Turns the indexes of its
	// assistant messages, where a compaction may cut.
	Lead  int   `json:"lead,omitempty"`
	Sizes []int `json:"sizes,omitempty"`
	Turns []int `json:"turns,omitempty"`
	// Counted is the provider's count of the next request while the
	// history is as counted (0: none); CountAsked is set once a count was
	// asked for it, answered or not; NoCounter once the model said it
	// cannot count (count.go).
	// Fresh estimates the messages added since the provider last
	// reported its count: the part of the estimate that may be wrong.
	Fresh int `json:"fresh,omitempty"`
	// Thoughts lists the assistant messages that still carry reasoning,
	// in order; Cycle is the index of the latest user message, where the
	// current tool-use cycle begins (reasoning_clear.go).
	Thoughts   []heldThought `json:"thoughts,omitempty"`
	Cycle      int           `json:"cycle,omitempty"`
	Counted    int           `json:"counted,omitempty"`
	CountAsked bool          `json:"count_asked,omitempty"`
	NoCounter  bool          `json:"no_counter,omitempty"`
}

type heldResult struct {
	CallID string `json:"id"`
	Tool   string `json:"tool"`
	Tokens int    `json:"n"`
	// At is the result's index in the history.
	At int `json:"at"`
	// Hash is the result's resultHash, as State.seen holds it: a result
	// cleared or summarized away is no longer seen by the model, so that
	// calling for it again (as its note invites) is not a stale turn.
	Hash uint64 `json:"h,omitempty"`
}

// estimate is the next request's estimated size in tokens: the
// provider's count when it counted the history as it is.
func (c *contextMemory) estimate() int {
	if c.Counted > 0 {
		return c.Counted
	}
	return c.Tokens + c.Overhead
}

// add counts a message appended to the history.
func (c *contextMemory) add(m *llm.Message) {
	n := messageTokens(m)
	c.changed()
	c.Tokens += n
	c.Fresh += n
	at := len(c.Sizes)
	c.Sizes = append(c.Sizes, n)
	if m.Result != nil {
		c.Held = append(c.Held, heldResult{CallID: m.Result.CallID, Tool: m.Result.Name, Tokens: n, At: at, Hash: resultHash(m.Result)})
	}
	if m.Role == llm.RoleAssistant {
		c.Turns = append(c.Turns, at)
	}
	c.noteMessage(at, m)
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
		c.Fresh = 0
		c.Overhead = max(0, int(min(u.InputTokens, 1<<40))-c.Tokens)
	}
}

// plan chooses the results to clear, oldest first, to bring the estimate
// down to target; the latest KeepToolResults and excluded tools stay.
func (c *contextMemory) plan(reason string, target int) *ContextEdit {
	p := &c.Policy
	e := &ContextEdit{Reason: reason, TokensBefore: c.estimate()}
	est := c.planReasoning(e, e.TokensBefore, target)
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
	if len(e.Cleared) == 0 && len(e.Reasoning) == 0 {
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
	if c != nil && c.shouldCount() {
		return Effect{Kind: CountTokens}
	}
	if c == nil || c.Policy.Window <= 0 || c.estimate() <= c.Policy.Window-c.Policy.Margin {
		return Effect{Kind: RequestModel}
	}
	if e := c.plan(EditForWindow, c.Policy.LowWater); e != nil {
		return Effect{Kind: EditContext, Edit: e}
	}
	if r := c.summaryRequest(s.Model); r != nil {
		return Effect{Kind: Summarize, Summary: r}
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
		c.Counted = 0
		c.Overhead = max(c.Overhead, w+1-c.Tokens)
		target = c.Policy.LowWater
	}
	e := c.plan(EditForPromptTooLong, target)
	if e == nil {
		if r := c.summaryRequest(s.Model); r != nil {
			c.Retried = true
			return Effect{Kind: Summarize, Summary: r}
		}
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
	c.changed()
	for i := range s.Messages {
		m := &s.Messages[i]
		if m.Result != nil && cleared[m.Result.CallID] {
			m.Result = clearedResult(m.Result.CallID, m.Result.Name)
		}
	}
	var held, gone []heldResult
	for _, h := range c.Held {
		if cleared[h.CallID] {
			note := noteTokens(h.CallID, h.Tool)
			c.Tokens += note - h.Tokens
			if h.At < len(c.Sizes) {
				c.Sizes[h.At] = note
			}
			gone = append(gone, h)
			continue
		}
		held = append(held, h)
	}
	c.Held = held
	c.clearReasoning(s, e)
	s.unsee(gone)
	// Clearing may not be enough: compaction comes next, if configured.
	return beforeRequest(s)
}

// unsee forgets the results gone from the history (cleared, or
// summarized away) as results the model has seen, unless a result with
// the same hash is still there: a later call that returns one of them
// again tells the model something it no longer has.
func (s *State) unsee(gone []heldResult) {
	for _, g := range gone {
		if g.Hash == 0 || slices.ContainsFunc(s.ctx.Held, func(h heldResult) bool { return h.Hash == g.Hash }) {
			continue
		}
		if i, found := slices.BinarySearch(s.seen, g.Hash); found {
			s.seen = slices.Delete(s.seen, i, i+1)
		}
	}
	if len(s.seen) == 0 {
		// As a decoded state has it: no results seen is a nil set.
		s.seen = nil
	}
}

// SummaryRequest is a compaction the decider asks for (Effect.Summary):
// the history's messages From to Through (exclusive) are to be
// summarized by Model ("" for the run's), with SummaryMessages.
type SummaryRequest struct {
	From    int    `json:"from"`
	Through int    `json:"through"`
	Model   string `json:"model,omitempty"`
	// TokensBefore is the next request's estimate now; KeptTokens what
	// stays of it (the opening messages, the latest turns, the overhead).
	TokensBefore int `json:"tokens_before"`
	KeptTokens   int `json:"kept_tokens"`
}

// summaryRequest returns the compaction to ask for, or nil when the
// policy has none, one was just made, or no earlier turn is left to
// summarize. The latest max(KeepToolResults, 1) turns stay whole, so that
// every call that stays keeps its result.
func (c *contextMemory) summaryRequest(model string) *SummaryRequest {
	p := &c.Policy
	if !p.Compact || c.Compacted {
		return nil
	}
	keep := max(p.KeepToolResults, 1)
	if len(c.Turns) <= keep {
		return nil
	}
	through := c.Turns[len(c.Turns)-keep]
	// Earlier turns that are only a previous summary are not worth
	// another request.
	if through <= c.Lead+1 {
		return nil
	}
	if p.SummaryModel != "" {
		model = p.SummaryModel
	}
	kept := c.Overhead
	for i, n := range c.Sizes {
		if i < c.Lead || i >= through {
			kept += n
		}
	}
	return &SummaryRequest{From: c.Lead, Through: through, Model: model, TokensBefore: c.estimate(), KeptTokens: kept}
}

// SummaryInstruction is what the summary request asks the model for.
const SummaryInstruction = "The conversation above is being compacted to fit the model's context window. " +
	"Write a summary of it that lets you carry on the task without it: what was asked, what each tool call found " +
	"(with the facts, numbers and identifiers you will need), what is done and what is left. Write only the summary."

// SummaryMessages returns the summary request's conversation: the
// messages to summarize, rendered as text in one user message (so that
// the request carries no tool calls of its own and suits any provider),
// followed by SummaryInstruction.
func SummaryMessages(history []llm.Message, r *SummaryRequest) []llm.Message {
	var b strings.Builder
	for _, m := range history[min(r.From, len(history)):min(r.Through, len(history))] {
		switch {
		case m.Result != nil:
			fmt.Fprintf(&b, "[result of call %s (%s), %s]\n%s\n\n", m.Result.CallID, m.Result.Name, m.Result.Status, m.Result.Content)
		default:
			if t := strings.TrimSpace(m.Text); t != "" {
				fmt.Fprintf(&b, "[%s]\n%s\n\n", m.Role, t)
			}
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, "[%s called %s (call %s) with %s]\n\n", m.Role, c.Name, c.ID, c.Arguments)
			}
		}
	}
	b.WriteString(SummaryInstruction)
	return []llm.Message{llm.UserMessage(b.String())}
}

// SummaryEvent turns the event of the summary request's model turn into
// the event that records the compaction: context_summarized, with the
// summary and its usage, or with the turn's failure.
func SummaryEvent(ev Event, r *SummaryRequest) Event {
	out := Event{Kind: ContextSummarized, At: ev.At, Latency: ev.Latency, Attempts: ev.Attempts, Response: ev.Response, Failure: ev.Failure}
	if ev.Kind != ModelResponded || ev.Response == nil {
		if out.Failure == nil {
			out.Failure = &Failure{Kind: FailModel, Message: "the summary request failed"}
		}
		return out
	}
	text := strings.TrimSpace(ev.Response.Message.Text)
	if text == "" {
		out.Failure = &Failure{Kind: FailModel, Message: "the summary request returned no text"}
		return out
	}
	m := summaryMessage(text)
	out.Edit = &ContextEdit{Reason: EditCompaction, From: r.From, Through: r.Through, Summary: text,
		TokensBefore: r.TokensBefore, TokensAfter: r.KeptTokens + messageTokens(&m)}
	return out
}

func summaryMessage(summary string) llm.Message {
	return llm.UserMessage("A summary of the earlier turns of this conversation, which were compacted to fit the context window:\n\n" + summary)
}

// contextSummarized applies a compaction: the summarized messages give
// way to the summary, and the run goes on once its usage is counted.
func contextSummarized(s *State, ev *Event) Effect {
	c, e := s.ctx, ev.Edit
	if c == nil || e == nil || e.From < c.Lead || e.Through > len(c.Sizes) || e.From >= e.Through {
		return stop(s, ProtocolError, "driver error: a compaction that does not match the history")
	}
	if ev.Response != nil {
		charge(s, ev.Response)
	}
	m := summaryMessage(e.Summary)
	if len(s.Messages) >= e.Through {
		msgs := make([]llm.Message, 0, len(s.Messages)-(e.Through-e.From)+1)
		msgs = append(append(append(msgs, s.Messages[:e.From]...), m), s.Messages[e.Through:]...)
		s.Messages = msgs
	}
	shift := e.Through - e.From - 1
	sizes := append(append(slices.Clone(c.Sizes[:e.From]), messageTokens(&m)), c.Sizes[e.Through:]...)
	c.Sizes, c.Tokens = sizes, 0
	for _, n := range sizes {
		c.Tokens += n
	}
	var held, gone []heldResult
	for _, h := range c.Held {
		switch {
		case h.At >= e.Through:
			h.At -= shift
			held = append(held, h)
		case h.At < e.From:
			// An opening message's result stays where it is.
			held = append(held, h)
		default:
			gone = append(gone, h)
		}
	}
	var turns []int
	for _, t := range c.Turns {
		if t >= e.Through {
			turns = append(turns, t-shift)
		}
	}
	c.Held, c.Turns, c.Compacted = held, turns, true
	c.shiftThoughts(e.From, e.Through)
	c.changed()
	s.unsee(gone)
	b := s.Budgets
	switch {
	case b.MaxTokens > 0 && s.Usage.Total() >= b.MaxTokens:
		return stop(s, CostBudgetExceeded, fmt.Sprintf("%d tokens used with the summary, budget %d: no room for another turn", s.Usage.Total(), b.MaxTokens))
	case b.MaxCost > 0 && s.Cost >= b.MaxCost:
		return stop(s, CostBudgetExceeded, fmt.Sprintf("cost $%.6f with the summary, budget $%.6f: no room for another turn", s.Cost, b.MaxCost))
	}
	return beforeRequest(s)
}

// String is the edit in one line, for trace tools.
func (e *ContextEdit) String() string {
	if e.Reason == EditCompaction {
		return "summarized messages " + strconv.Itoa(e.From) + " to " + strconv.Itoa(e.Through-1) + " in " +
			strconv.Itoa(len(e.Summary)) + " bytes, tokens " + strconv.Itoa(e.TokensBefore) + " -> " + strconv.Itoa(e.TokensAfter) + " (compaction)"
	}
	ids := make([]string, len(e.Cleared))
	for i, r := range e.Cleared {
		ids[i] = r.CallID
	}
	reasoning := ""
	if n := len(e.Reasoning); n > 0 {
		reasoning = " and the reasoning of " + strconv.Itoa(n) + " earlier message(s)"
	}
	return "cleared " + strconv.Itoa(len(e.Cleared)) + " tool result(s) (" + strings.Join(ids, ", ") + ")" + reasoning + ", tokens " +
		strconv.Itoa(e.TokensBefore) + " -> " + strconv.Itoa(e.TokensAfter) + " (" + e.Reason + ")"
}
