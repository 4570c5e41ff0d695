package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// resArgs names the resources a planner test call touches.
type resArgs struct {
	Res []string `json:"res,omitempty"`
}

// planTool builds a tool for planner tests: its effect and exclusive group
// are fixed, its resources come from the arguments.
func planTool(name string, effect tool.Effect, group string) *tool.Tool {
	return tool.MustNew(tool.Spec[resArgs]{
		Name: name, Effect: effect, ExclusiveGroup: group,
		Resources: func(in resArgs) []string { return in.Res },
	}, func(context.Context, resArgs) (bool, error) { return true, nil })
}

// pcall is one batch entry touching res.
func pcall(id string, tl *tool.Tool, confirm bool, res ...string) executor.PlanCall {
	b, _ := json.Marshal(resArgs{Res: res})
	return executor.PlanCall{Call: llm.ToolCall{ID: id, Name: tl.Name(), Arguments: b}, Tool: tl, NeedsConfirmation: confirm}
}

var (
	readT    = planTool("read", tool.ReadOnly, "")
	writeT   = planTool("write", tool.Write, "")
	txReadT  = planTool("tx_read", tool.ReadOnly, "tx")
	txWriteT = planTool("tx_write", tool.Write, "tx")
	rlReadT  = planTool("rl_read", tool.ReadOnly, "ratelimit")
)

// want is the expected placement of one call.
type want struct {
	stage  int
	mode   executor.Mode
	reason []string // substrings the reason must contain
}

