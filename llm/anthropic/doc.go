// Package anthropic adapts the official Anthropic Go SDK
// (github.com/anthropics/anthropic-sdk-go/v2) to llm.Model, over the
// Messages API.
//
// It is the model boundary (docs/DESIGN.md §1) for Claude: New takes an
// anthropic.Client the caller built and Options (nil is fine), and the
// Model's Generate turns one llm.Request into one Messages API call and the
// reply into an llm.Response. The Model is also an llm.StreamingModel: its
// Stream sends the same call streamed and yields the reply as it arrives
// (see Streaming). It never executes a tool, adds no retries of its own
// (the loop's are bounded and logged; see below for the SDK's), and keeps
// nothing of a request after Generate returns or Stream's iteration ends.
// It passes llmtest.RunConformance. Start with New and Options; the
// sections below say how messages, usage and errors map.
//
// The adapter takes an SDK client that the caller has already built; it never
// reads the environment (anthropic.NewClient does, even when given a key: it
// reads ANTHROPIC_BASE_URL and ANTHROPIC_CUSTOM_HEADERS unless passed
// option.WithoutEnvironmentDefaults). Build the client with
// option.WithMaxRetries(0): the loop owns retries (it honours Retry-After and
// the run's deadline, and logs every attempt), and an SDK that retries on
// its own hides those attempts and multiplies the loop's.
//
// # Mapping
//
// Going out, system messages become the top-level system field (in order,
// wherever they stood in the history); user and assistant text become text
// blocks; assistant tool calls become tool_use blocks whose input is the
// call's raw arguments; tool results become tool_result blocks linked by
// tool_use_id, with is_error set for error and skipped results and the
// result's JSON content sent as text. Consecutive messages of one role are
// merged into one message, so all results of a turn go back in a single user
// message, and tool_result blocks are placed before any text in it, as the
// API requires.
//
// Arguments that are not a JSON object (the model sent something broken and
// the loop reported it back as an invalid-arguments result) cannot be sent
// as tool_use input, which must be an object: the adapter sends {} for them
// instead, and the call's result still tells the model what went wrong.
//
// Coming back, text blocks are joined; tool_use blocks become llm.ToolCall
// values whose Arguments are the input's JSON exactly as it arrived;
// thinking blocks are kept (see Thinking) and server-tool blocks dropped.
// Usage.InputTokens counts the whole prompt (input_tokens, which counts
// neither cache reads nor cache writes, plus cache_read_input_tokens plus
// cache_creation_input_tokens), CachedInputTokens the cache reads and
// CacheWriteTokens the cache writes; ReasoningTokens comes from
// output_tokens_details.thinking_tokens. A stop_reason of "refusal" is an
// *llm.Error of kind llm.KindRefusal.
//
// # Thinking
//
// Options.ThinkingBudget turns on extended thinking with a fixed budget
// (thinking type "enabled"; at least 1024 tokens and, since thinking counts
// toward max_tokens, less than MaxTokens), Options.AdaptiveThinking lets the
// model choose (type "adaptive", the only mode of the newest models, which
// refuse a budget), and Options.InterleavedThinking adds the beta header
// interleaved-thinking-2025-05-14, so that a budgeted model also thinks
// between tool calls (its budget may then exceed MaxTokens; adaptive
// thinking interleaves without it). Options.Validate refuses a setting the
// API would refuse or that contradicts another; a Model built from such
// Options fails every Generate with that error, sending nothing. The
// settings belong to the Model, so they stay the same through a run's
// tool loop, as the API requires: a run resumed later must be given a
// Model with the same thinking settings. The API version this SDK speaks
// refuses temperature, top_p and top_k outright, so no sampling setting
// can clash with thinking; the adapter never forces a tool choice, which
// thinking also forbids.
//
// With thinking on, the API wants each assistant turn of the tool loop back
// with its thinking: thinking blocks with their signatures and
// redacted_thinking blocks with their encrypted data, unchanged and where
// they stood among the turn's text and tool_use blocks; otherwise it answers
// 400 ("Expected `thinking` or `redacted_thinking`, but found ...", "Invalid
// `signature` in `thinking` block", "... blocks in the latest assistant
// message cannot be modified"). Newer models think by default even without
// Options, so the adapter keeps thinking whenever a reply has it. A reply's
// thinking becomes the message's Reasoning, in order, with Provider
// "anthropic": a thinking block's text, or Hidden for a redacted_thinking
// block and for thinking shown as "omitted" (empty text). And the message's
// State (Provider "anthropic") holds what the next request needs: Data is
// the JSON object {"v":1,"blocks":[...]} listing the reply's content blocks
// in order, {"type":"thinking","thinking":...,"signature":...},
// {"type":"redacted_thinking","data":...}, {"type":"text","text":...} and
// {"type":"tool_use","id":...} (the call itself being the message's
// llm.ToolCall), and "prefix", a digest of the request the reply answered
// (see Preserved thinking). A reply without thinking has no State.
//
// Going out, an assistant message with this adapter's State is rebuilt from
// it: the thinking blocks exactly as they came, and the text and tool_use
// blocks in their places, the calls taken from the message. If the message's
// text or calls no longer match the State (someone edited the history), its
// thinking blocks go first, unchanged and in order, then its text and calls;
// the API may refuse that. A State of another version, or that is not
// valid, fails the request as a bad request naming the message. A message
// without State is sent as before. State that another provider made (on a
// message or a tool call) is left out, and Response.DroppedState counts it,
// so a history moved from another provider says in the run's log what it
// lost. Both State and Reasoning travel in the run's log and come back
// byte for byte, so a run paused for confirmation and resumed by another
// process sends its thinking back intact.
//
// # Preserved thinking
//
// Models with preserved thinking check each thinking or redacted_thinking
// block sent back against the request that produced it: if the system
// prompt, the tools or any message before the block changed since, the
// block is bound to a different conversation, and by default (for
// accounts created from 2026-08-31) the API refuses the request with a
// 400 invalid_request_error. A loop's context management changes exactly
// that: a cleared tool result, a compaction's summary and cleared
// reasoning all come before thinking the history still sends back.
//
// So the State records "prefix", a digest of the tools and the messages
// of the request the reply answered, and each request digests its history
// again. When some message's thinking was made under a prefix the history
// before it no longer has, the request carries
// thinking.block_binding.prefix_mismatch_behavior "drop_block" (on its
// thinking, or on adaptive thinking when Options set none) and the beta
// header thinking-binding-controls-2026-08-01: the API drops the failing
// blocks, and every later thinking block with them, instead of refusing.
// A history that was never edited never carries the setting; one that was
// carries it on every later request, the digest being a function of the
// history alone, so the requests stay alike for the prompt cache.
// Response.DroppedReasoning counts the blocks the reply's
// input_transformations lists as dropped (thinking_dropped), so the run's
// log says which turns were made without their earlier reasoning.
//
// A refusal the adapter could not prevent (a history edited before the
// adapter recorded prefixes) is a bad request, not retryable, that matches
// ErrThinkingPrefixMismatch and keeps the API's message, which names the
// block. count_tokens requests do not carry the setting.
//
// # Prompt caching
//
// A tool loop sends its whole history every turn. With
// Options.PromptCaching each request carries cache_control breakpoints
// (at most three of the API's four) so that every turn reads the prefix
// the turn before it wrote: one on the last system block (or the last
// tool, without a system prompt), which caches tools and system; one on
// the last block of the previous turn's request (the message before the
// last assistant message), so that a turn that added more blocks than the
// API's 20-block lookback (a batch of parallel calls and their results)
// still finds it; and one on the last block of this request, which
// writes the new prefix. Thinking blocks cannot carry a breakpoint; the
// one before them or after them does, and they are cached as part of the
// prefix, sent back unchanged (see Thinking). Options.CacheTTL chooses
// the cache's lifetime: five minutes (the default; writes cost 1.25 times
// the input rate) or CacheTTL1h (writes cost twice the input rate, for
// turns more than five minutes apart). Reads cost a tenth of the input
// rate.
//
// The request is byte-stable from turn to turn: a turn's request is the
// previous one with the new messages appended, nothing before them
// re-ordered or re-encoded (a call's input is the model's own JSON). Only
// the markers move, from the previous tail to the new one; the API keys
// its cache by the prompt's content and takes a marker only as the place
// to look, so a moved marker costs nothing.
//
// # Streaming
//
// Stream sends Generate's request with "stream": true
// (Messages.NewStreaming) when its iteration begins, and maps the server's
// events onto llm.Delta values in the order they came: message_start's
// usage (the prompt, cache reads and writes) as the first DeltaUsage;
// each text block's text_delta as DeltaText; each thinking block as a
// reasoning part of its own, numbered 0, 1, ... in block order, its
// thinking_delta pieces as DeltaReasoning, and a thinking block that
// showed nothing (display "omitted") and each redacted_thinking block as a
// Hidden part; each tool_use block as a call, numbered 0, 1, ... in block
// order, opened with its ID and name, fed with its input_json_delta
// fragments exactly as sent, and ended at content_block_stop (a call whose
// input came only as empty fragments gets "{}", the input Generate
// reports); each message_delta's cumulative usage as a DeltaUsage; and
// message_stop as the DeltaFinish. Signatures, citations and server-tool
// blocks are in no delta; ping events are skipped.
//
// The SDK's anthropic.Message.Accumulate assembles the reply as the events
// arrive (the text, thinking and signature pieces are gathered by the
// adapter and put into it when their block stops, since Accumulate would
// copy the whole text for each piece), and the finish is what Generate's
// own code makes of that message: its ID, model, stop reason, Truncated
// for max_tokens, DroppedState, and the State with the thinking blocks and
// signatures in their order among the text and tool_use blocks. So
// llm.Collect of a stream equals Generate's Response for the same reply,
// and the next request is the same byte for byte whichever way the turn
// came. A refusal's stop reason ends the stream with Generate's refusal
// error. Events that contradict each other (a delta for a block never
// started or already stopped, a stream that does not begin with
// message_start) are a non-retryable llm.KindProtocolError.
//
// A failure before the first event is classified as Generate's is (status,
// Retry-After, overloaded 529, ...). An error event after it
// (overloaded_error, api_error, ...) ends the stream with an *llm.Error
// naming the server's type and message, classified as that type's HTTP
// status would be (overloaded_error and api_error are retryable
// unavailable failures, rate_limit_error rate_limited, invalid_request_error
// a bad request), with no StatusCode since the reply's was 200; the loop
// does not retry a turn that has shown deltas, but the class says what
// happened. A connection that drops, or a body that ends before
// message_stop, is an unavailable error wrapping llm.ErrStreamEnded; a
// whole reply without a single event (a proxy that answered with JSON) is
// a non-retryable llm.KindBadResponse that says so. A
// consumer that breaks out of its loop closes the HTTP stream before the
// iteration returns. The reply's body is capped at Options.MaxStreamBytes
// (64 MiB by default, llmhttp.DefaultMaxStreamBytes), past which the stream
// fails as a non-retryable llm.KindBadResponse; MaxResponseBytes is for
// JSON replies only.
//
// # Errors
//
// API errors are classified by llmhttp.HTTPError: 429 is rate_limited, 529
// (overloaded_error) and other 5xx are unavailable, both retryable with the
// server's Retry-After; 401 and 403 are authentication; 404 is an unknown
// model; "prompt is too long" is context_length_exceeded. A 429 for a spent
// budget (error code *_spend_limit_reached), or any error the server marks
// with x-should-retry: false, is not retryable. Connection failures are
// retryable unavailable errors; the caller's own cancellation is returned
// as is. The server's Retry-After is reported in RetryAfter; the loop
// decides whether the run can wait that long (llm.CheckRetryAfter). Keep
// the SDK's own retries off (option.WithMaxRetries(0)): the SDK would sleep
// that long, whatever the deadline.
//
// Every request carries an llmhttp.ResponseGuard as its innermost middleware: a
// reply larger than Options.MaxResponseBytes (8 MiB by default), or a
// successful reply that is not JSON (an event stream, an HTML page), fails
// as a non-retryable llm.KindBadResponse that says so. stop_reason
// max_tokens (and model_context_window_exceeded) sets Response.Truncated.
//
// # Structured answers
//
// llm.Request.Output is sent as structured outputs, output_config.format
// {type: json_schema, schema}, which the SDK's MessageNewParams carries
// (no beta header). Models before structured outputs, and schemas with
// features they refuse, answer 400: Options.NoOutputFormat leaves the
// format out, and the loop's validation alone holds the answer to the
// schema.
//
// # Limits
//
// The SDK v2 speaks API version 2026-10-21, which rejects temperature, top_p
// and top_k, so Options has no sampling settings. Options has no setting
// for thinking's display or for output_config.effort; RequestOptions with
// option.WithJSONSet can send them. Server-tool blocks are not kept in
// State, so a turn that mixed them with thinking cannot be sent back
// whole. The SDK refuses a Generate request (not streamed) whose MaxTokens
// implies more than ten minutes of generation (about 21,000 tokens) unless
// RequestOptions sets option.WithRequestTimeout; Stream has no such limit.
//
// The package shares its name with the SDK's; import one of them under
// another name when a file needs both.
package anthropic
