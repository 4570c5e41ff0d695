package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
)

// TokenLine is one line of a run's token account (Tokens): a model turn,
// its input split by the provider's prompt cache, or a context edit (a
// clearing, or a compaction with its summary request's usage).
type TokenLine struct {
	Seq int
	// Step is the model turn: for a turn its own, for an edit the turn it
	// was made before.
	Step int
	// Kind is loop.ModelResponded, loop.ContextEdited,
	// loop.ContextSummarized, or loop.ModelFailed for a request that
	// failed after it was paid for in part (a stream that broke), whose
	// usage the run counts though the turn does not.
	Kind loop.EventKind
	// Usage is the turn's, or the summary request's, as the run counted
	// it (llm.Usage.Clamped).
	Usage llm.Usage
	// Edit is the edit (ContextEdited, ContextSummarized); nil for a
	// summary request that failed. Failure says why a request failed.
	Edit    *loop.ContextEdit
	Failure *loop.Failure
	// Miss is set on a turn that read far less from the prompt cache than
	// the turn before it left there (see CacheDrops).
	Miss *CacheDrop
}

// NewInput is the part of u's input tokens that was neither read from
// nor written to the provider's prompt cache: input paid at the plain
// price, and not kept for the next request.
func NewInput(u llm.Usage) int64 {
	return max(u.InputTokens-u.CachedInputTokens-u.CacheWriteTokens, 0)
}

// Tokens returns a run's token account, in the log's order: a line per
// model turn that got a response, per failed request that was paid for in
// part, and per context edit. Its usages add up to what the run counted
// toward its token budget.
func Tokens(events []loop.Event) []TokenLine {
	misses := map[int]*CacheDrop{}
	for _, m := range CacheDrops(events) {
		misses[m.Seq] = &m
	}
	var out []TokenLine
	step := 0
	for i := range events {
		ev := &events[i]
		switch ev.Kind {
		case loop.ModelResponded:
			if ev.Response == nil {
				continue
			}
			step++
			out = append(out, TokenLine{Seq: ev.Seq, Step: step, Kind: ev.Kind, Usage: ev.Response.Usage.Clamped(), Miss: misses[ev.Seq]})
		case loop.ModelFailed:
			if ev.Response != nil {
				out = append(out, TokenLine{Seq: ev.Seq, Step: step + 1, Kind: ev.Kind, Usage: ev.Response.Usage.Clamped(), Failure: ev.Failure})
			}
		case loop.ContextEdited, loop.ContextSummarized:
			if ev.Edit == nil && ev.Failure == nil {
				continue
			}
			l := TokenLine{Seq: ev.Seq, Step: step + 1, Kind: ev.Kind, Edit: ev.Edit, Failure: ev.Failure}
			if ev.Response != nil {
				l.Usage = ev.Response.Usage.Clamped()
			}
			out = append(out, l)
		}
	}
	return out
}

// CacheDrop is a cache miss: a model turn that read far less from the
// provider's prompt cache than the turn before it left there (read and
// wrote), and what the log says changed between the two requests.
type CacheDrop struct {
	Seq, Step int
	// Read is what the turn read from the cache; Prior what the previous
	// turn, at step PriorStep, read and wrote.
	Read, Prior int64
	PriorStep   int
	// Message is the index of the first message of the previous request
	// that this request does not repeat byte for byte, or -1 when this
	// request begins with all of the previous one.
	Message int
	// EditSeq is the context edit (context_edited or context_summarized)
	// that changed that message on purpose, 0 for none: the miss is then
	// the cost of the edit, expected, not a fault.
	EditSeq int
	// Cause names what changed, for a person.
	Cause string
}

// Expected reports a miss that a context edit of the run explains.
func (m *CacheDrop) Expected() bool { return m.EditSeq > 0 }

// Cache misses: a turn is a miss when the previous turn left at least
// cacheMissMin tokens in the cache (providers cache no shorter prefix) and
// it read less than half of them. cacheLife is how long the providers'
// default caches keep a prefix that is not read.
const (
	cacheMissMin = 1024
	cacheLife    = 5 * time.Minute
)

