package executor

import (
	"fmt"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// Mode says whether a stage's calls run together or alone.
type Mode string

// Stage modes.
const (
	Serial   Mode = "serial"
	Parallel Mode = "parallel"
)

// PlanCall is one call the planner places.
type PlanCall struct {
	Call llm.ToolCall
	Tool *tool.Tool
	// NeedsConfirmation is set when the policy asked for a human first.
	NeedsConfirmation bool
}

// Row is one line of a plan's decision table.
type Row struct {
	CallID    string      `json:"call_id"`
	Tool      string      `json:"tool"`
	Effect    tool.Effect `json:"effect"`
	Resources []string    `json:"resources,omitempty"`
	Stage     int         `json:"stage"`
	Mode      Mode        `json:"mode"`
	Reason    string      `json:"reason"`
}

// Plan is the execution plan of one batch: stages of indexes into the
// batch, run one stage after another, and the decision table that says why.
type Plan struct {
	Stages [][]int `json:"stages"`
	Table  []Row   `json:"table"`
}

// Planner turns a batch into a plan. It must be deterministic: the same
// batch always gives the same plan, so that replaying a run reproduces it.
type Planner interface {
	Plan(calls []PlanCall) Plan
}

// PlannerFunc adapts a function to the Planner interface.
type PlannerFunc func(calls []PlanCall) Plan

// Plan calls f.
func (f PlannerFunc) Plan(calls []PlanCall) Plan { return f(calls) }

// SerialPlanner runs every call alone, in the order the model gave. It is
// always safe, and the default until a batch-aware planner is configured.
func SerialPlanner() Planner {
	return PlannerFunc(func(calls []PlanCall) Plan {
		p := Plan{Stages: make([][]int, len(calls)), Table: make([]Row, len(calls))}
		idx := make([]int, len(calls)) // one backing array for all stages
		for i, c := range calls {
			idx[i] = i
			p.Stages[i] = idx[i : i+1 : i+1]
			p.Table[i] = Row{
				CallID: c.Call.ID, Tool: c.Call.Name, Effect: c.Tool.Effect(),
				Resources: c.Tool.Resources(c.Call.Arguments), Stage: i, Mode: Serial,
				Reason: "serial planner: one call at a time in model order",
			}
		}
		return p
	})
}

// PlanPart plans the calls of a batch listed in idx (ascending indexes into
// the batch; calls holds them in that order) with planner, and numbers the
// plan's stages by batch index. A planner whose plan does not place every
// call exactly once is not trusted: the calls then run serially, and the
// decision table says why.
func PlanPart(planner Planner, calls []PlanCall, idx []int) Plan {
	p := planner.Plan(calls)
	if err := p.check(len(calls)); err != nil {
		fallback := SerialPlanner().Plan(calls)
		for k := range fallback.Table {
			fallback.Table[k].Reason = "planner returned an invalid plan (" + err.Error() + "); running serially"
		}
		p = fallback
	}
	identity := true
	for k, i := range idx {
		identity = identity && i == k
	}
	if identity {
		return p // the planner's numbering is already the batch's
	}
	// Copy rather than rewrite in place: the planner may share its slices.
	flat := make([]int, 0, len(idx))
	stages := make([][]int, len(p.Stages))
	for k, st := range p.Stages {
		start := len(flat)
		for _, j := range st {
			flat = append(flat, idx[j])
		}
		stages[k] = flat[start:len(flat):len(flat)]
	}
	p.Stages = stages
	return p
}

// check verifies that every one of n calls is placed exactly once.
func (p Plan) check(n int) error {
	seen := make([]bool, n)
	count := 0
	for _, st := range p.Stages {
		for _, j := range st {
			if j < 0 || j >= n {
				return fmt.Errorf("call index %d out of range", j)
			}
			if seen[j] {
				return fmt.Errorf("call index %d placed twice", j)
			}
			seen[j] = true
			count++
		}
	}
	if count != n {
		return fmt.Errorf("%d of %d calls placed", count, n)
	}
	return nil
}
