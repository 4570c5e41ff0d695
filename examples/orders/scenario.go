package orders

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
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
	// Script returns the model's turns: the run's model request of step N
	// (llm.Request.Step, counted from 1) gets turn N, so that a run resumed
	// from its log in another process goes on with the script where it
	// left off. A retried request gets its step's turn again. cancel
	// cancels the run's context, for scripts that play a caller who gives
	// up mid-run.
	Script func(cancel context.CancelFunc) []llmtest.Turn
	// Repeat makes the model play the last turn for every step past the
	// end of the script; without it such a step fails.
	Repeat bool
	// Identity is who the run acts for.
	Identity policy.Identity
	// Policy decides each call; nil allows every registered tool.
	Policy policy.Policy
	// Budgets bound the run.
	Budgets loop.Budgets
	// Context is the run's context management (loop.Config.Context); nil
	// for none.
	Context *loop.ContextPolicy
	// Setup, if set, prepares the fresh book before the run, e.g. with
	// Book.HangAfterWrite. A book passed in RunOptions is used as it is.
	Setup func(b *Book)
	// ShowRefunds makes the demo's stop line report how many refunds the
	// book holds after the run, for the scenarios about writes.
	ShowRefunds bool
	// Interactive marks a scenario that waits for a person: it pauses for
	// confirmation, and the person's answer (toolloop approve or deny) and
	// the rest of the run (toolloop resume) come later, from other
	// processes, through a durable store. Interactive scenarios are not
	// part of the default demo (Defaults); they run when named.
	Interactive bool
	// Compensation and AtomicBatches are the run's compensation policy
	// and whether each turn's calls are all or nothing
	// (loop.Config.Compensation, AtomicBatches).
	Compensation  loop.CompensationPolicy
	AtomicBatches bool
	// OutputSchema, if set, is the JSON Schema the run's final answer must
	// match (loop.Config.OutputSchema), with the default retries.
	OutputSchema json.RawMessage
	// Ledger is the idempotency ledger of the run's writes when RunOptions
	// brings none. Nil means a fresh in-memory ledger (store.NewMemory) for
	// each run, which lives and dies with the run's fresh in-memory book.
	// A run over a durable book should have that book's store as its
	// ledger (RunOptions.Ledger), so that both outlive the process.
	Ledger store.Ledger
}

// SessionPrefix starts the session ID of every sandbox run: a run of
// scenario NAME is recorded with session ID "demo:NAME", which is how a
// later process knows how to rebuild its configuration (LookupSession).
const SessionPrefix = "demo:"

// SessionID returns the session ID the scenario's runs are recorded with.
func (s Scenario) SessionID() string { return SessionPrefix + s.Name }

// LookupSession returns the scenario whose runs carry the session ID.
func LookupSession(sessionID string) (Scenario, bool) {
	name, ok := strings.CutPrefix(sessionID, SessionPrefix)
	if !ok {
		return Scenario{}, false
	}
	return Lookup(name)
}

// Messages returns the opening of a sandbox conversation: the system
// prompt and the customer's message.
func Messages(ask string) []llm.Message {
	return []llm.Message{llm.SystemMessage(SystemPrompt), llm.UserMessage(ask)}
}

// RunOptions say where a scenario's run keeps its state and who watches
// it. The zero value is what Run uses: a fresh in-memory book, a private
// ledger, nothing recorded beyond the result.
type RunOptions struct {
	// Book is the book the run's tools work on. Nil means a fresh
	// in-memory book, prepared by the scenario's Setup.
	Book OrderBook
	// Store, when set, records the run's events as it goes
	// (loop.Config.Store), so that other processes can list it, answer its
	// confirmations (loop.Decide) and resume it. Resume requires it.
	Store store.EventLog
	// Ledger is the idempotency ledger of the run's writes; nil means the
	// scenario's Ledger, else a fresh in-memory one. A run that is resumed in
	// another process needs the same ledger there: use the store's.
	Ledger store.Ledger
	// Observer sees every event of the run: run logs, tracing.
	Observer loop.Observer
	// RunID names a new run. Empty means "run-NAME" without a Store, which
	// keeps the sandbox's traces reproducible, and "run-NAME-" followed by
	// eight random hex digits with one, so that the runs one store records
	// never collide.
	RunID string
}

