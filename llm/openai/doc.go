// Package openai adapts the official OpenAI Go SDK
// (github.com/openai/openai-go/v3) to the llm.Model interface, over both of
// OpenAI's text APIs:
//
//   - Chat, over Chat Completions (POST /chat/completions). It also talks to
//     OpenAI-compatible servers such as Ollama, vLLM, llama.cpp and LM Studio;
//     NewCompatible builds one for a base URL.
//   - Responses, over the Responses API (POST /responses), used statelessly:
//     every turn sends the whole history as input items with store=false, so
//     nothing is kept on OpenAI's side and a run can be replayed or resumed
//     from its own log, reasoning models' reasoning included (see Reasoning
//     models).
//
// Both are the model boundary (docs/DESIGN.md §1): Generate turns one llm.Request
// into one API call and the reply into an llm.Response, and never executes
// a tool or keeps the request. They pass llmtest.RunConformance. Both are
// also llm.StreamingModel: Stream sends the same request as a stream (see
// Streaming). Start with NewChat (or NewCompatible) and NewResponses and
// their options.
//
// # Clients
//
// Both adapters take an SDK client the caller has already built. The SDK's
// openai.NewClient reads OPENAI_API_KEY and other variables from the
// environment; this package never does, so build the client where your
// program reads its configuration. The SDK also retries 408, 409, 429 and 5xx
// replies on its own (twice by default). The loop has its own bounded,
// logged retries (loop.Config.ModelRetries), so build the client with
// option.WithMaxRetries(0) to let the loop decide, or keep the SDK's retries
// and set loop.Config.ModelRetries to -1: retrying in both places multiplies
// the attempts and hides them from the run's log.
//
// # Mapping
//
// Out: system, user, assistant (text and tool calls) and tool messages become
// the provider's messages or input items, in order. Every tool result is
// linked to its call by ID: a Chat "tool" message carries tool_call_id, a
// Responses function_call_output item carries call_id. A result's Content is
// JSON and is sent verbatim as the output string; an error result keeps its
// {"error": ..., "kind": ...} object so the model sees what failed. Tool
// definitions become function tools with name, description and the input
// schema as parameters.
//
// In: text, tool calls with their IDs and argument strings kept byte for byte
// (invalid JSON does not fail the request; the loop turns it into a
// recoverable invalid_arguments result), usage including cached input and
// reasoning tokens, the finish reason, the response ID and the model. Both
// adapters report finish reasons in Chat Completions' words: "stop",
// "tool_calls", "length", "content_filter".
//
// Provider state that another adapter attached to the history (Anthropic's
// thinking blocks, Gemini's thought signatures) is left out of the request,
// and llm.Response.DroppedState counts it, so that the run's log says a
// history moved between providers lost it. Chat has no state of its own
// and leaves out all of it.
//
// A refusal (Chat message.refusal, a Responses refusal content part) is an
// *llm.Error of kind llm.KindRefusal, not retryable, carrying the refusal
// text. So is a reply cut off by the content filter with nothing left in it.
//
// # Prompt caching
//
// OpenAI caches the prefix of every prompt of 1,024 tokens or more by
// itself, and bills what it reads from the cache at the model's cached
// rate (usage prompt_tokens_details.cached_tokens, or
// input_tokens_details.cached_tokens, reported as CachedInputTokens, part
// of InputTokens). A request hits only where it begins with an earlier
// one byte for byte: each request of a run is the previous one with the
// new turn appended, nothing before it re-ordered or re-encoded (a call's
// arguments go back as the model's own string, schemas as given). With
// ChatOptions.CacheKeyPerRun (ResponsesOptions.CacheKeyPerRun) every
// request also carries a prompt_cache_key of its run's own, so that OpenAI
// routes one run's turns to one cache: llm.Request.CacheKey when the
// caller sets it, else a hash of the run's start (model, tools, messages
// up to the first user message), the same for every turn and computed
// again from the history, so a resumed run keeps its key.
//
// # Reasoning models
//
// A reasoning model (o3, o4-mini, gpt-5, ...) thinks before it answers. Over
// the Responses API its reply holds reasoning items, before the calls and
// messages they led to. Used statelessly, the API forgets them unless the
// next request sends them back; then the model goes on from its own
// reasoning instead of starting over at every tool result, which costs
// tokens and loses the plan it made.
//
// The Responses adapter asks for each reasoning item's encrypted content
// (include ["reasoning.encrypted_content"]) when its options set
// ReasoningEffort or ReasoningSummary, or KeepReasoning says so. It does
// not by default: models that do not reason refuse the include with
// HTTP 400 "Encrypted content is not supported with this model". A reply's
// reasoning then lands in two places of its assistant message:
//
//   - Reasoning, one llm.Reasoning per reasoning item: its summary
//     (ReasoningSummary "auto", "concise" or "detailed" asks for one), else
//     Hidden. It is for people and the trace; nothing is sent back from it.
//   - State, tagged ProviderResponses ("openai-responses"): the reply's
//     items in their order, reasoning items with their IDs, summaries and
//     encrypted content as they came, messages and function calls by item
//     ID and position in the message's Text and ToolCalls. It is the
//     adapter's own JSON, kept byte for byte in the run's log, so a run
//     resumed in another process, with another client, sends the same
//     bytes.
//
// The next request sends such a message back as the reply's own items, in
// the reply's order: each reasoning item, then the message and function
// call items it produced, with their item IDs (msg_..., fc_...). The API
// insists on all of it. A function call or message that carries its item ID
// without the reasoning item before it is refused ("Item 'fc_...' of type
// 'function_call' was provided without its required 'reasoning' item:
// 'rs_...'."), so is a reasoning item not followed by an item it produced
// ("... was provided without its required following item.") and encrypted
// content that changed ("The encrypted content for item rs_... could not be
// verified.", code invalid_encrypted_content). Reasoning items at the end of
// a reply cut off while the model reasoned are shown but not kept: nothing
// follows them.
//
// A message without such state goes back as before: its text as an
// assistant message and its calls as function_call items without item IDs,
// which need no reasoning item. So does a message whose state no longer
// matches it (its text or calls were edited after the reply); that state
// is counted in DroppedState. A reply without encrypted content (not asked
// for) gets no State, only its Reasoning, shown Hidden.
//
// Chat Completions returns no reasoning, only its token count
// (completion_tokens_details.reasoning_tokens, in Usage.ReasoningTokens);
// ChatOptions.ReasoningEffort still sets the effort.
//
// # Call IDs the provider did not give
//
// Some OpenAI-compatible servers return tool calls without IDs. The loop
// cannot link results to such calls, so the adapters make one up:
// "toolloop_call_" followed by a hash of the history length, the turn's
// step, the call's position, name and arguments. The ID is stable (the same
// request and reply give the same ID, so a replayed run matches its log) and
// its prefix marks it as generated rather than the provider's. llm.Response
// has no field for this; the prefix is the record.
//
// # Errors
//
// Failed requests come back as *llm.Error, classified by llmhttp.HTTPError: 429
// is rate_limited and 408, 409 and 5xx unavailable, both retryable with the
// server's Retry-After; 401 and 403 are authentication, 404 an unknown model;
// OpenAI's error code context_length_exceeded (and the equivalents of
// compatible servers) is context_length_exceeded; any other 4xx is a bad
// request. A transport failure (connection refused or reset, a timeout that
// is not the caller's) is unavailable and retryable. The SDK's *openai.Error
// stays reachable with errors.As. The provider's error message is kept in the
// error text except for 401 and 403, whose messages can echo part of the key.
// A Responses reply that arrives with HTTP 200 but status "failed" is
// classified by its error code the same way (server_error is unavailable,
// rate_limit_exceeded rate limited). The provider's Retry-After is reported
// in RetryAfter; the loop decides whether the run can wait that long
// (llm.CheckRetryAfter).
//
// Every request carries an llmhttp.ResponseGuard as its innermost middleware: a
// reply larger than MaxResponseBytes (8 MiB by default), or a successful
// reply that is not JSON (an event stream from a proxy that turned
// streaming on, an HTML page), fails as a non-retryable llm.KindBadResponse
// that says so. A reply cut off at the output token limit ("length", or
// incomplete for max_output_tokens) has Response.Truncated set.
//
// # Streaming
//
// Stream sends Generate's request with "stream": true through the SDK's
// NewStreaming and yields llm.Delta values as the server's events arrive.
// What llm.Collect assembles from them is what Generate returns for the
// same reply, provider state included, so the next request is the same
// whether a turn was streamed or not; the tests check this on every
// fixture, with the event stream cut into random pieces.
//
// Chat asks for stream_options.include_usage: the usage comes in the last
// chunk, after the finish reason, and the finish delta after it. Tool
// calls are kept apart by their index: a call starts with the chunk that
// carries its ID and name, and its arguments follow by index, so the
// fragments of parallel calls may interleave. A chunk that gives a known
// index another ID, or another function name, is not merged: it reaches
// the llm.Accumulator as a second start, which fails the turn with
// llm.KindProtocolError. Calls end at the finish reason. A call without an ID
// (some compatible servers) gets its generated ID from its complete
// arguments, so it is yielded whole at the finish.
//
// Responses maps the typed events: output_text deltas (message items
// joined with a blank line, as Generate joins them), reasoning summary
// deltas (a reasoning part opens when its item is added), function calls
// started by output_item.added and ended by output_item.done, with their
// argument deltas between. The terminal event (response.completed,
// response.incomplete or response.failed) carries the whole response: the
// finish, its usage and its State (the reasoning items with their
// encrypted content) are built from it by Generate's own mapping. Whatever
// the events left out (reasoning text outside a summary, a server that
// sends no deltas) is sent then, and events that contradict that response
// are llm.KindProtocolError.
//
// Errors: a failure before the first delta (an HTTP error status, a
// connection refused, the response guard) is classified exactly as
// Generate's. An error the server sends inside the stream (a Responses
// "error" event, an {"error": ...} chunk) is an *llm.Error with the
// server's message, classified by its code. A connection that breaks
// after the first delta, or a stream that ends before its finish, is an
// llm.KindUnavailable wrapping llm.ErrStreamEnded. A consumer that breaks
// out of its range loop cancels the request, and the HTTP body is closed
// before the iterator returns. A chunk whose data is not JSON is
// llm.KindBadResponse saying so. Text or a new call after the finish
// reason, a negative call index, and a call ID with a control character
// (either API, streamed or not) are llm.KindProtocolError.
//
// A successful reply that is not an event stream (a server or proxy that
// ignored "stream") is read as the whole reply, within MaxResponseBytes,
// and gives the turn Generate gives, its deltas all at once and the
// Response marked NotStreamed, which the run's log records. One that is
// not the API's JSON (an HTML page, another object) is
// llm.KindBadResponse naming what came.
//
// Event streams may end their lines with \n, \r\n or \r alone, as the SSE
// format allows (the response guard makes them \n for the SDK).
//
// A streamed reply's body is capped at MaxStreamBytes
// (llmhttp.DefaultMaxStreamBytes, 64 MiB, by default): an event stream repeats
// its framing with every piece of text, so it runs several times the size
// of the same reply as one JSON body. Past the cap the stream fails with
// llm.KindBadResponse, after the deltas that fit.
//
// # OpenAI-compatible servers
//
// Chat works with servers that speak Chat Completions, with these quirks
// handled:
//
//   - usage may be missing (or only sent when streaming): Usage stays zero,
//     so token and cost budgets cannot count those turns;
//   - the completion ID, the finish reason or tool call IDs may be missing:
//     the response ID stays empty, the finish reason is inferred ("tool_calls"
//     when there are calls, else "stop"), call IDs are generated as above;
//     a stream that never sends a finish reason but ends with "data: [DONE]"
//     (OpenRouter, Novita) is complete, and its reason is inferred the same
//     way, where one that stops without [DONE] was cut short;
//   - usage parts may leave out what total_tokens counts (xAI's
//     completion_tokens excludes the reasoning tokens): the output becomes
//     total_tokens less the prompt, so budgets count what was billed;
//   - some servers say finish_reason "stop" even when they return tool calls:
//     the adapter goes by the calls, not the reason;
//   - arguments may arrive as a JSON object rather than a string: the object
//     is kept as the raw arguments; an empty arguments string becomes "{}";
//   - some servers only know max_tokens (ChatOptions.UseMaxTokens) or reject
//     parallel_tool_calls (leave ChatOptions.ParallelToolCalls nil);
//   - error bodies that are not OpenAI's {"error": {...}} shape are still
//     classified by their HTTP status, and their message is kept;
//   - a 404 is reported as an unknown model, which is what Ollama and vLLM
//     mean by it; a base URL without its /v1 gives one too.
//
// llm.Request.Output is sent as Chat's response_format {type: json_schema,
// json_schema: {name, schema, strict}} and as the Responses API's
// text.format {type: json_schema, name, schema, strict}. An
// OpenAI-compatible server without structured outputs may refuse or
// ignore it; the loop validates the answer either way.
//
// Duplicate call IDs are not rewritten: the loop reports them as a protocol
// error, which names the server's fault.
package openai
