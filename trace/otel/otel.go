package otel

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/trace"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/toolloop/toolloop/trace/otel"

// Options configure an Observer. Nil means the defaults.
type Options struct {
	// ProviderName is gen_ai.provider.name: "openai", "anthropic", ...; the
	// sandbox's scripted model uses "toolloop.scripted". Default "unknown".
	ProviderName string
	// AgentName is gen_ai.agent.name; it also names the run span,
	// "invoke_agent NAME".
	AgentName string
	// Redactor decides what of arguments, results and messages may be
	// recorded; nil means trace.NewRedactor(nil): summaries only.
	Redactor *trace.Redactor
}

// Observer turns the events of runs into OpenTelemetry spans. It may watch
// concurrent runs, as long as each has a context of its own (a run with a
// deadline, the default, always has): the runner passes every event of a
// run with the run's context, which is how events are matched to runs.
// Events of a run it did not see start (a resumed run) are ignored.
type Observer struct {
	tracer oteltrace.Tracer
	prov   attribute.KeyValue
	agent  string
	red    *trace.Redactor

	mu   sync.Mutex
	runs map[context.Context]*run
}

// NewObserver returns an Observer creating spans with tp; opts may be nil.
func NewObserver(tp oteltrace.TracerProvider, opts *Options) *Observer {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ProviderName == "" {
		o.ProviderName = "unknown"
	}
	if o.Redactor == nil {
		o.Redactor = trace.NewRedactor(nil)
	}
	return &Observer{
		tracer: tp.Tracer(ScopeName),
		prov:   keyProvider.String(o.ProviderName),
		agent:  o.AgentName,
		red:    o.Redactor,
		runs:   map[context.Context]*run{},
	}
}

// run is one run's span state. Its events arrive one at a time, from the
// goroutine that drives the run; a run resumed later may be driven from
// another, hence the lock.
type run struct {
	mu        sync.Mutex
	tl        trace.Timeline
	root      oteltrace.Span
	rootCtx   context.Context
	recording bool
	model     string
	session   string
	// summaryModel is the model a compaction's summary request goes to.
	summaryModel string
}

// Observe turns ev into spans.
func (o *Observer) Observe(ctx context.Context, ev *loop.Event) {
	o.mu.Lock()
	r := o.runs[ctx]
	if ev.Kind == loop.Started {
		if r != nil && r.root != nil {
			r.root.End() // a run that never stopped; its context was reused
		}
		r = &run{}
		o.runs[ctx] = r
	} else if ev.Kind == loop.Stopped && r != nil {
		delete(o.runs, ctx)
	}
	o.mu.Unlock()
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Kind == loop.Started {
		o.startRun(ctx, r, ev)
		if !r.recording {
			// Nobody records this run: derive no spans at all, which keeps
			// its cost near zero with a no-op or unsampling provider.
			return
		}
	} else if !r.recording {
		if ev.Kind == loop.Stopped && r.root != nil {
			r.root.End(oteltrace.WithTimestamp(ev.At))
		}
		return
	}
	spans := r.tl.Add(ev)
	var stageCtx context.Context
	stageID := 0
	for i := range spans {
		s := &spans[i]
		switch {
		case s.Kind == trace.SpanRun && s.Open():
			// Started: the span was started above.
		case s.Kind == trace.SpanRun:
			o.endRun(r, s)
		default:
			parent := r.rootCtx
			if s.Parent == stageID && stageCtx != nil {
				parent = stageCtx
			}
			sp := o.child(parent, r, s)
			if s.Kind == trace.SpanStage || s.Kind == trace.SpanCompensate {
				stageID, stageCtx = s.ID, oteltrace.ContextWithSpan(r.rootCtx, sp)
			}
		}
	}
}

