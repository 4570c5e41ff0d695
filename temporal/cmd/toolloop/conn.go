package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	sdktemporal "go.temporal.io/sdk/temporal"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/toolloop/toolloop/internal/cli"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
)

// temporalFlag is the flag that sends a command to a Temporal server.
const temporalFlag = "temporal"

// defaultTaskQueue is the task queue workers serve and runs start on
// unless --task-queue says otherwise.
const defaultTaskQueue = "toolloop"

// conn is the flags that say which Temporal server, namespace and task
// queue a command works with.
type conn struct {
	addr, namespace, queue string
}

// addConnFlags defines --temporal and --namespace, and with queue also
// --task-queue.
func addConnFlags(fs *flag.FlagSet, queue bool) *conn {
	c := &conn{}
	fs.StringVar(&c.addr, temporalFlag, "", "the Temporal server's frontend `HOST:PORT`, e.g. 127.0.0.1:7233")
	fs.StringVar(&c.namespace, "namespace", "default", "the Temporal `NAMESPACE`")
	if queue {
		fs.StringVar(&c.queue, "task-queue", defaultTaskQueue, "the task `QUEUE` the workers serve")
	}
	return c
}

// flags are the connection flags again, each after a space, for the
// commands a command prints.
func (c *conn) flags() string {
	f := " --temporal " + c.addr
	if c.namespace != "default" {
		f += " --namespace " + cli.ShellQuote(c.namespace)
	}
	return f
}

// check validates the flags.
func (c *conn) check() error {
	if c.addr == "" {
		return cli.Usagef("--temporal HOST:PORT is missing, e.g. --temporal 127.0.0.1:7233")
	}
	if _, _, err := net.SplitHostPort(c.addr); err != nil {
		return cli.Usagef("--temporal %q: want HOST:PORT, e.g. 127.0.0.1:7233", c.addr)
	}
	if c.namespace == "" {
		return cli.Usagef("--namespace must not be empty")
	}
	return nil
}

// dial connects to the server; a server that cannot be reached is a usage
// error that says how to start one.
func (c *conn) dial(ctx context.Context, k *cli.Kit, logLevel slog.Level) (client.Client, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl, err := client.DialContext(dctx, client.Options{HostPort: c.addr, Namespace: c.namespace, Logger: sdkLogger(k, logLevel)})
	if err != nil {
		return nil, cli.Usagef("cannot reach Temporal at %s (namespace %s): %v; a local one: temporal server start-dev --ip 127.0.0.1 --headless",
			c.addr, c.namespace, err)
	}
	return cl, nil
}

// sdkLogger is the SDK's logger: the level TOOLLOOP_TEMPORAL_LOG names
// (debug, info, warn, error), else def, on standard error.
func sdkLogger(k *cli.Kit, def slog.Level) sdklog.Logger {
	level := def
	if v := k.Getenv("TOOLLOOP_TEMPORAL_LOG"); v != "" {
		_ = level.UnmarshalText([]byte(v)) // a bad value keeps the default
	}
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(k.Stderr(), &slog.HandlerOptions{Level: level})))
}

// outputOf reads a closed workflow's run: its small output (or for a
// canceled workflow the output its cancellation carries), with the log
// and history from the workflow's events query, which a worker answers
// for a closed workflow too. Without a worker, the result has the
// output's status and counters but no log. A workflow the server
// terminated (a limit passed, or an operator) is an error that gives the
// reason.
//
// With the workers' blob store (logs, nil for none) the log is read from
// there, all of it, continued as new or not, with no worker needed.
func outputOf(ctx context.Context, cl client.Client, id, runID string, logs store.Blobs) (*loop.Result, error) {
	out, err := smallOutput(ctx, cl, id, runID)
	if err != nil {
		return nil, err
	}
	res := &loop.Result{RunID: out.RunID, Status: out.Status, Detail: out.Detail, Steps: out.Steps, ToolCalls: out.ToolCalls,
		Usage: out.Usage, Cost: out.Cost, Duration: out.Duration, Pending: out.Pending, Output: out.Output}
	evs, err := closedLog(ctx, cl, id, out, logs)
	switch {
	case err == nil && len(evs) > 0:
		full := loop.Replay(evs).Result(evs)
		full.Duration = out.Duration
		return full, nil
	case err != nil && logs != nil:
		return nil, err // the store was named: its failure is the answer
	}
	if out.Answer != "" {
		res.Messages = []llm.Message{{Role: llm.RoleAssistant, Text: out.Answer}}
	}
	return res, nil
}

