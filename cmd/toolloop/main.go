// Command toolloop is the command line of toolloop, a runtime for the
// controlled tool-calling loop of LLM applications.
//
// Usage:
//
//	toolloop demo [--mode NAME] [--trace] [--plan]
//	toolloop help [demo]
//
// The demo subcommand runs the order-desk sandbox (package
// examples/orders): a scripted model, no API key, one stop line per
// scenario. This package is the only one that reads the command line or
// the environment; everything else takes its configuration as arguments.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK    = 0 // done; for demo: every scenario ended as expected
	exitFail  = 1 // demo: a scenario ended with another status, or failed to start
	exitUsage = 2 // the command line was wrong
)

// run is the whole program behind main, with its inputs and outputs passed
// in so that tests can call it. args excludes the program name.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "demo":
		return demo(ctx, rest, stdout, stderr)
	case "trace":
		return traceCmd(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		if cmd == "help" && len(rest) > 0 {
			switch rest[0] {
			case "demo":
				demoUsage(stdout)
				return exitOK
			case "help":
				usage(stdout)
				return exitOK
			}
			fmt.Fprintf(stderr, "toolloop help: unknown command %q; commands: demo, help\n", rest[0])
			return exitUsage
		}
		usage(stdout)
		return exitOK
	default:
		if strings.HasPrefix(cmd, "-") {
			fmt.Fprintf(stderr, "toolloop: unknown flag %s; flags belong after a command (run 'toolloop help')\n", cmd)
		} else {
			fmt.Fprintf(stderr, "toolloop: unknown command %q; commands: demo, help (run 'toolloop help')\n", cmd)
		}
		return exitUsage
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `toolloop runs the controlled tool-calling loop of LLM applications.

Usage:
  toolloop demo [--mode NAME] [--trace] [--plan]   run the order-desk sandbox with a scripted model
  toolloop help [demo]                             show this help, or a command's

Run 'toolloop demo --help' for the demo's flags and scenarios.
`)
}