// ObserveResume implements loop.ResumeObserver: the resumed part of a run
// gets a root span of its own (marked toolloop.resumed), and the stored log
// is fed to the run's timeline without producing spans, so the spans that
// follow know where the run stood.
func (o *Observer) ObserveResume(ctx context.Context, history []loop.Event) {
	if len(history) == 0 || history[0].Kind != loop.Started {
		return
	}
	r := &run{}
	o.mu.Lock()
	if old := o.runs[ctx]; old != nil && old.root != nil {
		old.root.End()
	}
	o.runs[ctx] = r
	o.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	start := history[0]
	start.At = history[len(history)-1].At
	o.startRun(ctx, r, &start)
	if r.root != nil {
		r.root.SetAttributes(keyResumed.Bool(true), keyResumedAfterSeq.Int(len(history)))
	}
	for i := range history {
		r.tl.Add(&history[i])
	}
}

func (o *Observer) startRun(ctx context.Context, r *run, ev *loop.Event) {
	info := ev.Start
	if info == nil {
		return
	}
	r.model, r.session, r.summaryModel = info.Model, info.SessionID, info.Model
	if c := info.Context; c != nil && c.SummaryModel != "" {
		r.summaryModel = c.SummaryModel
	}
	name := string(trace.SpanRun)
	if o.agent != "" {
		name += " " + o.agent
	}
	b := info.Budgets
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs, keyOperation.String("invoke_agent"), o.prov,
		keyRunID.String(info.RunID), keyToolsVersion.String(info.ToolsVersion),
		keyMaxSteps.Int(b.MaxSteps), keyMaxToolCalls.Int(b.MaxToolCalls))
	attrs = appendStr(attrs, keyAgentName, o.agent)
	attrs = appendStr(attrs, keyConversation, info.SessionID)
	attrs = appendStr(attrs, keyRequestModel, info.Model)
	attrs = appendStr(attrs, keyPromptVersion, info.PromptVersion)
	attrs = appendStr(attrs, keyIdentity, info.Identity.Name)
	if len(info.Identity.Roles) > 0 {
		attrs = append(attrs, keyIdentityRoles.StringSlice(info.Identity.Roles))
	}
	if b.Deadline > 0 {
		attrs = append(attrs, keyDeadline.Float64(b.Deadline.Seconds()))
	}
	if b.MaxTokens > 0 {
		attrs = append(attrs, keyMaxTokens.Int64(b.MaxTokens))
	}
	if b.MaxCost > 0 {
		attrs = append(attrs, keyMaxCost.Float64(b.MaxCost))
	}
	r.rootCtx, r.root = o.tracer.Start(ctx, name, oteltrace.WithTimestamp(ev.At),
		oteltrace.WithSpanKind(oteltrace.SpanKindInternal), oteltrace.WithAttributes(attrs...))
	r.recording = r.root.IsRecording()
}

func (o *Observer) endRun(r *run, s *trace.Span) {
	if r.root == nil {
		return
	}
	info := s.Run
	attrs := []attribute.KeyValue{
		keyStatus.String(string(info.Status)), keyDetail.String(o.red.Diagnostic(info.Detail)),
		keySteps.Int(info.Steps), keyToolCalls.Int(info.ToolCalls),
		keyInputTokens.Int64(info.Usage.InputTokens), keyOutputTokens.Int64(info.Usage.OutputTokens),
	}
	attrs = usageDetail(attrs, info.Usage)
	attrs = o.writesAttrs(attrs, info.Writes)
	if info.Cost > 0 {
		attrs = append(attrs, keyCost.Float64(info.Cost))
	}
	if len(info.Pending) > 0 {
		ids := make([]string, len(info.Pending))
		for i, p := range info.Pending {
			ids[i] = p.CallID
		}
		attrs = append(attrs, keyPending.StringSlice(ids))
	}
	if s.Error != "" {
		attrs = append(attrs, keyErrorType.String(s.Error))
		r.root.SetStatus(codes.Error, o.red.Diagnostic(info.Detail))
	}
	r.root.SetAttributes(attrs...)
	r.root.End(oteltrace.WithTimestamp(s.End))
}

