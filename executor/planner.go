package executor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolloop/toolloop/tool"
)

// RulePlanner plans a batch by the rules of docs/DESIGN.md §6, in order:
//
//  1. a call that needs confirmation runs alone, after every call the
//     model gave before it;
//  2. writes run one at a time, each alone in its stage, in the model's
//     order;
//  3. a call touching a resource that an earlier call of the batch writes
//     runs after that write (and a write runs after earlier calls touching
//     its resources);
//  4. calls of one exclusive group (a shared transaction, a strict rate
//     limit) run one at a time, in the model's order;
//  5. the remaining read-only, independent calls run in parallel, at most
//     maxParallel per stage.
//
// The plan depends only on the batch, so replaying a run reproduces it.
func RulePlanner(maxParallel int) Planner {
	if maxParallel <= 0 {
		maxParallel = 4
	}
	return PlannerFunc(func(calls []PlanCall) Plan { return planByRules(calls, maxParallel) })
}

type placed struct {
	stage  int
	reason string
}

// planByRules places the calls one after another by the rules.
func planByRules(calls []PlanCall, maxParallel int) Plan {
	n := len(calls)
	// The scratch of a usual batch lives on the stack: a plan is made
	// every turn, and only its stages and table outlive it.
	var resourcesBuf [smallBatch][]string
	var placeBuf [smallBatch]placed
	resources, place := resourcesBuf[:0], placeBuf[:0]
	if n > smallBatch {
		resources, place = make([][]string, 0, n), make([]placed, 0, n)
	}
	resources, place = resources[:n], place[:n]
	for i, c := range calls {
		resources[i] = c.Tool.Resources(c.Call.Arguments)
	}
	// Stage occupancy while placing: how many calls, and whether one of
	// them must be alone.
	count := make([]int, 0, n)
	alone := make([]bool, 0, n)
	use := func(s int, exclusive bool) {
		for len(count) <= s {
			count = append(count, 0)
			alone = append(alone, false)
		}
		count[s]++
		alone[s] = alone[s] || exclusive
	}
	free := func(s int) bool { return s >= len(count) || (!alone[s] && count[s] < maxParallel) }
	empty := func(s int) bool { return s >= len(count) || count[s] == 0 }

	lastWrite := -1 // stage of the latest write
	barrier := -1   // every call must come after this stage (confirmations)
	// groupLast is the index of each exclusive group's latest call.
	var groupLast map[string]int // made when a group first appears
	for i, c := range calls {
		earliest := barrier + 1
		reason := ""
		after := func(s int, why string) {
			if s+1 > earliest || (s+1 == earliest && reason == "") {
				earliest, reason = s+1, why
			}
		}
		write := c.Tool.Effect() == tool.Write
		// Rule 3: order against earlier calls that share a resource.
		for j := 0; j < i; j++ {
			jw := calls[j].Tool.Effect() == tool.Write
			if !jw && !write {
				continue
			}
			if r := shared(resources[i], resources[j]); r != "" {
				if jw {
					after(place[j].stage, fmt.Sprintf("touches %s, written by %s earlier in the batch", r, calls[j].Call.ID))
				} else {
					after(place[j].stage, fmt.Sprintf("writes %s, read by %s earlier in the batch", r, calls[j].Call.ID))
				}
			}
		}
		// Rule 4: one at a time within a group.
		if g := c.Tool.ExclusiveGroup(); g != "" {
			if j, ok := groupLast[g]; ok {
				after(place[j].stage, fmt.Sprintf("exclusive group %q: after %s", g, calls[j].Call.ID))
			}
		}
		var s int
		switch {
		case c.NeedsConfirmation:
			// Rule 1: alone, after everything before it.
			s = max(len(count), earliest)
			reason = "needs confirmation: runs alone, after the calls before it"
			use(s, true)
			barrier = s
		case write:
			// Rule 2: alone, after the previous write.
			s = max(earliest, lastWrite+1)
			for !empty(s) {
				s++
			}
			if reason == "" {
				reason = "write: runs alone, in the model's order"
			} else {
				reason = "write: runs alone; " + reason
			}
			use(s, true)
			lastWrite = s
		default:
			s = earliest
			for !free(s) {
				s++
			}
			if reason == "" {
				reason = readReason
			}
			use(s, false)
		}
		if g := c.Tool.ExclusiveGroup(); g != "" {
			if groupLast == nil {
				groupLast = map[string]int{}
			}
			groupLast[g] = i
			// Rule 4 also means no two calls of a group share a stage.
			if !strings.Contains(reason, "exclusive group") {
				reason += fmt.Sprintf("; exclusive group %q", g)
			}
		}
		place[i] = placed{stage: s, reason: reason}
	}
	return assemble(calls, resources, place)
}

// smallBatch is the largest batch planByRules plans without allocating
// scratch.
const smallBatch = 8

// readReason is the reason of a call that rule 5 alone places.
const readReason = "read-only and independent"

// assemble numbers the used stages densely and builds the table. Stage
// numbers are small, so plain slices stand in for maps and sorting.
func assemble(calls []PlanCall, resources [][]string, place []placed) Plan {
	last := 0
	for _, p := range place {
		last = max(last, p.stage)
	}
	// size[s] counts the calls in sparse stage s; dense[s] is its number
	// once empty stages are dropped.
	scratch := make([]int, 2*(last+1))
	size, dense := scratch[:last+1], scratch[last+1:]
	for _, p := range place {
		size[p.stage]++
	}
	used := 0
	for st, c := range size {
		dense[st] = used
		if c > 0 {
			used++
		}
	}
	// One backing array holds every stage, in stage order and, within a
	// stage, in the model's order.
	flat := make([]int, len(place))
	start := make([]int, used+1)
	for st, c := range size {
		if c > 0 {
			start[dense[st]+1] = start[dense[st]] + c
		}
	}
	p := Plan{Stages: make([][]int, used), Table: make([]Row, len(calls))}
	for k := range p.Stages {
		p.Stages[k] = flat[start[k]:start[k]:start[k+1]]
	}
	for i, pl := range place {
		k := dense[pl.stage]
		p.Stages[k] = append(p.Stages[k], i)
	}
	for i, c := range calls {
		k := dense[place[i].stage]
		mode := Serial
		if len(p.Stages[k]) > 1 {
			mode = Parallel
		}
		p.Table[i] = Row{CallID: c.Call.ID, Tool: c.Call.Name, Effect: c.Tool.Effect(), Resources: resources[i],
			Stage: k, Mode: mode, Reason: place[i].reason}
	}
	return p
}

// shared returns a resource in both lists, or "".
func shared(a, b []string) string {
	for _, r := range a {
		if slices.Contains(b, r) {
			return r
		}
	}
	return ""
}
