package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"go.temporal.io/sdk/worker"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/internal/cli"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
	"github.com/toolloop/toolloop/tool"
)

// worker runs "toolloop worker": host the workflow and its activities on a
// task queue until interrupted.
func workerCmd(ctx context.Context, k *cli.Kit, args []string) int {
	fs := flag.NewFlagSet("toolloop worker", flag.ContinueOnError)
	cn := addConnFlags(fs, true)
	src := k.AddSourceFlags(fs)
	sf := addStoreFlags(fs)
	noStream := fs.Bool("no-stream", false, "ask the model for whole turns rather than streams")
	pos, err := k.ParseFlags(fs, args)
	if err != nil {
		return k.UsageError("worker", err, workerUsage)
	}
	if len(pos) > 0 {
		fmt.Fprintf(k.Stderr(), "toolloop worker: unexpected argument %q (run 'toolloop help worker')\n", pos[0])
		return cli.ExitUsage
	}
	if err := cn.check(); err != nil {
		return k.Fail("worker", err)
	}
	if err := sf.check(); err != nil {
		return k.Fail("worker", err)
	}
	if src.ModelName() != "" {
		return k.Fail("worker", cli.Usagef("--model does not apply to a worker: each run names its model (toolloop run --temporal ... --model M)"))
	}
	if src.ModelTimeout() != 0 {
		return k.Fail("worker", cli.Usagef("--model-timeout does not apply to a worker: each run sets its own (toolloop run --temporal ... --model-timeout D)"))
	}
	model, _, err := k.Model(ctx, src)
	if err != nil {
		return k.Fail("worker", err)
	}
	cl, err := cn.dial(ctx, k, slog.LevelWarn)
	if err != nil {
		return k.Fail("worker", err)
	}
	defer cl.Close()
	st, err := sf.open(ctx, k)
	if err != nil {
		return k.Fail("worker", err)
	}
	defer st.Close()
	reg, closeTools, err := k.Tools(ctx, src, st.book)
	if err != nil {
		return k.Fail("worker", err)
	}
	defer closeTools()
	acts, err := newActivities(model, reg, src.Policy(), st.shared, !*noStream)
	if err != nil {
		return k.Fail("worker", err)
	}
	w := worker.New(cl, cn.queue, worker.Options{})
	temporal.RegisterWorkflow(w)
	acts.Register(w)
	tools := "none"
	if names := reg.Names(); len(names) > 0 {
		tools = strings.Join(names, ",")
	}
	fmt.Fprintf(k.Stdout(), "toolloop worker: serving task queue %s on %s (namespace %s); provider %s; tools %s; store %s\n",
		cn.queue, cn.addr, cn.namespace, src.Provider(), tools, st.name)
	// Run returns on the interrupt, or with the error that stopped the
	// worker for good.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	interrupt := make(chan any)
	go func() {
		<-rctx.Done()
		close(interrupt)
	}()
	if err := w.Run(interrupt); err != nil {
		return k.Fail("worker", err)
	}
	fmt.Fprintln(k.Stdout(), "toolloop worker: stopped")
	return cli.ExitOK
}

// workerStore is what the workers of a task queue share: the idempotency
// ledger, and the blobs holding the runs' logs and large tool results.
// The SQLite store is one; a store on a server (Postgres) is another, for
// workers on several machines.
type workerStore interface {
	store.Ledger
	store.Blobs
}

// newActivities builds a worker's activities over the store its task
// queue shares; stream asks a model that can stream for streams
// (temporal.Config.Stream), whose progress the activity's heartbeats then
// carry.
func newActivities(model llm.Model, reg *tool.Registry, pol policy.Policy, st workerStore, stream bool) (*temporal.Activities, error) {
	return temporal.NewActivities(temporal.Config{
		Model: model, Tools: reg, Policy: pol, Blobs: st, Stream: stream,
		Executor: executor.New(&executor.Options{Ledger: st}),
	})
}

func workerUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop worker --temporal HOST:PORT --provider P [--tools orders] [flags]

Hosts the toolloop workflow (toolloop.RunLoop) and its activities on a task
queue of a Temporal server until interrupted (Ctrl-C, SIGTERM). Runs started
with toolloop run --temporal go to the workers of their task queue; start as
many workers as you like, on as many machines: a worker that dies mid-run is
replaced by another, and writes it had started are replayed from the shared
idempotency ledger, never repeated.

Flags:
  --temporal HOST:PORT   the server's frontend, e.g. 127.0.0.1:7233
  --namespace NS         the namespace (default "default")
  --task-queue Q         the task queue to serve (default "toolloop")
  --provider P           the model provider: openai, openai-responses,
                         anthropic, gemini (API keys from the environment, as
                         for toolloop run), or sandbox (the order desk's
                         rule-based model, no key); each run names its model
                         with toolloop run --model
  --base-url URL         the provider's API somewhere else
  --tools orders         the order desk's tools over the book in the store
  --mcp 'CMD ARGS'       the tools of an MCP server run as a command; repeatable
  --mcp-url URL          the tools of an MCP server over HTTP; repeatable
  --mcp-config FILE      compensations, all-or-nothing groups and trust for the
                         MCP servers' tools (see toolloop help run); the workers
                         load the tools and perform the compensations, so they
                         need the file
  --confirm-writes       every write waits for a person (toolloop approve)
  --slow-writes D        with --tools orders: each write answers D after it is
                         applied (a drill for workers dying mid-write)
  --db PATH              the SQLite store holding the order book, the
                         idempotency ledger and the runs' logs and large tool
                         results (default: toolloop.db in the data
                         directory); workers of one task queue must share it,
                         so they run on one machine
  --store URL            instead of --db, a PostgreSQL store holding the same,
                         postgres://USER:PASSWORD@HOST:PORT/DB (a schema of
                         its own: ?search_path=SCHEMA), for workers of one
                         task queue on several machines
  --no-stream            ask the model for whole turns; by default a turn is
                         streamed on the worker (the workflow sees it whole),
                         and the model activity's heartbeat details show its
                         progress: temporal workflow describe --workflow-id ID

Every worker of a task queue must offer the same tools: a run records its
tools' version when it starts. Set TOOLLOOP_TEMPORAL_LOG=info to see the
SDK's log (default warn).
`)
}