// child creates and ends the span of one stage.
func (o *Observer) child(parent context.Context, r *run, s *trace.Span) oteltrace.Span {
	kind := oteltrace.SpanKindInternal
	if s.Kind == trace.SpanChat || s.Kind == trace.SpanSummarize {
		kind = oteltrace.SpanKindClient
	}
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs, keyStep.Int(s.Step), keySeq.Int(s.Seq))
	var status string
	switch s.Kind {
	case trace.SpanChat:
		attrs, status = o.chatAttrs(attrs, r, s)
	case trace.SpanSummarize:
		attrs, status = o.summaryAttrs(attrs, r, s)
	case trace.SpanEditContext:
		attrs = o.editAttrs(attrs, s.Event.Edit)
	case trace.SpanTool:
		attrs, status = o.toolAttrs(attrs, s)
	case trace.SpanStage:
		attrs = append(attrs, keyStage.Int(s.Stage), keyPlanMode.String(string(s.Mode)),
			keyStageCalls.Int(len(s.Event.Outcomes)))
		if f := s.Event.Failure; f != nil {
			status = o.red.Diagnostic(f.Message)
		}
	case trace.SpanValidate, trace.SpanAuthorize, trace.SpanPlan:
		attrs = append(attrs, keyCalls.Int(len(s.Calls)))
		if s.Kind == trace.SpanAuthorize {
			attrs = verdictCounts(attrs, s.Calls)
		}
		if s.Kind == trace.SpanPlan && s.Event.Plan != nil {
			attrs = append(attrs, keyPlanStages.Int(len(s.Event.Plan.Stages)))
		}
	case trace.SpanAppend:
		attrs = appendResults(attrs, s.Calls)
	case trace.SpanCompensate:
		attrs = o.compensateAttrs(attrs, s)
	case trace.SpanUndo:
		attrs, status = o.undoAttrs(attrs, s)
	case trace.SpanBudget:
		attrs = budgetAttrs(attrs, s.Budget)
		status = string(s.Budget.Status)
	case trace.SpanConfirm:
		if c := s.Event.Confirmation; c != nil {
			attrs = append(attrs, keyToolCallID.String(c.CallID), keyConfirmApproved.Bool(c.Approved),
				keyConfirmBy.String(c.By))
			attrs = appendStr(attrs, keyConfirmNote, o.red.Diagnostic(c.Note))
			if len(s.Calls) == 1 {
				attrs = append(attrs, keyToolName.String(s.Calls[0].Tool))
			}
		}
	}
	if s.Error != "" {
		attrs = append(attrs, keyErrorType.String(s.Error))
		if status == "" {
			status = s.Error
		}
	}
	_, sp := o.tracer.Start(parent, s.Name, oteltrace.WithTimestamp(s.Start), oteltrace.WithSpanKind(kind),
		oteltrace.WithAttributes(attrs...))
	switch s.Kind {
	case trace.SpanValidate:
		o.validateEvents(sp, s)
	case trace.SpanAuthorize:
		o.policyEvents(sp, s)
	case trace.SpanPlan:
		o.planEvents(sp, s)
	case trace.SpanEditContext:
		clearedEvents(sp, s)
	}
	if s.Error != "" {
		sp.SetStatus(codes.Error, status)
	}
	sp.End(oteltrace.WithTimestamp(s.End))
	return sp
}

