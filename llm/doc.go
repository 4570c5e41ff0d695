// Package llm is the model-client boundary: the provider-neutral
// conversation types and the Model interface every provider adapter
// implements.
//
// A Model takes a Request (the messages so far, the tool definitions, the
// model's name and the turn's step) and gives a Response: an assistant
// Message with text and/or tool calls, and the turn's Usage. It never
// executes a tool, and it must not keep or change the Request after
// Generate returns: the loop reuses it for the next turn.
//
// The types keep what a provider sent. A ToolCall's Arguments are the raw
// bytes the model produced, even when they are not valid JSON (they are
// encoded losslessly, and validation turns them into a recoverable
// invalid-arguments result for the model). A ToolResult is JSON content
// with a status (ok, error, skipped) and, for failures, an ErrorKind the
// model reads and the loop uses to choose between "send back" and "stop".
// Every call is answered by exactly one tool message whose CallID names it:
// the link is always the ID, never a position or a completion order, and
// CheckHistory verifies that invariant on any conversation.
//
// Failures of the provider come back as *Error, classified by the same
// ErrorKind as tool results (rate limited, unavailable and timeout mean
// the same on both sides; authentication, unknown model, context length,
// refusal, bad request are a model request's own) with Retryable and
// RetryAfter; HTTPError gives adapters one classification of HTTP
// replies, and IsRetryable is what the loop's bounded retries ask. A wait the provider asks for that
// outlasts the run's deadline makes the failure final and says so
// (CheckRetryAfter, which the loop calls). ResponseGuard caps the size of a reply
// (DefaultMaxResponseBytes unless an adapter's MaxResponseBytes says
// otherwise) and names a successful reply that is not JSON; both fail as
// KindBadResponse. Response.Truncated marks an answer cut off at the
// output token limit, whatever the provider calls it.
//
// Start with Model, Request, Response, Message and ToolResult. Adapters
// live in subpackages (llm/openai, llm/anthropic, llm/gemini), so this one
// imports nothing but the standard library; llm/llmtest has a scripted
// Model and the conformance suite every adapter runs. Every other package
// of toolloop depends on this one, and it depends on none of them.
package llm