// CacheDrops returns the cache misses of a run: the model turns that read
// far less from the prompt cache than the previous turn left there, each
// with its cause: the first message of the previous request that this one changed (rebuilt by
// replaying the log) and the context edit that changed it, or, when the
// messages agree, what else the log shows between the two requests (a
// resume, a pause longer than a cache lives). The messages include the
// system prompt; the tools are logged as their version only, the same for
// the whole run.
func CacheDrops(events []loop.Event) []CacheDrop {
	if len(events) == 0 || events[0].Kind != loop.Started || events[0].Start == nil {
		return nil
	}
	// First the usages alone: most runs have no miss, and need no replay.
	type pair struct{ prev, cur, step int }
	var pairs []pair
	prev, step := -1, 0
	for i := range events {
		ev := &events[i]
		if ev.Kind != loop.ModelResponded || ev.Response == nil {
			continue
		}
		step++
		if prev >= 0 {
			p, u := events[prev].Response.Usage.Clamped(), ev.Response.Usage.Clamped()
			if left := p.CachedInputTokens + p.CacheWriteTokens; left >= cacheMissMin && 2*u.CachedInputTokens < left {
				pairs = append(pairs, pair{prev, i, step})
			}
		}
		prev = i
	}
	if len(pairs) == 0 {
		return nil
	}
	// The request of a turn is the history just before its response.
	need := map[int]bool{}
	for _, p := range pairs {
		need[p.prev], need[p.cur] = true, true
	}
	requests := map[int][]llm.Message{}
	var st loop.State
	for i := range events {
		if need[i] {
			requests[i] = st.History()
		}
		loop.Next(&st, &events[i])
	}
	out := make([]CacheDrop, 0, len(pairs))
	for _, p := range pairs {
		pe, ce := &events[p.prev], &events[p.cur]
		m := CacheDrop{Seq: ce.Seq, Step: p.step, PriorStep: p.step - 1,
			Read: ce.Response.Usage.Clamped().CachedInputTokens, Message: -1}
		pu := pe.Response.Usage.Clamped()
		m.Prior = pu.CachedInputTokens + pu.CacheWriteTokens
		a, b := requests[p.prev], requests[p.cur]
		m.Message = firstChanged(a, b)
		m.EditSeq, m.Cause = missCause(events[p.prev+1:p.cur], a, b, m.Message, ce.At.Add(-ce.Latency).Sub(pe.At))
		out = append(out, m)
	}
	return out
}

// firstChanged returns the index of the first message of a that b does
// not repeat byte for byte (as JSON), or -1 when b begins with all of a.
func firstChanged(a, b []llm.Message) int {
	for i := range a {
		if i >= len(b) {
			return i
		}
		x, errX := json.Marshal(&a[i])
		y, errY := json.Marshal(&b[i])
		if errX != nil || errY != nil || !bytes.Equal(x, y) {
			return i
		}
	}
	return -1
}

// missCause names what changed between two requests: between are the
// events after the previous request's response up to this request's, d
// the first message changed (-1 for none), gap the time between the
// previous response and this request.
func missCause(between []loop.Event, a, b []llm.Message, d int, gap time.Duration) (int, string) {
	if d >= 0 {
		for i := range between {
			ev := &between[i]
			e := ev.Edit
			if e == nil || (ev.Kind != loop.ContextEdited && ev.Kind != loop.ContextSummarized) {
				continue
			}
			if ev.Kind == loop.ContextSummarized && d >= e.From && d < e.Through {
				return ev.Seq, fmt.Sprintf("expected: the compaction at seq %d replaced messages %d-%d by a summary, so the "+
					"request differs from message %d on and was written to the cache again", ev.Seq, e.From, e.Through-1, d)
			}
			if r := a[d].Result; ev.Kind == loop.ContextEdited && r != nil && clears(e, r.CallID) {
				return ev.Seq, fmt.Sprintf("expected: the clearing at seq %d replaced the result of call %s (%s)%s, so the "+
					"request was written to the cache again from there", ev.Seq, r.CallID, r.Name, others(len(e.Cleared)-1))
			}
		}
		if d >= len(b) {
			return 0, fmt.Sprintf("the request has %d message(s) where the previous one had %d, and no context edit of "+
				"the run removed them: the history was cut", len(b), len(a))
		}
		return 0, fmt.Sprintf("%s (message %d of the request) is not what the previous request sent, and no context "+
			"edit of the run changed it: something rewrote the history, and the cache holds nothing after it",
			describeMessage(&a[d], d), d+1)
	}
	for i := range between {
		if between[i].Kind == loop.Resumed {
			return 0, fmt.Sprintf("the request begins with all of the previous one, but the run was resumed in between "+
				"(seq %d): the new process may send other tools or cache settings (the log keeps the tools as their "+
				"version only), or its cache had expired", between[i].Seq)
		}
	}
	if gap > cacheLife {
		return 0, fmt.Sprintf("the request begins with all of the previous one, but it came %s after it: longer than "+
			"a 5-minute cache keeps a prefix (a 1-hour cache would have)", fmtDur(gap))
	}
	return 0, "the request begins with all of the previous one, so what changed is not in the log (the tools, the " +
		"request's cache settings), or the provider dropped its cache"
}

// others says how many more results a clearing replaced, if any.
func others(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" and %d other(s)", n)
}

// clears reports whether e cleared the result of call id.
func clears(e *loop.ContextEdit, id string) bool {
	for _, c := range e.Cleared {
		if c.CallID == id {
			return true
		}
	}
	return false
}

// describeMessage names a message of a request for a person.
func describeMessage(m *llm.Message, i int) string {
	switch {
	case m.Role == llm.RoleSystem:
		return "the system prompt"
	case m.Result != nil:
		return "the result of call " + m.Result.CallID + " (" + m.Result.Name + ")"
	case len(m.ToolCalls) > 0:
		ids := make([]string, len(m.ToolCalls))
		for j, c := range m.ToolCalls {
			ids[j] = c.ID
		}
		return "the assistant turn with call(s) " + strings.Join(ids, ", ")
	case i == 0:
		return "the first " + string(m.Role) + " message"
	}
	return "a " + string(m.Role) + " message"
}

