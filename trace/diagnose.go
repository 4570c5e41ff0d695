package trace

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// FindingKind names a suspicious pattern in a run.
type FindingKind string

// Finding kinds, in the order Diagnose reports findings at the same event.
const (
	// MismatchedResult: a result is not matched to its call by ID (it
	// names another call, an unknown call, or a call already answered), or
	// a call has no result.
	MismatchedResult FindingKind = "mismatched_result"
	// LostResults: a call succeeded, but its result did not reach the
	// history because another call failed.
	LostResults FindingKind = "lost_results"
	// UnkeyedWriteRetry: a write was tried again, after a timeout or a
	// transient failure, without an idempotency key, so it may have been
	// applied twice.
	UnkeyedWriteRetry FindingKind = "unkeyed_write_retry"
	// RepeatedCall: the model asked for the same tool with the same
	// arguments again.
	RepeatedCall FindingKind = "repeated_call"
	// ResultNotSeen: a tool succeeded, but the model then said it had no
	// result: the result may not be linked to its call by ID.
	ResultNotSeen FindingKind = "result_not_seen"
	// DroppedState: the model client left out provider state another
	// provider made (llm.Response.DroppedState): the history switched
	// providers, and the model answered without that reasoning.
	DroppedState FindingKind = "dropped_state"
	// RepeatedTool: the model called the same tool in several turns in a
	// row with changing arguments and no answer.
	RepeatedTool FindingKind = "repeated_tool"
	// CostRising: tokens or tool calls per turn keep growing.
	CostRising FindingKind = "cost_rising"
	// UncachedGrowth: the input of the model turns kept growing and none
	// of them read the provider's prompt cache, so each turn paid full
	// price for the whole history again.
	UncachedGrowth FindingKind = "uncached_growth"
	// CacheMiss: a model turn read far less from the prompt cache than
	// the turn before it left there, and no context edit of the run
	// explains it; the message says what the log shows changed between
	// the two requests (see CacheDrops). A miss that an edit explains is
	// the edit's expected cost, and no finding.
	CacheMiss FindingKind = "cache_miss"
	// BudgetStop: the run ran out of a budget; the findings before it
	// usually say why.
	BudgetStop FindingKind = "budget_stop"
	// RunStopped: the run stopped with a status other than a final answer,
	// a budget, a pause for confirmation or the caller's cancellation.
	RunStopped FindingKind = "run_stopped"
)

var findingOrder = []FindingKind{MismatchedResult, LostResults, UnkeyedWriteRetry, RepeatedCall,
	ResultNotSeen, DroppedState, RepeatedTool, CostRising, UncachedGrowth, CacheMiss, TaintHold, BudgetStop, RunStopped}

// Finding is one suspicious point of a run.
type Finding struct {
	// Seq is the event where it shows; Step the model turn.
	Seq  int         `json:"seq"`
	Step int         `json:"step"`
	Kind FindingKind `json:"kind"`
	// CallIDs are the calls involved, earliest first.
	CallIDs []string `json:"call_ids,omitempty"`
	// Message explains the finding to a person.
	Message string `json:"message"`
}

func (f Finding) String() string {
	s := fmt.Sprintf("seq %d step %d %s", f.Seq, f.Step, f.Kind)
	if len(f.CallIDs) > 0 {
		s += " [" + strings.Join(f.CallIDs, " ") + "]"
	}
	return s + ": " + f.Message
}

// noResult matches an answer saying that a tool gave nothing back.
var noResult = regexp.MustCompile(`(?i)\b(no|not|never|haven'?t|have not|didn'?t|did not|couldn'?t|could not|unable to|cannot|can'?t|still waiting for|waiting for)\b[^.!?]{0,40}\b(results?|responses?|outputs?|data|answers?|reply|replies)\b`)

// prior is a call seen earlier in the run.
type prior struct {
	id, tool string
	step     int
	write    bool
	key      string // idempotency key
	argKey   uint64 // tool name and canonical arguments
	status   llm.ResultStatus
	kind     llm.ErrorKind
	timedOut bool
	executed bool
	replayed bool
}

type diagBatch struct {
	calls []llm.ToolCall
	keys  []uint64
	plan  *executor.Plan
	// answered counts results per call ID from the executor.
	answered map[string]int
}

