package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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

// blobCounter counts what is stored, to see results go by reference.
type blobCounter struct {
	*store.Memory
	puts  int
	sizes []int
}

func (b *blobCounter) PutBlob(ctx context.Context, data []byte) (string, error) {
	b.puts++
	b.sizes = append(b.sizes, len(data))
	return b.Memory.PutBlob(ctx, data)
}

// TestLargeResultsByReference runs 6 turns of 20 KB tool results in the
// test environment: the model sees every result in full (longRunParts
// checks), the log keeps each large result as a reference, every model
// activity's input stays small (the log's digest and the turn's new
// events, not the conversation), and ReadResult gives back the whole
// history and log. The model requests are activities (ModelAsActivity),
// whose inputs the test environment shows.
func TestLargeResultsByReference(t *testing.T) {
	const turns, size = 6, 20_000
	blobs := &blobCounter{Memory: store.NewMemory()}
	acts := longRunParts(t, turns, size, blobs)
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(testLogger())
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	temporal.RegisterWorkflow(env)
	acts.Register(env)
	var inputs []int
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name != temporal.ModelActivity {
			return
		}
		var in temporal.ModelInput
		if err := args.Get(&in); err != nil {
			t.Error(err)
		}
		b, _ := json.Marshal(in)
		inputs = append(inputs, len(b))
	})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{RunID: "run-byref", Model: "scripted", ModelAsActivity: true,
		Messages: []llm.Message{llm.UserMessage("read every page")}, Budgets: loop.Budgets{MaxSteps: turns + 1}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var out temporal.RunOutput
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	if out.Status != loop.FinalAnswer || out.Answer != "read 6 pages" {
		t.Fatalf("output %+v", out)
	}
	if b, _ := json.Marshal(out); len(b) > 2<<10 {
		t.Fatalf("output of %d bytes", len(b))
	}
	for i, n := range inputs {
		if n > 6<<10 {
			t.Fatalf("model input %d is %d bytes: the conversation travels by value", i+1, n)
		}
	}
	if len(inputs) != turns+1 {
		t.Fatalf("%d model requests", len(inputs))
	}
	large := 0
	for _, n := range blobs.sizes {
		if n == size+2 { // the JSON string
			large++
		}
	}
	if large != turns {
		t.Fatalf("%d large results stored as blobs, want %d (sizes %v)", large, turns, blobs.sizes)
	}
	// The log as stored holds references; ReadResult resolves them.
	res := readResult(t, blobs, out)
	for p := 1; p <= turns; p++ {
		var got string
		r := res.Messages[2*p].Result
		if json.Unmarshal(r.Content, &got) != nil || got != pageContent(p, size) {
			t.Fatalf("result %d is not whole: %.80s", p, r.Content)
		}
	}
	v, err := env.QueryWorkflow(temporal.EventsQuery)
	if err != nil {
		t.Fatal(err)
	}
	var evs []loop.Event
	if err := v.Get(&evs); err != nil {
		t.Fatal(err)
	}
	refs := 0
	for _, ev := range evs {
		for _, o := range ev.Outcomes {
			if strings.Contains(string(o.Result.Content), "$toolloop_blob") && len(o.Result.Content) < 200 {
				refs++
			}
		}
	}
	if refs != turns {
		t.Fatalf("the workflow's log holds %d references, want %d", refs, turns)
	}
}

// TestModelResponseTooLarge: a model response past MaxResponseBytes stops
// the run with model_error and a detail that says why, at once (never
// retried), where the server would fail the activity's completion.
func TestModelResponseTooLarge(t *testing.T) {
	sb := newSandbox(t, scenario(t, "normal"))
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	big := llm.ModelFunc(func(context.Context, *llm.Request) (*llm.Response, error) {
		calls++
		return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Text: strings.Repeat("x", temporal.MaxResponseBytes)}}, nil
	})
	acts, err := temporal.NewActivities(temporal.Config{Model: big, Tools: reg, Blobs: sb.ledger})
	if err != nil {
		t.Fatal(err)
	}
	acts.Register(sb.env)
	out := sb.run(t, sb.input("run-big", "sandbox"))
	if out.Status != loop.ModelError || !strings.Contains(out.Detail, "more than the 1048576 a Temporal payload") || calls != 1 {
		t.Fatalf("status %s (%s) after %d requests", out.Status, out.Detail, calls)
	}
}