func (o *Observer) chatAttrs(attrs []attribute.KeyValue, r *run, s *trace.Span) ([]attribute.KeyValue, string) {
	ev := s.Event
	attrs = append(attrs, keyOperation.String("chat"), o.prov)
	attrs = appendStr(attrs, keyRequestModel, r.model)
	attrs = appendStr(attrs, keyConversation, r.session)
	if ev.Attempts > 0 {
		attrs = append(attrs, keyModelAttempts.Int(ev.Attempts))
	}
	if resp := ev.Response; resp != nil {
		u := resp.Usage
		attrs = append(attrs, keyInputTokens.Int64(u.InputTokens), keyOutputTokens.Int64(u.OutputTokens),
			keyResponseCalls.Int(len(resp.Message.ToolCalls)))
		attrs = appendStr(attrs, keyResponseID, resp.ID)
		attrs = appendStr(attrs, keyResponseModel, resp.Model)
		if resp.FinishReason != "" {
			attrs = append(attrs, keyFinishReasons.StringSlice([]string{resp.FinishReason}))
		}
		attrs = usageDetail(attrs, u)
		if resp.DroppedState > 0 {
			attrs = append(attrs, keyDroppedState.Int(resp.DroppedState))
		}
	}
	if f := ev.Failure; f != nil {
		return attrs, o.red.Diagnostic(f.Message)
	}
	return attrs, ""
}

// summaryAttrs describes a compaction's summary request: a chat request
// to the summary model, with its usage (which the run counts toward its
// budgets), and the edit it made.
func (o *Observer) summaryAttrs(attrs []attribute.KeyValue, r *run, s *trace.Span) ([]attribute.KeyValue, string) {
	ev := s.Event
	attrs = append(attrs, keyOperation.String("chat"), o.prov)
	attrs = appendStr(attrs, keyRequestModel, r.summaryModel)
	attrs = appendStr(attrs, keyConversation, r.session)
	if ev.Attempts > 0 {
		attrs = append(attrs, keyModelAttempts.Int(ev.Attempts))
	}
	if resp := ev.Response; resp != nil {
		u := resp.Usage
		attrs = append(attrs, keyInputTokens.Int64(u.InputTokens), keyOutputTokens.Int64(u.OutputTokens))
		attrs = appendStr(attrs, keyResponseID, resp.ID)
		attrs = appendStr(attrs, keyResponseModel, resp.Model)
		attrs = usageDetail(attrs, u)
	}
	if ev.Edit == nil {
		// A summary request that failed made no edit.
		attrs = append(attrs, keyContextReason.String(loop.EditCompaction))
	}
	attrs = o.editAttrs(attrs, ev.Edit)
	if f := ev.Failure; f != nil {
		return attrs, o.red.Diagnostic(f.Message)
	}
	return attrs, ""
}

// editAttrs describes a context edit: why, the next request's estimate
// before and after, and the results it cleared or the messages it
// summarized (the summary itself only with full content opted in).
func (o *Observer) editAttrs(attrs []attribute.KeyValue, e *loop.ContextEdit) []attribute.KeyValue {
	if e == nil {
		return attrs
	}
	attrs = append(attrs, keyContextReason.String(e.Reason), keyContextBefore.Int(e.TokensBefore), keyContextAfter.Int(e.TokensAfter))
	if e.Reason == loop.EditCompaction {
		attrs = append(attrs, keyContextFrom.Int(e.From), keyContextThrough.Int(e.Through), keyContextSummaryBytes.Int(len(e.Summary)))
		if o.red.FullContent() {
			attrs = append(attrs, keyContextSummary.String(o.red.Text(e.Summary)))
		}
		return attrs
	}
	ids := make([]string, len(e.Cleared))
	for i, c := range e.Cleared {
		ids[i] = c.CallID
	}
	return append(attrs, keyContextCleared.Int(len(e.Cleared)), keyContextClearedIDs.StringSlice(ids))
}

// clearedEvents records each tool result a clearing replaced by its note.
func clearedEvents(sp oteltrace.Span, s *trace.Span) {
	if !sp.IsRecording() || s.Event.Edit == nil {
		return
	}
	for _, c := range s.Event.Edit.Cleared {
		sp.AddEvent("cleared_result", oteltrace.WithTimestamp(s.End), oteltrace.WithAttributes(
			keyToolCallID.String(c.CallID), keyToolName.String(c.Tool), keyContextResultTokens.Int(c.Tokens)))
	}
}