// Diagnose walks one run's log and returns what looks wrong in it, the
// first suspicious point first. It never fails: a log too broken to replay
// gives the findings found up to the break. Hand-built logs are welcome;
// findings about results need the call IDs of the model's responses.
func Diagnose(events []loop.Event) []Finding {
	var (
		out      []Finding
		step     int
		batch    *diagBatch
		byKey    = map[uint64]*prior{}
		byID     = map[string]*prior{}
		all      []*prior
		okSince  []*prior // successful calls since the model last answered
		streaks  = map[string][]string{}
		reported = map[string]bool{}
		tokens   []int64
		dropped  int // the most state pieces a response said were left out
		perTurn  []int
		turnSeq  []int
	)
	add := func(f Finding) { out = append(out, f) }
	gone := editedAway(events)
	for i := range events {
		ev := &events[i]
		switch ev.Kind {
		case loop.ModelResponded:
			if ev.Response == nil {
				continue
			}
			step++
			msg := ev.Response.Message
			u := ev.Response.Usage
			tokens = append(tokens, u.InputTokens+u.OutputTokens)
			perTurn = append(perTurn, len(msg.ToolCalls))
			turnSeq = append(turnSeq, ev.Seq)
			if msg.Text != "" && len(okSince) > 0 && noResult.MatchString(msg.Text) {
				ids, tools := make([]string, len(okSince)), make([]string, len(okSince))
				for j, p := range okSince {
					ids[j], tools[j] = p.id, p.tool
				}
				add(Finding{Seq: ev.Seq, Step: step, Kind: ResultNotSeen, CallIDs: ids, Message: fmt.Sprintf(
					"the model says %q although %s succeeded: it may not have received the result; check that each result "+
						"is sent back linked to its call by ID (tool_call_id / tool_use_id), not by position",
					clip(msg.Text, 80), strings.Join(slices.Compact(tools), ", "))})
			}
			okSince = nil
			// Once a history has switched providers, every later request
			// leaves the same state out: report it when it first grows.
			if n := ev.Response.DroppedState; n > dropped {
				add(Finding{Seq: ev.Seq, Step: step, Kind: DroppedState, Message: fmt.Sprintf(
					"the model client left out %d piece(s) of provider state that another provider made: the history "+
						"switched providers, so the model answered without that provider's reasoning (only the text "+
						"and calls of those turns reached it)", n)})
				dropped = n
			}
			// Streaks of the same tool in consecutive turns.
			seen := map[string]bool{}
			for _, c := range msg.ToolCalls {
				if seen[c.Name] {
					continue
				}
				seen[c.Name] = true
				streaks[c.Name] = append(streaks[c.Name], c.ID)
			}
			for name := range streaks {
				if !seen[name] {
					delete(streaks, name)
				}
			}
			batch = &diagBatch{calls: msg.ToolCalls, answered: map[string]int{}}
			batch.keys = make([]uint64, len(msg.ToolCalls))
			for j, c := range msg.ToolCalls {
				batch.keys[j] = fallbackKey(c)
			}
		case loop.CallsValidated:
			if batch == nil {
				continue
			}
			for j, c := range batch.calls {
				if j < len(ev.Checks) && ev.Checks[j].Known {
					batch.keys[j] = ev.Checks[j].Key
				}
				p, again := byKey[batch.keys[j]]
				// A call whose result a context edit took away may be
				// made again: the note that replaced it says so.
				if again && p.tool == c.Name && p.id != c.ID && !(gone[p.id] > 0 && gone[p.id] < ev.Seq) {
					add(repeated(ev.Seq, step, p, c))
				}
			}
			for j, c := range batch.calls {
				p := &prior{id: c.ID, tool: c.Name, step: step, argKey: batch.keys[j]}
				if j < len(ev.Checks) {
					p.key = ev.Checks[j].WriteKey
					p.write = ev.Checks[j].WriteKey != ""
				}
				byKey[batch.keys[j]] = p
				byID[c.ID] = p
				all = append(all, p)
			}
		case loop.StagePlanned:
			if batch != nil && ev.Plan != nil {
				batch.plan = ev.Plan
				for _, r := range ev.Plan.Table {
					if p := byID[r.CallID]; p != nil && r.Effect == tool.Write {
						p.write = true
					}
				}
			}
		case loop.StageFinished:
			if batch == nil {
				continue
			}
			out = stageFindings(out, ev, step, batch, byID, all)
			for _, o := range ev.Outcomes {
				if p := byID[o.Result.CallID]; p != nil && o.Result.Status == llm.StatusOK {
					okSince = append(okSince, p)
				}
			}
		case loop.Stopped:
			switch ev.Status {
			case loop.MaxStepsExceeded, loop.ToolBudgetExceeded, loop.CostBudgetExceeded, loop.DeadlineExceeded:
				add(Finding{Seq: ev.Seq, Step: step, Kind: BudgetStop, Message: fmt.Sprintf(
					"the run stopped with %s: %s", string(ev.Status), ev.Detail)})
			case loop.FinalAnswer, loop.ConfirmationRequired, loop.Canceled:
			default:
				add(Finding{Seq: ev.Seq, Step: step, Kind: RunStopped, Message: fmt.Sprintf(
					"the run stopped with %s: %s", string(ev.Status), ev.Detail)})
			}
		}
		// A tool called in three turns in a row, arguments changing.
		for name, ids := range streaks {
			if len(ids) == 3 && !reported[name] && ev.Kind == loop.ModelResponded {
				reported[name] = true
				add(Finding{Seq: ev.Seq, Step: step, Kind: RepeatedTool, CallIDs: slices.Clone(ids), Message: name})
			}
		}
	}
	// Fill in the streak messages now that their lengths are known.
	for i := range out {
		f := &out[i]
		if f.Kind != RepeatedTool {
			continue
		}
		name := f.Message
		f.Message = fmt.Sprintf("the model called %s in %d turns in a row (%s) with changing arguments and no answer: "+
			"it may be paging or searching without end", name, len(f.CallIDs), strings.Join(f.CallIDs, ", "))
		if ids := streaks[name]; len(ids) > 3 && ids[0] == f.CallIDs[0] {
			f.Message += fmt.Sprintf("; the streak went on for %d turns, to %s", len(ids), ids[len(ids)-1])
		}
	}
	out = append(out, rising(tokens, perTurn, turnSeq)...)
	out = append(out, lost(events, gone)...)
	out = append(out, uncached(events)...)
	out = append(out, cacheMisses(events)...)
	out = append(out, taintHolds(events)...)
	slices.SortStableFunc(out, func(a, b Finding) int {
		if a.Seq != b.Seq {
			return a.Seq - b.Seq
		}
		return slices.Index(findingOrder, a.Kind) - slices.Index(findingOrder, b.Kind)
	})
	return out
}