func TestRulePlannerRules(t *testing.T) {
	par, ser := executor.Parallel, executor.Serial
	indep := []string{"read-only and independent"}
	wr := []string{"write", "alone"}
	for _, tc := range []struct {
		name        string
		maxParallel int
		batch       []executor.PlanCall
		stages      [][]int
		rows        []want
	}{{
		name: "independent reads share a stage", maxParallel: 4,
		batch:  []executor.PlanCall{pcall("c1", readT, false, "a"), pcall("c2", readT, false, "a"), pcall("c3", readT, false)},
		stages: [][]int{{0, 1, 2}},
		rows:   []want{{0, par, indep}, {0, par, indep}, {0, par, indep}},
	}, {
		name: "at most maxParallel per stage", maxParallel: 3,
		batch: []executor.PlanCall{
			pcall("c1", readT, false), pcall("c2", readT, false), pcall("c3", readT, false), pcall("c4", readT, false),
			pcall("c5", readT, false), pcall("c6", readT, false), pcall("c7", readT, false),
		},
		stages: [][]int{{0, 1, 2}, {3, 4, 5}, {6}},
		rows: []want{
			{0, par, indep}, {0, par, indep}, {0, par, indep},
			{1, par, indep}, {1, par, indep}, {1, par, indep},
			{2, ser, indep},
		},
	}, {
		name: "maxParallel 0 means 4", maxParallel: 0,
		batch: []executor.PlanCall{
			pcall("c1", readT, false), pcall("c2", readT, false), pcall("c3", readT, false),
			pcall("c4", readT, false), pcall("c5", readT, false),
		},
		stages: [][]int{{0, 1, 2, 3}, {4}},
		rows:   []want{{0, par, indep}, {0, par, indep}, {0, par, indep}, {0, par, indep}, {1, ser, indep}},
	}, {
		name: "maxParallel 1 serialises reads", maxParallel: 1,
		batch:  []executor.PlanCall{pcall("c1", readT, false), pcall("c2", readT, false)},
		stages: [][]int{{0}, {1}},
		rows:   []want{{0, ser, indep}, {1, ser, indep}},
	}, {
		name: "writes each alone in model order", maxParallel: 4,
		batch:  []executor.PlanCall{pcall("w1", writeT, false, "a"), pcall("w2", writeT, false, "b"), pcall("w3", writeT, false)},
		stages: [][]int{{0}, {1}, {2}},
		rows:   []want{{0, ser, wr}, {1, ser, wr}, {2, ser, wr}},
	}, {
		name: "a read of a resource written earlier comes after the write", maxParallel: 4,
		batch: []executor.PlanCall{
			pcall("r0", readT, false, "order:B"),
			pcall("w1", writeT, false, "order:A"),
			pcall("r2", readT, false, "order:A"),
			pcall("r3", readT, false, "order:C"),
		},
		stages: [][]int{{0, 3}, {1}, {2}},
		rows: []want{
			{0, par, indep},
			{1, ser, wr},
			{2, ser, []string{"order:A", "written by w1"}},
			{0, par, indep},
		},
	}, {
		name: "the later write of two wins the reason", maxParallel: 4,
		batch: []executor.PlanCall{
			pcall("w1", writeT, false, "a"),
			pcall("w2", writeT, false, "b"),
			pcall("r3", readT, false, "a", "b"),
		},
		stages: [][]int{{0}, {1}, {2}},
		rows:   []want{{0, ser, wr}, {1, ser, wr}, {2, ser, []string{"written by w2"}}},
	}, {
		name: "a write after a read of the same resource goes after the read", maxParallel: 4,
		batch: []executor.PlanCall{
			pcall("r1", readT, false, "order:A"),
			pcall("r2", readT, false, "order:B"),
			pcall("w3", writeT, false, "order:A"),
			pcall("r4", readT, false, "order:B"),
		},
		stages: [][]int{{0, 1, 3}, {2}},
		rows: []want{
			{0, par, indep}, {0, par, indep},
			{1, ser, []string{"write", "alone", "writes order:A", "read by r1"}},
			{0, par, indep},
		},
	}, {
		name: "exclusive group calls never share a stage and keep model order", maxParallel: 4,
		batch: []executor.PlanCall{
			pcall("g1", txReadT, false),
			pcall("g2", txReadT, false),
			pcall("r3", readT, false),
			pcall("g3", txReadT, false),
			pcall("l4", rlReadT, false),
			pcall("l5", rlReadT, false),
		},
		stages: [][]int{{0, 2, 4}, {1, 5}, {3}},
		rows: []want{
			{0, par, []string{`exclusive group "tx"`}},
			{1, par, []string{`exclusive group "tx"`, "g1"}},
			{0, par, indep},
			{2, ser, []string{`exclusive group "tx"`, "g2"}},
			{0, par, []string{`exclusive group "ratelimit"`}},
			{1, par, []string{`exclusive group "ratelimit"`, "l4"}},
		},
	}, {
		name: "a group write is alone and after the group's reads", maxParallel: 4,
		batch: []executor.PlanCall{
			pcall("g1", txReadT, false),
			pcall("r2", readT, false),
			pcall("g3", txWriteT, false),
			pcall("g4", txReadT, false),
		},
		stages: [][]int{{0, 1}, {2}, {3}},
		rows: []want{
			{0, par, []string{`exclusive group "tx"`}},
			{0, par, indep},
			{1, ser, []string{"write", `exclusive group "tx"`, "g1"}},
			{2, ser, []string{`exclusive group "tx"`, "g3"}},
		},
	}, {
		name: "a call needing confirmation is alone, after the calls before it, before the calls after it", maxParallel: 4,
		batch: []executor.PlanCall{
			pcall("r1", readT, false, "x"),
			pcall("r2", readT, false, "y"),
			pcall("c3", readT, true, "z"),
			pcall("r4", readT, false, "x"),
			pcall("r5", readT, false),
		},
		stages: [][]int{{0, 1}, {2}, {3, 4}},
		rows: []want{
			{0, par, indep}, {0, par, indep},
			{1, ser, []string{"needs confirmation", "alone"}},
			{2, par, nil}, {2, par, nil},
		},
	}, {
		name: "a confirmed write after a write", maxParallel: 4,
		batch: []executor.PlanCall{
			pcall("w1", writeT, false, "a"),
			pcall("r2", readT, false, "b"),
			pcall("w3", writeT, true, "c"),
			pcall("w4", writeT, false, "d"),
			pcall("r5", readT, false, "e"),
		},
		// r5 may not join w4: a write is alone in its stage.
		stages: [][]int{{0}, {1}, {2}, {3}, {4}},
		rows: []want{
			{0, ser, wr}, {1, ser, indep},
			{2, ser, []string{"needs confirmation"}},
			{3, ser, wr}, {4, ser, nil},
		},
	}, {
		name: "combined", maxParallel: 2,
		batch: []executor.PlanCall{
			pcall("c1", readT, false, "order:A"), // 0
			pcall("c2", readT, false, "order:B"), // 0
			pcall("c3", readT, false, "order:C"), // 1: stage 0 full
			pcall("c4", writeT, false, "order:A"),
			pcall("c5", readT, false, "order:A"), // after c4
			pcall("c6", txReadT, false),          // 1 (with c3)
			pcall("c7", txReadT, false),          // after c6; stage 3 is c4's
			pcall("c8", readT, true),             // confirmation
			pcall("c9", readT, false, "order:B"), // after c8
		},
		// placement stages: c1,c2:0 c3,c6:1 c4:2 c5,c7:3 c8:4 c9:5
		stages: [][]int{{0, 1}, {2, 5}, {3}, {4, 6}, {7}, {8}},
		rows: []want{
			{0, par, indep}, {0, par, indep}, {1, par, indep},
			{2, ser, []string{"write", "read by c1"}},
			{3, par, []string{"written by c4"}},
			{1, par, []string{`exclusive group "tx"`}},
			{3, par, []string{`exclusive group "tx"`, "c6"}},
			{4, ser, []string{"needs confirmation"}},
			{5, ser, nil},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := executor.RulePlanner(tc.maxParallel).Plan(tc.batch)
			mp := tc.maxParallel
			if mp <= 0 {
				mp = 4
			}
			checkPlan(t, tc.batch, p, mp)
			if !reflect.DeepEqual(p.Stages, tc.stages) {
				t.Errorf("Stages = %v, want %v", p.Stages, tc.stages)
			}
			if len(p.Table) != len(tc.rows) {
				t.Fatalf("table has %d rows, want %d", len(p.Table), len(tc.rows))
			}
			for i, w := range tc.rows {
				row := p.Table[i]
				if row.Stage != w.stage || row.Mode != w.mode {
					t.Errorf("row %d (%s): stage %d mode %s, want stage %d mode %s (reason %q)",
						i, row.CallID, row.Stage, row.Mode, w.stage, w.mode, row.Reason)
				}
				for _, s := range w.reason {
					if !strings.Contains(row.Reason, s) {
						t.Errorf("row %d (%s): reason %q does not mention %q", i, row.CallID, row.Reason, s)
					}
				}
			}
			if t.Failed() {
				logTable(t, p)
			}
		})
	}
}

