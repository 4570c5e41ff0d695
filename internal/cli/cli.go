package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolloop/toolloop/loop"
)

// Exit codes.
const (
	exitOK    = 0 // done; for demo: every scenario ended as expected
	exitFail  = 1 // a run ended with an unexpected status, or something failed that no flag can fix
	exitUsage = 2 // the command line (or the environment it needs) was wrong; the message names the fix
	exitBusy  = 3 // another process is driving the run (it holds the run's lease): try again later
)

// cli is what the program takes from its process besides the arguments:
// its output streams, its environment, and the extension of its build.
type cli struct {
	stdout, stderr io.Writer
	// getenv reads an environment variable; "" means unset.
	getenv func(string) string
	// ext is the build's extension, or nil.
	ext *Extension
}

// Main is the whole toolloop program, with its inputs and outputs passed
// in so that tests can call it, and returns the exit code. args excludes
// the program name; getenv reads the environment (nil means an empty one).
// ext, when not nil, adds a backend and commands (see Extension).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, ext *Extension) int {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	c := &cli{stdout: stdout, stderr: stderr, getenv: getenv, ext: ext}
	if len(args) == 0 {
		c.help("")(stderr)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	if ext != nil {
		if run, ok := ext.Commands[cmd]; ok {
			return run(ctx, &Kit{c}, rest)
		}
	} else if what := needsTemporal(args); what != "" {
		fmt.Fprintf(stderr, "toolloop: %s needs the Temporal build of toolloop, which this one is not: "+
			"go run ./temporal/cmd/toolloop %s (or build it with go build -o toolloop ./temporal/cmd/toolloop)\n",
			what, strings.Join(args, " "))
		return exitUsage
	}
	var drv Driver = localDriver{}
	if ext != nil && ext.Driver != nil && hasFlag(rest, ext.Flag) {
		drv = ext.Driver
	}
	switch cmd {
	case "demo":
		return c.demo(ctx, drv, rest)
	case "run":
		return c.runCmd(ctx, drv, rest)
	case "runs":
		return c.runs(ctx, drv, rest)
	case "approve", "deny":
		return c.decide(ctx, drv, cmd, rest)
	case "resume":
		return c.resume(ctx, drv, rest)
	case "trace":
		return c.traceCmd(ctx, drv, rest)
	case "replay":
		return c.replayCmd(ctx, drv, rest)
	case "serve":
		return c.serve(ctx, drv, rest)
	case "help", "-h", "-help", "--help":
		topic := ""
		if cmd == "help" && len(rest) > 0 {
			topic = rest[0]
		}
		if help := c.help(topic); help != nil {
			help(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "toolloop help: unknown command %q; commands: %s\n", topic, c.commandList())
		return exitUsage
	default:
		if strings.HasPrefix(cmd, "-") {
			fmt.Fprintf(stderr, "toolloop: unknown flag %s; flags belong after a command (run 'toolloop help')\n", cmd)
		} else {
			fmt.Fprintf(stderr, "toolloop: unknown command %q; commands: %s (run 'toolloop help')\n", cmd, c.commandList())
		}
		return exitUsage
	}
}

const commandList = "demo, run, runs, approve, deny, resume, trace, replay, serve, help"

// commandList names the program's commands, for messages.
func (c *cli) commandList() string {
	list := commandList
	if c.ext != nil {
		var more []string
		for name := range c.ext.Commands {
			more = append(more, name)
		}
		slices.Sort(more)
		list = strings.Replace(list, ", help", ", "+strings.Join(more, ", ")+", help", 1)
	}
	return list
}

// help returns the help of a command ("" for the program's), the
// extension's part after the core's, or nil for an unknown command.
func (c *cli) help(cmd string) func(io.Writer) {
	var core func(io.Writer)
	switch cmd {
	case "", "help":
		core = usage
	case "demo":
		core = demoUsage
	case "run":
		core = runUsage
	case "runs":
		core = runsUsage
	case "approve", "deny":
		core = decideUsage
	case "resume":
		core = resumeUsage
	case "trace":
		core = traceUsage
	case "replay":
		core = replayUsage
	case "serve":
		core = serveUsage
	}
	if c.ext == nil || c.ext.Usage == nil {
		return core
	}
	if core == nil {
		if !c.ext.Usage(io.Discard, cmd) {
			return nil
		}
		return func(w io.Writer) { c.ext.Usage(w, cmd) }
	}
	return func(w io.Writer) {
		core(w)
		var more strings.Builder
		if c.ext.Usage(&more, cmd) {
			fmt.Fprintln(w)
			io.WriteString(w, more.String())
		}
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `toolloop runs the controlled tool-calling loop of LLM applications.

Usage:
  toolloop demo [--mode NAME] [--trace] [--plan]   run the order-desk sandbox with a scripted model
  toolloop run --provider P --model M "prompt"     run the loop on a real provider (see 'toolloop help run')
  toolloop runs [--status S]                       list the runs in the store, with pending approvals
  toolloop runs export RUN_ID | import FILE        a run's log to a file, and back into a store
  toolloop approve RUN_ID CALL_ID --by NAME        approve a call a run paused for
  toolloop deny RUN_ID CALL_ID --by NAME           deny it (the model is told, with --note TEXT)
  toolloop resume RUN_ID                           carry a run on from the store
  toolloop trace show|diagnose RUN_ID              render or check a run's log
  toolloop replay RUN_ID|FILE|--all [flags]        re-decide recorded runs with new tools, policy, budgets
  toolloop serve --users FILE                      the web console: runs, approvals, live runs
  toolloop help [COMMAND]                          show this help, or a command's

Runs are recorded in a SQLite store: --db PATH, by default toolloop.db in
$XDG_DATA_HOME/toolloop (or ~/.local/share/toolloop). Run logs go to
--log DIR (toolloop run: by default the runs directory beside the store).

Run 'toolloop help COMMAND' for a command's flags.

On a Temporal server: the build from temporal/cmd/toolloop adds a worker
command and --temporal HOST:PORT to demo, run, runs, approve, deny and trace.
`)
}

// dataDir is where toolloop keeps its files unless told otherwise:
// $XDG_DATA_HOME/toolloop, else ~/.local/share/toolloop.
func (c *cli) dataDir() (string, error) {
	if d := c.getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "toolloop"), nil
	}
	home := c.getenv("HOME")
	if home == "" && runtime.GOOS == "windows" {
		home = c.getenv("USERPROFILE")
	}
	if home == "" || !filepath.IsAbs(home) {
		return "", errors.New("no data directory: neither XDG_DATA_HOME nor HOME is set to an absolute path")
	}
	return filepath.Join(home, ".local", "share", "toolloop"), nil
}