// uncachedTurns is how many model turns in a row must grow their input
// with no cache read before uncached reports them, and uncachedMin the
// input a turn must reach: below it providers do not cache at all.
const (
	uncachedTurns = 4
	uncachedMin   = 4096
)

// uncached reports the first streak of model turns whose input grew turn
// after turn, past uncachedMin, with no token read from the prompt cache.
func uncached(events []loop.Event) []Finding {
	var prev int64
	streak, step, first := 0, 0, int64(0)
	for _, ev := range events {
		if ev.Kind != loop.ModelResponded || ev.Response == nil {
			continue
		}
		step++
		u := ev.Response.Usage
		switch {
		case u.CachedInputTokens > 0 || u.InputTokens <= prev || u.InputTokens < uncachedMin:
			streak = 0
		case streak == 0:
			streak, first = 1, u.InputTokens
		default:
			streak++
		}
		prev = u.InputTokens
		if streak == uncachedTurns {
			return []Finding{{Seq: ev.Seq, Step: step, Kind: UncachedGrowth, Message: fmt.Sprintf(
				"the input grew from %d to %d tokens over %d turns and no turn read the prompt cache: each turn pays for the "+
					"whole history again; turn prompt caching on (toolloop run does by default), or look for what changes "+
					"the request's beginning from turn to turn", first, u.InputTokens, uncachedTurns)}}
		}
	}
	return nil
}

// editedAway returns the calls whose results a context edit cleared or
// summarized away, each with the edit's seq; nil for a run without edits.
func editedAway(events []loop.Event) map[string]int {
	if !slices.ContainsFunc(events, func(ev loop.Event) bool {
		return ev.Kind == loop.ContextEdited || ev.Kind == loop.ContextSummarized
	}) {
		return nil
	}
	gone := map[string]int{}
	var st loop.State
	for i := range events {
		ev := &events[i]
		if e := ev.Edit; e != nil {
			switch {
			case ev.Kind == loop.ContextEdited:
				for _, c := range e.Cleared {
					gone[c.CallID] = ev.Seq
				}
			case ev.Kind == loop.ContextSummarized && e.From >= 0 && e.From <= e.Through && e.Through <= len(st.Messages):
				for _, m := range st.Messages[e.From:e.Through] {
					if m.Result != nil {
						gone[m.Result.CallID] = ev.Seq
					}
				}
			}
		}
		loop.Next(&st, ev)
	}
	return gone
}

