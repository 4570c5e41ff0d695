package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
)

// Backend is where the commands' runs are kept and driven: the SQLite
// store with the loop in this process, or a Temporal server and its
// workers. Every command (run, runs, approve, deny, resume, trace, demo,
// serve) is written once over it; what differs between backends is their
// own flags, which their Driver defines.
//
// It is the web console's backend (listing runs, reading a log,
// recording an answer, resuming), which toolloop serve hands to the
// console as it is, with starting a run and naming the backend added. A
// run the backend does not have is an error wrapping
// store.ErrUnknownRun; a refused answer is a *loop.AnswerError; an error
// made by Usagef is one the person at the command line can fix, and its
// text says how (to the console, which has no command line, it is
// console.ErrNotHere).
type Backend interface {
	console.Backend
	// Start starts a run and waits until it stops or pauses for a
	// person's confirmation, and returns its result. With req.Detach it
	// returns once the run is started, with a result that carries only
	// its RunID.
	Start(ctx context.Context, req *Request) (*loop.Result, error)
	// Info says how the commands name the backend in what they print.
	Info() Info
	// Close releases what the backend holds; the error is one to report,
	// not one that undoes the command.
	Close() error
}

// Info is how the commands name a backend in what they print.
type Info struct {
	// Flags select the backend again, each after a space and quoted, for
	// the commands a command prints: " --db PATH", " --temporal HOST:PORT".
	Flags string
	// Where names the backend in messages: "in PATH", "on HOST:PORT".
	Where string
	// GoesOn reports whether a paused run goes on by itself once every
	// pending call is answered; if not, toolloop resume carries it on.
	GoesOn bool
}

// ScenarioRunner is a Backend that can play the sandbox's scenarios, for
// toolloop demo.
type ScenarioRunner interface {
	// RunScenario plays s and returns its result and the book its tools
	// worked on; obs, if not nil, sees the run's events.
	RunScenario(ctx context.Context, s orders.Scenario, obs loop.Observer) (*loop.Result, orders.OrderBook, error)
}

// Driver makes the backends of one kind. A command asks it for the
// backend's flags before it parses its command line, and opens the
// backend after.
type Driver interface {
	// Flags defines on fs the backend's flags for command cmd ("run",
	// "runs", "runs export", "approve", "deny", "resume", "trace", "serve",
	// "demo", or "replay", which only an extension's backend is asked
	// for: the core build's replay reads its own store) and returns the
	// function that opens the backend once fs is parsed.
	Flags(cmd string, fs *flag.FlagSet) Opener
}

// Opener opens a backend with the flags its Driver defined, once they are
// parsed. Opening should be cheap and check the flags; a backend connects
// when it is first used, so that a command line that is wrong for other
// reasons is reported first.
type Opener func(ctx context.Context, k *Kit) (Backend, error)

// Request is a run for Backend.Start: what toolloop run's own flags and
// prompt say. The backend adds what its flags say (the provider and the
// tools, or the task queue of the workers that have them).
type Request struct {
	// ID is the run's ID; "" lets the backend choose one.
	ID string
	// Model is --model, "" when it was not given: the backend may have a
	// default, or say that it is missing.
	Model string
	// System is the system prompt, "" for the backend's default.
	System string
	// Prompt is the user's message.
	Prompt string
	// Identity is who the run acts for.
	Identity policy.Identity
	// Budgets bound the run; their Prices are left empty: see Price.
	Budgets loop.Budgets
	// Detach asks Start to return as soon as the run is started.
	Detach bool
	// NoStream asks for whole model turns (loop.Config.Stream false).
	NoStream bool
	// Context is the run's context management (loop.Config.Context), nil
	// for none.
	Context *loop.ContextPolicy
	// Watch, if not nil, is shown the run as it goes
	// (loop.Config.Watch); a backend that cannot (its runs go on
	// elsewhere) leaves it out, and the answer is printed at the end.
	Watch func(ctx context.Context, u loop.Update)
	// OutputSchema is --output-schema's JSON Schema, checked (nil for
	// none), and OutputRetries --output-retries: loop.Config's fields of
	// the same names.
	OutputSchema  json.RawMessage
	OutputRetries int
	// Compensation is --compensate's policy and AtomicBatches
	// --atomic-batches: loop.Config's fields of the same names.
	Compensation  loop.CompensationPolicy
	AtomicBatches bool

	// prices is the price table: the built-in one and --prices FILE's.
	prices map[string]loop.Price
}

// Price returns model's price from the built-in table and --prices FILE,
// or nil when neither has one; a cost budget without a price is an error
// that names --prices.
func (r *Request) Price(model string) (*loop.Price, error) {
	if p, ok := priceFor(r.prices, model); ok {
		return &p, nil
	}
	if r.Budgets.MaxCost > 0 {
		return nil, &usageErr{fmt.Sprintf(`--max-cost needs the price of model %q, which is not built in: pass --prices FILE with {%q: {"input_per_mtok": N, "cached_input_per_mtok": N, "output_per_mtok": N}}`, model, model)}
	}
	return nil, nil
}

// Messages returns the conversation the run opens with: the system prompt
// (System, else def if not ""), then the user's prompt.
func (r *Request) Messages(def string) []llm.Message {
	var msgs []llm.Message
	switch {
	case r.System != "":
		msgs = append(msgs, llm.SystemMessage(r.System))
	case def != "":
		msgs = append(msgs, llm.SystemMessage(def))
	}
	return append(msgs, llm.UserMessage(r.Prompt))
}
