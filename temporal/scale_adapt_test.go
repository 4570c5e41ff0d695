package temporal_test

import (
	"context"
	"os"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
	"github.com/toolloop/toolloop/tool"
)

// scale_test.go's view of this code: conversations by reference through
// an in-memory blob store, Continue-As-New when the server suggests it.
// testdata/scale/before_adapt_test.go.txt is the same for the code before.

// scaleEnd is how a measured run ended.
type scaleEnd struct {
	Status                         string
	Steps, ToolCalls, Continuation int
}

func scaleActivities(t *testing.T, model llm.Model, reg *tool.Registry) *temporal.Activities {
	t.Helper()
	acts, err := temporal.NewActivities(temporal.Config{Model: model, Tools: reg, Blobs: store.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	return acts
}

// scaleInput is a run's input, with the defaults (model requests and
// short stages of reads as local activities);
// TOOLLOOP_SCALE_ACTIVITIES=1 makes every model request and call an
// activity (RunInput.ModelAsActivity, LocalReadBound -1), as every run
// was before local turns; TOOLLOOP_SCALE_LOCAL_MODEL=1 makes the model
// requests local activities and the calls activities (RunInput.LocalModel,
// LocalReadBound -1).
func scaleInput(msgs []llm.Message, b loop.Budgets) temporal.RunInput {
	in := temporal.RunInput{Model: "scripted", Messages: msgs, Budgets: b}
	switch {
	case os.Getenv("TOOLLOOP_SCALE_ACTIVITIES") == "1":
		in.ModelAsActivity, in.LocalReadBound = true, -1
	case os.Getenv("TOOLLOOP_SCALE_LOCAL_MODEL") == "1":
		in.LocalModel, in.LocalReadBound = true, -1
	}
	return in
}

func scaleGet(ctx context.Context, run client.WorkflowRun) (scaleEnd, error) {
	var out temporal.RunOutput
	err := run.Get(ctx, &out)
	return scaleEnd{Status: string(out.Status), Steps: out.Steps, ToolCalls: out.ToolCalls, Continuation: out.ContinuedAsNew}, err
}
