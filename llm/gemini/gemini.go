package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmhttp"
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
	// ThinkingBudget caps the tokens the model may think with (Gemini 2.5:
	// 0 turns thinking off where the model allows it, -1 lets the model
	// decide); nil leaves the model's default.
	ThinkingBudget *int32
	// ThinkingLevel sets how much Gemini 3 models think: "minimal", "low",
	// "medium" or "high" (in any case; which levels a model accepts is
	// Gemini's to say); "" leaves the model's default. Gemini refuses a
	// request with both a level and a budget, so New refuses the options.
	ThinkingLevel string
	// IncludeThoughts asks for thought summaries. They come back in the
	// message's Reasoning, never in its Text (see the package
	// documentation).
	IncludeThoughts bool
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
	// MaxResponseBytes caps the body of each reply: 0 means
	// llmhttp.DefaultMaxResponseBytes, negative no cap. A larger reply fails
	// with a non-retryable llm.KindBadResponse that names the cap. The
	// cap lives in the HTTP client, so New derives a client of its own
	// from the one it is given (see New).
	MaxResponseBytes int64
	// MaxStreamBytes caps the body of each streamed reply (Stream): 0
	// means llmhttp.DefaultMaxStreamBytes, negative no cap. A larger stream
	// fails with a non-retryable llm.KindBadResponse that names the cap,
	// after the deltas that came before it.
	MaxStreamBytes int64
	// NoSignatureFallback stops the adapter from sending the placeholder
	// thought signature for replayed calls that carry no Gemini state (see
	// the package documentation). Such requests then fail with a
	// bad_request error on models that require signatures.
	NoSignatureFallback bool
}

// Model is an llm.Model backed by the Gemini API. It is safe for concurrent
// use and keeps nothing between requests: what Gemini needs back (thought
// signatures) travels in the messages, so any Model, in any process, can
// take a conversation over.
type Model struct {
	client *genai.Client
	opts   Options
	// thinking is the request's thinking configuration built from opts,
	// nil for the model's default.
	thinking *genai.ThinkingConfig
	// setupErr is why New could not accept its options or derive its
	// guarded client; every request fails with it.
	setupErr error
}

var _ llm.Model = (*Model)(nil)

// New returns a Model that sends its requests through client. opts may be
// nil; it is copied (its slices too, not the values its pointers point
// to), so later changes to it have no effect. New panics if client is nil.
//
// The genai SDK has no per-request middleware, so to cap the size of
// replies (Options.MaxResponseBytes) New builds a client of its own from
// client's configuration (ClientConfig, already resolved: nothing more is
// read from the environment), with a copy of its HTTP client whose
// transport enforces the cap (llmhttp.ResponseGuard). client itself and its
// HTTP client are left as they were.
//
// Options Gemini would refuse (an unknown ThinkingLevel, a level together
// with a budget) make every request fail with a bad_request *llm.Error
// that names the option, before anything is sent.
func New(client *genai.Client, opts *Options) *Model {
	if client == nil {
		panic("gemini: New needs a *genai.Client")
	}
	m := &Model{client: client}
	if opts != nil {
		m.opts = *opts
		m.opts.StopSequences = append([]string(nil), opts.StopSequences...)
		m.opts.SafetySettings = append([]*genai.SafetySetting(nil), opts.SafetySettings...)
		if opts.ThinkingBudget != nil {
			m.opts.ThinkingBudget = genai.Ptr(*opts.ThinkingBudget)
		}
	}
	var err error
	if m.thinking, err = thinkingConfig(&m.opts); err != nil {
		m.setupErr = &llm.Error{Kind: llm.KindBadRequest, Err: err}
		return m
	}
	m.client, m.setupErr = guarded(client, llmhttp.ResponseGuard{Provider: Provider,
		MaxBytes: m.opts.MaxResponseBytes, MaxStreamBytes: m.opts.MaxStreamBytes})
	return m
}

// Validate reports options Gemini would refuse (an unknown ThinkingLevel,
// a level together with a budget, a budget below -1), so that a command
// line can say so before the first request; New makes every request fail
// with the same error.
func (o *Options) Validate() error {
	_, err := thinkingConfig(o)
	return err
}

// thinkingConfig builds the thinking configuration the options ask for,
// nil when they leave the model's default.
func thinkingConfig(o *Options) (*genai.ThinkingConfig, error) {
	if o.ThinkingBudget == nil && o.ThinkingLevel == "" && !o.IncludeThoughts {
		return nil, nil
	}
	tc := &genai.ThinkingConfig{IncludeThoughts: o.IncludeThoughts, ThinkingBudget: o.ThinkingBudget}
	if o.ThinkingLevel != "" {
		switch level := genai.ThinkingLevel(strings.ToUpper(o.ThinkingLevel)); level {
		case genai.ThinkingLevelMinimal, genai.ThinkingLevelLow, genai.ThinkingLevelMedium, genai.ThinkingLevelHigh:
			tc.ThinkingLevel = level
		default:
			return nil, fmt.Errorf("gemini: Options.ThinkingLevel %q is not one of minimal, low, medium, high", o.ThinkingLevel)
		}
		if o.ThinkingBudget != nil {
			return nil, fmt.Errorf("gemini: Options.ThinkingLevel %q and Options.ThinkingBudget %d are both set; Gemini accepts one or the other", o.ThinkingLevel, *o.ThinkingBudget)
		}
	}
	if b := o.ThinkingBudget; b != nil && *b < -1 {
		return nil, fmt.Errorf("gemini: Options.ThinkingBudget %d is negative; use -1 for a budget the model decides", *b)
	}
	return tc, nil
}

