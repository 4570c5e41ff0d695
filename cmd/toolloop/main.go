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
