package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
)

// Extension is what a build of toolloop adds to the core program: another
// backend, chosen by a flag, and commands of its own. The Temporal build
// adds its server (--temporal HOST:PORT) and the worker command.
type Extension struct {
	// Flag is the name of the flag that selects Driver's backend: a
	// command line that carries --Flag uses it instead of the local
	// store.
	Flag string
	// Driver makes the extension's backends.
	Driver Driver
	// Commands are more commands, by name; each gets the arguments after
	// its name and returns the exit code.
	Commands map[string]func(ctx context.Context, k *Kit, args []string) int
	// Usage prints the extension's part of the help of cmd ("" for the
	// program's) and reports whether it has one.
	Usage func(w io.Writer, cmd string) bool
}

// Exit codes, for extensions: see the program's help.
const (
	ExitOK    = exitOK
	ExitFail  = exitFail
	ExitUsage = exitUsage
	ExitBusy  = exitBusy
)

// temporalFlag is the flag of the Temporal build, named in the message of
// a build that does not have it.
const temporalFlag = "temporal"

// needsTemporal returns what in args only the Temporal build can run (the
// worker command, or the --temporal flag), or "".
func needsTemporal(args []string) string {
	if len(args) > 0 && args[0] == "worker" {
		return "toolloop worker"
	}
	if hasFlag(args, temporalFlag) {
		return "--" + temporalFlag
	}
	return ""
}

// hasFlag reports whether args carry the flag name (-name, --name,
// --name=value) before any "--".
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		n := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if n, _, _ = strings.Cut(n, "="); n == name {
			return true
		}
	}
	return false
}

// Kit is what an extension's commands and backends share with the core
// ones, so that both look and behave alike: the process's streams and
// environment, flag parsing and errors, and the model and tool flags.
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

// UsageError reports a bad command line for cmd ("worker") and returns
// ExitUsage; a request for help prints help instead and returns ExitOK.
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
	mode := storeExisting
	if create {
		mode = storeCreate
	}
	return openStore(path, mode)
}

// Source is the model and tool flags of toolloop run (--provider, --model,
// --base-url, --tools, --mcp, --mcp-env, --mcp-url, --mcp-config, --confirm-writes,
// --slow-writes).
type Source struct{ f *sourceFlags }

// AddSourceFlags defines the model and tool flags on fs.
func (k *Kit) AddSourceFlags(fs *flag.FlagSet) *Source { return &Source{addSourceFlags(fs)} }

// ModelName is --model's value.
func (s *Source) ModelName() string { return s.f.model }

// ModelTimeout is --model-timeout's value (0 when not given).
func (s *Source) ModelTimeout() time.Duration { return s.f.modelTimeout }

// Provider is --provider's value.
func (s *Source) Provider() string { return s.f.provider }

// Policy is the policy the flags ask for (nil: allow every tool).
func (s *Source) Policy() policy.Policy { return s.f.policy() }

// Model builds the provider's client from the flags and the API key in the
// environment; the second result is gen_ai.provider.name.
func (k *Kit) Model(ctx context.Context, s *Source) (llm.Model, string, error) {
	return k.c.modelFor(ctx, s.f)
}

// Tools builds the tools the flags name, the order desk's over the book
// openBook opens (SQLiteBook for a store/sqlite file); close releases what
// they hold open (MCP servers).
func (k *Kit) Tools(ctx context.Context, s *Source, openBook BookOpener) (reg *tool.Registry, close func(), err error) {
	box, err := k.c.toolsFor(ctx, s.f, openBook)
	if err != nil {
		return nil, nil, err
	}
	return box.reg, box.close, nil
}

// SQLiteBook opens the order book in the SQLite store st, for Tools.
func SQLiteBook(st *sqlite.Store) BookOpener { return sqliteBook(st) }

// ShellQuote quotes s for a POSIX shell when it needs it, for commands
// printed to be pasted.
func ShellQuote(s string) string { return shellQuote(s) }