// TestToolActivityHeartbeats: a tool call that runs longer than the
// tool heartbeat (300ms here, 10s by default) completes, its activity
// beating meanwhile, so that a worker lost mid-call is noticed within the
// heartbeat, not at the call's StartToClose. The read is made an activity
// (LocalReadBound -1): as a local activity it would send no heartbeats.
func TestToolActivityHeartbeats(t *testing.T) {
	type in struct{}
	slow, err := tool.New(tool.Spec[in]{Name: "slow", Description: "takes its time", HonorsContext: true},
		func(ctx context.Context, _ in) (string, error) {
			select {
			case <-time.After(time.Second):
				return "done", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(slow)
	if err != nil {
		t.Fatal(err)
	}
	model := llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		if req.Step == 1 {
			return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: "call_s1", Name: "slow", Arguments: json.RawMessage(`{}`)}}}}, nil
		}
		return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Text: "finished"}}, nil
	})
	blobs := store.NewMemory()
	acts, err := temporal.NewActivities(temporal.Config{Model: model, Tools: reg, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(testLogger())
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	temporal.RegisterWorkflow(env)
	acts.Register(env)
	beats, attempts := 0, 0
	env.SetOnActivityHeartbeatListener(func(info *activity.Info, _ converter.EncodedValues) {
		if info.ActivityType.Name == temporal.ToolActivity {
			beats++
		}
	})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == temporal.ToolActivity {
			attempts++
		}
	})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.RunInput{RunID: "run-beat", Model: "scripted", LocalReadBound: -1,
		Messages: []llm.Message{llm.UserMessage("take your time")}, ToolHeartbeat: 300 * time.Millisecond})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var out temporal.RunOutput
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	res := readResult(t, blobs, out)
	r := toolResult(res.Messages, "call_s1")
	if out.Status != loop.FinalAnswer || r == nil || r.Status != llm.StatusOK || attempts != 1 || beats < 2 {
		t.Fatalf("status %s, result %+v, %d attempts, %d heartbeats", out.Status, r, attempts, beats)
	}
}

