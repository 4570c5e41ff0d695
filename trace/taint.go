package trace

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
)

// TaintHold: a taint rule (policy.TaintRules) held a call for a person's
// confirmation, or denied it, because untrusted content could steer it;
// the message names each value that is not trusted and the call whose
// result it came from.
const TaintHold FindingKind = "taint_hold"

// taintHolds reports each call a taint rule held or denied. The log has
// the decisions' reasons; the facts behind them (which values, from which
// results) are the decider's, worked out again by replaying the log, as
// the run did when it asked the policy.
func taintHolds(events []loop.Event) []Finding {
	held := false
	for i := range events {
		for _, d := range events[i].Decisions {
			held = held || isTaintHold(d)
		}
	}
	if !held {
		return nil // most logs: no replay
	}
	var (
		out   []Finding
		s     loop.State
		calls []llm.ToolCall
		facts []*policy.Taint
		step  int
		order = map[string]int{} // call ID -> its place in the run
	)
	for i := range events {
		ev := events[i] // the decider's copy: the caller's log is not touched
		loop.Next(&s, &ev)
		switch ev.Kind {
		case loop.ModelResponded:
			if ev.Response != nil {
				step++
			}
		case loop.CallsValidated:
			calls, facts = nil, nil
			if s.Batch != nil {
				calls, facts = s.Batch.Calls, s.Batch.Taint
			}
			for _, c := range calls {
				if _, ok := order[c.ID]; !ok {
					order[c.ID] = len(order)
				}
			}
		case loop.PolicyDecided:
			for j, d := range ev.Decisions {
				if !isTaintHold(d) || j >= len(calls) {
					continue
				}
				var t *policy.Taint
				if j < len(facts) {
					t = facts[j]
				}
				f := taintFinding(ev.Seq, step, calls[j], d, t)
				slices.SortStableFunc(f.CallIDs, func(a, b string) int { return order[a] - order[b] })
				out = append(out, f)
			}
		}
	}
	return out
}

func isTaintHold(d policy.Decision) bool {
	return d.Verdict != policy.Allow && strings.HasPrefix(d.Rule, "taint")
}

// taintFinding explains one held call from its facts t (nil when the log
// cannot give them: the decision's reason is all there is).
func taintFinding(seq, step int, c llm.ToolCall, d policy.Decision, t *policy.Taint) Finding {
	what := "held call %s (%s) for a person's confirmation"
	if d.Verdict == policy.Deny {
		what = "denied call %s (%s)"
	}
	msg := fmt.Sprintf("the taint rule %s "+what, d.Rule, c.ID, c.Name)
	var sources []string
	seen := map[string]bool{}
	source := func(s *policy.Source) {
		if s != nil && !seen[s.CallID] {
			seen[s.CallID] = true
			sources = append(sources, s.CallID)
		}
	}
	var why []string
	if t != nil {
		for _, a := range t.Args {
			v := fmt.Sprintf("argument %s = %q", a.Path, a.Value)
			if a.Embedded {
				v = fmt.Sprintf("%q inside argument %s", a.Value, a.Path)
			}
			if a.Origin == policy.Untrusted && a.From != nil {
				why = append(why, fmt.Sprintf("%s came only from the untrusted result of call %s (%s)", v, a.From.CallID, a.From.Tool))
				source(a.From)
			} else {
				why = append(why, v+" is in neither the prompt nor a trusted result (the model wrote it)")
			}
		}
		if len(sources) == 0 && t.Tainted && t.Source != nil {
			why = append(why, fmt.Sprintf("the run was tainted by the result of call %s (%s)", t.Source.CallID, t.Source.Tool))
			source(t.Source)
		}
		if t.Private != nil && d.Rule == "taint_private" {
			why = append(why, fmt.Sprintf("it had read private data in the result of call %s (%s)", t.Private.CallID, t.Private.Tool))
			source(t.Private)
		}
	}
	if len(why) > 0 {
		msg += ": " + strings.Join(why, "; ")
	} else {
		msg += ": " + d.Reason
	}
	return Finding{Seq: seq, Step: step, Kind: TaintHold, CallIDs: append(sources, c.ID), Message: msg}
}
