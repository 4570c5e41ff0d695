// Command toolloop is the command line of toolloop, a runtime for the
// controlled tool-calling loop of LLM applications: the sandbox (demo),
// runs on real providers (run), and the durable runs' commands (runs,
// approve, deny, resume, trace). 'toolloop help' lists them; package
// internal/cli has them all.
//
// This build runs the loop in its own process. The Temporal build, with a
// worker command and --temporal flags, is temporal/cmd/toolloop.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/toolloop/toolloop/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv, nil)
	stop()
	os.Exit(code)
}
