package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/toolloop/toolloop/internal/cli"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/temporal"
)

// pollEvery is how often run waits look at a run that may pause.
const pollEvery = 200 * time.Millisecond

// run runs "toolloop run --temporal": start a run on the server, and wait
// until it stops or pauses for confirmation (or, with --detach, not).
func run(ctx context.Context, k *cli.Kit, args []string) int {
	fs := flag.NewFlagSet("toolloop run", flag.ContinueOnError)
	cn := addConnFlags(fs, true)
	model := fs.String("model", "", "the `MODEL` name the workers' provider knows")
	bf := k.AddBudgetFlags(fs)
	pricesFile := fs.String("prices", "", "model prices from the JSON `FILE` (added to the built-in ones)")
	identity := fs.String("identity", "cli", "the `NAME` the run acts for, as the policy sees it")
	system := fs.String("system", "", "a system prompt `TEXT`")
	id := fs.String("id", "", "the workflow `ID`, which is also the run ID (default: toolloop- and random hex)")
	detach := fs.Bool("detach", false, "print the run's ID and return at once")
	confirmWait := fs.Duration("confirm-timeout", 0, "how long a run paused for confirmation waits for its answers (`D`; default: for ever)")
	pos, err := k.ParseFlags(fs, args)
	if err != nil {
		return k.UsageError("run", err, runUsage)
	}
	if len(pos) != 1 || strings.TrimSpace(pos[0]) == "" {
		fmt.Fprintf(k.Stderr(), "toolloop run: want one prompt, got %d argument(s); quote it: toolloop run --temporal HOST:PORT --model M \"your question\"\n", len(pos))
		return cli.ExitUsage
	}
	if *model == "" {
		return k.Fail("run", cli.Usagef("--model is missing: name the model the workers' provider knows (any name for --provider sandbox workers)"))
	}
	budgets, err := bf.Budgets()
	if err != nil {
		return k.Fail("run", err)
	}
	if *confirmWait < 0 {
		return k.Fail("run", cli.Usagef("--confirm-timeout must not be negative (0, or leaving it out, waits for ever)"))
	}
	in := temporal.RunInput{Model: *model, Identity: policy.Identity{Name: *identity}, Budgets: budgets,
		ConfirmationTimeout: *confirmWait}
	price, ok, err := k.Price(*model, *pricesFile)
	if err != nil {
		return k.Fail("run", err)
	}
	if ok {
		in.Price = &price
	} else if budgets.MaxCost > 0 {
		return k.Fail("run", cli.Usagef("--max-cost needs the price of model %q, which is not built in: pass --prices FILE", *model))
	}
	if *system != "" {
		in.Messages = append(in.Messages, llm.SystemMessage(*system))
	}
	in.Messages = append(in.Messages, llm.UserMessage(pos[0]))
	if *id == "" {
		*id = newWorkflowID()
	}
	cl, err := cn.dial(ctx, k, slog.LevelError)
	if err != nil {
		return k.Fail("run", err)
	}
	defer cl.Close()
	wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: *id, TaskQueue: cn.queue,
		WorkflowExecutionErrorWhenAlreadyStarted: true}, temporal.WorkflowName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return k.Fail("run", cli.Usagef("run ID %s is already in use by a running run; pick another --id, or follow it with: toolloop trace show%s %s",
			*id, cn.flags(), cli.ShellQuote(*id)))
	}
	if err != nil {
		return k.Fail("run", fmt.Errorf("starting the run: %w", err))
	}
	if *detach {
		fmt.Fprintf(k.Stdout(), "run=%s\n", wr.GetID())
		fmt.Fprintf(k.Stdout(), "# follow it with: toolloop runs%s; toolloop trace show%s %s\n",
			cn.flags(), cn.flags(), cli.ShellQuote(wr.GetID()))
		return cli.ExitOK
	}
	res, err := await(ctx, cl, wr)
	if err != nil {
		return k.Fail("run", fmt.Errorf("run %s: %w; follow it with: toolloop runs%s", wr.GetID(), err, cn.flags()))
	}
	return printRun(k, res, cn)
}

// await waits until the run's workflow closes, or the run pauses for
// confirmation, and returns the run's result.
func await(ctx context.Context, cl client.Client, wr client.WorkflowRun) (*loop.Result, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type closed struct {
		res *loop.Result
		err error
	}
	done := make(chan closed, 1)
	go func() {
		res, err := outputOf(wctx, cl, wr.GetID(), wr.GetRunID())
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
			evs, err := liveEvents(ctx, cl, wr.GetID())
			if err != nil {
				return nil, err
			}
			if len(evs) == 0 {
				continue
			}
			return cli.ResultOf(evs), nil
		}
	}
}

