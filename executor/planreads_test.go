package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

type resourceArgs struct {
	R []string `json:"r,omitempty"`
}

// planReads is a shortcut: on every batch it takes, it must give exactly
// the plan the rules give one call at a time, down to the JSON logged.
func TestPlanReadsMatchesRules(t *testing.T) {
	var tools []*tool.Tool
	for _, effect := range []tool.Effect{tool.ReadOnly, tool.Write} {
		for _, group := range []string{"", "g"} {
			tools = append(tools, tool.MustNew(tool.Spec[resourceArgs]{
				Name: fmt.Sprintf("%s_%s", effect, group), Effect: effect, ExclusiveGroup: group,
				Resources: func(a resourceArgs) []string { return a.R },
			}, func(context.Context, resourceArgs) (any, error) { return nil, nil }))
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	taken := 0
	for range 5000 {
		n := rng.IntN(12)
		batch := make([]PlanCall, n)
		for i := range batch {
			tl := tools[0]
			if rng.IntN(8) == 0 {
				tl = tools[rng.IntN(len(tools))]
			}
			var a resourceArgs
			for range rng.IntN(3) {
				a.R = append(a.R, fmt.Sprint("res", rng.IntN(3)))
			}
			args, _ := json.Marshal(a)
			batch[i] = PlanCall{Call: llm.ToolCall{ID: fmt.Sprint("c", i), Name: tl.Name(), Arguments: args},
				Tool: tl, NeedsConfirmation: rng.IntN(20) == 0}
		}
		maxParallel := 1 + rng.IntN(5)
		want := planEachCall(batch, maxParallel)
		got, ok := planReads(batch, maxParallel)
		if !ok {
			continue
		}
		taken++
		wantJSON, _ := json.Marshal(want)
		gotJSON, _ := json.Marshal(got)
		if !reflect.DeepEqual(got, want) || string(gotJSON) != string(wantJSON) {
			t.Fatalf("maxParallel %d:\nshortcut %s\nrules    %s", maxParallel, gotJSON, wantJSON)
		}
	}
	if taken < 1000 {
		t.Errorf("the shortcut took only %d batches", taken)
	}
}
