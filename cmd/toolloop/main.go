package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolloop/toolloop/internal/cli"
)

func main() {
	// SIGTERM is how service managers, container runtimes and kill stop a
	// process: it ends a run as Ctrl-C does, recorded as canceled, with the
	// MCP servers the command started stopped, rather than killing the
	// process mid-run and leaving the run "running".
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv, nil)
	stop()
	os.Exit(code)
}