// dbPath is the store's file: flagValue, else toolloop.db in the data
// directory.
func (c *cli) dbPath(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	dir, err := c.dataDir()
	if err != nil {
		return "", fmt.Errorf("%w; pass --db PATH", err)
	}
	return filepath.Join(dir, "toolloop.db"), nil
}

// defaultLogDir is where run logs go without --log: the runs directory in
// the data directory.
func (c *cli) defaultLogDir() (string, error) {
	dir, err := c.dataDir()
	if err != nil {
		return "", fmt.Errorf("no default run log directory: %w", err)
	}
	return filepath.Join(dir, "runs"), nil
}

// parseFlags parses args with fs, letting flags and positional arguments
// mix ("resume RUN --db x" and "resume --db x RUN" alike); after "--"
// everything is positional. A parse error is returned as the flag package
// words it; fs prints nothing.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		if consumed := len(args) - fs.NArg(); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, fs.Args()...), nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// usageError reports a bad command line in one line, naming the fix, and
// returns exitUsage. A parse error from parseFlags that asks for help
// prints the help instead, on stdout, and returns exitOK.
func (c *cli) usageError(cmd string, err error, help func(io.Writer)) int {
	if help == nil {
		help = c.help(strings.Fields(cmd)[0])
	}
	if errors.Is(err, flag.ErrHelp) {
		help(c.stdout)
		return exitOK
	}
	fmt.Fprintf(c.stderr, "toolloop %s: %v (run 'toolloop help %s')\n", cmd, err, cmd)
	return exitUsage
}

// badRunID reports whether id, given to cmd as what (--id, RUN_ID),
// cannot be a run ID (loop.CheckRunID), and if so says so on standard
// error: the caller then exits with exitUsage. Such an ID would name no
// log file, or forge lines in what the commands print.
func (c *cli) badRunID(cmd, what, id string) bool {
	err := loop.CheckRunID(id)
	if err != nil {
		fmt.Fprintf(c.stderr, "toolloop %s: %s: %v\n", cmd, what, err)
	}
	return err != nil
}

// stringList is a flag that may be given several times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ", ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// durationFlag is a flag holding a time.Duration that may not be
// negative: 0 (or leaving the flag out) means the default, and a negative
// one is refused as the flag is parsed, so that no run starts with it.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return "0s"
	}
	return f.d.String()
}

func (f durationFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("want a duration such as 90s or 5m")
	}
	if d < 0 {
		return errors.New("must not be negative (0, or leaving the flag out, means the default)")
	}
	*f.d = d
	return nil
}

// byteCapFlag is a flag holding a cap in bytes: a positive number, 0 (or
// leaving the flag out) for the default, or -1 for no cap.
type byteCapFlag struct{ n *int64 }

func (f byteCapFlag) String() string {
	if f.n == nil {
		return "0"
	}
	return strconv.FormatInt(*f.n, 10)
}

func (f byteCapFlag) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < -1 {
		return errors.New("want a number of bytes, 0 for the default or -1 for no cap")
	}
	*f.n = n
	return nil
}

// choiceFlag is a string flag that takes one of a fixed list of values.
type choiceFlag struct {
	s      *string
	values []string
}

func (f choiceFlag) String() string {
	if f.s == nil {
		return ""
	}
	return *f.s
}

func (f choiceFlag) Set(v string) error {
	if !slices.Contains(f.values, v) {
		return fmt.Errorf("want one of %s", strings.Join(f.values, ", "))
	}
	*f.s = v
	return nil
}

// httpURLFlag is a string flag that takes an absolute http or https URL
// with a host, so that a URL that cannot work is refused as the command
// line is read, not when the run first needs it.
type httpURLFlag struct{ s *string }

func (f httpURLFlag) String() string {
	if f.s == nil {
		return ""
	}
	return *f.s
}

func (f httpURLFlag) Set(v string) error {
	if err := checkHTTPURL(v); err != nil {
		return err
	}
	*f.s = v
	return nil
}

// checkHTTPURL reports why raw is not an absolute http or https URL with a
// host, or nil. The error does not repeat the URL, which may hold a
// secret.
func checkHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Opaque != "":
		return errors.New("want an absolute http or https URL, such as http://localhost:11434/v1")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want an http or https URL, such as http://localhost:11434/v1")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("the URL has no host; want one such as http://localhost:11434/v1")
	}
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs it, so that printed
// commands can be pasted as they are.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
