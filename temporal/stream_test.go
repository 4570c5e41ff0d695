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
	return runModel(t, model, true, 0)
}

// runModel is streamedRun with Config.Stream set to stream and
// RunInput.ModelTimeout to timeout (zero for the default). The model
// requests are activities (ModelAsActivity): the tests here are about
// the model activity, its heartbeats and its attempts.
func runModel(t *testing.T, model llm.Model, stream bool, timeout time.Duration) (temporal.RunOutput, *loop.Result, int, []temporal.StreamProgress) {
	t.Helper()
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	blobs := store.NewMemory()
	acts, err := temporal.NewActivities(temporal.Config{Model: model, Tools: reg, Blobs: blobs, Stream: stream})
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
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{RunID: "run-stream", Model: "scripted", ModelAsActivity: true,
		Messages: []llm.Message{llm.UserMessage("tell me slowly")}, ModelHeartbeat: 300 * time.Millisecond,
		ModelRetryBackoff: time.Millisecond, ModelTimeout: timeout})
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
	unavailable := &llm.Error{Kind: llm.KindUnavailable, Retryable: true, Err: errors.New("connection reset")}

	out, res, starts, _ := streamedRun(t, llmtest.New(llmtest.Text("first try failed").BreakAfter(0, unavailable), llmtest.Text("second try")))
	if out.Status != loop.FinalAnswer || res.Answer() != "second try" || starts != 2 {
		t.Errorf("failed before the first delta: status %s (%s), answer %q, %d model activities; want final_answer on the retry",
			out.Status, out.Detail, res.Answer(), starts)
	}

	// The usage delta (100 input tokens) comes first, then the text.
	broken := llmtest.Text("a turn that breaks part-way").WithUsage(100, 20).BreakAfter(3, unavailable)
	out, res, starts, _ = streamedRun(t, llmtest.New(broken, llmtest.Text("never asked")))
	if out.Status != loop.ModelError || starts != 1 || !strings.Contains(out.Detail, "broke off after it began streaming") {
		t.Errorf("broken after the first delta: status %s (%s), %d model activities; want model_error, asked once",
			out.Status, out.Detail, starts)
	}
	// What the stream showed stays in the model_failed event, and the usage
	// it reported counts (not as a step), as in process.
	failed := lastOfKind(res.Events, loop.ModelFailed)
	if failed == nil || failed.Response == nil || failed.Response.Message.Text == "" ||
		!strings.HasPrefix("a turn that breaks part-way", failed.Response.Message.Text) {
		t.Errorf("broken after the first delta: model_failed event %+v, want the text received so far", failed)
	}
	if res.Usage.InputTokens != 100 || res.Steps != 0 {
		t.Errorf("broken after the first delta: usage %+v, %d steps; want the 100 input tokens reported, no step", res.Usage, res.Steps)
	}

	// A partial turn too large for a payload keeps only its usage.
	huge := llmtest.Text(strings.Repeat("many words ", 120_000)).WithUsage(100, 20).BreakAfter(140_000, unavailable)
	out, res, _, _ = streamedRun(t, llmtest.New(huge))
	if f := lastOfKind(res.Events, loop.ModelFailed); out.Status != loop.ModelError || f == nil || f.Response == nil ||
		f.Response.Message.Text != "" || res.Usage.InputTokens != 100 {
		t.Errorf("broken after 1.1 MB: status %s, model_failed event %+v, usage %+v; want model_error, the usage without the text",
			out.Status, f, res.Usage)
	}

	bad := llm.ModelFunc(func(context.Context, *llm.Request) (*llm.Response, error) { return nil, errors.New("not used") })
	out, res, starts, _ = streamedRun(t, inconsistent{bad})
	if out.Status != loop.ProtocolError || starts != 1 || !strings.Contains(out.Detail, "started twice") {
		t.Errorf("inconsistent stream: status %s (%s), %d model activities; want protocol_error, asked once",
			out.Status, out.Detail, starts)
	}
	if f := lastOfKind(res.Events, loop.ModelFailed); f == nil || f.Response == nil ||
		len(f.Response.Message.ToolCalls) != 1 || f.Response.Message.ToolCalls[0].ID != "call_a" {
		t.Errorf("inconsistent stream: model_failed event %+v, want the call started before the contradiction", f)
	}
}

