package temporal_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
	"github.com/toolloop/toolloop/tool"
)

// TestLocalReadsAndWrites: with the defaults, the model's requests and a
// stage of reads whose worst case fits RunInput.LocalReadBound are local
// activities; a read that may take longer (a minute's timeout and the
// executor's two retries: 3m15s) and a write are activities. With
// ModelAsActivity and LocalReadBound -1 everything is an activity, as
// before local turns.
func TestLocalReadsAndWrites(t *testing.T) {
	type none struct{}
	newTool := func(s tool.Spec[none]) *tool.Tool {
		s.Description, s.HonorsContext = "does "+s.Name, true
		tl, err := tool.New(s, func(context.Context, none) (string, error) { return s.Name + " done", nil })
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	reg, err := tool.NewRegistry(
		newTool(tool.Spec[none]{Name: "quick"}),
		newTool(tool.Spec[none]{Name: "long", Timeout: time.Minute}),
		newTool(tool.Spec[none]{Name: "note", Effect: tool.Write}),
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name              string
		set               func(*temporal.RunInput)
		wantLocal, wantAs []string // how each kind ran: model, then each call by name
	}{
		{"default", func(*temporal.RunInput) {}, []string{"model", "quick"}, []string{"long", "note"}},
		{"activities", func(in *temporal.RunInput) { in.ModelAsActivity, in.LocalReadBound = true, -1 },
			nil, []string{"model", "quick", "long", "note"}},
	} {
		t.Run(v.name, func(t *testing.T) {
			model := llmtest.New(
				llmtest.Calls(llmtest.Call("c1", "quick", `{}`)),
				llmtest.Calls(llmtest.Call("c2", "long", `{}`)),
				llmtest.Calls(llmtest.Call("c3", "note", `{}`)),
				llmtest.Text("all done"),
			)
			acts, err := temporal.NewActivities(temporal.Config{Model: model, Tools: reg, Blobs: store.NewMemory()})
			if err != nil {
				t.Fatal(err)
			}
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(testLogger())
			env := suite.NewTestWorkflowEnvironment()
			env.SetTestTimeout(30 * time.Second)
			temporal.RegisterWorkflow(env)
			acts.Register(env)
			var mu sync.Mutex
			ran := map[bool]map[string]bool{true: {}, false: {}} // local? -> what
			note := func(local bool, name string, call func() (temporal.CallInput, error)) {
				what := ""
				switch name {
				case temporal.ModelActivity:
					what = "model"
				case temporal.ToolActivity:
					c, err := call()
					if err != nil {
						t.Error(err)
						return
					}
					what = c.Call.Name
				default:
					return
				}
				mu.Lock()
				ran[local][what] = true
				mu.Unlock()
			}
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
				note(false, info.ActivityType.Name, func() (c temporal.CallInput, err error) { return c, args.Get(&c) })
			})
			env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
				note(true, info.ActivityType.Name, func() (temporal.CallInput, error) {
					if c, ok := args[0].(temporal.CallInput); ok {
						return c, nil
					}
					return temporal.CallInput{}, fmt.Errorf("a local call's argument is %T", args[0])
				})
			})
			in := temporal.RunInput{RunID: "run-local-" + v.name, Model: "scripted",
				Messages: []llm.Message{llm.UserMessage("do it all")}, Budgets: loop.Budgets{MaxSteps: 5}}
			v.set(&in)
			env.ExecuteWorkflow(temporal.WorkflowName, in)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var out temporal.RunOutput
			if err := env.GetWorkflowResult(&out); err != nil {
				t.Fatal(err)
			}
			if out.Status != loop.FinalAnswer || out.ToolCalls != 3 {
				t.Fatalf("output %+v", out)
			}
			keys := func(m map[string]bool) []string {
				var k []string
				for s := range m {
					k = append(k, s)
				}
				slices.Sort(k)
				return k
			}
			wantLocal, wantAs := slices.Sorted(slices.Values(v.wantLocal)), slices.Sorted(slices.Values(v.wantAs))
			if g := keys(ran[true]); !slices.Equal(g, wantLocal) {
				t.Errorf("local activities ran %v, want %v", g, wantLocal)
			}
			if g := keys(ran[false]); !slices.Equal(g, wantAs) {
				t.Errorf("activities ran %v, want %v", g, wantAs)
			}
		})
	}
}
