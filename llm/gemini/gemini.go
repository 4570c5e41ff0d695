// Package gemini adapts the Gemini API, through the official
// google.golang.org/genai SDK, to the llm.Model interface.
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
// body. Transport failures are retryable unavailable errors; the context's
// own cancellation or deadline is returned as is.
//
// The SDK retries only when the client was built with
// HTTPOptions.RetryOptions. The loop already retries retryable model errors
// (loop.Config.ModelRetries), so leave RetryOptions unset, or the two retry
// budgets multiply.
package gemini

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
)

// Options configures a Model. The zero value is usable when every request
// names its model.
type Options struct {
	// Model is the Gemini model used when llm.Request.Model is empty, e.g.
	// "gemini-2.5-flash".
	Model string
	// MaxOutputTokens caps each response's output, thinking included; zero
	// leaves the model's default.
	MaxOutputTokens int32
	// Temperature, TopP and TopK tune sampling; nil leaves the model's
	// default.
	Temperature *float32
	TopP        *float32
	TopK        *float32
	// Seed asks for reproducible sampling, best effort; nil for random.
	Seed *int32
	// StopSequences end the output when one of them is generated.
	StopSequences []string
	// Thinking configures the model's thinking (budget or level, whether
	// thought summaries come back); nil leaves the model's default.
	Thinking *genai.ThinkingConfig
	// SafetySettings override Gemini's default content filters.
	SafetySettings []*genai.SafetySetting
	// ToolMode sets the function-calling mode when the request has tools:
	// genai.FunctionCallingConfigModeAuto (the API's default, used when
	// empty), FunctionCallingConfigModeAny (the model must call a tool),
	// FunctionCallingConfigModeNone or FunctionCallingConfigModeValidated.
	ToolMode genai.FunctionCallingConfigMode
	// Configure, when set, is called last on each request's config, after
	// the adapter has filled it in: the place for any setting Options does
	// not name (cached content, labels, service tier, ...). It must not
	// retain the config.
	Configure func(*genai.GenerateContentConfig)
	// NoSignatureFallback stops the adapter from sending the placeholder
	// thought signature for replayed calls whose real signature it does
	// not know (see the package documentation). Such requests then fail
	// with a bad_request error on models that require signatures.
	NoSignatureFallback bool
}

// Model is an llm.Model backed by the Gemini API. It is safe for concurrent
// use. Its only state is the table of thought signatures described in the
// package documentation.
type Model struct {
	client *genai.Client
	opts   Options
	sigs   *signatures
}

var _ llm.Model = (*Model)(nil)

// New returns a Model that sends its requests through client. opts may be
// nil; it is copied (its slices too, not the values its pointers point
// to), so later changes to it have no effect. New panics if client is nil.
func New(client *genai.Client, opts *Options) *Model {
	if client == nil {
		panic("gemini: New needs a *genai.Client")
	}
	m := &Model{client: client, sigs: newSignatures(maxSignatures)}
	if opts != nil {
		m.opts = *opts
		m.opts.StopSequences = append([]string(nil), opts.StopSequences...)
		m.opts.SafetySettings = append([]*genai.SafetySetting(nil), opts.SafetySettings...)
	}
	return m
}

// Generate sends the conversation to Gemini's generateContent and maps the
// first candidate back: its text, or its function calls as tool calls.
// Failures are *llm.Error values (see the package documentation), except a
// canceled or expired ctx, whose error is returned as is.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	model := req.Model
	if model == "" {
		model = m.opts.Model
	}
	if model == "" {
		return nil, &llm.Error{Kind: llm.ErrorBadRequest, Err: errors.New("gemini: no model named: set llm.Request.Model or Options.Model")}
	}
	contents, system, err := m.contents(model, req.Messages)
	if err != nil {
		return nil, &llm.Error{Kind: llm.ErrorBadRequest, Err: err}
	}
	tools, err := toolsOf(req.Tools)
	if err != nil {
		return nil, &llm.Error{Kind: llm.ErrorBadRequest, Err: err}
	}
	cfg := m.config(system, tools)
	resp, err := m.client.Models.GenerateContent(ctx, model, contents, cfg)
	if err != nil {
		return nil, m.classify(ctx, err)
	}
	return m.response(req, model, resp)
}

// config builds one request's GenerateContentConfig. It is built afresh for
// every call: the SDK writes defaults into the config it is given.
func (m *Model) config(system *genai.Content, tools []*genai.Tool) *genai.GenerateContentConfig {
	o := &m.opts
	cfg := &genai.GenerateContentConfig{
		SystemInstruction: system,
		MaxOutputTokens:   o.MaxOutputTokens,
		Temperature:       o.Temperature,
		TopP:              o.TopP,
		TopK:              o.TopK,
		Seed:              o.Seed,
		StopSequences:     o.StopSequences,
		ThinkingConfig:    o.Thinking,
		SafetySettings:    o.SafetySettings,
		Tools:             tools,
	}
	if len(cfg.Tools) > 0 && o.ToolMode != "" {
		cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: o.ToolMode}}
	}
	if o.Configure != nil {
		o.Configure(cfg)
	}
	return cfg
}

// refusal returns the error for a response Gemini's filters stopped.
func refusal(format string, args ...any) error {
	return &llm.Error{Kind: llm.ErrorRefusal, Err: fmt.Errorf("gemini: "+format, args...)}
}
