package executor_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

type orderArgs struct {
	OrderID string `json:"order_id"`
}

func planTools(t *testing.T) (get, refund *tool.Tool) {
	t.Helper()
	res := func(in orderArgs) []string { return []string{"order:" + in.OrderID} }
	get = tool.MustNew(tool.Spec[orderArgs]{Name: "get_order", Resources: res},
		func(context.Context, orderArgs) (bool, error) { return true, nil })
	refund = tool.MustNew(tool.Spec[orderArgs]{Name: "refund", Effect: tool.Write, Resources: res},
		func(context.Context, orderArgs) (bool, error) { return true, nil })
	return get, refund
}

func planCall(id string, tl *tool.Tool, orderID string, confirm bool) executor.PlanCall {
	return executor.PlanCall{
		Call:              llm.ToolCall{ID: id, Name: tl.Name(), Arguments: json.RawMessage(`{"order_id":"` + orderID + `"}`)},
		Tool:              tl,
		NeedsConfirmation: confirm,
	}
}

func TestSerialPlanner(t *testing.T) {
	get, refund := planTools(t)
	batch := []executor.PlanCall{
		planCall("c1", get, "A1", false),
		planCall("c2", refund, "A1", true),
		planCall("c3", get, "B2", false),
	}
	p := executor.SerialPlanner().Plan(batch)

	if want := [][]int{{0}, {1}, {2}}; !reflect.DeepEqual(p.Stages, want) {
		t.Errorf("Stages = %v, want %v", p.Stages, want)
	}
	want := []executor.Row{
		{CallID: "c1", Tool: "get_order", Effect: tool.ReadOnly, Resources: []string{"order:A1"}, Stage: 0, Mode: executor.Serial},
		{CallID: "c2", Tool: "refund", Effect: tool.Write, Resources: []string{"order:A1"}, Stage: 1, Mode: executor.Serial},
		{CallID: "c3", Tool: "get_order", Effect: tool.ReadOnly, Resources: []string{"order:B2"}, Stage: 2, Mode: executor.Serial},
	}
	if len(p.Table) != len(want) {
		t.Fatalf("Table has %d rows, want %d", len(p.Table), len(want))
	}
	for i, row := range p.Table {
		if row.Reason == "" {
			t.Errorf("row %d has no reason", i)
		}
		row.Reason = ""
		if !reflect.DeepEqual(row, want[i]) {
			t.Errorf("row %d = %+v, want %+v", i, row, want[i])
		}
	}
	// Every call is placed exactly once, in model order.
	var placed []int
	for _, s := range p.Stages {
		placed = append(placed, s...)
	}
	if !slices.Equal(placed, []int{0, 1, 2}) {
		t.Errorf("placed = %v", placed)
	}
}

func TestSerialPlannerDeterministic(t *testing.T) {
	get, refund := planTools(t)
	batch := []executor.PlanCall{planCall("a", refund, "X", false), planCall("b", get, "Y", false)}
	p1 := executor.SerialPlanner().Plan(batch)
	p2 := executor.SerialPlanner().Plan(batch)
	if !reflect.DeepEqual(p1, p2) {
		t.Errorf("same batch, different plans:\n%+v\n%+v", p1, p2)
	}
	b1, _ := json.Marshal(p1)
	b2, _ := json.Marshal(p2)
	if string(b1) != string(b2) {
		t.Errorf("plans encode differently:\n%s\n%s", b1, b2)
	}
}

func TestSerialPlannerEmpty(t *testing.T) {
	p := executor.SerialPlanner().Plan(nil)
	if len(p.Stages) != 0 || len(p.Table) != 0 {
		t.Errorf("Plan(nil) = %+v", p)
	}
}

// Stages are independent slices: a driver that appends to one does not
// change the next.
func TestSerialPlannerStagesDoNotAlias(t *testing.T) {
	get, _ := planTools(t)
	p := executor.SerialPlanner().Plan([]executor.PlanCall{planCall("a", get, "1", false), planCall("b", get, "2", false)})
	_ = append(p.Stages[0], 99)
	if p.Stages[1][0] != 1 {
		t.Errorf("appending to stage 0 changed stage 1: %v", p.Stages)
	}
}

func TestPlanJSON(t *testing.T) {
	get, _ := planTools(t)
	p := executor.SerialPlanner().Plan([]executor.PlanCall{planCall("c1", get, "A1", false)})
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	row := m["table"].([]any)[0].(map[string]any)
	for _, k := range []string{"call_id", "tool", "effect", "resources", "stage", "mode", "reason"} {
		if _, ok := row[k]; !ok {
			t.Errorf("row JSON lacks %q: %s", k, b)
		}
	}
	var back executor.Plan
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, p) {
		t.Errorf("round trip = %+v, %v", back, err)
	}
}

func TestPlannerFunc(t *testing.T) {
	var got []executor.PlanCall
	var pl executor.Planner = executor.PlannerFunc(func(calls []executor.PlanCall) executor.Plan {
		got = calls
		idx := make([]int, len(calls))
		for i := range idx {
			idx[i] = i
		}
		return executor.Plan{Stages: [][]int{idx}}
	})
	get, _ := planTools(t)
	batch := []executor.PlanCall{planCall("a", get, "1", false), planCall("b", get, "2", false)}
	p := pl.Plan(batch)
	if len(got) != 2 || !reflect.DeepEqual(p.Stages, [][]int{{0, 1}}) {
		t.Errorf("PlannerFunc: got %d calls, plan %+v", len(got), p)
	}
}

func TestPlanPartRenumbersAndDistrustsBadPlans(t *testing.T) {
	read := tool.MustNew(tool.Spec[struct{}]{Name: "read"}, func(context.Context, struct{}) (string, error) { return "", nil })
	calls := []executor.PlanCall{
		{Call: llm.ToolCall{ID: "a", Name: "read"}, Tool: read},
		{Call: llm.ToolCall{ID: "b", Name: "read"}, Tool: read},
	}
	together := executor.PlannerFunc(func(cs []executor.PlanCall) executor.Plan {
		return executor.Plan{Stages: [][]int{{0, 1}}}
	})
	if p := executor.PlanPart(together, calls, []int{1, 3}); !reflect.DeepEqual(p.Stages, [][]int{{1, 3}}) {
		t.Fatalf("stages %v, want the batch's indexes [[1 3]]", p.Stages)
	}
	loses := executor.PlannerFunc(func(cs []executor.PlanCall) executor.Plan {
		return executor.Plan{Stages: [][]int{{0}}}
	})
	p := executor.PlanPart(loses, calls, []int{0, 1})
	if !reflect.DeepEqual(p.Stages, [][]int{{0}, {1}}) || !strings.Contains(p.Table[1].Reason, "invalid plan") {
		t.Fatalf("a plan that drops a call: %+v", p)
	}
}
