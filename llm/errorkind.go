package llm

// ErrorKind classifies a failure: a tool call's (ToolResult.ErrorKind,
// which the model reads and the loop uses to choose between "send back"
// and "stop") or a model request's (Error.Kind, which tells the loop
// whether another attempt can help).
//
// It is the one vocabulary of failures in toolloop, for both. A failure
// that means the same on both sides (the service at the other end is
// rate limiting, down or slow) has one value and one name, so that a log,
// a trace or a retry rule reads one list; the groups below say where each
// kind may appear. The type does not stop a kind from the wrong group (a
// tool result of kind authentication): nothing in toolloop makes one, and
// a type for each side would buy that check with two names for each of
// rate_limited, unavailable and timeout.
//
// A kind's value is its wire form: it is written into run logs, traces,
// Temporal histories and what the model reads, so a value never changes
// once released (recorded runs must still decode and replay). Its Go
// name is the value in CamelCase after "Kind". ErrX names are kept for
// error values (errors.Is targets); a kind is not one.
type ErrorKind string

// Kinds shared by tool calls and model requests: the service at the other
// end (a tool's backend, the model's provider) is overloaded, down or
// slow. They mean the same on both sides, so each is one value. A later
// attempt may not meet them: a model request of any of the three is
// retried (Error.Retryable), a tool call of the first two too
// (tool.Retryable), while a tool's timeout goes by its OnTimeout policy.
const (
	KindRateLimited ErrorKind = "rate_limited"
	KindUnavailable ErrorKind = "unavailable"
	// KindTimeout is a tool call or model request that did not answer
	// within its timeout.
	KindTimeout ErrorKind = "timeout"
)

// Kinds of a tool call's result that go back to the model as a
// recoverable failure it can act on.
const (
	KindNotFound         ErrorKind = "not_found"
	KindInvalidArguments ErrorKind = "invalid_arguments"
	KindNeedsInput       ErrorKind = "needs_input"
	KindInternal         ErrorKind = "internal"
	// KindToolError is a failure the tool reported without saying which
	// kind: an MCP server's result marked IsError, which covers anything
	// from "no such file" to "the upstream API timed out". Since another
	// attempt may or may not cure it, it is neither retryable
	// (tool.Retryable: the executor does not repeat a call that ran, which
	// may be a write, behind the model's back) nor deterministic
	// (tool.Deterministic: a model that tries again later is not declared
	// spinning over a failure that may have been transient).
	KindToolError ErrorKind = "tool_error"
)

// Kinds of a tool call's result that say why the call was not run, or why
// the run stopped around it.
const (
	KindToolNotAllowed       ErrorKind = "tool_not_allowed"
	KindPermissionDenied     ErrorKind = "permission_denied"
	KindAwaitingConfirmation ErrorKind = "awaiting_confirmation"
	KindCanceled             ErrorKind = "canceled"
	KindRunStopped           ErrorKind = "run_stopped"
	// KindOutcomeUnknown is a call that may or may not have taken effect:
	// its request went out and the answer was lost, and for a write no
	// status look-up settled it. A handler reports one with
	// tool.OutcomeUnknown.
	KindOutcomeUnknown ErrorKind = "outcome_unknown"
	// KindIdempotencyConflict is a write whose idempotency key was already
	// used with other arguments: the call is refused, never executed.
	KindIdempotencyConflict ErrorKind = "idempotency_conflict"
	// KindWriteInProgress is a write whose key another attempt holds in
	// flight right now.
	KindWriteInProgress ErrorKind = "write_in_progress"
)

// Kinds of a failed model request (Error.Kind). As a rule none is
// retryable: each names its fix (a key, a model name, a shorter prompt, a
// server that answers in the API's JSON), and sending the same request
// again would meet the same answer. The exception is Gemini's malformed
// function call, a bad_request marked Retryable: the model wrote a call
// that did not parse, and a second sampling of the same request may not.
const (
	KindAuthentication        ErrorKind = "authentication"
	KindUnknownModel          ErrorKind = "unknown_model"
	KindContextLengthExceeded ErrorKind = "context_length_exceeded"
	KindRefusal               ErrorKind = "refusal"
	KindBadRequest            ErrorKind = "bad_request"
	// KindBadResponse is a reply the adapter could not use: larger than
	// its cap on a response (llmhttp.ResponseGuard), or not the JSON the API
	// speaks (a proxy streaming, an HTML page).
	KindBadResponse ErrorKind = "bad_response"
	// KindProtocolError is a reply that breaks the provider's own
	// protocol: a stream whose chunks contradict each other (one call
	// index with two IDs, arguments for a call never started, an event
	// after the end). Trying again would not make the provider
	// consistent, and the loop stops the run with protocol_error rather
	// than guess which chunk was meant.
	KindProtocolError ErrorKind = "protocol_error"
)
