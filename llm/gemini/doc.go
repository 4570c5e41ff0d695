// Package gemini adapts the Gemini API, through the official
// google.golang.org/genai SDK, to the llm.Model interface.
//
// It is the model boundary (docs/DESIGN.md §1) for Gemini: New takes a
// *genai.Client the caller built and Options (nil is fine), and the Model's
// Generate turns one llm.Request into one generateContent call and the
// first candidate into an llm.Response. It never executes a tool, adds no
// retries of its own and remembers nothing between turns: the thought
// signatures Gemini needs back travel in the messages (see below), so a
// conversation can be resumed by another Model, in another process or on
// another worker. It passes llmtest.RunConformance. Start with New and
// Options. The Model is also an llm.StreamingModel: Stream hands the turn
// over as Gemini generates it (see Streaming).
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
//     arguments parsed as a JSON object, or, when the message has Gemini
//     state, the parts Gemini sent in their order (see Thought signatures).
//     Stored arguments that are not a JSON object (the model's invalid JSON,
//     already answered by an error result) are replaced by the empty object,
//     which the SDK sends as a functionCall without args;
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
//   - text parts are concatenated into Text; thought parts (thought=true)
//     never are: each one's text, a thought summary (Options.IncludeThoughts),
//     becomes an llm.Reasoning of Provider "gemini" in Message.Reasoning.
//     A reply that spent thinking tokens and showed no thought gets one
//     Reasoning with Hidden set: the model thought, and only Gemini can
//     read it (through the signatures);
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
// *llm.Error of kind llm.KindRefusal. A MALFORMED_FUNCTION_CALL finish (the
// model produced a call Gemini could not parse) fails with a retryable
// bad_request *llm.Error: a new attempt usually succeeds.
//
// # Prompt caching
//
// Gemini 2.5 and later cache the prompts they see by themselves (implicit
// caching) and bill a prompt whose beginning they have seen recently at
// the cached rate; cachedContentTokenCount says how much, reported as
// CachedInputTokens (part of InputTokens). A hit needs the same beginning:
// each request of a run is the previous one with the new turn's contents
// appended, its system instruction, tools and configuration unchanged,
// and earlier contents encoded the same way every turn (a call's
// arguments and a result's content are JSON objects whose keys are
// written in one order). Explicit caches (CachedContent) are not used.
//
// # Thought signatures
//
// Thinking models (Gemini 2.5, 3 and later) attach an opaque
// thoughtSignature to parts of their replies, and want each back exactly
// as received, on the same part, when the history is sent again. Gemini 3
// signs the first functionCall part of every step (only the first of
// parallel calls) and, in a reply without calls, its last part. It
// validates the steps of the current turn (everything after the last user
// message with text): a step whose first functionCall comes back without
// its signature fails with 400 INVALID_ARGUMENT "Function call is missing a
// thought_signature in functionCall parts...", one with altered bytes with
// "Corrupted thought signature.".
//
// The signatures travel in the messages as llm.ProviderState of Provider
// "gemini", so they are in the run's log and a resumed run sends them
// whatever Model instance, process or worker resumes it:
//   - a functionCall part's signature is its llm.ToolCall's State; Data is
//     the signature's bytes as Gemini sent them (base64 in JSON, as Gemini
//     sends it), nothing added. A call Gemini did not sign (the second of
//     parallel calls) has no State;
//   - signatures on other parts (text, thought) make the Message's State.
//     Its Data is a small JSON document, {"v":1,"parts":[...]}, that lists
//     the reply's parts in order, each with its kind ("text", "thought",
//     "call"), the byte length of its text and its signature, but no text:
//     text parts take theirs from Message.Text, thought parts from the
//     message's Gemini Reasoning entries, calls stand for Message.ToolCalls
//     in order. A message whose only signatures are on calls has no State.
//
// Requests put each signature back: every call gets its own State, and a
// message with State is rebuilt part by part in Gemini's order, its signed
// thought parts with their summaries (unsigned thought summaries are not
// sent back: they are for people, and Gemini reads nothing from them).
// When the message no longer fits its State (its text or reasoning was
// edited since, by redaction say) it is sent as text then calls, without
// the text's and thoughts' signatures; Gemini does not validate those, so
// the request still goes through, and the State counts as dropped. Gemini
// state that is not this encoding fails the request with a bad_request
// error naming the message.
//
// State that another provider made (llm.ForeignState: Anthropic's thinking
// blocks, the Responses API's reasoning items) is never sent to Gemini; nor
// is another provider's Reasoning.
//
// A step none of whose calls carries Gemini state (a history from another
// provider, from a Gemini model that did not think, or logged before
// signatures travelled in the messages) has no signature Gemini 3 would
// accept. Gemini validates only the steps of the current turn, after the
// last user message with text; for such a step, with Gemini 3 and later
// models (and aliases without a version, such as "gemini-flash-latest"),
// the adapter sends Google's documented placeholder,
// "skip_thought_signature_validator", on the step's first call, which
// makes Gemini skip validation for that step: the
// model's reasoning for it is lost, but the conversation goes on. This is
// the only place a placeholder is sent; a step with any signed call is
// sent with its signatures. Options.NoSignatureFallback turns the
// placeholder off; such requests then fail with the error above.
//
// Response.DroppedState counts what of the history's state did not reach
// Gemini as it came: other providers' state (llm.ForeignState), plus one
// for each step sent with the placeholder, plus one for each message
// whose Gemini State no longer fit it.
//
// # Thinking
//
// Options.ThinkingBudget (Gemini 2.5) and Options.ThinkingLevel (Gemini 3:
// "minimal", "low", "medium", "high") set how much the model thinks; Gemini
// refuses both in one request, and so does New. Options.IncludeThoughts
// asks for thought summaries, which come back as Reasoning. Thinking tokens
// are in Usage.ReasoningTokens (thoughtsTokenCount) and, since Gemini bills
// them as output, in Usage.OutputTokens.
//
// # Streaming
//
// Stream sends the request Generate would send, byte for byte, to
// streamGenerateContent?alt=sse, whose events are each a
// GenerateContentResponse chunk, and yields the first candidate as
// llm.Delta values:
//   - a text part's text is a text delta; a thought part's (thought=true)
//     a reasoning delta, never text. Gemini streams one part's text in
//     pieces, one per chunk, and its thought signature with the last piece
//     (often an empty one), so consecutive pieces of one kind are taken as
//     one part until a signature closes it: a new reasoning Index begins
//     with a thought part after a signed one or after other parts;
//   - a functionCall part arrives whole: it is a start (ID, name, and its
//     signature as State), its args as one arguments delta, and an end.
//     Calls are numbered in order across chunks, and their generated IDs
//     are Generate's, from the position of the call among the joined parts;
//   - each chunk's usageMetadata, a running total, is a usage delta when it
//     changed; the finish delta comes once the stream has ended with a
//     finish reason, with the message's State built from the joined parts
//     by the code Generate uses, and DroppedState counted as Generate does.
//     The reply that spent thinking tokens and showed no thought gets its
//     Hidden reasoning just before it.
//
// So llm.Collect of a stream is the Response Generate returns for the same
// reply sent whole with the pieces joined, and the next request is the
// same either way.
//
// A failure before the first delta is the error Generate returns for the
// same reply (a status, an error event, a refusal, a malformed call); one
// after it is yielded after the deltas received. An error event in the
// stream is classified like an error reply; a filtered finish reason is a
// refusal; a connection that breaks, or a stream that ends without a
// finish reason, is a retryable llm.KindUnavailable wrapping
// llm.ErrStreamEnded (the adapter watches the body's reads, as the SDK
// reports a body cut in the middle of an event as undecodable JSON). A
// consumer that stops ranging cancels the request, and the connection is
// closed before the iterator returns. The stream passes the
// llmhttp.ResponseGuard as an event stream the request asked for
// (llmhttp.ExpectStream), capped at Options.MaxStreamBytes (64 MiB by
// default) rather than MaxResponseBytes.
//
// The SDK resumes a stream that Gemini ends with finish reason
// CONTINUATION and a continuation token (GenerateContentConfig's
// AutomaticContinuation, on by default); the adapter sees one stream.
//
// # Errors
//
// A genai.APIError is classified with llmhttp.HTTPError: 429
// (RESOURCE_EXHAUSTED) is rate_limited and 500, 503 and other 5xx are
// unavailable, both retryable; 401 and 403 are authentication, as is the 400
// INVALID_ARGUMENT with reason API_KEY_INVALID that Gemini answers for a bad
// API key; 404 is an unknown model; a 400 saying the input token count
// exceeds the maximum is context_length_exceeded. The SDK does not expose
// the headers of a failed response, so RetryAfter comes from the
// google.rpc.RetryInfo detail ("retryDelay": "2s") Gemini puts in the error
// body; the loop decides whether the run can wait that long (a daily
// quota's cannot; llm.CheckRetryAfter). Transport failures are retryable
// unavailable errors, as is a reply cut off by its connection; the
// context's own cancellation or deadline is returned as is.
//
// Replies pass an llmhttp.ResponseGuard installed in the HTTP client (see New):
// one larger than Options.MaxResponseBytes (8 MiB by default), or a
// successful one that is not JSON (an event stream, an HTML page), fails as
// a non-retryable llm.KindBadResponse that says so, where the SDK would
// read it all and quote it whole in its error. finishReason MAX_TOKENS sets
// Response.Truncated.
//
// llm.Request.Output is sent as responseMimeType application/json with
// responseJsonSchema, the JSON Schema as it is. Gemini 1.x and 2.x refuse
// it together with function declarations, so a request with tools to such
// a model goes without it, and the loop's validation alone holds the
// answer to the schema; Options.Configure may set a response type or
// schema of its own, which is then left alone.
//
// The SDK retries only when the client was built with
// HTTPOptions.RetryOptions. The loop already retries retryable model errors
// (loop.Config.ModelRetries), so leave RetryOptions unset, or the two retry
// budgets multiply.
package gemini