// cacheMisses reports the cache misses that no context edit explains.
func cacheMisses(events []loop.Event) []Finding {
	var out []Finding
	for _, m := range CacheDrops(events) {
		if m.Expected() {
			continue
		}
		out = append(out, Finding{Seq: m.Seq, Step: m.Step, Kind: CacheMiss, Message: fmt.Sprintf(
			"the turn read %d tokens from the prompt cache where the turn before (step %d) left %d there, so it paid "+
				"for most of its input again: %s", m.Read, m.PriorStep, m.Prior, m.Cause)})
	}
	return out
}

func repeated(seq, step int, p *prior, c llm.ToolCall) Finding {
	msg := fmt.Sprintf("call %s asks for %s with the same arguments as call %s (step %d)", c.ID, c.Name, p.id, p.step)
	switch {
	case p.replayed || (p.write && p.key != "" && p.status == llm.StatusOK):
		msg += fmt.Sprintf("; the write has idempotency key %q, so a retry is answered from the ledger, but the model "+
			"is repeating itself", p.key)
	case p.status == llm.StatusOK:
		msg += "; that call succeeded, so the model may not have seen its result (is it linked to the call by ID?)"
	case p.status == llm.StatusError:
		msg += fmt.Sprintf("; that call failed with %s, and the same arguments will fail the same way", p.kind)
	case p.executed:
		msg += fmt.Sprintf("; that call ended %s", p.status)
	}
	return Finding{Seq: seq, Step: step, Kind: RepeatedCall, CallIDs: []string{p.id, c.ID}, Message: msg}
}

// stageFindings checks one stage's outcomes against the plan and records
// them in the calls seen so far.
func stageFindings(out []Finding, ev *loop.Event, step int, b *diagBatch, byID map[string]*prior, all []*prior) []Finding {
	var want []int
	if b.plan != nil && ev.Stage >= 0 && ev.Stage < len(b.plan.Stages) {
		want = b.plan.Stages[ev.Stage]
	}
	if b.plan != nil && len(ev.Outcomes) != len(want) {
		var ids []string
		for _, i := range want {
			if i >= 0 && i < len(b.calls) {
				ids = append(ids, b.calls[i].ID)
			}
		}
		out = append(out, Finding{Seq: ev.Seq, Step: step, Kind: MismatchedResult, CallIDs: ids, Message: fmt.Sprintf(
			"stage %d planned %d call(s) but reported %d outcome(s): results cannot be matched to calls", ev.Stage, len(want), len(ev.Outcomes))})
	}
	for j, o := range ev.Outcomes {
		r := o.Result
		if j < len(want) && want[j] >= 0 && want[j] < len(b.calls) {
			if c := b.calls[want[j]]; r.CallID != c.ID {
				out = append(out, Finding{Seq: ev.Seq, Step: step, Kind: MismatchedResult, CallIDs: []string{c.ID, r.CallID},
					Message: fmt.Sprintf("stage %d reports the result of %s (%s) where call %s (%s) was planned: the result is "+
						"matched to the wrong call", ev.Stage, idOrNone(r.CallID), r.Name, c.ID, c.Name)})
			}
		}
		inBatch := slices.ContainsFunc(b.calls, func(c llm.ToolCall) bool { return c.ID == r.CallID })
		if !inBatch {
			out = append(out, Finding{Seq: ev.Seq, Step: step, Kind: MismatchedResult, CallIDs: []string{r.CallID},
				Message: fmt.Sprintf("a result names call %s, which the model did not make in this turn", idOrNone(r.CallID))})
			continue
		}
		if b.answered[r.CallID]++; b.answered[r.CallID] == 2 {
			out = append(out, Finding{Seq: ev.Seq, Step: step, Kind: MismatchedResult, CallIDs: []string{r.CallID},
				Message: fmt.Sprintf("call %s has a second result", r.CallID)})
		}
		p := byID[r.CallID]
		if p == nil {
			continue
		}
		write := p.write || o.IdempotencyKey != ""
		if write && o.IdempotencyKey == "" && o.Attempts > 1 {
			out = append(out, Finding{Seq: ev.Seq, Step: step, Kind: UnkeyedWriteRetry, CallIDs: []string{r.CallID},
				Message: fmt.Sprintf("write %s (%s) was tried %d times without an idempotency key: if an attempt that "+
					"seemed to fail had applied, it was applied again", r.CallID, r.Name, o.Attempts)})
		}
		// A write asked for again after it timed out without a key.
		if o.IdempotencyKey == "" {
			for _, q := range all {
				if q != p && q.executed && q.write && q.key == "" && q.timedOut && q.tool == p.tool && q.argKey == p.argKey {
					out = append(out, Finding{Seq: ev.Seq, Step: step, Kind: UnkeyedWriteRetry, CallIDs: []string{q.id, r.CallID},
						Message: fmt.Sprintf("write %s timed out (step %d) and ran again as %s without an idempotency key: the "+
							"first may have applied, so it may now be applied twice", q.id, q.step, r.CallID)})
				}
			}
		}
		p.executed, p.status, p.kind, p.timedOut, p.replayed = true, r.Status, r.ErrorKind, o.TimedOut, o.Replayed
		if o.IdempotencyKey != "" {
			p.key = o.IdempotencyKey
		}
	}
	return out
}

