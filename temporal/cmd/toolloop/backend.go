package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/internal/cli"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/temporal"
)

// pollEvery is how often Start looks at a run that may pause.
const pollEvery = 200 * time.Millisecond

// driver makes the Temporal backend: runs are workflows on a Temporal
// server, driven by the workers of their task queue (toolloop worker).
type driver struct{}

// Flags implements cli.Driver: the connection flags (--temporal,
// --namespace, and for run and demo --task-queue), for run
// --confirm-timeout and --model-timeout, and for run, trace, serve, runs
// export and replay the workers' store (--db, --store), from which a
// run's log is read whole.
func (driver) Flags(cmd string, fs *flag.FlagSet) cli.Opener {
	b := &backend{cmd: cmd, cn: addConnFlags(fs, cmd == "run" || cmd == "demo"), logLevel: slog.LevelError}
	switch cmd {
	case "run":
		fs.DurationVar(&b.confirmWait, "confirm-timeout", 0, "how long a run paused for confirmation waits for its answers (`D`; default: for ever)")
		fs.DurationVar(&b.modelTimeout, "model-timeout", 0, "give up on a model request, or a stream, quiet for `D` and try again, as for a rate limit (default 5m)")
		b.sf = addLogStoreFlags(fs)
	case "trace", "serve", "runs export", "replay":
		b.sf = addLogStoreFlags(fs)
	case "demo":
		// The scenarios fail on purpose (a model that answers HTTP 500,
		// tools that time out): the SDK's reports of it would only hide
		// the stop lines, so it stays quiet unless TOOLLOOP_TEMPORAL_LOG
		// says otherwise.
		b.logLevel = slog.LevelError + 4
	}
	return b.open
}

// backend is the Temporal backend. It connects when first used.
type backend struct {
	cmd         string
	cn          *conn
	logLevel    slog.Level
	confirmWait time.Duration
	// modelTimeout is run's RunInput.ModelTimeout (0 for the default).
	modelTimeout time.Duration

	// sf names the workers' store for trace and serve (nil for other
	// commands); logs is that store once opened, nil when none is named.
	sf        *storeFlags
	logs      store.Blobs
	closeLogs func()

	k  *cli.Kit
	mu sync.Mutex
	cl client.Client
}

// open implements cli.Opener.
func (b *backend) open(ctx context.Context, k *cli.Kit) (cli.Backend, error) {
	if b.cmd == "resume" {
		return nil, errNoResume
	}
	if err := b.cn.check(); err != nil {
		return nil, err
	}
	b.k = k
	if b.sf != nil {
		logs, closeLogs, err := b.sf.openLogs(ctx, k)
		if err != nil {
			return nil, err
		}
		b.logs, b.closeLogs = logs, closeLogs
	}
	return b, nil
}

// client returns the connection to the server, dialing it the first time.
func (b *backend) client(ctx context.Context) (client.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cl != nil {
		return b.cl, nil
	}
	cl, err := b.cn.dial(ctx, b.k, b.logLevel)
	if err != nil {
		return nil, err
	}
	b.cl = cl
	return cl, nil
}

// Info implements cli.Backend.
func (b *backend) Info() cli.Info {
	return cli.Info{Flags: b.cn.flags(), Where: "on " + b.cn.addr, GoesOn: true}
}

// Close implements cli.Backend.
func (b *backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cl != nil {
		b.cl.Close()
		b.cl = nil
	}
	if b.closeLogs != nil {
		b.closeLogs()
		b.closeLogs, b.logs = nil, nil
	}
	return nil
}

// Start implements cli.Backend: the run starts as a workflow on the task
// queue, whose workers have the model's provider and the tools.
func (b *backend) Start(ctx context.Context, req *cli.Request) (*loop.Result, error) {
	if req.Model == "" {
		return nil, cli.Usagef("--model is missing: name the model the workers' provider knows (any name for --provider sandbox workers)")
	}
	if b.confirmWait < 0 {
		return nil, cli.Usagef("--confirm-timeout must not be negative (0, or leaving it out, waits for ever)")
	}
	if b.modelTimeout < 0 {
		return nil, cli.Usagef("--model-timeout must not be negative (0, or leaving it out, is 5m)")
	}
	if req.NoStream {
		return nil, cli.Usagef("--no-stream does not apply to a run on Temporal: whether the model streams is the workers' choice (toolloop worker --no-stream)")
	}
	price, err := req.Price(req.Model)
	if err != nil {
		return nil, err
	}
	in := temporal.RunInput{Model: req.Model, Identity: req.Identity, Budgets: req.Budgets, Price: price,
		ConfirmationTimeout: b.confirmWait, ModelTimeout: b.modelTimeout, Context: req.Context, Messages: req.Messages(""),
		OutputSchema: req.OutputSchema, OutputRetries: req.OutputRetries,
		Compensation: req.Compensation, AtomicBatches: req.AtomicBatches}
	id := req.ID
	if id == "" {
		id = newWorkflowID()
	}
	cl, err := b.client(ctx)
	if err != nil {
		return nil, err
	}
	// A run ID is never used twice, finished or not, as in process: the
	// default idempotency keys of a run's writes are made from it, so a
	// second run under it would find the first one's writes in the ledger.
	wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: b.cn.queue,
		WorkflowExecutionErrorWhenAlreadyStarted: true, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE},
		temporal.WorkflowName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, cli.Usagef("run ID %s is already in use on %s (by a run running or finished); pick another --id, or look at that run with: toolloop trace show%s %s",
			id, b.cn.addr, b.cn.flags(), cli.ShellQuote(id))
	}
	if err != nil {
		return nil, fmt.Errorf("starting the run: %w", err)
	}
	if req.Detach {
		return &loop.Result{RunID: wr.GetID()}, nil
	}
	res, err := await(ctx, cl, wr, b.logs)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w; follow it with: toolloop runs%s", wr.GetID(), err, b.cn.flags())
	}
	return res, nil
}

