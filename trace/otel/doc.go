// Package otel exports runs as OpenTelemetry spans that follow the GenAI
// semantic conventions (open-telemetry/semantic-conventions-genai:
// docs/gen-ai/gen-ai-agent-spans.md and gen-ai-spans.md, status
// Development).
//
// It takes an OpenTelemetry TracerProvider the caller configured
// (exporter, sampler, resource) and Options, and only emits spans: it
// never changes an event or the run, reads no environment and installs no
// global provider. Runs it did not see start (a resumed run) are ignored.
// Of the library's packages it alone imports OpenTelemetry, so a program
// that does not export spans links none of it.
//
// NewObserver returns a loop.Observer; attach it with loop.Config.Observer.
// Spans are derived from the run's events (trace.Timeline) and carry the
// times the events record, so each span has its real start and end: the
// calls of a parallel stage overlap.
//
// The span tree of a run:
//
//	invoke_agent [AGENT]          INTERNAL  the run; child of the span in the run's context
//	  chat MODEL                  CLIENT    one model request
//	  budget_check                INTERNAL  the decider's check of steps, tokens, cost, tool calls, deadline
//	  validate_calls              INTERNAL  schema validation of a turn's calls
//	  authorize_calls             INTERNAL  the policy's decisions (one event per call)
//	  await_confirmation          INTERNAL  the wait for a human's answer (resumed runs)
//	  plan_batch                  INTERNAL  the planner's decision table (one event per row)
//	  execute_stage               INTERNAL  one stage of the plan
//	    execute_tool TOOL         INTERNAL  one call, from the executor's start, for its duration
//	  append_results              INTERNAL  the batch's results entering the history
//	  edit_context                INTERNAL  a clearing of old tool results (one event per result)
//	  chat SUMMARY_MODEL          CLIENT    a compaction's summary request (toolloop.context.reason=compaction)
//
// Attributes from the GenAI conventions: gen_ai.operation.name,
// gen_ai.provider.name, gen_ai.agent.name, gen_ai.conversation.id (the
// session ID), gen_ai.request.model, gen_ai.response.id,
// gen_ai.response.model, gen_ai.response.finish_reasons,
// gen_ai.usage.input_tokens, gen_ai.usage.output_tokens,
// gen_ai.usage.cache_read.input_tokens,
// gen_ai.usage.cache_creation.input_tokens (cache writes),
// gen_ai.usage.reasoning.output_tokens (these three on chat spans and, as
// the run's totals, on the run span), gen_ai.tool.name,
// gen_ai.tool.call.id, gen_ai.tool.type, and, only with full content opted
// in (trace.RedactOptions.FullContent), gen_ai.tool.call.arguments and
// gen_ai.tool.call.result, masked; error.type from the general
// conventions. toolloop's own attributes are named toolloop.*: the run's
// identity, versions, budgets and outcome (toolloop.run.id,
// toolloop.prompt.version, toolloop.tools.version, toolloop.budget.*,
// toolloop.status, toolloop.detail), toolloop.step and toolloop.seq on
// every stage, toolloop.tool.arguments (a summary: keys, types, lengths),
// the policy decision (toolloop.policy.*), the plan (toolloop.plan.mode,
// toolloop.stage), retries and idempotency (toolloop.tool.attempts,
// toolloop.tool.retries, toolloop.idempotency.key, ...), and
// toolloop.response.dropped_state on a chat span whose model client left
// another provider's state out of the request (the conventions have no
// attribute for it). Context edits have no convention either: an
// edit_context span and a summary request's span carry toolloop.context.*
// (the reason, the loop's estimate of the next request before and after,
// the calls cleared or the messages summarized, and the summary's text
// only with full content opted in); the summary request's usage is
// gen_ai.usage.* as for any model request, and counts in the run's totals.
//
// error.type is a failure kind (model, canceled, deadline), a tool's error
// kind (timeout, not_found, ...), a budget's or the run's stop status, or
// "denied" for a confirmation a person refused.
package otel