// A turn too large for the model activity's input to carry (a long reply,
// then 80 results just under RefThreshold: about 1.3 MB of events) is
// stored before the next request, whose input then carries none of it;
// the run ends as it would anyway, every result whole. The model requests
// are activities (ModelAsActivity), whose inputs are what is checked.
func TestLargeTurnStoredBeforeTheRequest(t *testing.T) {
	const calls, size = 80, temporal.RefThreshold - 100
	page, err := tool.New(tool.Spec[struct {
		N int `json:"n"`
	}]{Name: "page", Description: "a page", Effect: tool.ReadOnly},
		func(_ context.Context, in struct {
			N int `json:"n"`
		}) (string, error) {
			return strings.Repeat(string(rune('a'+in.N%26)), size-2), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(page)
	if err != nil {
		t.Fatal(err)
	}
	var batch []llm.ToolCall
	for i := range calls {
		batch = append(batch, llmtest.Call(fmt.Sprintf("c%d", i), "page", map[string]int{"n": i}))
	}
	first := llmtest.Calls(batch...)
	first.Response.Message.Text = strings.Repeat("Reading them all. ", 30_000) // 540 KB
	model := llmtest.New(first, llmtest.Text("read them all"))
	blobs := store.NewMemory()
	acts, err := temporal.NewActivities(temporal.Config{Model: model, Tools: reg, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	var inputs []int
	out := runInTestEnv(t, acts, temporal.RunInput{RunID: "run-large-turn", Model: "scripted", ModelAsActivity: true,
		Messages: []llm.Message{llm.UserMessage("read every page")}, Budgets: loop.Budgets{MaxToolCalls: calls}},
		func(info *activity.Info, args converter.EncodedValues) {
			if info.ActivityType.Name != temporal.ModelActivity {
				return
			}
			var in temporal.ModelInput
			if err := args.Get(&in); err != nil {
				t.Error(err)
			}
			b, _ := json.Marshal(in)
			inputs = append(inputs, len(b))
		})
	if out.Status != loop.FinalAnswer || out.ToolCalls != calls {
		t.Fatalf("output %+v", out)
	}
	if len(inputs) != 2 || inputs[1] > 64<<10 {
		t.Fatalf("model inputs of %v bytes: the second should carry none of the large turn", inputs)
	}
	res := readResult(t, blobs, out)
	if r := res.Messages[len(res.Messages)-2].Result; r == nil || len(r.Content) != size {
		t.Fatalf("the last result read back is not whole: %+v", r)
	}
}

// A write still running when the run's time runs out may have happened:
// its activity is cut off with the run, which stops deadline_exceeded, and
// the log says the write's outcome is unknown, never that the call was
// cut short before it could write.
func TestWriteCutByTheDeadline(t *testing.T) {
	type in struct {
		Order string `json:"order"`
	}
	refund, err := tool.New(tool.Spec[in]{Name: "refund", Description: "refunds an order", Effect: tool.Write,
		HonorsContext: true, IdempotencyKey: func(a in) string { return "refund/" + a.Order }},
		func(ctx context.Context, _ in) (string, error) {
			select { // a slow payment service
			case <-time.After(3 * time.Second):
				return "refunded", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(refund)
	if err != nil {
		t.Fatal(err)
	}
	model := llmtest.New(llmtest.Calls(llmtest.Call("r1", "refund", map[string]string{"order": "A1"})), llmtest.Text("never"))
	blobs := store.NewMemory()
	acts, err := temporal.NewActivities(temporal.Config{Model: model, Tools: reg, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	out := runInTestEnv(t, acts, temporal.RunInput{RunID: "run-cut-write", Model: "scripted",
		Messages: []llm.Message{llm.UserMessage("refund A1")}, Budgets: loop.Budgets{Deadline: time.Second}}, nil)
	res := readResult(t, blobs, out)
	r := toolResult(res.Messages, "r1")
	if out.Status != loop.DeadlineExceeded || r == nil || r.ErrorKind != llm.KindOutcomeUnknown {
		t.Fatalf("status %s (%s), result %+v; want the write's outcome unknown", out.Status, out.Detail, r)
	}
}

// slowBlobs takes a second to store anything, as a distant store might.
type slowBlobs struct{ *store.Memory }

func (b slowBlobs) PutBlob(ctx context.Context, data []byte) (string, error) {
	time.Sleep(time.Second)
	return b.Memory.PutBlob(ctx, data)
}

// The model activity beats while it stores the turn and reads the log
// back, not only during the request: a store slower than the heartbeat
// timeout (300ms here) is not taken for a lost worker (ModelAsActivity: a
// local activity sends no heartbeats).
func TestModelActivityBeatsWhileStoring(t *testing.T) {
	blobs := slowBlobs{store.NewMemory()}
	acts, err := temporal.NewActivities(temporal.Config{Model: llmtest.New(llmtest.Text("done")), Tools: mustRegistry(t), Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	attempts := 0
	out := runInTestEnv(t, acts, temporal.RunInput{RunID: "run-slow-store", Model: "scripted", ModelAsActivity: true,
		Messages: []llm.Message{llm.UserMessage("hello")}, ModelHeartbeat: 300 * time.Millisecond},
		func(info *activity.Info, _ converter.EncodedValues) {
			if info.ActivityType.Name == temporal.ModelActivity {
				attempts++
			}
		})
	if out.Status != loop.FinalAnswer || attempts != 1 {
		t.Fatalf("status %s (%s), %d model attempts; want final_answer at the first", out.Status, out.Detail, attempts)
	}
}

func mustRegistry(t *testing.T) *tool.Registry {
	t.Helper()
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// runInTestEnv runs one workflow of in over acts in the SDK's test
// environment and returns its output; started, when set, sees each
// activity start with its input.
func runInTestEnv(t *testing.T, acts *temporal.Activities, in temporal.RunInput, started func(*activity.Info, converter.EncodedValues)) temporal.RunOutput {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(testLogger())
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	temporal.RegisterWorkflow(env)
	acts.Register(env)
	if started != nil {
		env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
			started(info, args)
		})
	}
	env.ExecuteWorkflow(temporal.WorkflowName, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var out temporal.RunOutput
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	return out
}