func (o *Observer) toolAttrs(attrs []attribute.KeyValue, s *trace.Span) ([]attribute.KeyValue, string) {
	attrs = append(attrs, keyOperation.String("execute_tool"), keyToolType.String("function"),
		keyStage.Int(s.Stage), keyPlanMode.String(string(s.Mode)))
	if len(s.Calls) != 1 {
		return attrs, ""
	}
	c := &s.Calls[0]
	out := &c.Outcome
	res := &out.Result
	attrs = append(attrs, keyToolName.String(c.Tool), keyToolCallID.String(c.ID),
		keyToolArgs.String(o.red.Summary(c.Tool, c.Arguments)),
		keyToolStatus.String(string(res.Status)), keyToolAttempts.Int(out.Attempts),
		keyToolRetries.Int(max(out.Attempts-1, 0)))
	if c.Planned {
		attrs = append(attrs, keyToolEffect.String(string(c.Row.Effect)))
	}
	if res.ErrorKind != "" {
		attrs = append(attrs, keyToolErrorKind.String(string(res.ErrorKind)))
	}
	if c.Decision.Verdict != "" {
		attrs = append(attrs, keyPolicyVerdict.String(string(c.Decision.Verdict)), keyPolicyRule.String(c.Decision.Rule))
	}
	if cf := c.Confirmation; cf != nil {
		attrs = append(attrs, keyConfirmApproved.Bool(cf.Approved), keyConfirmBy.String(cf.By))
	}
	attrs = appendStr(attrs, keyIdempotency, out.IdempotencyKey)
	for _, f := range []struct {
		k  attribute.Key
		on bool
	}{{keyToolTimedOut, out.TimedOut}, {keyToolReplayed, out.Replayed}, {keyToolReconciled, out.Reconciled},
		{keyToolUnknown, out.OutcomeUnknown}} {
		if f.on {
			attrs = append(attrs, f.k.Bool(true))
		}
	}
	if o.red.FullContent() {
		attrs = append(attrs, keyCallArgs.String(string(o.red.Arguments(c.Tool, c.Arguments))))
		if res.Status == llm.StatusOK {
			attrs = append(attrs, keyCallResult.String(string(o.red.Result(c.Tool, res.Content))))
		}
	}
	if res.Status == llm.StatusError {
		msg := out.Err
		if msg == "" {
			msg = string(res.ErrorKind)
		}
		return attrs, o.red.Diagnostic(msg)
	}
	return attrs, ""
}

// verdictCounts counts the policy's verdicts.
func verdictCounts(attrs []attribute.KeyValue, calls []trace.Call) []attribute.KeyValue {
	var allow, other int
	for _, c := range calls {
		switch c.Decision.Verdict {
		case "":
		case policy.Allow:
			allow++
		default:
			other++
		}
	}
	return append(attrs, keyAllowed.Int(allow), keyNotAllowed.Int(other))
}

func appendResults(attrs []attribute.KeyValue, calls []trace.Call) []attribute.KeyValue {
	var ok, failed, skipped int
	for _, c := range calls {
		switch c.Result.Status {
		case llm.StatusOK:
			ok++
		case llm.StatusError:
			failed++
		case llm.StatusSkipped:
			skipped++
		}
	}
	return append(attrs, keyResults.Int(ok+failed+skipped), keyResultsOK.Int(ok), keyResultsError.Int(failed),
		keyResultsSkipped.Int(skipped))
}

