package orders

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
)

// ModelName is the model name the sandbox's runs record.
const ModelName = "scripted-order-desk"

// PromptVersion is the version of SystemPrompt the runs record.
const PromptVersion = "order-desk-v1"

// SystemPrompt opens every sandbox conversation.
const SystemPrompt = "You are the order desk of a small online shop. Answer questions about orders " +
	"with the tools; never guess an order's state. Refunds and cancellations change the books."

// Scenario is one scripted conversation with the order desk and the status
// it must end with. A scenario is plain data: Run builds everything else
// (a fresh book, the tools, the scripted model, the loop configuration).
type Scenario struct {
	// Name identifies the scenario, e.g. on the demo's command line.
	Name string
	// Want is the status the run must end with.
	Want loop.Status
	// Description says in one line what happens.
	Description string
	// Ask is the customer's message.
	Ask string
	// Script returns the model's turns, in order. cancel cancels the run's
	// context, for scripts that play a caller who gives up mid-run.
	Script func(cancel context.CancelFunc) []llmtest.Turn
	// Repeat makes the model replay the last turn once the script runs out.
	Repeat bool
	// Identity is who the run acts for.
	Identity policy.Identity
	// Policy decides each call; nil allows every registered tool.
	Policy policy.Policy
	// Budgets bound the run.
	Budgets loop.Budgets
}

// Messages returns the opening of a sandbox conversation: the system
// prompt and the customer's message.
func Messages(ask string) []llm.Message {
	return []llm.Message{llm.SystemMessage(SystemPrompt), llm.UserMessage(ask)}
}

// Run plays the scenario once against a fresh book and returns the run's
// result and the book as the run left it. The run ending with any status,
// expected or not, is reported in the result; the error is non-nil only
// when the scenario could not be set up, and then the result is nil.
//
// The run ID is "run-" followed by the scenario's name, so that traces of
// the sandbox are reproducible.
func (s Scenario) Run(ctx context.Context) (*loop.Result, *Book, error) {
	if s.Script == nil {
		return nil, nil, fmt.Errorf("orders: scenario %q has no script", s.Name)
	}
	book := NewBook()
	reg, err := Tools(book)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	turns := s.Script(cancel)
	model := llmtest.New(turns...)
	if s.Repeat {
		model = llmtest.Repeating(turns...)
	}
	name := s.Name
	cfg := loop.Config{
		Model:     model,
		ModelName: ModelName,
		Tools:     reg,
		Policy:    s.Policy,
		Identity:  s.Identity,
		Budgets:   s.Budgets,
		// Small waits keep the whole demo well under a second.
		Executor: executor.New(&executor.Options{
			DefaultTimeout: time.Second,
			RetryBackoff:   5 * time.Millisecond,
			MaxRetryWait:   50 * time.Millisecond,
		}),
		ModelRetryBackoff: 2 * time.Millisecond,
		SessionID:         "sandbox",
		PromptVersion:     PromptVersion,
		NewRunID:          func() string { return "run-" + name },
	}
	res, err := loop.Run(ctx, cfg, Messages(s.Ask))
	if res == nil {
		return nil, nil, fmt.Errorf("orders: scenario %q: %w", s.Name, err)
	}
	// err is the run's *loop.StopError when the status is not
	// final_answer; the result already says so.
	return res, book, nil
}

// Lookup returns the scenario with the given name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Names returns the scenario names in the order of Scenarios.
func Names() []string {
	all := Scenarios()
	names := make([]string, len(all))
	for i, s := range all {
		names[i] = s.Name
	}
	return names
}

// ref is the arguments of a call that names one order.
func ref(id string) map[string]string { return map[string]string{"order_id": id} }

// call is shorthand for a scripted tool call.
func call(id, name string, args any) llm.ToolCall { return llmtest.Call(id, name, args) }

// script wraps a fixed list of turns as a Script.
func script(turns ...llmtest.Turn) func(context.CancelFunc) []llmtest.Turn {
	return func(context.CancelFunc) []llmtest.Turn { return turns }
}