// await waits until the run's workflow closes, or the run pauses for
// confirmation, and returns the run's result, its log read from logs
// when given (the workers' store).
func await(ctx context.Context, cl client.Client, wr client.WorkflowRun, logs store.Blobs) (*loop.Result, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type closed struct {
		res *loop.Result
		err error
	}
	done := make(chan closed, 1)
	go func() {
		res, err := outputOf(wctx, cl, wr.GetID(), wr.GetRunID(), logs)
		done <- closed{res, err}
	}()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case c := <-done:
			return c.res, c.err
		case <-ctx.Done():
			return nil, fmt.Errorf("stopped waiting (%w); the run goes on", ctx.Err())
		case <-tick.C:
			st, err := liveStatus(ctx, cl, wr.GetID())
			if err != nil || st.Status != string(loop.ConfirmationRequired) {
				continue // not paused, or closed meanwhile (done says)
			}
			evs, err := liveEvents(ctx, cl, wr.GetID(), logs)
			if err != nil {
				return nil, err
			}
			if len(evs) == 0 {
				continue
			}
			return loop.Replay(evs).Result(evs), nil
		}
	}
}

// newWorkflowID returns "toolloop-" and 16 random hex digits.
func newWorkflowID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "toolloop-" + hex.EncodeToString(b[:])
}

// Decide implements cli.Backend with the workflow's confirm update, which
// checks the answer (loop.CheckAnswer): a refusal comes back as the
// workflow's *loop.AnswerError (temporal.AnswerRefusal), and nothing is
// recorded. A closed run's workflow takes no update: the answer is
// refused with loop.ErrNotPaused and the status the run ended with.
func (b *backend) Decide(ctx context.Context, runID string, answer loop.Confirmation) error {
	cl, err := b.client(ctx)
	if err != nil {
		return err
	}
	uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h, err := cl.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{WorkflowID: runID, UpdateName: temporal.ConfirmUpdate,
		Args: []any{answer}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		var st temporal.RunStatus
		err = h.Get(uctx, &st)
	}
	var (
		nf *serviceerror.NotFound
		ae *loop.AnswerError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(temporal.AnswerRefusal(err), &ae):
		return ae
	case errors.As(err, &nf):
		return b.closedAnswer(ctx, cl, runID, answer)
	case uctx.Err() != nil:
		return fmt.Errorf("run %s did not answer within 30s (does a worker serve its task queue?): %w", runID, err)
	}
	return fmt.Errorf("run %s did not take the answer: %w", runID, err)
}

// closedAnswer is the refusal of an answer to a run whose workflow takes
// no update: a run the server does not have wraps store.ErrUnknownRun; a
// closed run's log is checked as in process (loop.CheckAnswer), so that
// a call answered before is loop.ErrAlreadyAnswered, naming who answered;
// any other answer is loop.ErrNotPaused with the status the run ended
// with.
func (b *backend) closedAnswer(ctx context.Context, cl client.Client, runID string, answer loop.Confirmation) error {
	desc, err := cl.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		return fmt.Errorf("run %s: %w", runID, store.ErrUnknownRun)
	}
	if evs, err := b.Events(ctx, runID); err == nil && len(evs) > 0 {
		if err := loop.CheckAnswer(loop.Replay(evs), answer); err != nil {
			return err
		}
	}
	ex := desc.GetWorkflowExecutionInfo()
	r := runInfo(ctx, cl, runID, ex.GetExecution().GetRunId(), ex.GetStatus())
	return &loop.AnswerError{Err: loop.ErrNotPaused, RunID: runID, CallID: answer.CallID, Status: r.Status,
		Detail: "its workflow has closed"}
}

// errNoResume is what toolloop resume --temporal says.
var errNoResume = cli.Usagef("a run on Temporal needs no resume: its workflow goes on by itself once a worker " +
	"serves its task queue (and, when it waits for confirmation, once every call is answered with toolloop approve or deny --temporal)")

