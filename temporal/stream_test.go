package temporal_test

import (
	"context"
	"errors"
	"iter"
	"strings"
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

// streamedRun runs one workflow in the test environment over model with
// Config.Stream set, a model heartbeat of 300ms, and returns its output,
// the result read back, how many model activities started, and the
// progress each model heartbeat carried.
func streamedRun(t *testing.T, model llm.Model) (temporal.RunOutput, *loop.Result, int, []temporal.StreamProgress) {
	t.Helper()
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	blobs := store.NewMemory()
	acts, err := temporal.NewActivities(temporal.Config{Model: model, Tools: reg, Blobs: blobs, Stream: true})
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
	var progress []temporal.StreamProgress
	starts := 0
	env.SetOnActivityHeartbeatListener(func(info *activity.Info, details converter.EncodedValues) {
		if info.ActivityType.Name != temporal.ModelActivity || !details.HasValues() {
			return
		}
		var p temporal.StreamProgress
		if err := details.Get(&p); err != nil {
			t.Errorf("model heartbeat details: %v", err)
		}
		mu.Lock()
		progress = append(progress, p)
		mu.Unlock()
	})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == temporal.ModelActivity {
			starts++
		}
	})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{RunID: "run-stream", Model: "scripted",
		Messages: []llm.Message{llm.UserMessage("tell me slowly")}, ModelHeartbeat: 300 * time.Millisecond,
		ModelRetryBackoff: time.Millisecond})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var out temporal.RunOutput
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return out, readResult(t, blobs, out), starts, progress
}

// With Config.Stream the model activity streams the turn, its heartbeats
// carry the progress so far (how a watcher follows a Temporal run), and
// the workflow records the assembled turn, as Generate would give it.
func TestStreamedModelActivity(t *testing.T) {
	const answer = "A slow answer, in many small pieces, one after the other."
	turn := llmtest.Text(answer)
	turn.OnDelta = func(ctx context.Context, i int) error {
		select { // some 0.7s in all, several heartbeats of 100ms
		case <-time.After(40 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	model := llmtest.New(turn)
	out, res, starts, progress := streamedRun(t, model)
	if out.Status != loop.FinalAnswer || res.Answer() != answer || starts != 1 {
		t.Fatalf("status %s (%s), answer %q, %d model activities; want final_answer with the whole answer, once",
			out.Status, out.Detail, res.Answer(), starts)
	}
	if len(progress) < 2 {
		t.Fatalf("%d model heartbeats with progress, want several over a 2s stream", len(progress))
	}
	for i := 1; i < len(progress); i++ {
		if progress[i].Deltas < progress[i-1].Deltas || progress[i].TextBytes < progress[i-1].TextBytes {
			t.Errorf("progress went back: %+v after %+v", progress[i], progress[i-1])
		}
	}
	if last := progress[len(progress)-1]; last.Deltas == 0 || last.TextBytes == 0 || last.TextBytes > len(answer) {
		t.Errorf("last progress %+v, want some of the %d bytes of text", last, len(answer))
	}
	if model.Abandoned() != 0 {
		t.Errorf("%d streams abandoned", model.Abandoned())
	}
}

// A stream that fails before its first delta is retried like a request; one
// that breaks after it stops the run with model_error, never retried; one
// whose pieces contradict each other stops it with protocol_error.
func TestStreamedModelActivityFailures(t *testing.T) {
	unavailable := &llm.Error{Kind: llm.ErrorUnavailable, Retryable: true, Err: errors.New("connection reset")}

	out, res, starts, _ := streamedRun(t, llmtest.New(llmtest.Text("first try failed").BreakAfter(0, unavailable), llmtest.Text("second try")))
	if out.Status != loop.FinalAnswer || res.Answer() != "second try" || starts != 2 {
		t.Errorf("failed before the first delta: status %s (%s), answer %q, %d model activities; want final_answer on the retry",
			out.Status, out.Detail, res.Answer(), starts)
	}

	out, _, starts, _ = streamedRun(t, llmtest.New(llmtest.Text("a turn that breaks part-way").BreakAfter(3, unavailable), llmtest.Text("never asked")))
	if out.Status != loop.ModelError || starts != 1 || !strings.Contains(out.Detail, "after its first delta") {
		t.Errorf("broken after the first delta: status %s (%s), %d model activities; want model_error, asked once",
			out.Status, out.Detail, starts)
	}

	bad := llm.ModelFunc(func(context.Context, *llm.Request) (*llm.Response, error) { return nil, errors.New("not used") })
	out, _, starts, _ = streamedRun(t, inconsistent{bad})
	if out.Status != loop.ProtocolError || starts != 1 || !strings.Contains(out.Detail, "started twice") {
		t.Errorf("inconsistent stream: status %s (%s), %d model activities; want protocol_error, asked once",
			out.Status, out.Detail, starts)
	}
}

// inconsistent streams one call index under two IDs.
var _ llm.StreamingModel = inconsistent{}

type inconsistent struct{ llm.Model }

func (inconsistent) Stream(context.Context, *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		for _, d := range []llm.Delta{
			{Kind: llm.DeltaToolCallStart, Index: 0, Call: &llm.ToolCall{ID: "call_a", Name: "x"}},
			{Kind: llm.DeltaToolCallStart, Index: 0, Call: &llm.ToolCall{ID: "call_b", Name: "x"}},
		} {
			if !yield(d, nil) {
				return
			}
		}
	}
}