func logTable(t *testing.T, p executor.Plan) {
	t.Helper()
	for _, r := range p.Table {
		t.Logf("  %-4s %-9s %-9s %-12v stage %d %-8s %s", r.CallID, r.Tool, r.Effect, r.Resources, r.Stage, r.Mode, r.Reason)
	}
}

func TestRulePlannerEmpty(t *testing.T) {
	p := executor.RulePlanner(4).Plan(nil)
	if len(p.Stages) != 0 || len(p.Table) != 0 {
		t.Errorf("Plan(nil) = %+v", p)
	}
}

// The table carries each call's ID, tool, effect and resources.
func TestRulePlannerTableColumns(t *testing.T) {
	batch := []executor.PlanCall{pcall("c1", readT, false, "a", "b"), pcall("c2", txWriteT, false)}
	p := executor.RulePlanner(4).Plan(batch)
	wantRows := []executor.Row{
		{CallID: "c1", Tool: "read", Effect: tool.ReadOnly, Resources: []string{"a", "b"}, Stage: 0, Mode: executor.Serial},
		{CallID: "c2", Tool: "tx_write", Effect: tool.Write, Stage: 1, Mode: executor.Serial},
	}
	for i, row := range p.Table {
		if row.Reason == "" {
			t.Errorf("row %d has no reason", i)
		}
		row.Reason = ""
		if !reflect.DeepEqual(row, wantRows[i]) {
			t.Errorf("row %d = %+v, want %+v", i, row, wantRows[i])
		}
	}
}

func TestRulePlannerDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 50 {
		batch := randomBatch(rng, 1+rng.IntN(12))
		copyBatch := slices.Clone(batch)
		p1 := executor.RulePlanner(3).Plan(batch)
		p2 := executor.RulePlanner(3).Plan(copyBatch)
		p3 := executor.RulePlanner(3).Plan(batch)
		if !reflect.DeepEqual(p1, p2) || !reflect.DeepEqual(p1, p3) {
			t.Fatalf("same batch, different plans:\n%+v\n%+v\n%+v", p1, p2, p3)
		}
		b1, _ := json.Marshal(p1)
		b2, _ := json.Marshal(p2)
		if string(b1) != string(b2) {
			t.Fatalf("plans encode differently:\n%s\n%s", b1, b2)
		}
	}
}

// Stages are independent slices: a driver that appends to one does not
// change the next.
func TestRulePlannerStagesDoNotAlias(t *testing.T) {
	p := executor.RulePlanner(4).Plan([]executor.PlanCall{
		pcall("a", readT, false), pcall("b", readT, false), pcall("c", writeT, false), pcall("d", readT, false, "x"),
	})
	before := fmt.Sprint(p.Stages)
	for i := range p.Stages {
		_ = append(p.Stages[i], 99)
	}
	if after := fmt.Sprint(p.Stages); after != before {
		t.Errorf("appending to a stage changed another: %s -> %s", before, after)
	}
}

var randomTools = []*tool.Tool{readT, readT, readT, writeT, txReadT, txWriteT, rlReadT}

// randomBatch mixes reads, writes, shared resources, exclusive groups and
// confirmations.
func randomBatch(rng *rand.Rand, n int) []executor.PlanCall {
	resources := []string{"order:A", "order:B", "order:C", "customer:1"}
	batch := make([]executor.PlanCall, n)
	for i := range batch {
		tl := randomTools[rng.IntN(len(randomTools))]
		var res []string
		for range rng.IntN(3) {
			if r := resources[rng.IntN(len(resources))]; !slices.Contains(res, r) {
				res = append(res, r)
			}
		}
		batch[i] = pcall(fmt.Sprint("c", i), tl, rng.IntN(10) == 0, res...)
	}
	return batch
}