// printRun prints a run's answer, if any, its stop line, and for a run
// that waits for confirmation the commands that answer it.
func printRun(k *cli.Kit, res *loop.Result, cn *conn) int {
	if res.Status == loop.FinalAnswer {
		fmt.Fprintln(k.Stdout(), res.Answer())
	}
	fmt.Fprintln(k.Stdout(), cli.RunLine(res))
	writeNextSteps(k.Stdout(), res, cn)
	return cli.ExitCodeOf(res.Status)
}

// writeNextSteps prints the commands that answer the calls a paused run
// waits on; the workflow goes on by itself once they are all answered.
func writeNextSteps(w io.Writer, res *loop.Result, cn *conn) {
	if res.Status != loop.ConfirmationRequired || len(res.Pending) == 0 {
		return
	}
	flags := cn.flags()
	fmt.Fprintln(w, "# the run waits on the server; to approve (it goes on once every call is answered):")
	for _, p := range res.Pending {
		fmt.Fprintf(w, "toolloop approve %s %s --by NAME%s\n", cli.ShellQuote(res.RunID), cli.ShellQuote(p.CallID), flags)
	}
	fmt.Fprintln(w, "# or to deny (the model is told, with the note):")
	for _, p := range res.Pending {
		fmt.Fprintf(w, "toolloop deny %s %s --by NAME --note TEXT%s\n", cli.ShellQuote(res.RunID), cli.ShellQuote(p.CallID), flags)
	}
}

// newWorkflowID returns "toolloop-" and 16 random hex digits.
func newWorkflowID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "toolloop-" + hex.EncodeToString(b[:])
}

// decide runs "approve" and "deny" --temporal: the ConfirmUpdate update,
// which the workflow validates (a call that is not pending is rejected
// with nothing recorded).
func decide(ctx context.Context, k *cli.Kit, verb string, args []string) int {
	fs := flag.NewFlagSet("toolloop "+verb, flag.ContinueOnError)
	cn := addConnFlags(fs, false)
	by := fs.String("by", "", "who decides (`NAME`); recorded in the run's log")
	note := fs.String("note", "", "why (`TEXT`); recorded, and for a denial shown to the model")
	pos, err := k.ParseFlags(fs, args)
	if err != nil {
		return k.UsageError(verb, err, decideUsage)
	}
	if len(pos) != 2 {
		fmt.Fprintf(k.Stderr(), "toolloop %s: want RUN_ID CALL_ID, got %d argument(s): toolloop %s --temporal HOST:PORT RUN_ID CALL_ID --by NAME [--note TEXT]\n",
			verb, len(pos), verb)
		return cli.ExitUsage
	}
	runID, callID := pos[0], pos[1]
	if strings.TrimSpace(*by) == "" {
		fmt.Fprintf(k.Stderr(), "toolloop %s: --by NAME is missing: say who decides, e.g. --by alice\n", verb)
		return cli.ExitUsage
	}
	cl, err := cn.dial(ctx, k, slog.LevelError)
	if err != nil {
		return k.Fail(verb, err)
	}
	defer cl.Close()
	answer := loop.Confirmation{CallID: callID, Approved: verb == "approve", By: *by, Note: *note}
	uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h, err := cl.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{WorkflowID: runID, UpdateName: temporal.ConfirmUpdate,
		Args: []any{answer}, WaitForStage: client.WorkflowUpdateStageCompleted})
	var st temporal.RunStatus
	if err == nil {
		err = h.Get(uctx, &st)
	}
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return k.Fail(verb, cn.notFound(err, "open run "+runID))
		}
		if uctx.Err() != nil {
			return k.Fail(verb, fmt.Errorf("run %s did not answer within 30s (does a worker serve its task queue?): %w", runID, err))
		}
		return k.Fail(verb, cli.Usagef("run %s did not take the answer: %v", runID, err))
	}
	done := "approved"
	if !answer.Approved {
		done = "denied"
	}
	var still []string
	for _, p := range st.Pending {
		if p.Confirmation == nil {
			still = append(still, p.CallID)
		}
	}
	if len(still) > 0 {
		fmt.Fprintf(k.Stdout(), "%s call %s of run %s (by %s); still pending: %s\n", done, callID, runID, *by, strings.Join(still, ", "))
		return cli.ExitOK
	}
	fmt.Fprintf(k.Stdout(), "%s call %s of run %s (by %s); the run goes on; follow it with: toolloop trace show%s %s\n",
		done, callID, runID, *by, cn.flags(), cli.ShellQuote(runID))
	return cli.ExitOK
}