func idOrNone(id string) string {
	if id == "" {
		return "(no call ID)"
	}
	return id
}

// fallbackKey identifies a call by tool name and canonical arguments, for
// calls the log has no validation for.
func fallbackKey(c llm.ToolCall) uint64 {
	var v any
	if err := json.Unmarshal(c.Arguments, &v); err != nil {
		return tool.CallKey(c.Name, tool.Fingerprint(string(c.Arguments)))
	}
	return tool.CallKey(c.Name, tool.Fingerprint(v))
}

// rising reports tokens or tool calls per turn that grow over three turns
// or more, to at least twice where they started.
func rising(tokens []int64, calls []int, seqs []int) []Finding {
	var out []Finding
	check := func(vals []int64, what string) {
		for start := 0; start < len(vals); {
			end := start
			for end+1 < len(vals) && vals[end+1] > vals[end] {
				end++
			}
			if end-start >= 2 && vals[start] > 0 && vals[end] >= 2*vals[start] {
				series := make([]string, 0, end-start+1)
				for _, v := range vals[start : end+1] {
					series = append(series, strconv.FormatInt(v, 10))
				}
				out = append(out, Finding{Seq: seqs[end], Step: end + 1, Kind: CostRising, Message: fmt.Sprintf(
					"%s per turn rose from %d to %d over turns %d to %d (%s): each turn costs more than the last",
					what, vals[start], vals[end], start+1, end+1, strings.Join(series, ", "))})
			}
			start = end + 1
		}
	}
	check(tokens, "tokens")
	c := make([]int64, len(calls))
	for i, n := range calls {
		c[i] = int64(n)
	}
	check(c, "tool calls")
	return out
}

// lost replays the log through the decider and reports calls that
// succeeded but whose results the history does not hold as successes
// (gone lists the results context edits took away on purpose), and a
// history that breaks the call-ID invariant.
func lost(events []loop.Event, gone map[string]int) []Finding {
	if len(events) == 0 || events[0].Kind != loop.Started || events[0].Start == nil {
		return nil
	}
	var st loop.State
	ok := map[string]int{}     // call ID -> seq of its successful outcome
	okStep := map[string]int{} // call ID -> its step
	step := 0
	for i := range events {
		ev := &events[i]
		if ev.Kind == loop.ModelResponded {
			step++
		}
		if ev.Kind == loop.StageFinished {
			for _, o := range ev.Outcomes {
				if o.Result.Status == llm.StatusOK {
					ok[o.Result.CallID], okStep[o.Result.CallID] = ev.Seq, step
				}
			}
		}
		loop.Next(&st, ev)
	}
	var out []Finding
	final := map[string]*llm.ToolResult{}
	history := st.History()
	for _, m := range history {
		if m.Role == llm.RoleTool && m.Result != nil {
			final[m.Result.CallID] = m.Result
		}
	}
	ids := make([]string, 0, len(ok))
	for id := range ok {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return ok[a] - ok[b] })
	for _, id := range ids {
		r := final[id]
		if (r != nil && r.Status == llm.StatusOK) || (r == nil && gone[id] > 0) {
			continue
		}
		got := "no result at all"
		if r != nil {
			got = "a " + string(r.Status) + " result"
		}
		out = append(out, Finding{Seq: ok[id], Step: okStep[id], Kind: LostResults, CallIDs: []string{id}, Message: fmt.Sprintf(
			"call %s succeeded, but the history holds %s for it: another call's failure lost its result", id, got)})
	}
	if err := llm.CheckHistory(history); err != nil {
		last := events[len(events)-1]
		out = append(out, Finding{Seq: last.Seq, Step: step, Kind: MismatchedResult, Message: "the history breaks the call-ID invariant: " + err.Error()})
	}
	return out
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "..."
}