// RunInput.ModelTimeout bounds how long the model may be quiet, as in
// process: a streamed turn that keeps coming runs past it; a stream quiet
// for longer before its first delta is tried again, and after it stops
// the run with model_error; a request not answered within it is a
// retryable timeout.
func TestModelTimeoutIsQuietTime(t *testing.T) {
	const timeout = 300 * time.Millisecond
	// pause makes delta at waits 40ms each, and delta at stall wait until
	// the attempt's context ends.
	pause := func(turn llmtest.Turn, stall int) llmtest.Turn {
		turn.OnDelta = func(ctx context.Context, i int) error {
			wait := 40 * time.Millisecond
			if i == stall {
				wait = time.Minute
			}
			select {
			case <-time.After(wait):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return turn
	}
	long := strings.Repeat("a steady stream ", 20) // 40 deltas, 1.6s in all

	out, res, starts, _ := runModel(t, llmtest.New(pause(llmtest.Text(long), -1)), true, timeout)
	if out.Status != loop.FinalAnswer || res.Answer() != long || starts != 1 {
		t.Errorf("a 1.6s stream, never quiet for %v: status %s (%s), %d model activities; want final_answer at once",
			timeout, out.Status, out.Detail, starts)
	}

	out, res, starts, _ = runModel(t, llmtest.New(pause(llmtest.Text("never shown"), 0), llmtest.Text("second try")), true, timeout)
	if out.Status != loop.FinalAnswer || res.Answer() != "second try" || starts != 2 {
		t.Errorf("quiet before the first delta: status %s (%s), answer %q, %d model activities; want final_answer on the retry",
			out.Status, out.Detail, res.Answer(), starts)
	}

	out, res, starts, _ = runModel(t, llmtest.New(pause(llmtest.Text(long), 3), llmtest.Text("never asked")), true, timeout)
	if f := lastOfKind(res.Events, loop.ModelFailed); out.Status != loop.ModelError || starts != 1 ||
		!strings.Contains(out.Detail, "sent nothing for 300ms") || f == nil || f.Response == nil || f.Response.Message.Text == "" {
		t.Errorf("quiet after the third delta: status %s (%s), %d model activities, model_failed %+v; want model_error naming the timeout, asked once, the text kept",
			out.Status, out.Detail, starts, f)
	}

	slow := llm.ModelFunc(func(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	out, _, starts, _ = runModel(t, slow, false, timeout)
	if out.Status != loop.ModelError || starts != 3 || !strings.Contains(out.Detail, "did not answer within 300ms") {
		t.Errorf("a request with no answer: status %s (%s), %d model activities; want model_error naming the timeout after 3 attempts",
			out.Status, out.Detail, starts)
	}
}

// lastOfKind is the last event of kind k, or nil.
func lastOfKind(evs []loop.Event, k loop.EventKind) *loop.Event {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == k {
			return &evs[i]
		}
	}
	return nil
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

// The model activity judges a stream's quiet time with the shared handler
// (loop.ModelTurn): usage reports alone do not keep an attempt open, and a
// complete turn whose connection then stays silent is the turn.
func TestModelActivityQuietTime(t *testing.T) {
	const timeout = 100 * time.Millisecond
	out, _, starts, _ := runModel(t, &llmtest.Lingering{UsageEvery: 10 * time.Millisecond}, true, timeout)
	if out.Status != loop.ModelError || starts != 3 || !strings.Contains(out.Detail, "sent nothing for 100ms") {
		t.Errorf("usage reports only: status %s (%s), %d model activities; want model_error naming the timeout after 3 attempts",
			out.Status, out.Detail, starts)
	}

	complete := &llmtest.Lingering{Deltas: []llm.Delta{
		{Kind: llm.DeltaText, Text: "All done."},
		{Kind: llm.DeltaUsage, Usage: &llm.Usage{InputTokens: 30, OutputTokens: 3}},
		{Kind: llm.DeltaFinish, Finish: &llm.Finish{FinishReason: "stop"}},
	}}
	out, res, starts, _ := runModel(t, complete, true, timeout)
	if out.Status != loop.FinalAnswer || res.Answer() != "All done." || starts != 1 {
		t.Errorf("complete, then silent: status %s (%s), answer %q, %d model activities; want the complete turn",
			out.Status, out.Detail, res.Answer(), starts)
	}
}

// A provider that asks to wait past the run's deadline (Retry-After) ends
// the run at once with model_error naming the wait, on Temporal as in
// process: the shared handler (loop.ModelTurn) judges the wait against the
// activity's context, which the run's remaining time bounds. Before,
// Temporal found the retry's delay past the run's time and gave up with a
// bare "rate limited", saying nothing of the wait.
func TestModelActivityRetryAfterBeyondDeadline(t *testing.T) {
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	limited := llm.ModelFunc(func(context.Context, *llm.Request) (*llm.Response, error) {
		return nil, &llm.Error{Kind: llm.KindRateLimited, StatusCode: 429, Retryable: true, RetryAfter: time.Hour,
			Err: errors.New("rate limited")}
	})
	acts, err := temporal.NewActivities(temporal.Config{Model: limited, Tools: reg, Blobs: store.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	starts := 0
	out := runInTestEnv(t, acts, temporal.RunInput{RunID: "run-retry-after", Model: "scripted", ModelAsActivity: true,
		Messages: []llm.Message{llm.UserMessage("hi")}, Budgets: loop.Budgets{Deadline: 10 * time.Second}},
		func(info *activity.Info, _ converter.EncodedValues) {
			if info.ActivityType.Name == temporal.ModelActivity {
				starts++
			}
		})
	if out.Status != loop.ModelError || starts != 1 || !strings.Contains(out.Detail, "Retry-After") {
		t.Fatalf("status %s (%s), %d model activities; want model_error naming the wait, asked once", out.Status, out.Detail, starts)
	}
}