// runs runs "toolloop runs --temporal": the server's toolloop runs, in the
// server's order, with their status (asked of a running workflow, read from a
// closed one's result).
func runs(ctx context.Context, k *cli.Kit, args []string) int {
	fs := flag.NewFlagSet("toolloop runs", flag.ContinueOnError)
	cn := addConnFlags(fs, false)
	status := fs.String("status", "", "list only runs with status `S`")
	limit := fs.Int("limit", 50, "list at most `N` runs")
	pos, err := k.ParseFlags(fs, args)
	if err != nil {
		return k.UsageError("runs", err, runsUsage)
	}
	if len(pos) > 0 {
		fmt.Fprintf(k.Stderr(), "toolloop runs: unexpected argument %q; filter with --status S\n", pos[0])
		return cli.ExitUsage
	}
	if *limit < 1 {
		fmt.Fprintf(k.Stderr(), "toolloop runs: --limit %d: want at least 1\n", *limit)
		return cli.ExitUsage
	}
	valid := []string{loop.RunningStatus}
	for _, s := range loop.Statuses() {
		valid = append(valid, string(s))
	}
	if *status != "" && !slices.Contains(valid, *status) {
		fmt.Fprintf(k.Stderr(), "toolloop runs: unknown status %q; want one of %s\n", *status, strings.Join(valid, ", "))
		return cli.ExitUsage
	}
	cl, err := cn.dial(ctx, k, slog.LevelError)
	if err != nil {
		return k.Fail("runs", err)
	}
	defer cl.Close()
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN_ID\tSTATUS\tSTEPS\tTOOL_CALLS\tTOKENS\tSTARTED\tPENDING")
	n := 0
	var token []byte
	for n < *limit {
		resp, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: cn.namespace, PageSize: int32(min(*limit, 100)), NextPageToken: token,
			Query: fmt.Sprintf("WorkflowType = '%s'", temporal.WorkflowName),
		})
		if err != nil {
			return k.Fail("runs", fmt.Errorf("listing the runs: %w", err))
		}
		// A running run's status is a query, answered by a worker (or
		// not, after a timeout): ask for a page's rows at once.
		rows := make([]row, len(resp.Executions))
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i, ex := range resp.Executions {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				rows[i] = runRow(ctx, cl, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId(), ex.GetStatus())
			})
		}
		wg.Wait()
		for i, ex := range resp.Executions {
			if n >= *limit {
				break
			}
			id, row := ex.GetExecution().GetWorkflowId(), rows[i]
			if *status != "" && row.status != *status {
				continue
			}
			n++
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, row.status, row.steps, row.calls, row.tokens,
				ex.GetStartTime().AsTime().UTC().Format(time.RFC3339), row.pending)
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			break
		}
	}
	if n == 0 {
		if *status != "" {
			fmt.Fprintf(k.Stdout(), "no runs with status %s on %s\n", *status, cn.addr)
		} else {
			fmt.Fprintf(k.Stdout(), "no runs on %s\n", cn.addr)
		}
		return cli.ExitOK
	}
	if err := tw.Flush(); err != nil {
		return k.Fail("runs", err)
	}
	if _, err := k.Stdout().Write(table.Bytes()); err != nil {
		return k.Fail("runs", err)
	}
	return cli.ExitOK
}

// row is one line of runs.
type row struct {
	status, steps, calls, tokens, pending string
}

// runRow reads a run's status: from a running workflow's status query (it
// needs a worker; without one the run shows as running), or from a closed
// one's output; a workflow that ended without one shows Temporal's status.
func runRow(ctx context.Context, cl client.Client, id, runID string, wf enumspb.WorkflowExecutionStatus) row {
	r := row{status: loop.RunningStatus, steps: "-", calls: "-", tokens: "-", pending: "-"}
	var pending []loop.Pending
	switch wf {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		st, err := liveStatus(ctx, cl, id)
		if err != nil {
			return r
		}
		r.status, pending = st.Status, st.Pending
		r.steps, r.calls, r.tokens = fmt.Sprint(st.Steps), fmt.Sprint(st.ToolCalls), fmt.Sprint(st.Usage.Total())
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		res, err := outputOf(ctx, cl, id, runID)
		if err != nil {
			r.status = workflowStatus(wf)
			return r
		}
		r.status, pending = string(res.Status), res.Pending
		r.steps, r.calls, r.tokens = fmt.Sprint(res.Steps), fmt.Sprint(res.ToolCalls), fmt.Sprint(res.Usage.Total())
	default:
		// Failed, terminated, timed out, continued as new: no output.
		r.status = workflowStatus(wf)
	}
	var parts []string
	for _, p := range pending {
		if p.Confirmation == nil {
			parts = append(parts, fmt.Sprintf("%s (%s)", p.CallID, p.Tool))
		}
	}
	if len(parts) > 0 {
		r.pending = strings.Join(parts, ", ")
	}
	return r
}