func budgetAttrs(attrs []attribute.KeyValue, b *trace.BudgetCheck) []attribute.KeyValue {
	outcome := "ok"
	if !b.Passed() {
		outcome = string(b.Status)
	}
	attrs = append(attrs, keyBudgetPoint.String(b.Point), keyBudgetOutcome.String(outcome),
		keySteps.Int(b.Steps), keyMaxSteps.Int(b.MaxSteps), keyToolCalls.Int(b.ToolCalls),
		keyTokens.Int64(b.Tokens), keyElapsed.Float64(b.Elapsed.Seconds()))
	if b.Requested > 0 {
		attrs = append(attrs, keyRequested.Int(b.Requested))
	}
	if b.MaxToolCalls > 0 {
		attrs = append(attrs, keyMaxToolCalls.Int(b.MaxToolCalls))
	}
	if b.MaxTokens > 0 {
		attrs = append(attrs, keyMaxTokens.Int64(b.MaxTokens))
	}
	if b.MaxCost > 0 {
		attrs = append(attrs, keyCost.Float64(b.Cost), keyMaxCost.Float64(b.MaxCost))
	}
	if b.Deadline > 0 {
		attrs = append(attrs, keyDeadline.Float64(b.Deadline.Seconds()))
	}
	return attrs
}

// validateEvents records each call that failed validation.
func (o *Observer) validateEvents(sp oteltrace.Span, s *trace.Span) {
	if !sp.IsRecording() {
		return
	}
	for _, c := range s.Calls {
		switch {
		case !c.Validated:
		case !c.Check.Known:
			sp.AddEvent("unknown_tool", oteltrace.WithTimestamp(s.End), oteltrace.WithAttributes(
				keyToolCallID.String(c.ID), keyToolName.String(c.Tool)))
		case c.Check.Problem != "":
			sp.AddEvent("invalid_arguments", oteltrace.WithTimestamp(s.End), oteltrace.WithAttributes(
				keyToolCallID.String(c.ID), keyToolName.String(c.Tool), keyToolArgs.String(o.red.Summary(c.Tool, c.Arguments)),
				keyProblem.String(o.red.Diagnostic(c.Check.Problem))))
		}
	}
}

// policyEvents records the policy's decision on each call it did not
// allow outright; an allowed call's execute_tool span carries its verdict
// and rule.
func (o *Observer) policyEvents(sp oteltrace.Span, s *trace.Span) {
	if !sp.IsRecording() {
		return
	}
	for _, c := range s.Calls {
		d := c.Decision
		if d.Verdict == "" || d.Verdict == policy.Allow {
			continue
		}
		attrs := []attribute.KeyValue{keyToolCallID.String(c.ID), keyToolName.String(c.Tool),
			keyToolArgs.String(o.red.Summary(c.Tool, c.Arguments)), keyPolicyVerdict.String(string(d.Verdict)),
			keyPolicyRule.String(d.Rule), keyPolicyReason.String(o.red.Diagnostic(d.Reason))}
		sp.AddEvent("policy_decision", oteltrace.WithTimestamp(s.End), oteltrace.WithAttributes(attrs...))
		if d.Verdict == policy.Confirm {
			sp.AddEvent("confirmation_required", oteltrace.WithTimestamp(s.End), oteltrace.WithAttributes(attrs[:2]...))
		}
	}
}

// planEvents records the planner's decision table, one event per row.
func (o *Observer) planEvents(sp oteltrace.Span, s *trace.Span) {
	if !sp.IsRecording() || s.Event.Plan == nil {
		return
	}
	for _, row := range s.Event.Plan.Table {
		attrs := []attribute.KeyValue{keyToolCallID.String(row.CallID), keyToolName.String(row.Tool),
			keyToolEffect.String(string(row.Effect)), keyStage.Int(row.Stage), keyPlanMode.String(string(row.Mode)),
			keyPlanReason.String(row.Reason)}
		if len(row.Resources) > 0 {
			res := make([]string, len(row.Resources))
			for i, r := range row.Resources {
				res[i] = o.red.Diagnostic(r)
			}
			attrs = append(attrs, keyPlanResources.StringSlice(res))
		}
		sp.AddEvent("plan_row", oteltrace.WithTimestamp(s.End), oteltrace.WithAttributes(attrs...))
	}
}

func appendStr(attrs []attribute.KeyValue, k attribute.Key, v string) []attribute.KeyValue {
	if v == "" {
		return attrs
	}
	return append(attrs, k.String(v))
}

