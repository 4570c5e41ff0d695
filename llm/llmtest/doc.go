// Package llmtest is the model boundary's test kit: a scripted llm.Model
// for tests, examples and the sandbox, and the conformance suite every
// provider adapter runs.
//
// Model plays a fixed script of Turns (Text, Calls built with Call, an
// error, a delay, or a Func that answers from the request), in order; New
// fails a request after the last turn with ErrScriptExhausted, Repeating
// plays the last turn again forever (a model stuck in a loop, for budget
// tests). It records a copy of every request, so a test can check what the
// loop sent (Requests), and hands out a fresh copy of each scripted reply,
// so a caller that edits a response cannot change the script. It needs no
// API key and no network, and it is safe for concurrent use.
//
// Model is also an llm.StreamingModel: Stream plays the same turn as
// deltas (Deltas: text and arguments in pieces of a few bytes, parallel
// calls interleaved, usage, the finish), which an llm.Accumulator
// assembles into exactly what Generate returns. A turn's OnDelta paces
// or breaks its stream (BreakAfter fails it before the first delta or
// part-way), and Abandoned counts the streams whose consumer went away
// part-way, so that loop tests can check a canceled run closed its
// connection.
//
// RunConformance drives an adapter through its real SDK against a test
// server that serves the provider's own wire replies, one per Case: a final
// answer with usage, one call, parallel calls, arguments that are not
// valid JSON, rate limiting with Retry-After, a server error, a bad key, an
// over-long prompt. It checks what the adapter returns (calls with their
// IDs and raw arguments, usage, *llm.Error kinds) and what it sends
// (each tool result linked to its call by ID). For a streaming adapter it
// also checks how it meets compatible servers: a streamed request answered
// with the whole reply as JSON is Generate's turn, marked NotStreamed, and
// a stream that ends without a finish reason the way some servers end
// every turn (CaseStreamWithoutFinishReason) is finished. A Harness
// connects it to one adapter.
//
// The package depends only on llm and the standard library, net/http
// left out: the loop and the sandbox (examples/orders) use its Model, the
// adapters its suite. The flood server the adapters' response caps are
// tested against is in llm/llmhttp/llmhttptest.
package llmtest
