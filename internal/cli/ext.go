package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
)

// Extension adds commands, or other ways to run the existing ones, to the
// toolloop program: the Temporal build adds the worker command and the
// --temporal variants. Main offers it every command line first.
type Extension interface {
	// Run runs the command line args (the program name excluded) and
	// returns its exit code, or reports handled false to leave it to the
	// core commands.
	Run(ctx context.Context, k *Kit, args []string) (code int, handled bool)
}

// Exit codes, for extensions: see the program's help.
const (
	ExitOK    = exitOK
	ExitFail  = exitFail
	ExitUsage = exitUsage
)

// TemporalFlag is the flag that sends a command to a Temporal server.
const TemporalFlag = "temporal"

// needsTemporal returns what in args only the Temporal build can run (the
// worker command, or the --temporal flag), or "".
func needsTemporal(args []string) string {
	if len(args) > 0 && args[0] == "worker" {
		return "toolloop worker"
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if name, ok := FlagName(a); ok && name == TemporalFlag {
			return "--" + TemporalFlag
		}
	}
	return ""
}

// FlagName returns the name of the flag arg spells (-name, --name,
// --name=value), and false when arg is not a flag.
func FlagName(arg string) (string, bool) {
	if len(arg) < 2 || arg[0] != '-' || arg == "--" {
		return "", false
	}
	name := strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
	name, _, _ = strings.Cut(name, "=")
	return name, name != ""
}

// Kit is what an Extension's commands share with the core ones, so that
// both look and behave alike: the process's streams and environment, flag
// parsing and errors, the model and tool flags, budgets and prices, and
// the renderings of runs.
type Kit struct{ c *cli }

// Stdout is the program's standard output.
func (k *Kit) Stdout() io.Writer { return k.c.stdout }

// Stderr is the program's standard error.
func (k *Kit) Stderr() io.Writer { return k.c.stderr }

// Getenv reads the program's environment; "" means unset.
func (k *Kit) Getenv(name string) string { return k.c.getenv(name) }

// ParseFlags parses args with fs, flags and positional arguments mixed,
// and returns the positional ones (see the core commands).
func (k *Kit) ParseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	return parseFlags(fs, args)
}

// UsageError reports a bad command line for cmd ("run", "trace show") and
// returns ExitUsage; a request for help prints help instead and returns
// ExitOK.
func (k *Kit) UsageError(cmd string, err error, help func(io.Writer)) int {
	return k.c.usageError(cmd, err, help)
}

// Fail reports err for cmd on one line and returns ExitUsage for an error
// made by Usagef, ExitFail otherwise.
func (k *Kit) Fail(cmd string, err error) int { return k.c.fail(cmd, err) }

// Usagef returns an error the person at the command line can fix; its
// text should say how.
func Usagef(format string, args ...any) error { return &usageErr{fmt.Sprintf(format, args...)} }

// DBPath returns the store's file: flagValue, else the default one.
func (k *Kit) DBPath(flagValue string) (string, error) { return k.c.dbPath(flagValue) }

// OpenStore opens (with create, making) the SQLite store at path.
func (k *Kit) OpenStore(path string, create bool) (*sqlite.Store, error) {
	return openStore(path, create)
}

// Source is the model and tool flags of toolloop run (--provider, --model,
// --base-url, --tools, --mcp, --mcp-url, --confirm-writes).
type Source struct{ f *sourceFlags }

// AddSourceFlags defines the model and tool flags on fs.
func (k *Kit) AddSourceFlags(fs *flag.FlagSet) *Source { return &Source{addSourceFlags(fs)} }

// ModelName is --model's value.
func (s *Source) ModelName() string { return s.f.model }

// Provider is --provider's value.
func (s *Source) Provider() string { return s.f.provider }

// Policy is the policy the flags ask for (nil: allow every tool).
func (s *Source) Policy() policy.Policy {
	if s.f.confirmWrites {
		return policy.ConfirmWrites()
	}
	return nil
}

// Model builds the provider's client from the flags and the API key in the
// environment; the second result is gen_ai.provider.name.
func (k *Kit) Model(ctx context.Context, s *Source) (llm.Model, string, error) {
	return k.c.modelFor(ctx, s.f)
}

// Tools builds the tools the flags name, the order desk's over the book in
// st; close releases what they hold open (MCP servers).
func (k *Kit) Tools(ctx context.Context, s *Source, st *sqlite.Store) (reg *tool.Registry, close func(), err error) {
	box, err := k.c.toolsFor(ctx, s.f, st)
	if err != nil {
		return nil, nil, err
	}
	return box.reg, box.close, nil
}

// Budget is the budget flags of toolloop run (--max-steps, --deadline, ...).
type Budget struct{ b *budgetFlags }

// AddBudgetFlags defines the budget flags on fs.
func (k *Kit) AddBudgetFlags(fs *flag.FlagSet) *Budget { return &Budget{addBudgetFlags(fs)} }

// Budgets returns the budgets the flags set, or a usage error.
func (b *Budget) Budgets() (loop.Budgets, error) { return b.b.budgets() }

// Price returns model's price from the built-in table and the JSON file
// pricesFile (if not empty); false when neither has one.
func (k *Kit) Price(model, pricesFile string) (loop.Price, bool, error) {
	prices, err := loadPrices(pricesFile)
	if err != nil {
		return loop.Price{}, false, &usageErr{err.Error()}
	}
	p, ok := priceFor(prices, model)
	return p, ok, nil
}

// RunLine is a run's one-line summary, as toolloop run prints it: status,
// counters, cost, run ID, pending calls and stop detail.
func RunLine(res *loop.Result) string { return summaryLine("", res, -1, true, true) }

// ExitCodeOf is the exit code of a command that drove a run to st.
func ExitCodeOf(st loop.Status) int { return okStatus(st) }

// ResultOf rebuilds a run's result from its event log.
func ResultOf(events []loop.Event) *loop.Result { return resultOf(events) }

// TraceEvents renders (sub "show") or checks (sub "diagnose") a run's
// events as toolloop trace does; source names where they came from.
func (k *Kit) TraceEvents(sub string, events []loop.Event, source string, width int, asJSON bool) int {
	if len(events) == 0 {
		fmt.Fprintf(k.c.stderr, "toolloop trace %s: %s holds no events\n", sub, source)
		return exitFail
	}
	if sub == "show" {
		return k.c.show(events, source, width)
	}
	return diagnose(events, source, asJSON, k.c.stdout, k.c.stderr)
}

// DemoDriver runs the sandbox's scenarios somewhere else than in this
// process, for Demo.
type DemoDriver interface {
	// Run plays one scenario and returns its result and the book its
	// tools worked on. obs, if not nil, must see the run's events.
	Run(ctx context.Context, s orders.Scenario, obs loop.Observer) (*loop.Result, orders.OrderBook, error)
	// NextSteps prints how to answer a run paused for confirmation.
	NextSteps(w io.Writer, res *loop.Result)
}

// Demo runs toolloop demo with args (its flags but --db) through d, and
// prints what the in-process demo prints.
func (k *Kit) Demo(ctx context.Context, args []string, d DemoDriver) int {
	if d == nil {
		return k.c.usageError("demo", errors.New("no demo driver"), demoUsage)
	}
	return k.c.demoWith(ctx, args, d)
}

// Usage prints the program's help.
func Usage(w io.Writer) { usage(w) }

// ShellQuote quotes s for a POSIX shell when it needs it, for commands
// printed to be pasted.
func ShellQuote(s string) string { return shellQuote(s) }