// workflowStatus names a workflow that ended without a run's output by
// Temporal's status: workflow_failed, workflow_terminated, ...
func workflowStatus(wf enumspb.WorkflowExecutionStatus) string {
	return "workflow_" + strings.ToLower(strings.TrimPrefix(wf.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

// traceCmd runs "toolloop trace show|diagnose --temporal RUN_ID" on the
// run's event log: a closed run's from its output, a running one's from
// the events query.
func traceCmd(ctx context.Context, k *cli.Kit, args []string) int {
	if len(args) == 0 || (args[0] != "show" && args[0] != "diagnose") {
		fmt.Fprintf(k.Stderr(), "toolloop trace: want show or diagnose: toolloop trace show|diagnose --temporal HOST:PORT RUN_ID\n")
		return cli.ExitUsage
	}
	sub := args[0]
	fs := flag.NewFlagSet("toolloop trace "+sub, flag.ContinueOnError)
	cn := addConnFlags(fs, false)
	width := fs.Int("width", 40, "show: width of the timeline's bars")
	asJSON := fs.Bool("json", false, "diagnose: findings as JSON lines")
	pos, err := k.ParseFlags(fs, args[1:])
	if err != nil {
		return k.UsageError("trace "+sub, err, traceUsage)
	}
	if len(pos) != 1 {
		fmt.Fprintf(k.Stderr(), "toolloop trace %s: want one RUN_ID (the workflow ID), got %d\n", sub, len(pos))
		return cli.ExitUsage
	}
	if *width < 10 || *width > 400 {
		fmt.Fprintf(k.Stderr(), "toolloop trace %s: --width %d: want 10 to 400\n", sub, *width)
		return cli.ExitUsage
	}
	cl, err := cn.dial(ctx, k, slog.LevelError)
	if err != nil {
		return k.Fail("trace "+sub, err)
	}
	defer cl.Close()
	id := pos[0]
	desc, err := cl.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return k.Fail("trace "+sub, cn.notFound(err, "run "+id))
	}
	var events []loop.Event
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		events, err = liveEvents(ctx, cl, id)
		if err != nil {
			return k.Fail("trace "+sub, fmt.Errorf("run %s is running and no worker answered for its log: %w", id, err))
		}
	} else {
		res, err := outputOf(ctx, cl, id, "")
		if err != nil {
			return k.Fail("trace "+sub, fmt.Errorf("run %s left no log: %w", id, err))
		}
		events = res.Events
	}
	return k.TraceEvents(sub, events, "run "+id+" on "+cn.addr, *width, *asJSON)
}

func runUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop run --temporal HOST:PORT --model M [flags] "prompt"

Starts a run as a workflow on the Temporal server, to be driven by the
workers of the task queue (toolloop worker), and waits until it stops, or
pauses for a person's confirmation; --detach prints its ID and returns at
once. The run ID is the workflow ID.

Flags:
  --temporal HOST:PORT   the server; --namespace NS, --task-queue Q as for the worker
  --model M              the model name the workers' provider knows
  --id ID                the workflow ID (default toolloop- and random hex)
  --detach               do not wait
  --system TEXT          a system prompt
  --identity NAME        who the run acts for (default cli)
  --confirm-timeout D    how long a paused run waits for answers (default: for ever)
  --max-steps N, --deadline D, --tool-timeout D, --max-tool-calls N,
  --max-tokens N, --max-cost USD, --prices FILE   budgets, as for toolloop run

Exit status: 0 for a final answer or a pause for confirmation, 1 for any
other stop, 2 for a usage error.
`)
}

func decideUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop approve|deny --temporal HOST:PORT RUN_ID CALL_ID --by NAME [--note TEXT]

Answers a call a run on Temporal waits on (the workflow's confirm update).
The workflow checks the answer first: a call that is not pending is refused
and nothing is recorded. Once every pending call is answered, the run goes
on by itself.
`)
}

func runsUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop runs --temporal HOST:PORT [--status S] [--limit N]

Lists the toolloop runs on the Temporal server, in the order the server's
visibility store gives them (on the dev server, not strictly by time): status, model
turns, tool calls, tokens, start time and the calls awaiting confirmation.
A running run's status is asked of a worker; without one it shows as running.
`)
}

func traceUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop trace show|diagnose --temporal HOST:PORT RUN_ID [--width N] [--json]

Renders (show) or checks (diagnose) the event log of a run on the Temporal
server, as toolloop trace does for a log file: the same log, the same output.
`)
}