// usageDetail adds the parts of the input and output tokens that the
// conventions count apart: cache reads and writes, reasoning. Each is
// part of gen_ai.usage.input_tokens or output_tokens, as the conventions
// say it should be; zero counts are left out.
func usageDetail(attrs []attribute.KeyValue, u llm.Usage) []attribute.KeyValue {
	for _, a := range []struct {
		key attribute.Key
		n   int64
	}{{keyCacheRead, u.CachedInputTokens}, {keyCacheWrite, u.CacheWriteTokens}, {keyReasoning, u.ReasoningTokens}} {
		if a.n > 0 {
			attrs = append(attrs, a.key.Int64(a.n))
		}
	}
	return attrs
}

// Attribute keys. The gen_ai.* and error.type keys are those of the
// OpenTelemetry semantic conventions (the GenAI registry moved out of the
// Go semconv packages after v1.41.0, so they are spelt out here).
const (
	keyOperation     attribute.Key = "gen_ai.operation.name"
	keyProvider      attribute.Key = "gen_ai.provider.name"
	keyAgentName     attribute.Key = "gen_ai.agent.name"
	keyConversation  attribute.Key = "gen_ai.conversation.id"
	keyRequestModel  attribute.Key = "gen_ai.request.model"
	keyResponseID    attribute.Key = "gen_ai.response.id"
	keyResponseModel attribute.Key = "gen_ai.response.model"
	keyFinishReasons attribute.Key = "gen_ai.response.finish_reasons"
	keyInputTokens   attribute.Key = "gen_ai.usage.input_tokens"
	keyOutputTokens  attribute.Key = "gen_ai.usage.output_tokens"
	keyCacheRead     attribute.Key = "gen_ai.usage.cache_read.input_tokens"
	keyCacheWrite    attribute.Key = "gen_ai.usage.cache_creation.input_tokens"
	keyReasoning     attribute.Key = "gen_ai.usage.reasoning.output_tokens"
	keyToolName      attribute.Key = "gen_ai.tool.name"
	keyToolCallID    attribute.Key = "gen_ai.tool.call.id"
	keyToolType      attribute.Key = "gen_ai.tool.type"
	keyCallArgs      attribute.Key = "gen_ai.tool.call.arguments"
	keyCallResult    attribute.Key = "gen_ai.tool.call.result"
	keyErrorType     attribute.Key = "error.type"

	keyRunID           attribute.Key = "toolloop.run.id"
	keyResumed         attribute.Key = "toolloop.resumed"
	keyResumedAfterSeq attribute.Key = "toolloop.resumed.after_seq"
	keyPromptVersion   attribute.Key = "toolloop.prompt.version"
	keyToolsVersion    attribute.Key = "toolloop.tools.version"
	keyIdentity        attribute.Key = "toolloop.identity.name"
	keyIdentityRoles   attribute.Key = "toolloop.identity.roles"
	keyMaxSteps        attribute.Key = "toolloop.budget.max_steps"
	keyMaxToolCalls    attribute.Key = "toolloop.budget.max_tool_calls"
	keyMaxTokens       attribute.Key = "toolloop.budget.max_tokens"
	keyMaxCost         attribute.Key = "toolloop.budget.max_cost"
	keyDeadline        attribute.Key = "toolloop.budget.deadline"
	keyBudgetPoint     attribute.Key = "toolloop.budget.point"
	keyBudgetOutcome   attribute.Key = "toolloop.budget.outcome"
	keyStatus          attribute.Key = "toolloop.status"
	keyDetail          attribute.Key = "toolloop.detail"
	keySteps           attribute.Key = "toolloop.steps"
	keyToolCalls       attribute.Key = "toolloop.tool_calls"
	keyRequested       attribute.Key = "toolloop.tool_calls.requested"
	keyTokens          attribute.Key = "toolloop.tokens"
	keyCost            attribute.Key = "toolloop.cost"
	keyElapsed         attribute.Key = "toolloop.elapsed"
	keyPending         attribute.Key = "toolloop.pending.call_ids"
	keyStep            attribute.Key = "toolloop.step"
	keySeq             attribute.Key = "toolloop.seq"
	keyModelAttempts   attribute.Key = "toolloop.model.attempts"
	keyResponseCalls   attribute.Key = "toolloop.response.tool_calls"
	// The GenAI conventions have no attribute for provider state an
	// adapter left out of a request (llm.Response.DroppedState), so it is
	// toolloop's own.
	keyDroppedState attribute.Key = "toolloop.response.dropped_state"
	keyCalls        attribute.Key = "toolloop.calls"
	// Context edits (clearings and compactions) have no GenAI convention:
	// toolloop's own. The estimates are the loop's, in tokens.
	keyContextReason       attribute.Key = "toolloop.context.reason"
	keyContextBefore       attribute.Key = "toolloop.context.tokens_before"
	keyContextAfter        attribute.Key = "toolloop.context.tokens_after"
	keyContextCleared      attribute.Key = "toolloop.context.cleared"
	keyContextClearedIDs   attribute.Key = "toolloop.context.cleared.call_ids"
	keyContextResultTokens attribute.Key = "toolloop.context.result_tokens"
	keyContextFrom         attribute.Key = "toolloop.context.summarized.from"
	keyContextThrough      attribute.Key = "toolloop.context.summarized.through"
	keyContextSummaryBytes attribute.Key = "toolloop.context.summary.bytes"
	keyContextSummary      attribute.Key = "toolloop.context.summary"
	keyProblem             attribute.Key = "toolloop.validation.problem"
	keyPolicyVerdict       attribute.Key = "toolloop.policy.verdict"
	keyPolicyRule          attribute.Key = "toolloop.policy.rule"
	keyPolicyReason        attribute.Key = "toolloop.policy.reason"
	keyAllowed             attribute.Key = "toolloop.policy.allowed"
	keyNotAllowed          attribute.Key = "toolloop.policy.not_allowed"
	keyConfirmApproved     attribute.Key = "toolloop.confirmation.approved"
	keyConfirmBy           attribute.Key = "toolloop.confirmation.by"
	keyConfirmNote         attribute.Key = "toolloop.confirmation.note"
	keyPlanStages          attribute.Key = "toolloop.plan.stages"
	keyPlanMode            attribute.Key = "toolloop.plan.mode"
	keyPlanReason          attribute.Key = "toolloop.plan.reason"
	keyPlanResources       attribute.Key = "toolloop.plan.resources"
	keyStage               attribute.Key = "toolloop.stage"
	keyStageCalls          attribute.Key = "toolloop.stage.calls"
	keyToolArgs            attribute.Key = "toolloop.tool.arguments"
	keyToolStatus          attribute.Key = "toolloop.tool.status"
	keyToolErrorKind       attribute.Key = "toolloop.tool.error_kind"
	keyToolEffect          attribute.Key = "toolloop.tool.effect"
	keyToolAttempts        attribute.Key = "toolloop.tool.attempts"
	keyToolRetries         attribute.Key = "toolloop.tool.retries"
	keyToolTimedOut        attribute.Key = "toolloop.tool.timed_out"
	keyToolReplayed        attribute.Key = "toolloop.tool.replayed"
	keyToolReconciled      attribute.Key = "toolloop.tool.reconciled"
	keyToolUnknown         attribute.Key = "toolloop.tool.outcome_unknown"
	keyIdempotency         attribute.Key = "toolloop.idempotency.key"
	keyResults             attribute.Key = "toolloop.results"
	keyResultsOK           attribute.Key = "toolloop.results.ok"
	keyResultsError        attribute.Key = "toolloop.results.error"
	keyResultsSkipped      attribute.Key = "toolloop.results.skipped"
)

var _ loop.Observer = (*Observer)(nil)