// Over random batches, every plan keeps the rules' invariants.
func TestRulePlannerProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		n := rng.IntN(14)
		maxParallel := 1 + rng.IntN(5)
		batch := randomBatch(rng, n)
		p := executor.RulePlanner(maxParallel).Plan(batch)
		ok := t.Run("", func(t *testing.T) { checkPlan(t, batch, p, maxParallel) })
		if !ok {
			t.Logf("iteration %d, maxParallel %d:", iter, maxParallel)
			for _, c := range batch {
				t.Logf("  %s %s confirm=%v res=%v", c.Call.ID, c.Call.Name, c.NeedsConfirmation, c.Tool.Resources(c.Call.Arguments))
			}
			logTable(t, p)
			t.FailNow()
		}
	}
}

// checkPlan checks the invariants every rule plan keeps.
func checkPlan(t *testing.T, batch []executor.PlanCall, p executor.Plan, maxParallel int) {
	t.Helper()
	n := len(batch)
	if len(p.Table) != n {
		t.Fatalf("table has %d rows for %d calls", len(p.Table), n)
	}
	stageOf := make([]int, n)
	seen := make([]int, n)
	for k, st := range p.Stages {
		if len(st) == 0 {
			t.Errorf("stage %d is empty", k)
		}
		if len(st) > maxParallel {
			t.Errorf("stage %d has %d calls, more than maxParallel %d", k, len(st), maxParallel)
		}
		if !slices.IsSorted(st) {
			t.Errorf("stage %d lists its calls out of model order: %v", k, st)
		}
		for _, i := range st {
			if i < 0 || i >= n {
				t.Fatalf("stage %d names call %d of %d", k, i, n)
			}
			seen[i]++
			stageOf[i] = k
		}
	}
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("call %d appears %d times in the stages %v", i, c, p.Stages)
		}
	}
	// Dense: the table's stages are 0..k-1 and match the stage lists.
	for i, row := range p.Table {
		c := batch[i]
		if row.Stage != stageOf[i] {
			t.Errorf("row %d says stage %d, stages put it in %d", i, row.Stage, stageOf[i])
		}
		if row.CallID != c.Call.ID || row.Tool != c.Call.Name || row.Effect != c.Tool.Effect() ||
			!slices.Equal(row.Resources, c.Tool.Resources(c.Call.Arguments)) {
			t.Errorf("row %d = %+v does not describe call %s", i, row, c.Call.ID)
		}
		if wantMode := map[bool]executor.Mode{true: executor.Parallel, false: executor.Serial}[len(p.Stages[stageOf[i]]) > 1]; row.Mode != wantMode {
			t.Errorf("row %d mode %s in a stage of %d", i, row.Mode, len(p.Stages[stageOf[i]]))
		}
		if row.Reason == "" {
			t.Errorf("row %d has no reason", i)
		}
	}
	lastWrite := -1
	for i, c := range batch {
		si := stageOf[i]
		write := c.Tool.Effect() == tool.Write
		if write || c.NeedsConfirmation {
			if len(p.Stages[si]) != 1 {
				t.Errorf("%s (write=%v confirm=%v) shares stage %d: %v", c.Call.ID, write, c.NeedsConfirmation, si, p.Stages[si])
			}
		}
		if write {
			if si <= lastWrite {
				t.Errorf("write %s in stage %d, not after the previous write's stage %d", c.Call.ID, si, lastWrite)
			}
			lastWrite = si
		}
		ri := c.Tool.Resources(c.Call.Arguments)
		for j := range i {
			d := batch[j]
			sj := stageOf[j]
			if c.NeedsConfirmation && sj >= si {
				t.Errorf("confirmation %s (stage %d) not after earlier call %s (stage %d)", c.Call.ID, si, d.Call.ID, sj)
			}
			if d.NeedsConfirmation && si <= sj {
				t.Errorf("%s (stage %d) not after earlier confirmation %s (stage %d)", c.Call.ID, si, d.Call.ID, sj)
			}
			if g := c.Tool.ExclusiveGroup(); g != "" && g == d.Tool.ExclusiveGroup() && si <= sj {
				t.Errorf("group %q: %s (stage %d) not after %s (stage %d)", g, c.Call.ID, si, d.Call.ID, sj)
			}
			dw := d.Tool.Effect() == tool.Write
			if (write || dw) && slices.ContainsFunc(ri, func(r string) bool {
				return slices.Contains(d.Tool.Resources(d.Call.Arguments), r)
			}) && si <= sj {
				t.Errorf("%s (stage %d) shares a resource with %s (stage %d), one of them a write, but is not after it",
					c.Call.ID, si, d.Call.ID, sj)
			}
		}
	}
}