// closedLog returns the log of the closed run whose output is out: from
// the workers' store (logs) when given, else from the events query, which
// a worker answers; an error says why there is none.
func closedLog(ctx context.Context, cl client.Client, id string, out *temporal.RunOutput, logs store.Blobs) ([]loop.Event, error) {
	if out.Events == 0 {
		return nil, nil // ended before its first event
	}
	var evs []loop.Event
	var err error
	switch {
	case logs != nil && out.Log != "":
		if evs, err = temporal.ReadLog(ctx, logs, out.Log); err != nil {
			return nil, fmt.Errorf("run %s: reading its log from the workers' store: %w", id, err)
		}
	case logs == nil && out.ContinuedAsNew > 0:
		// The workflow holds only the events since its last run began.
		return nil, &continuedError{id: id}
	default:
		if evs, err = liveEvents(ctx, cl, id, logs); err != nil {
			return nil, fmt.Errorf("run %s: its log (%d events) comes from a worker of its task queue, and none answered (%w); "+
				"start one, or give the workers' store with --db PATH or --store URL", id, out.Events, err)
		}
	}
	if len(evs) != out.Events {
		return nil, fmt.Errorf("run %s: %d of its %d events were found (is the store that of the workers that ran it?)", id, len(evs), out.Events)
	}
	return evs, nil
}

// smallOutput reads a closed workflow's RunOutput, as outputOf, without
// its log.
func smallOutput(ctx context.Context, cl client.Client, id, runID string) (*temporal.RunOutput, error) {
	var out temporal.RunOutput
	err := cl.GetWorkflow(ctx, id, runID).Get(ctx, &out)
	var canceled *sdktemporal.CanceledError
	var terminated *sdktemporal.TerminatedError
	switch {
	case errors.As(err, &canceled):
		if !canceled.HasDetails() || canceled.Details(&out) != nil || out.Status == "" {
			return nil, fmt.Errorf("run %s was canceled before it started", id)
		}
	case errors.As(err, &terminated):
		st, serr := temporal.Status(ctx, cl, id)
		if serr != nil {
			return nil, fmt.Errorf("run %s was terminated by the server", id)
		}
		return nil, fmt.Errorf("run %s was terminated by the server: %s", id, st.Detail)
	case err != nil:
		return nil, err
	}
	return &out, nil
}

// liveStatus asks a running workflow for its status; it needs a worker to
// answer, and one that does answers in milliseconds: a run whose task
// queue has none is given up on after two seconds.
func liveStatus(ctx context.Context, cl client.Client, id string) (temporal.RunStatus, error) {
	return query[temporal.RunStatus](ctx, cl, id, temporal.StatusQuery, 2*time.Second)
}

// liveEvents asks a running workflow for its log so far. After a
// continuation as new the workflow holds only the events since; the
// earlier ones are read from the workers' blob store (logs), and without
// it that is an error rather than a log cut short. With the store, tool
// results kept by reference are read back too.
func liveEvents(ctx context.Context, cl client.Client, id string, logs store.Blobs) ([]loop.Event, error) {
	evs, err := query[[]loop.Event](ctx, cl, id, temporal.EventsQuery, 5*time.Second)
	if err != nil || len(evs) == 0 {
		return evs, err
	}
	if logs == nil {
		if evs[0].Seq != 1 {
			return nil, &continuedError{id: id, first: evs[0].Seq}
		}
		return evs, nil
	}
	if evs, err = temporal.ResolveEvents(ctx, logs, evs); err != nil {
		return nil, fmt.Errorf("run %s: reading its tool results from the workers' store: %w", id, err)
	}
	if evs[0].Seq == 1 {
		return evs, nil
	}
	st, err := liveStatus(ctx, cl, id)
	if err != nil {
		return nil, err
	}
	stored, err := temporal.ReadLog(ctx, logs, st.Log)
	if err != nil {
		return nil, fmt.Errorf("run %s: reading its events from before it continued as new from the workers' store: %w", id, err)
	}
	first := evs[0].Seq
	if len(stored) < first-1 {
		return nil, fmt.Errorf("run %s: the workers' store holds %d of the %d events from before it continued as new "+
			"(is it the store of the workers that ran it?)", id, len(stored), first-1)
	}
	return append(stored[:first-1:first-1], evs...), nil
}

// continuedError is the log of a run that continued as new, asked for
// without the workers' store, which holds its earlier events.
type continuedError struct {
	id    string
	first int // the first event its workflow holds; 0 when not known
}

func (e *continuedError) Error() string {
	if e.first == 0 {
		return fmt.Sprintf("run %s continued as new: its events are in the workers' store: "+
			"give it with --db PATH or --store URL to read them", e.id)
	}
	return fmt.Sprintf("run %s continued as new: its workflow holds its events from %d on, the earlier ones "+
		"are in the workers' store: give it with --db PATH or --store URL to read them", e.id, e.first)
}

// query asks the workflow id one of its queries, waiting at most wait.
func query[T any](ctx context.Context, cl client.Client, id, name string, wait time.Duration) (T, error) {
	qctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var out T
	v, err := cl.QueryWorkflow(qctx, id, "", name)
	if err == nil {
		err = v.Get(&out)
	}
	return out, err
}
