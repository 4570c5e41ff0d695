package main

import (
	"context"
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

// RunScenario implements cli.ScenarioRunner for toolloop demo --temporal:
// the scenario runs as a workflow on the server, with a worker of its own
// in this process (its own task queue, book, ledger and scripted model).
func (b *backend) RunScenario(ctx context.Context, s orders.Scenario, obs loop.Observer) (*loop.Result, orders.OrderBook, error) {
	if s.Interactive {
		return nil, nil, cli.Usagef("mode %s waits for a person, and on Temporal the run needs workers that outlive this command: "+
			"start toolloop worker --temporal %s --provider sandbox --tools orders --confirm-writes, then toolloop run --temporal %s --model m \"refund A103\"",
			s.Name, b.cn.addr, b.cn.addr)
	}
	cl, err := b.client(ctx)
	if err != nil {
		return nil, nil, err
	}
	id := newWorkflowID()
	queue := b.cn.queue + "-demo-" + strings.TrimPrefix(id, "toolloop-")
	book := tsandbox.Book(s)
	// A caller who gives up cancels the workflow; the request waits for
	// the server to record it, as the in-process cancel takes effect at
	// once.
	cancel := func() {
		cctx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer done()
		_ = cl.CancelWorkflow(cctx, id, "")
	}
	acts, err := tsandbox.Activities(s, book, store.NewMemory(), cancel)
	if err != nil {
		return nil, nil, err
	}
	w := worker.New(cl, queue, worker.Options{})
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
	if s.Want == loop.Canceled {
		// The caller cancels while the model's second answer comes back.
		// A local model request (the default) keeps the workflow task, and
		// the task runs the next turns before the server can deliver the
		// cancellation (docs/DESIGN.md §13), so the run would end first; a
		// model request of its own ends the task, as a turn's I/O does in
		// process, and the cancellation stops the run where it does there.
		in.ModelAsActivity = true
	}
	wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName, in)
	if err != nil {
		return nil, nil, err
	}
	res, err := outputOf(ctx, cl, wr.GetID(), wr.GetRunID(), nil)
	if err != nil {
		// Interrupted, most likely: the workflow's worker stops with this
		// call, so the run must not stay open on a queue nobody serves.
		tctx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer done()
		_ = cl.TerminateWorkflow(tctx, id, "", "toolloop demo stopped before the run ended")
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