// missNote is a cache miss as a note on a turn's line.
func missNote(m *CacheDrop) string {
	if m.Expected() {
		return fmt.Sprintf("cache rewritten, %s", m.Cause)
	}
	return fmt.Sprintf("CACHE MISS: read %d of the %d the turn before left: %s", m.Read, m.Prior, m.Cause)
}

// showTokens prints the run's token account: a line per model turn with
// its input split into cache reads, cache writes and new input, a line
// per context edit (the calls whose results it cleared, or the messages
// it summarized and the summary request's tokens, and the next request's
// estimate before and after), and the totals. A run whose turns report no
// tokens and that made no edit has no such section.
func showTokens(w io.Writer, events []loop.Event) {
	lines := Tokens(events)
	var total llm.Usage
	shown := false
	for _, l := range lines {
		total = total.Add(l.Usage)
		shown = shown || l.Edit != nil || l.Usage != (llm.Usage{})
	}
	if !shown {
		return
	}
	// Column widths, so that the turns line up across the edits between them.
	wIn, wRead, wWrite, wNew, wOut := 1, 1, 1, 1, 1
	width := func(w *int, n int64) { *w = max(*w, len(strconv.FormatInt(n, 10))) }
	for _, l := range append(lines, TokenLine{Kind: loop.ModelResponded, Usage: total}) {
		if l.Kind == loop.ModelResponded || l.Kind == loop.ModelFailed {
			u := l.Usage
			width(&wIn, u.InputTokens)
			width(&wRead, u.CachedInputTokens)
			width(&wWrite, u.CacheWriteTokens)
			width(&wNew, NewInput(u))
			width(&wOut, u.OutputTokens)
		}
	}
	split := func(u llm.Usage) string {
		return fmt.Sprintf("input %*d = cache_read %*d + cache_write %*d + new %*d  output %*d", wIn, u.InputTokens,
			wRead, u.CachedInputTokens, wWrite, u.CacheWriteTokens, wNew, NewInput(u), wOut, u.OutputTokens)
	}
	fmt.Fprintf(w, "\ntokens and context edits\n")
	for _, l := range lines {
		switch l.Kind {
		case loop.ModelResponded:
			note := ""
			if l.Miss != nil {
				note = "  " + missNote(l.Miss)
			}
			fmt.Fprintf(w, "  seq %-3d %-14s %-15s %s%s\n", l.Seq, "step "+strconv.Itoa(l.Step), "turn", split(l.Usage), note)
		case loop.ModelFailed:
			note := ""
			if l.Failure != nil {
				note = "  the request failed (" + string(l.Failure.Kind) + "): " + l.Failure.Message
			}
			fmt.Fprintf(w, "  seq %-3d %-14s %-15s %s%s\n", l.Seq, "step "+strconv.Itoa(l.Step), "failed", split(l.Usage), note)
		case loop.ContextSummarized:
			if l.Edit == nil {
				fmt.Fprintf(w, "  seq %-3d before step %-2d %-15s the summary request failed (%d tokens in, %d out): %s\n",
					l.Seq, l.Step, loop.EditCompaction, l.Usage.InputTokens, l.Usage.OutputTokens, l.Failure.Message)
				continue
			}
			e := l.Edit
			fmt.Fprintf(w, "  seq %-3d before step %-2d %-15s summarized messages %d-%d in %d bytes (%d tokens in, %d out)  tokens %d -> %d\n",
				l.Seq, l.Step, e.Reason, e.From, e.Through-1, len(e.Summary), l.Usage.InputTokens, l.Usage.OutputTokens, e.TokensBefore, e.TokensAfter)
		case loop.ContextEdited:
			e := l.Edit
			if e == nil {
				continue
			}
			calls := make([]string, len(e.Cleared))
			for i, r := range e.Cleared {
				calls[i] = r.CallID + "(" + r.Tool + ")"
			}
			fmt.Fprintf(w, "  seq %-3d before step %-2d %-15s cleared %d result(s): %s  tokens %d -> %d\n",
				l.Seq, l.Step, e.Reason, len(e.Cleared), strings.Join(calls, " "), e.TokensBefore, e.TokensAfter)
		}
	}
	fmt.Fprintf(w, "  %-38s %s\n", "total", split(total))
}

// editNote describes a context edit's span in the timeline.
func editNote(ev *loop.Event) []string {
	var parts []string
	if e := ev.Edit; e != nil {
		if e.Reason == loop.EditCompaction {
			parts = append(parts, fmt.Sprintf("compaction messages=%d-%d", e.From, e.Through-1))
		} else {
			parts = append(parts, fmt.Sprintf("%s cleared=%d", e.Reason, len(e.Cleared)))
		}
		parts = append(parts, fmt.Sprintf("estimate=%d->%d", e.TokensBefore, e.TokensAfter))
	}
	if ev.Response != nil {
		u := ev.Response.Usage
		parts = append(parts, fmt.Sprintf("tokens=%d+%d", u.InputTokens, u.OutputTokens))
	}
	return parts
}