// Scenarios returns the sandbox's scenarios. The first three are the ones
// DESIGN.md §9 requires; after them comes one scenario for each other exit
// of the loop, so that every status but tool_outcome_unknown is reached by
// exactly one scenario (final_answer by two: normal and not_found). Each
// call returns fresh values.
func Scenarios() []Scenario {
	readOnly := []string{QueryOrder, TrackShipment, ListOrders}
	return []Scenario{
		{
			Name: "normal", Want: loop.FinalAnswer,
			Description: "looks up order A100, tracks its parcel, then answers",
			Ask:         "Where is my order A100?",
			Script: script(
				llmtest.Calls(call("call_q1", QueryOrder, ref("A100"))),
				llmtest.Calls(call("call_t1", TrackShipment, ref("A100"))),
				llmtest.Text("Your order A100 (a mechanical keyboard) is on its way with DHL, tracking number "+
					"DHL-100-7731. It is at the Leipzig hub and should arrive on 2025-06-12."),
			),
		},
		{
			Name: "unknown_tool", Want: loop.ToolNotAllowed,
			Description: "the model calls delete_database, which is not registered",
			Ask:         "Please remove all the cancelled orders.",
			Script: script(
				llmtest.Calls(call("call_d1", "delete_database", map[string]any{"table": "orders", "where": "status = 'cancelled'"})),
				llmtest.Text("Done."),
			),
		},
		{
			Name: "loop_forever", Want: loop.MaxStepsExceeded,
			Description: "the model pages through list_orders forever (page 1, 2, 3, ...); MaxSteps is 5",
			Ask:         "Find the order Grace placed last year.",
			Repeat:      true,
			Budgets:     loop.Budgets{MaxSteps: 5},
			Script: script(llmtest.Turn{Func: func(req *llm.Request) (*llm.Response, error) {
				// A new page every turn, so the calls differ and spin
				// detection stays quiet: only the step limit stops this.
				c := call(fmt.Sprintf("call_l%d", req.Step), ListOrders, map[string]int{"page": req.Step})
				return llmtest.Calls(c).Response, nil
			}}),
		},
		{
			Name: "not_found", Want: loop.FinalAnswer,
			Description: "query_order A999 fails with not_found; the model reads the error and answers",
			Ask:         "What is the status of order A999?",
			Script: script(
				llmtest.Calls(call("call_q1", QueryOrder, ref("A999"))),
				llmtest.Text("I cannot find an order A999. Could you check the order number on your receipt?"),
			),
		},
		{
			Name: "tool_timeout", Want: loop.ToolTimeout,
			Description: "track_shipment on A104 (SlowPost) runs past its 50ms timeout, which stops the run",
			Ask:         "Where is order A104?",
			Budgets:     loop.Budgets{ToolTimeout: 50 * time.Millisecond},
			Script: script(
				llmtest.Calls(call("call_q1", QueryOrder, ref("A104"))),
				llmtest.Calls(call("call_t1", TrackShipment, ref("A104"))),
				llmtest.Text("Your parcel is with SlowPost."),
			),
		},
		{
			Name: "deadline_exceeded", Want: loop.DeadlineExceeded,
			Description: "the run's 100ms deadline passes while track_shipment (timeout 2s) waits on SlowPost",
			Ask:         "Where is order A104? I need it today.",
			Budgets:     loop.Budgets{Deadline: 100 * time.Millisecond},
			Script: script(
				llmtest.Calls(call("call_t1", TrackShipment, ref("A104"))),
				llmtest.Text("Your parcel is with SlowPost."),
			),
		},
		{
			Name: "tool_budget_exceeded", Want: loop.ToolBudgetExceeded,
			Description: "the model asks for three lookups in one turn; MaxToolCalls is 2",
			Ask:         "Compare my orders A100, A101 and A103.",
			Budgets:     loop.Budgets{MaxToolCalls: 2},
			Script: script(
				llmtest.Calls(
					call("call_q1", QueryOrder, ref("A100")),
					call("call_q2", QueryOrder, ref("A101")),
					call("call_q3", QueryOrder, ref("A103")),
				),
				llmtest.Text("Here is the comparison."),
			),
		},
		{
			Name: "cost_budget_exceeded", Want: loop.CostBudgetExceeded,
			Description: "two turns use 1190 tokens; MaxTokens is 1000",
			Ask:         "Tell me everything about order A100.",
			Budgets:     loop.Budgets{MaxTokens: 1000},
			Script: script(
				llmtest.Calls(call("call_q1", QueryOrder, ref("A100"))).WithUsage(400, 50),
				llmtest.Calls(call("call_t1", TrackShipment, ref("A100"))).WithUsage(700, 40),
				llmtest.Text("Order A100 is in transit.").WithUsage(900, 60),
			),
		},
		{
			Name: "spin_detected", Want: loop.SpinDetected,
			Description: "the model repeats query_order A102 with the same arguments in two consecutive turns",
			Ask:         "Has my order A102 shipped yet?",
			Script: script(
				llmtest.Calls(call("call_q1", QueryOrder, ref("A102"))),
				// Same arguments, spelt differently: spin detection
				// compares them canonically, not byte for byte.
				llmtest.Calls(call("call_q2", QueryOrder, `{ "order_id" : "A102" }`)),
				llmtest.Text("Order A102 has not shipped yet."),
			),
		},
		{
			Name: "permission_denied", Want: loop.PermissionDenied,
			Description: `identity "guest" may only read; the model calls refund_order`,
			Ask:         "Refund my order A103, the monitor arm arrived broken.",
			Identity:    policy.Identity{Name: "guest"},
			Policy:      policy.Permissions(policy.Grants{"guest": readOnly}),
			Script: script(
				llmtest.Calls(call("call_q1", QueryOrder, ref("A103"))),
				llmtest.Calls(call("call_r1", RefundOrder, map[string]string{"order_id": "A103", "reason": "arrived broken"})),
				llmtest.Text("Your refund is on its way."),
			),
		},
		{
			Name: "confirmation_required", Want: loop.ConfirmationRequired,
			Description: "writes need a human's confirmation; refund_order pauses the run and nothing is refunded",
			Ask:         "Refund order A103, the customer says it arrived broken.",
			Identity:    policy.Identity{Name: "agent-7", Roles: []string{"support"}},
			Policy: policy.Chain(
				policy.Permissions(policy.Grants{"role:support": {"*"}}),
				policy.ConfirmWrites(),
			),
			Script: script(
				llmtest.Calls(call("call_q1", QueryOrder, ref("A103"))),
				llmtest.Calls(call("call_r1", RefundOrder, map[string]string{"order_id": "A103", "reason": "arrived broken"})),
				llmtest.Text("The refund is done."),
			),
		},
		{
			Name: "protocol_error", Want: loop.ProtocolError,
			Description: "the model sends two tool calls with the same ID in one response",
			Ask:         "Compare orders A100 and A101.",
			Script: script(
				llmtest.Calls(
					call("call_1", QueryOrder, ref("A100")),
					call("call_1", QueryOrder, ref("A101")),
				),
				llmtest.Text("Here is the comparison."),
			),
		},
		{
			Name: "model_error", Want: loop.ModelError,
			Description: "the provider answers HTTP 500 to every attempt; the run stops after the bounded retries",
			Ask:         "Where is my order A100?",
			Repeat:      true,
			Script: script(llmtest.Turn{Err: &llm.Error{
				StatusCode: 500, Retryable: true,
				Err: errors.New("provider answered HTTP 500: internal server error"),
			}}),
		},
		{
			Name: "canceled", Want: loop.Canceled,
			Description: "the caller cancels the run while the model's second answer arrives; its call is skipped",
			Ask:         "Where is order A101?",
			Script: func(cancel context.CancelFunc) []llmtest.Turn {
				return []llmtest.Turn{
					llmtest.Calls(call("call_q1", QueryOrder, ref("A101"))),
					{Func: func(*llm.Request) (*llm.Response, error) {
						// The caller gives up just as the answer comes
						// back: the run must stop before running it.
						cancel()
						return llmtest.Calls(call("call_t1", TrackShipment, ref("A101"))).Response, nil
					}},
					llmtest.Text("Order A101 was delivered."),
				}
			},
		},
	}
}