// Resume implements cli.Backend: a workflow needs none.
func (b *backend) Resume(context.Context, string) (*loop.Result, error) { return nil, errNoResume }

// Runs implements cli.Backend: the server's toolloop runs, in the order
// its visibility store gives them, with their status (asked of a running
// workflow, read from a closed one's result).
func (b *backend) Runs(ctx context.Context, f console.Filter) ([]console.Run, error) {
	cl, err := b.client(ctx)
	if err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	var (
		list  []console.Run
		token []byte
	)
	for len(list) < limit {
		resp, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: b.cn.namespace, PageSize: int32(min(limit, 100)), NextPageToken: token,
			// A run that continued as new is one run: its last workflow
			// execution stands for it.
			Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus != 'ContinuedAsNew'", temporal.WorkflowName),
		})
		if err != nil {
			return nil, fmt.Errorf("listing the runs: %w", err)
		}
		// A running run's status is a query, answered by a worker (or
		// not, after a timeout): ask for a page's rows at once.
		rows := make([]console.Run, len(resp.Executions))
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i, ex := range resp.Executions {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				rows[i] = runInfo(ctx, cl, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId(), ex.GetStatus())
				rows[i].StartedAt = ex.GetStartTime().AsTime()
			})
		}
		wg.Wait()
		for _, r := range rows {
			if len(list) < limit && (f.Status == "" || r.Status == f.Status) {
				list = append(list, r)
			}
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			break
		}
	}
	return list, nil
}

// runInfo reads a run's status: from a running workflow's status query
// (it needs a worker; without one the run shows as running, uncounted),
// or from a closed one's output; a workflow that ended without one shows
// Temporal's status.
func runInfo(ctx context.Context, cl client.Client, id, runID string, wf enumspb.WorkflowExecutionStatus) console.Run {
	r := console.Run{RunID: id, Status: loop.RunningStatus}
	switch wf {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		st, err := liveStatus(ctx, cl, id)
		if err != nil {
			return r
		}
		r.Status, r.Pending, r.Counted = st.Status, st.Pending, true
		r.Steps, r.ToolCalls, r.Tokens = st.Steps, st.ToolCalls, st.Usage.Total()
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		res, err := smallOutput(ctx, cl, id, runID)
		if err != nil {
			r.Status = workflowStatus(wf)
			return r
		}
		r.Status, r.Pending, r.Counted = string(res.Status), res.Pending, true
		r.Steps, r.ToolCalls, r.Tokens = res.Steps, res.ToolCalls, res.Usage.Total()
		r.SessionID = res.SessionID
	default:
		// Failed, terminated, timed out, continued as new: no output.
		r.Status = workflowStatus(wf)
	}
	return r
}

// workflowStatus names a workflow that ended without a run's output by
// Temporal's status: workflow_failed, workflow_terminated, ...
func workflowStatus(wf enumspb.WorkflowExecutionStatus) string {
	return "workflow_" + strings.ToLower(strings.TrimPrefix(wf.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

// Events implements cli.Backend: a closed run's log from its output, a
// running one's from the events query. For runs export and replay, which
// need the log whole, a log read without the workers' store that keeps a
// tool result there by reference is refused, naming the flags that give
// the store: the file would otherwise hold references, not the results.
func (b *backend) Events(ctx context.Context, id string) ([]loop.Event, error) {
	evs, err := b.events(ctx, id)
	if err != nil || b.logs != nil || (b.cmd != "runs export" && b.cmd != "replay") {
		return evs, err
	}
	// Resolving against an empty store fails at the first reference, and
	// changes nothing in a log that has none.
	if _, err := temporal.ResolveEvents(ctx, store.NewMemory(), evs); err != nil {
		return nil, fmt.Errorf("run %s keeps tool results of over %d KB in the workers' store, and its log is whole only with them: "+
			"give the store with --db PATH or --store URL (%w)", id, temporal.RefThreshold>>10, err)
	}
	return evs, nil
}

// events reads a run's log for Events.
func (b *backend) events(ctx context.Context, id string) ([]loop.Event, error) {
	cl, err := b.client(ctx)
	if err != nil {
		return nil, err
	}
	desc, err := cl.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, fmt.Errorf("run %s: %w", id, store.ErrUnknownRun)
	}
	if err != nil {
		return nil, err
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		events, err := liveEvents(ctx, cl, id, b.logs)
		var cont *continuedError
		if errors.As(err, &cont) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("run %s is running and no worker answered for its log: %w", id, err)
		}
		return events, nil
	}
	out, err := smallOutput(ctx, cl, id, "")
	if err != nil {
		return nil, fmt.Errorf("run %s left no log: %w", id, err)
	}
	return closedLog(ctx, cl, id, out, b.logs)
}