// Run plays the scenario once against a fresh in-memory book and returns
// the run's result and the book as the run left it. The run ending with any
// status, expected or not, is reported in the result; the error is non-nil
// only when the scenario could not be set up, and then the result is nil.
//
// The run ID is "run-" followed by the scenario's name, so that traces of
// the sandbox are reproducible.
func (s Scenario) Run(ctx context.Context) (*loop.Result, *Book, error) {
	book := NewBook()
	if s.Setup != nil {
		s.Setup(book)
	}
	res, _, err := s.RunWith(ctx, RunOptions{Book: book})
	if err != nil {
		return nil, nil, err
	}
	return res, book, nil
}

// RunWith plays the scenario once with the book, store, ledger and
// observer opts gives, and returns the result and the book the run used.
// As with Run, the error is non-nil only when the run could not be set up
// or (with a Store) could not record its progress; the status is in the
// result.
func (s Scenario) RunWith(ctx context.Context, opts RunOptions) (*loop.Result, OrderBook, error) {
	runID := opts.RunID
	if runID == "" {
		runID = "run-" + s.Name
		if opts.Store != nil {
			runID = NewRunID(s.Name)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runner, book, err := s.runner(opts, cancel, runID)
	if err != nil {
		return nil, nil, err
	}
	res, err := runner.Run(ctx, Messages(s.Ask))
	if res == nil {
		return nil, nil, fmt.Errorf("orders: scenario %q: %w", s.Name, err)
	}
	// err is the run's *loop.StopError when the status is not
	// final_answer; the result already says so.
	return res, book, nil
}

// Resume goes on with a run of the scenario from its log in opts.Store, as
// loop.Runner.Resume does: after loop.Decide recorded a person's answers,
// it carries the run on from where it paused; a run that has ended comes
// back unchanged. opts should name the book and ledger the run began with
// (a SQLiteBook and the store's ledger, for a run that outlives its
// process); the scripted model picks the script up at the run's next step.
func (s Scenario) Resume(ctx context.Context, runID string, opts RunOptions) (*loop.Result, OrderBook, error) {
	if opts.Store == nil {
		return nil, nil, errors.New("orders: Resume needs RunOptions.Store")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runner, book, err := s.runner(opts, cancel, runID)
	if err != nil {
		return nil, nil, err
	}
	res, err := runner.Resume(ctx, runID)
	if res == nil {
		return nil, nil, fmt.Errorf("orders: scenario %q: resuming run %s: %w", s.Name, runID, err)
	}
	return res, book, nil
}

// runner builds the scenario's loop runner over opts' book (a fresh one
// when it has none).
func (s Scenario) runner(opts RunOptions, cancel context.CancelFunc, runID string) (*loop.Runner, OrderBook, error) {
	if s.Script == nil {
		return nil, nil, fmt.Errorf("orders: scenario %q has no script", s.Name)
	}
	book := opts.Book
	if book == nil {
		b := NewBook()
		if s.Setup != nil {
			s.Setup(b)
		}
		book = b
	}
	ledger := opts.Ledger
	if ledger == nil {
		ledger = s.Ledger
	}
	if ledger == nil {
		// In memory, like the fresh book: a ledger that outlived the book
		// would only remember writes to a book that is gone. Nothing here
		// needs the SQLite driver, so the sandbox alone (cmd/sandbox)
		// compiles without it.
		ledger = store.NewMemory()
	}
	parts, err := s.Parts(book, ledger, cancel)
	if err != nil {
		return nil, nil, err
	}
	runner, err := loop.NewRunner(loop.Config{
		Model:             parts.Model,
		ModelName:         ModelName,
		Tools:             parts.Tools,
		Policy:            s.Policy,
		Identity:          s.Identity,
		Budgets:           s.Budgets,
		Context:           s.Context,
		Executor:          parts.Executor,
		ModelRetryBackoff: ModelRetryBackoff,
		SessionID:         s.SessionID(),
		PromptVersion:     PromptVersion,
		Store:             opts.Store,
		Observer:          opts.Observer,
		NewRunID:          func() string { return runID },
		OutputSchema:      s.OutputSchema,
		Compensation:      s.Compensation,
		AtomicBatches:     s.AtomicBatches,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("orders: scenario %q: %w", s.Name, err)
	}
	return runner, book, nil
}

// ModelRetryBackoff is the sandbox runs' first wait before a model
// request is tried again: small, to keep the whole demo well under a
// second.
const ModelRetryBackoff = 2 * time.Millisecond

// Parts are the pieces of a scenario's run that hold behaviour rather than
// data: for drivers that assemble a run themselves (the Temporal workflow's
// worker), so that they run exactly what Run runs.
type Parts struct {
	// Model plays the scenario's script by step (Scripted).
	Model llm.Model
	// Tools are the order desk's tools over the run's book.
	Tools *tool.Registry
	// Executor runs the calls with the sandbox's small waits, writes
	// through the ledger.
	Executor *executor.Executor
}

// Parts builds the scenario's model, its tools over book and its executor
// over ledger; cancel is what the script calls to play a caller who gives
// up (the canceled scenario).
func (s Scenario) Parts(book OrderBook, ledger store.Ledger, cancel context.CancelFunc) (Parts, error) {
	if s.Script == nil {
		return Parts{}, fmt.Errorf("orders: scenario %q has no script", s.Name)
	}
	reg, err := Tools(book)
	if err != nil {
		return Parts{}, err
	}
	return Parts{
		Model: Scripted(s.Script(cancel), s.Repeat),
		Tools: reg,
		// Small waits keep the whole demo well under a second.
		Executor: executor.New(&executor.Options{
			DefaultTimeout: time.Second,
			RetryBackoff:   5 * time.Millisecond,
			MaxRetryWait:   50 * time.Millisecond,
			Ledger:         ledger,
		}),
	}, nil
}

// NewRunID returns a new run ID for a run of the named scenario: "run-",
// the name, "-" and eight random hex digits.
func NewRunID(name string) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "run-" + name + "-" + hex.EncodeToString(b[:])
}

// Scripted returns a model that plays turns by step: the request of step N
// (llm.Request.Step) gets turns[N-1], whatever the model answered before
// and in whichever process, so that a run resumed from its log continues
// the script. Past the end of the script it plays the last turn if repeat
// is set, and otherwise fails with llmtest.ErrScriptExhausted.
func Scripted(turns []llmtest.Turn, repeat bool) llm.Model {
	return llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		i := req.Step - 1
		switch {
		case i < 0:
			return nil, fmt.Errorf("orders: the scripted model needs the request's step, got %d", req.Step)
		case i >= len(turns) && (!repeat || len(turns) == 0):
			return nil, llmtest.ErrScriptExhausted
		case i >= len(turns):
			i = len(turns) - 1
		}
		// llmtest plays the one turn: it honours the turn's delay and
		// the context, and hands out a fresh copy of the response.
		return llmtest.New(turns[i]).Generate(ctx, req)
	})
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

// Names returns the scenario names in the order of Scenarios, the
// interactive ones included.
func Names() []string {
	all := Scenarios()
	names := make([]string, len(all))
	for i, s := range all {
		names[i] = s.Name
	}
	return names
}

// Defaults returns the scenarios the demo runs when none is named: all but
// the interactive ones, in the order of Scenarios.
func Defaults() []Scenario {
	var out []Scenario
	for _, s := range Scenarios() {
		if !s.Interactive {
			out = append(out, s)
		}
	}
	return out
}

// ref is the arguments of a call that names one order.
func ref(id string) map[string]string { return map[string]string{"order_id": id} }

// call is shorthand for a scripted tool call.
func call(id, name string, args any) llm.ToolCall { return llmtest.Call(id, name, args) }

// script wraps a fixed list of turns as a Script.
func script(turns ...llmtest.Turn) func(context.CancelFunc) []llmtest.Turn {
	return func(context.CancelFunc) []llmtest.Turn { return turns }
}

// OrderStatusSchema is the output schema of the invalid_output scenario:
// an order's ID and its status.
var OrderStatusSchema = json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},` +
	`"status":{"type":"string"}},"required":["order_id","status"],"additionalProperties":false}`)

// Scenarios returns the sandbox's scenarios. The first three are the ones
// docs/DESIGN.md §9 requires; after them comes one scenario for each other exit
// of the loop, then five about several calls in one turn (docs/DESIGN.md §6),
// idempotent writes (§7) and compensation (§7.1): parallel, refund_retry,
// refund_twice, refund_unknown and refund_reversed. Among these, every
// status is reached by exactly one scenario, except final_answer, which
// normal, not_found, parallel, refund_retry, refund_twice and
// refund_reversed reach. Last comes confirm_refund, the one
// interactive scenario (see Scenario.Interactive, Defaults): it pauses like
// confirmation_required, but for good, until a person approves or denies
// the refund, and then ends with final_answer. Each call returns fresh
// values.
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
			Name: "context_exhausted", Want: loop.ContextExhausted,
			Description: "the provider refuses the second request as too long for the model's window, and no old tool result is large enough to clear",
			Ask:         "Where is my order A100?",
			Repeat:      true,
			Context:     &loop.ContextPolicy{Window: 200_000},
			Script: script(
				llmtest.Calls(call("call_q1", QueryOrder, ref("A100"))),
				llmtest.Turn{Err: &llm.Error{
					StatusCode: 400, Kind: llm.KindContextLengthExceeded,
					Err: errors.New("prompt is too long: 201234 tokens > 200000 maximum"),
				}},
			),
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
			Name: "invalid_output", Want: loop.InvalidOutput,
			Description: "the answer must be JSON with the order and its status; the model answers in prose, " +
				"then twice with JSON that misses a field, and the run stops after the two corrections",
			Ask:          "Where is order A100? Answer as JSON.",
			OutputSchema: OrderStatusSchema,
			Script: script(
				llmtest.Calls(call("call_q1", QueryOrder, ref("A100"))),
				llmtest.Text("Order A100 is on its way with DHL."),
				llmtest.Text(`{"order_id": "A100"}`),
				llmtest.Text(`{"order_id": "A100", "state": "shipped"}`),
			),
		},
		{
			Name: "compensation_failed", Want: loop.CompensationFailed,
			Description: "both or neither: cancel_order for A102 succeeds, issue_voucher for the cancelled A105 fails; " +
				"a cancellation declares no compensation, so it is left for a person and the run stops",
			Ask:          "Cancel order A102 and put what I paid for A105 on a store voucher, both or neither.",
			Compensation: loop.CompensateWrites, AtomicBatches: true,
			Script: script(
				llmtest.Calls(
					call("call_c1", CancelOrder, ref("A102")),
					call("call_v1", IssueVoucher, map[string]string{"order_id": "A105", "reason": "never arrived"})),
				llmtest.Text("Done."),
			),
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
		{
			Name: "refund_reversed", Want: loop.FinalAnswer, ShowRefunds: true,
			Description: "both or neither: refund_order for A103 succeeds, issue_voucher for A102 (not shipped) fails, " +
				"so the refund is reversed (reverse_refund, through the ledger) before the model answers",
			Ask:          "Refund order A103 to my card and give me a store voucher for A102, both or neither.",
			Compensation: loop.CompensateWrites, AtomicBatches: true,
			Script: script(
				llmtest.Calls(
					call("call_r1", RefundOrder, refundA103),
					call("call_v1", IssueVoucher, map[string]string{"order_id": "A102", "reason": "goodwill"})),
				llmtest.Text("I could not issue the voucher for A102: it has not shipped yet. As you asked for both or "+
					"neither, I took the refund of A103 back; nothing has changed on your orders."),
			),
		},
		{
			Name: "confirm_refund", Want: loop.ConfirmationRequired, ShowRefunds: true, Interactive: true,
			Description: "writes need a human's confirmation; the run pauses before refunding A103 until a person " +
				"approves or denies (toolloop approve/deny), then toolloop resume goes on to a final answer",
			Ask:      "Refund order A103, the customer says the monitor arm arrived broken.",
			Identity: policy.Identity{Name: "agent-7", Roles: []string{"support"}},
			Policy: policy.Chain(
				policy.Permissions(policy.Grants{"role:support": {"*"}}),
				policy.ConfirmWrites(),
			),
			Script: script(
				llmtest.Calls(call("call_q1", QueryOrder, ref("A103"))),
				llmtest.Calls(call("call_r1", RefundOrder, refundA103)),
				llmtest.Turn{Func: answerRefund("call_r1")},
			),
		},
	}
}

// answerRefund is the scripted model's last turn after a refund that
// needed confirmation: it reads the refund's result, by call ID, and
// reports the refund, or that a person denied it and why.
func answerRefund(callID string) func(*llm.Request) (*llm.Response, error) {
	return func(req *llm.Request) (*llm.Response, error) {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			r := req.Messages[i].Result
			if r == nil || r.CallID != callID {
				continue
			}
			if r.Status == llm.StatusOK {
				var rf Refund
				if err := json.Unmarshal(r.Content, &rf); err != nil {
					return nil, fmt.Errorf("orders: the result of %s is not a refund: %w", callID, err)
				}
				return llmtest.Text(fmt.Sprintf("Order %s is refunded: %d.%02d EUR back to your original payment, refund %s.",
					rf.OrderID, rf.AmountCents/100, rf.AmountCents%100, rf.RefundID)).Response, nil
			}
			var e struct {
				Error string `json:"error"`
			}
			why := string(r.Content)
			if json.Unmarshal(r.Content, &e) == nil && e.Error != "" {
				why = e.Error
			}
			return llmtest.Text("I have not refunded the order: " + why +
				". Please contact the order desk if you want the decision reviewed.").Response, nil
		}
		return nil, fmt.Errorf("orders: no result for call %s in the request", callID)
	}
}
