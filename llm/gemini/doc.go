// Package gemini adapts the Gemini API, through the official
// google.golang.org/genai SDK, to the llm.Model interface.
//
// It is the model boundary of DESIGN.md for Gemini: New takes a
// *genai.Client the caller built and Options (nil is fine), and the Model's
// Generate turns one llm.Request into one generateContent call and the
// first candidate into an llm.Response. It never executes a tool and adds
// no retries of its own; the one thing it remembers between turns is the
// thought signatures described below. It passes llmtest.RunConformance.
// Start with New and Options.
//
// The adapter takes an already-built *genai.Client and never reads the
// environment; the SDK's NewClient does, so build the client where the
// application reads its configuration (the command line, a test).
//
// # Mapping
//
// Out, to a generateContent request:
//   - system messages become the request's systemInstruction, one text part
//     each, wherever they appear in the history (Gemini has no system turn);
//   - user messages become "user" contents;
//   - assistant messages become "model" contents: a text part, then one
//     functionCall part per tool call, whose args are the call's stored
//     arguments parsed as a JSON object. Stored arguments that are not a
//     JSON object (the model's invalid JSON, already answered by an error
//     result) are replaced by the empty object, which the SDK sends as a
//     functionCall without args;
//   - consecutive tool messages, the results of one turn, become one "user"
//     content of functionResponse parts, each carrying the call's ID and
//     name. An ok result is sent as {"output": <content>}; an error or
//     skipped result as its content when that is already an object with an
//     "error" key (as llm.ErrorContent makes it), else as {"error": <content>},
//     with the result's error kind added as "kind" when the object has none;
//   - tool definitions become one Tool whose functionDeclarations carry each
//     input schema as parametersJsonSchema.
//
// Back, from the first candidate:
//   - text parts are concatenated; thought parts (thought summaries) are
//     dropped;
//   - each functionCall part becomes an llm.ToolCall whose Arguments are the
//     args re-encoded as JSON. Gemini sends args as structured JSON, so
//     arguments are always valid JSON;
//   - a call keeps Gemini's own ID when the API gives one. Often it gives
//     none: the adapter then generates one, "toolloop_" followed by 16 hex
//     digits of a hash of the response ID, the request's step, the part's
//     index and the tool's name. Generated IDs are stable (the same response always gets the
//     same IDs) and unique within a run; they are sent back to Gemini in
//     both the functionCall and the functionResponse parts, which links each
//     result to its call;
//   - usage: InputTokens is promptTokenCount plus toolUsePromptTokenCount;
//     OutputTokens is candidatesTokenCount plus thoughtsTokenCount, because
//     Gemini bills thinking tokens as output and does not include them in
//     candidatesTokenCount; CachedInputTokens is cachedContentTokenCount
//     (part of InputTokens); ReasoningTokens is thoughtsTokenCount (part of
//     OutputTokens);
//   - Response.ID is the responseId, Response.Model the modelVersion, and
//     Response.FinishReason Gemini's finishReason as sent ("STOP",
//     "MAX_TOKENS", ...).
//
// A prompt blocked by Gemini's filters (promptFeedback.blockReason) and a
// candidate stopped by them (finishReason SAFETY, PROHIBITED_CONTENT,
// BLOCKLIST, SPII, RECITATION and their image variants) fail with an
// *llm.Error of kind llm.ErrorRefusal. A MALFORMED_FUNCTION_CALL finish (the
// model produced a call Gemini could not parse) fails with a retryable
// bad_request *llm.Error: a new attempt usually succeeds.
//
// # Thought signatures
//
// Thinking models (Gemini 2.5, 3 and later) attach an opaque thoughtSignature
// to function-call parts, and Gemini 3 rejects a later request whose
// replayed function calls lack it. llm.ToolCall has no field for it, so the
// Model remembers the signatures of the calls it returned, by call ID, in a
// bounded in-memory table, and puts each one back on its call when the
// history is sent again. A call the Model does not know (a history from
// another process, a store, another provider) is sent, for Gemini 3 and later
// models, with Google's documented placeholder signature
// "skip_thought_signature_validator" on the first call of its turn; see
// Options.NoSignatureFallback.
//
// # Errors
//
// A genai.APIError is classified with llm.HTTPError: 429
// (RESOURCE_EXHAUSTED) is rate_limited and 500, 503 and other 5xx are
// unavailable, both retryable; 401 and 403 are authentication, as is the 400
// INVALID_ARGUMENT with reason API_KEY_INVALID that Gemini answers for a bad
// API key; 404 is an unknown model; a 400 saying the input token count
// exceeds the maximum is context_length_exceeded. The SDK does not expose
// the headers of a failed response, so RetryAfter comes from the
// google.rpc.RetryInfo detail ("retryDelay": "2s") Gemini puts in the error
// body; the loop decides whether the run can wait that long (a daily
// quota's cannot; llm.CheckRetryAfter). Transport failures are retryable
// unavailable errors; the context's own cancellation or deadline is
// returned as is.
//
// Replies pass an llm.ResponseGuard installed in the HTTP client (see New):
// one larger than Options.MaxResponseBytes (8 MiB by default), or a
// successful one that is not JSON (an event stream, an HTML page), fails as
// a non-retryable llm.ErrorBadResponse that says so, where the SDK would
// read it all and quote it whole in its error. finishReason MAX_TOKENS sets
// Response.Truncated.
//
// The SDK retries only when the client was built with
// HTTPOptions.RetryOptions. The loop already retries retryable model errors
// (loop.Config.ModelRetries), so leave RetryOptions unset, or the two retry
// budgets multiply.
package gemini