// guarded returns a client like c whose HTTP client checks every reply
// with g, and tells a stream why its body stopped (see readWatch).
func guarded(c *genai.Client, g llmhttp.ResponseGuard) (*genai.Client, error) {
	cc := c.ClientConfig()
	cc.HTTPClient = g.Client(cc.HTTPClient)
	cc.HTTPClient.Transport = watchTransport{next: cc.HTTPClient.Transport}
	// The configuration is resolved, so building needs no context: no
	// credentials are looked up.
	gc, err := genai.NewClient(context.Background(), &cc)
	if err != nil {
		return c, &llm.Error{Kind: llm.KindBadRequest, Err: fmt.Errorf("gemini: cannot install the cap on a response's size in the client: %w", err)}
	}
	return gc, nil
}

// Generate sends the conversation to Gemini's generateContent and maps the
// first candidate back: its text, or its function calls as tool calls.
// Failures are *llm.Error values (see the package documentation), except a
// canceled or expired ctx, whose error is returned as is.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	c, err := m.prepare(req)
	if err != nil {
		return nil, err
	}
	resp, err := m.client.Models.GenerateContent(ctx, c.model, c.contents, c.cfg)
	if err != nil {
		return nil, m.classify(ctx, err)
	}
	out, err := m.response(req, c.model, resp)
	if err != nil {
		return nil, err
	}
	out.DroppedState = c.droppedState
	return out, nil
}

// call is one request as the SDK takes it, built from an llm.Request.
type call struct {
	model    string
	contents []*genai.Content
	cfg      *genai.GenerateContentConfig
	// droppedState is the response's DroppedState: the history's state
	// that did not reach Gemini as it came.
	droppedState int
}

// prepare builds the request Generate and Stream send. Its failures are
// bad_request *llm.Error values: nothing was sent.
func (m *Model) prepare(req *llm.Request) (call, error) {
	if m.setupErr != nil {
		return call{}, m.setupErr
	}
	model := req.Model
	if model == "" {
		model = m.opts.Model
	}
	if model == "" {
		return call{}, &llm.Error{Kind: llm.KindBadRequest, Err: errors.New("gemini: no model named: set llm.Request.Model or Options.Model")}
	}
	contents, system, dropped, err := m.contents(model, req.Messages)
	if err != nil {
		return call{}, &llm.Error{Kind: llm.KindBadRequest, Err: err}
	}
	tools, err := toolsOf(req.Tools)
	if err != nil {
		return call{}, &llm.Error{Kind: llm.KindBadRequest, Err: err}
	}
	cfg := m.config(system, tools)
	if err := structuredOutput(cfg, model, req.Output); err != nil {
		return call{}, &llm.Error{Kind: llm.KindBadRequest, Err: err}
	}
	return call{model: model, contents: contents, cfg: cfg,
		droppedState: llm.ForeignState(req.Messages, Provider) + dropped}, nil
}

// structuredOutput asks for the answer as JSON matching o's schema
// (responseMimeType application/json and responseJsonSchema, which takes
// JSON Schema as it is, unlike responseSchema's OpenAPI subset), unless
// cfg already says how to answer (Options.Configure set a response schema
// or MIME type) or the request has tools and the model is older than
// Gemini 3: Gemini 1.x and 2.x refuse function calling together with a
// JSON response type, so such runs rely on the loop's validation alone.
func structuredOutput(cfg *genai.GenerateContentConfig, model string, o *llm.OutputFormat) error {
	if o == nil || cfg.ResponseMIMEType != "" || cfg.ResponseSchema != nil || cfg.ResponseJsonSchema != nil {
		return nil
	}
	if len(cfg.Tools) > 0 && !requiresSignatures(model) {
		return nil
	}
	var schema map[string]any
	if err := json.Unmarshal(o.Schema, &schema); err != nil {
		return fmt.Errorf("gemini: output schema %q is not a JSON object: %w", o.Name, err)
	}
	cfg.ResponseMIMEType = "application/json"
	cfg.ResponseJsonSchema = schema
	return nil
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
		SafetySettings:    o.SafetySettings,
		Tools:             tools,
	}
	if m.thinking != nil {
		// A copy, budget included: Configure may change what it is given.
		tc := *m.thinking
		if tc.ThinkingBudget != nil {
			tc.ThinkingBudget = genai.Ptr(*tc.ThinkingBudget)
		}
		cfg.ThinkingConfig = &tc
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
	return &llm.Error{Kind: llm.KindRefusal, Err: fmt.Errorf("gemini: "+format, args...)}
}
