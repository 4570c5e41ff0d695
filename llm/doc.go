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
// RetryAfter; IsRetryable is what the loop's bounded retries ask. A wait
// the provider asks for that outlasts the run's deadline makes the failure
// final and says so (CheckRetryAfter, which the loop calls).
// Response.Truncated marks an answer cut off at the output token limit,
// whatever the provider calls it.
//
// Start with Model, Request, Response, Message and ToolResult. Adapters
// live in subpackages (llm/openai, llm/anthropic, llm/gemini), so this one
// imports nothing but the standard library, and not net/http either:
// what the adapters share about HTTP (HTTPError, which classifies a failed
// reply, and ResponseGuard, which caps a reply's size and refuses one that
// is not JSON) is llm/llmhttp, so that a program with a scripted model
// compiles no HTTP. llm/llmtest has a scripted Model and the conformance
// suite every adapter runs. Every other package of toolloop depends on
// this one, and it depends on none of them.
package llm
