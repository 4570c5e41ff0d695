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
	"github.com/toolloop/toolloop/store"
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
	// Setup, if set, prepares the fresh book before the run, e.g. with
	// Book.HangAfterWrite.
	Setup func(b *Book)
	// ShowRefunds makes the demo's stop line report how many refunds the
	// book holds after the run, for the scenarios about writes.
	ShowRefunds bool
	// Ledger is the idempotency ledger of the run's writes. Nil means a
	// fresh SQLite ledger (store/sqlite) in a temporary file, made when the
	// run first claims a write and removed after the run; a test may pass
	// store.NewMemory() instead.
	Ledger store.Ledger
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
	if s.Setup != nil {
		s.Setup(book)
	}
	reg, err := Tools(book)
	if err != nil {
		return nil, nil, err
	}
	ledger := s.Ledger
	if ledger == nil {
		tmp := &tempLedger{}
		defer tmp.close()
		ledger = tmp
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
			Ledger:         ledger,
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
// of the loop, then four about several calls in one turn (DESIGN.md §6) and
// idempotent writes (§7): parallel, refund_retry, refund_twice and
// refund_unknown. Every status is reached by exactly one scenario, except
// final_answer, which normal, not_found, parallel, refund_retry and
// refund_twice reach. Each call returns fresh values.
func Scenarios() []Scenario {
	readOnly := []string{QueryOrder, TrackShipment, ListOrders}
	refundA103 := map[string]string{"order_id": "A103", "reason": "arrived broken"}
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
		{
			Name: "parallel", Want: loop.FinalAnswer, ShowRefunds: true,
			Description: "one turn, four calls: the reads of A100 and A101 run in parallel, the refund of A103 " +
				"runs alone, and the read of A103 runs after it",
			Ask: "Where are my orders A100 and A101? And please refund A103, the monitor arm arrived broken.",
			Script: script(
				llmtest.Calls(
					call("call_q1", QueryOrder, ref("A100")),
					call("call_t1", TrackShipment, ref("A101")),
					call("call_r1", RefundOrder, refundA103),
					call("call_q2", QueryOrder, ref("A103")),
				),
				llmtest.Text("A100 is on its way with DHL (tracking DHL-100-7731). A101 was delivered to the front desk. "+
					"A103 is refunded: 64.00 EUR back to your original payment, refund R-A103-1."),
			),
		},
		{
			Name: "refund_retry", Want: loop.FinalAnswer, ShowRefunds: true,
			Description: "refund_order of A103 applies, then runs past its 50ms timeout; its status look-up " +
				"finds the refund, so the call succeeds and nothing is refunded twice",
			Ask:     "Refund order A103, the monitor arm arrived broken.",
			Budgets: loop.Budgets{ToolTimeout: 50 * time.Millisecond},
			Setup:   func(b *Book) { b.HangAfterWrite("A103") },
			Script: script(
				llmtest.Calls(call("call_r1", RefundOrder, refundA103)),
				llmtest.Text("Order A103 is refunded: 64.00 EUR back to your original payment, refund R-A103-1."),
			),
		},
		{
			Name: "refund_twice", Want: loop.FinalAnswer, ShowRefunds: true,
			Description: "the model asks for the refund of A103 again two turns later; the ledger replays " +
				"the first result instead of refunding twice",
			Ask: "Refund order A103, it arrived broken, and make sure the refund went through.",
			Script: script(
				llmtest.Calls(call("call_r1", RefundOrder, refundA103)),
				llmtest.Calls(call("call_q1", QueryOrder, ref("A103"))),
				// The same refund under a new call ID: the key is
				// refund:A103 either way.
				llmtest.Calls(call("call_r2", RefundOrder, refundA103)),
				llmtest.Text("Order A103 is refunded, once: 64.00 EUR back to your original payment, refund R-A103-1."),
			),
		},
		{
			Name: "refund_unknown", Want: loop.ToolOutcomeUnknown, ShowRefunds: true,
			Description: "issue_voucher for A101 applies, then runs past its 50ms timeout; with no status " +
				"look-up to settle it, the run stops rather than guess or pay twice",
			Ask:     "Refund order A101 as a store voucher, the cables do not fit.",
			Budgets: loop.Budgets{ToolTimeout: 50 * time.Millisecond},
			Setup:   func(b *Book) { b.HangAfterWrite("A101") },
			Script: script(
				llmtest.Calls(call("call_v1", IssueVoucher, map[string]string{"order_id": "A101", "reason": "cables do not fit"})),
				llmtest.Text("Your voucher is on its way."),
			),
		},
	}
}
