package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/internal/cli"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
	tsandbox "github.com/toolloop/toolloop/temporal/sandbox"
)

// demo runs "toolloop demo --temporal": every sandbox scenario as a
// workflow on the server, each with a worker of its own in this process
// (its own task queue, book, ledger and scripted model), printing the
// in-process demo's stop lines.
func demo(ctx context.Context, k *cli.Kit, args []string) int {
	// The connection flags are taken out here; the rest is the core
	// demo's, which parses them and prints.
	var rest []string
	cn := &conn{namespace: "default", queue: defaultTaskQueue}
	for i := 0; i < len(args); i++ {
		name, ok := cli.FlagName(args[i])
		if !ok || (name != cli.TemporalFlag && name != "namespace" && name != "task-queue") {
			rest = append(rest, args[i])
			continue
		}
		value, inline := "", false
		if _, v, found := strings.Cut(args[i], "="); found {
			value, inline = v, true
		}
		if !inline {
			if i+1 >= len(args) {
				fmt.Fprintf(k.Stderr(), "toolloop demo: flag needs an argument: %s\n", args[i])
				return cli.ExitUsage
			}
			i++
			value = args[i]
		}
		switch name {
		case cli.TemporalFlag:
			cn.addr = value
		case "namespace":
			cn.namespace = value
		default:
			cn.queue = value
		}
	}
	// The scenarios fail on purpose (a model that answers HTTP 500, tools
	// that time out): the SDK's reports of it would only hide the stop
	// lines, so it stays quiet unless TOOLLOOP_TEMPORAL_LOG says otherwise.
	cl, err := cn.dial(ctx, k, slog.LevelError+4)
	if err != nil {
		return k.Fail("demo", err)
	}
	defer cl.Close()
	return k.Demo(ctx, rest, &demoDriver{k: k, cl: cl, cn: cn})
}

// demoDriver runs scenarios on the server.
type demoDriver struct {
	k  *cli.Kit
	cl client.Client
	cn *conn
}

// Run implements cli.DemoDriver.
func (d *demoDriver) Run(ctx context.Context, s orders.Scenario, obs loop.Observer) (*loop.Result, orders.OrderBook, error) {
	if s.Interactive {
		return nil, nil, cli.Usagef("mode %s waits for a person, and on Temporal the run needs workers that outlive this command: "+
			"start toolloop worker --temporal %s --provider sandbox --tools orders --confirm-writes, then toolloop run --temporal %s --model m \"refund A103\"",
			s.Name, d.cn.addr, d.cn.addr)
	}
	id := newWorkflowID()
	queue := d.cn.queue + "-demo-" + strings.TrimPrefix(id, "toolloop-")
	book := tsandbox.Book(s)
	// A caller who gives up cancels the workflow; the request waits for
	// the server to record it, as the in-process cancel takes effect at
	// once.
	cancel := func() {
		cctx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer done()
		_ = d.cl.CancelWorkflow(cctx, id, "")
	}
	acts, err := tsandbox.Activities(s, book, store.NewMemory(), cancel)
	if err != nil {
		return nil, nil, err
	}
	w := worker.New(d.cl, queue, worker.Options{})
	temporal.RegisterWorkflow(w)
	acts.Register(w)
	if err := w.Start(); err != nil {
		return nil, nil, err
	}
	defer w.Stop()
	in := tsandbox.Input(s, "run-"+s.Name)
	// In-process, a run without a store stops when it needs a person's
	// confirmation; here the workflow would wait for one. It waits a
	// moment and then ends with the same status.
	in.ConfirmationTimeout = time.Millisecond
	wr, err := d.cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName, in)
	if err != nil {
		return nil, nil, err
	}
	res, err := outputOf(ctx, d.cl, wr.GetID(), wr.GetRunID())
	if err != nil {
		// Interrupted, most likely: the workflow's worker stops with this
		// call, so the run must not stay open on a queue nobody serves.
		tctx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer done()
		_ = d.cl.TerminateWorkflow(tctx, id, "", "toolloop demo stopped before the run ended")
		return nil, nil, err
	}
	if obs != nil {
		// The log was written on the server; observers see it now, in
		// order, with the times the workflow stamped.
		for i := range res.Events {
			obs.Observe(ctx, &res.Events[i])
		}
	}
	return res, book, nil
}

// NextSteps implements cli.DemoDriver.
func (d *demoDriver) NextSteps(w io.Writer, res *loop.Result) { writeNextSteps(w, res, d.cn) }
