package console

import (
	"fmt"
	"strings"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/trace"
)

// tokenRow is one line of a run's token account on its page: a model
// turn with its input split by the prompt cache, or a context edit (a
// compaction with its summary request's tokens).
type tokenRow struct {
	Seq int `json:"seq,omitempty"`
	// Step is the turn's number, or "before N" for an edit.
	Step string `json:"step,omitempty"`
	// What is "turn", "failed" (a request paid for in part), "clearing",
	// "compaction" or "total".
	What       string `json:"what"`
	Input      int64  `json:"input"`
	CacheRead  int64  `json:"cache_read"`
	CacheWrite int64  `json:"cache_write"`
	New        int64  `json:"new"`
	Output     int64  `json:"output"`
	// Edit says what an edit did, or why a request failed.
	Edit string `json:"edit,omitempty"`
	// Miss is a turn's cache miss, in words; Expected when a context
	// edit of the run explains it.
	Miss     string `json:"miss,omitempty"`
	Expected bool   `json:"expected,omitempty"`
}

// tokenRows is the run's token account (trace.Tokens) with a total row
// last; none for a run whose turns report no tokens and that made no edit.
func tokenRows(events []loop.Event) []tokenRow {
	lines := trace.Tokens(events)
	var rows []tokenRow
	var total llm.Usage
	shown := false
	for _, l := range lines {
		total = total.Add(l.Usage)
		shown = shown || l.Edit != nil || l.Usage != (llm.Usage{})
		r := usageRow(l.Usage)
		r.Seq = l.Seq
		switch l.Kind {
		case loop.ModelResponded:
			r.What, r.Step = "turn", fmt.Sprint(l.Step)
			if m := l.Miss; m != nil {
				r.Miss = fmt.Sprintf("cache miss: read %d of the %d tokens the turn before left in the cache; %s", m.Read, m.Prior, m.Cause)
				r.Expected = m.Expected()
			}
		case loop.ModelFailed:
			r.What, r.Step = "failed", fmt.Sprint(l.Step)
			if l.Failure != nil {
				r.Edit = "the request failed (" + string(l.Failure.Kind) + "): " + l.Failure.Message
			}
		default:
			r.What, r.Step, r.Edit = "clearing", fmt.Sprintf("before %d", l.Step), editText(l)
			if l.Kind == loop.ContextSummarized {
				r.What = loop.EditCompaction
			}
		}
		rows = append(rows, r)
	}
	if !shown {
		return nil
	}
	r := usageRow(total)
	r.What = "total"
	return append(rows, r)
}

func usageRow(u llm.Usage) tokenRow {
	return tokenRow{Input: u.InputTokens, CacheRead: u.CachedInputTokens, CacheWrite: u.CacheWriteTokens,
		New: trace.NewInput(u), Output: u.OutputTokens}
}

// editText says what a context edit did, for a person.
func editText(l trace.TokenLine) string {
	e := l.Edit
	switch {
	case e == nil && l.Failure != nil:
		return "the summary request failed: " + l.Failure.Message
	case e == nil:
		return ""
	case e.Reason == loop.EditCompaction:
		return fmt.Sprintf("summarized messages %d to %d in %d bytes; next request estimated at %d tokens, then %d",
			e.From, e.Through-1, len(e.Summary), e.TokensBefore, e.TokensAfter)
	}
	calls := make([]string, len(e.Cleared))
	for i, c := range e.Cleared {
		calls[i] = c.CallID + " (" + c.Tool + ")"
	}
	return fmt.Sprintf("cleared %d tool result(s) (%s): %s; next request estimated at %d tokens, then %d",
		len(e.Cleared), e.Reason, strings.Join(calls, ", "), e.TokensBefore, e.TokensAfter)
}
