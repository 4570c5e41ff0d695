package temporal_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/temporal"
)

// A run with an output schema on the workflow, through the shared decider:
// every model activity's request carries the schema, a prose answer and
// one missing a field are corrected, and the conforming answer comes back
// in RunOutput.Output and decodes from ReadResult's result. (The
// decider's count of rejected answers crosses a continuation as new in
// its State encoding: TestStateRoundTrip in loop cuts the invalid_output
// transcript at every event.)
func TestOutputSchemaWorkflow(t *testing.T) {
	var mu sync.Mutex
	var asked []*llm.OutputFormat
	answer := func(text string) llmtest.Turn {
		return llmtest.Turn{Func: func(req *llm.Request) (*llm.Response, error) {
			mu.Lock()
			asked = append(asked, req.Output)
			mu.Unlock()
			return llmtest.Text(text).Response, nil
		}}
	}
	s := orders.Scenario{
		Name: "structured", Want: loop.FinalAnswer, Ask: "Where is order A100? Answer as JSON.",
		OutputSchema: orders.OrderStatusSchema,
		Script: func(context.CancelFunc) []llmtest.Turn {
			return []llmtest.Turn{
				answer("Order A100 is on its way."),
				answer(`{"order_id": "A100"}`),
				answer("```json\n{\"order_id\": \"A100\", \"status\": \"shipped\"}\n```"),
			}
		},
	}
	sb := newSandbox(t, s)
	sb.register()
	in := sb.input("run-structured", s.SessionID())
	sb.env.ExecuteWorkflow(temporal.WorkflowName, in)
	if err := sb.env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var out temporal.RunOutput
	if err := sb.env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	var fromOutput map[string]string
	if err := json.Unmarshal(out.Output, &fromOutput); err != nil || out.Status != loop.FinalAnswer || out.Steps != 3 ||
		fromOutput["status"] != "shipped" {
		t.Fatalf("output: %s after %d steps, %s (%s)", out.Status, out.Steps, out.Output, out.Detail)
	}
	res := readResult(t, sb.ledger, out)
	type orderStatus struct {
		OrderID string `json:"order_id"`
		Status  string `json:"status"`
	}
	got, err := loop.Decode[orderStatus](res)
	if err != nil || got != (orderStatus{"A100", "shipped"}) {
		t.Fatalf("Decode = %+v, %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 3 {
		t.Fatalf("%d model requests, want 3", len(asked))
	}
	for i, f := range asked {
		if f == nil || f.Name != loop.DefaultOutputName || len(f.Schema) == 0 {
			t.Errorf("request %d asks for output %+v, want the schema", i+1, f)
		}
	}
}
