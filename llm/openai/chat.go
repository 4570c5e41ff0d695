package openai

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/toolloop/toolloop/llm"
)

// ChatOptions configures a Chat adapter. The zero value (or nil) sends
// only what the request carries and leaves every setting to the server.
type ChatOptions struct {
	// Model is used when a request names none (loop.Config.ModelName
	// names one for every request).
	Model string
	// MaxOutputTokens caps each reply, reasoning tokens included; 0 leaves
	// the server's limit. It is sent as max_completion_tokens, or as
	// max_tokens when UseMaxTokens is set.
	MaxOutputTokens int64
	// UseMaxTokens sends the cap as the older max_tokens, for compatible
	// servers that do not know max_completion_tokens. OpenAI's reasoning
	// models reject max_tokens.
	UseMaxTokens bool
	// Temperature and TopP are sent when set; reasoning models reject
	// them. Go 1.26 spells a literal as new(0.2).
	Temperature *float64
	TopP        *float64
	// Seed asks for best-effort deterministic sampling when set.
	Seed *int64
	// ParallelToolCalls, when set, turns parallel tool calls on or off;
	// nil leaves the server's default (on at OpenAI). It is only sent with
	// a request that has tools, since OpenAI rejects it otherwise.
	ParallelToolCalls *bool
	// ReasoningEffort ("minimal", "low", "medium", "high", ...) is sent to
	// reasoning models when set.
	ReasoningEffort string
	// StrictTools asks for strict schema adherence on every tool. OpenAI
	// then requires each schema to list all properties as required and to
	// forbid additional ones.
	StrictTools bool
	// PromptCacheKey, SafetyIdentifier and ServiceTier ("auto", "default",
	// "flex", "priority") are passed through when set.
	PromptCacheKey   string
	SafetyIdentifier string
	ServiceTier      string
	// CacheKeyPerRun sends a prompt_cache_key of the run's own with every
	// request, so that OpenAI routes a run's turns to one prompt cache:
	// llm.Request.CacheKey when set, else a hash of the conversation's
	// start (the model, the tools, the messages up to the first user
	// message), which every turn of a run shares. PromptCacheKey, when
	// set, is sent instead. OpenAI caches prompts of 1,024 tokens or more
	// by itself; the key only keeps one run's requests together.
	CacheKeyPerRun bool
	// RequestOptions are added to every request: headers, a per-request
	// timeout, extra body fields a compatible server understands
	// (option.WithJSONSet), ...
	RequestOptions []option.RequestOption
	// MaxResponseBytes caps the body of each reply: 0 means
	// llmhttp.DefaultMaxResponseBytes, negative no cap. A larger reply fails
	// with a non-retryable llm.KindBadResponse that names the cap.
	MaxResponseBytes int64
	// MaxStreamBytes caps the body of each streamed reply (Stream): 0
	// means llmhttp.DefaultMaxStreamBytes, negative no cap. An event stream
	// repeats its framing with every piece, so it needs a larger cap than
	// the same reply as one JSON body; past it the stream fails with a
	// non-retryable llm.KindBadResponse.
	MaxStreamBytes int64
}

// Chat is an llm.Model over OpenAI's Chat Completions API, or any server
// that speaks it. Chat Completions returns no reasoning to send back, so
// Chat attaches no state to messages and sends none: state another
// adapter attached to the history is left out and counted in
// llm.Response.DroppedState. It is immutable and safe for concurrent use.
type Chat struct {
	completions sdk.ChatCompletionService
	opts        ChatOptions
	now         func() time.Time
}

var _ llm.Model = (*Chat)(nil)

// NewChat returns a Chat adapter that sends its requests through client.
// opts may be nil; it is copied. Build the client with
// option.WithMaxRetries(0) so that the loop's own retries decide (see the
// package documentation).
func NewChat(client sdk.Client, opts *ChatOptions) *Chat {
	c := &Chat{completions: client.Chat.Completions, now: time.Now}
	if opts != nil {
		c.opts = *opts
		c.opts.Temperature, c.opts.TopP = clone(opts.Temperature), clone(opts.TopP)
		c.opts.Seed, c.opts.ParallelToolCalls = clone(opts.Seed), clone(opts.ParallelToolCalls)
		c.opts.RequestOptions = append([]option.RequestOption(nil), opts.RequestOptions...)
	}
	return c
}

// compatibleKey is sent when NewCompatible is given no API key: most local
// servers ignore the header, and some reject a request without one.
const compatibleKey = "unused"

// NewCompatible returns a Chat adapter for an OpenAI-compatible server
// (Ollama at http://localhost:11434/v1, vLLM, llama.cpp's server, LM
// Studio, ...). baseURL is the URL the paths /chat/completions hang from,
// usually ending in /v1. An empty apiKey sends a placeholder.
//
// The client it builds does not read OPENAI_* environment variables (so no
// OpenAI organization or project header reaches another server) and does
// not retry on its own; extra options are applied last and can change that,
// or set an HTTP client (option.WithHTTPClient) with timeouts.
func NewCompatible(baseURL, apiKey string, opts *ChatOptions, extra ...option.RequestOption) *Chat {
	if apiKey == "" {
		apiKey = compatibleKey
	}
	ro := append([]option.RequestOption{
		option.WithBaseURL(baseURL),
		option.WithAPIKey(apiKey),
		option.WithMaxRetries(0),
	}, extra...)
	// openai.NewClient would read the environment; the chat service alone
	// is all the adapter uses.
	return NewChat(sdk.Client{Options: ro, Chat: sdk.NewChatService(ro...)}, opts)
}

// Generate sends the conversation and tool definitions as one chat
// completion request and maps the first choice back.
func (c *Chat) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params, err := c.params(req)
	if err != nil {
		return nil, err
	}
	var httpResp *http.Response
	completion, err := c.completions.New(ctx, params, requestOptions(c.opts.RequestOptions, c.opts.MaxResponseBytes, c.opts.MaxStreamBytes, &httpResp)...)
	if err != nil {
		return nil, classify(ctx, err, httpResp, c.now())
	}
	resp, err := chatResponse(req, completion, string(params.Model))
	if err != nil {
		return nil, err
	}
	// Chat Completions has no place for any provider's state: all of it
	// is left out, and the log says how much.
	resp.DroppedState = llm.ForeignState(req.Messages, providerChat)
	return resp, nil
}

// params maps a request onto the SDK's parameters.
func (c *Chat) params(req *llm.Request) (sdk.ChatCompletionNewParams, error) {
	var p sdk.ChatCompletionNewParams
	model, err := modelName(req, c.opts.Model)
	if err != nil {
		return p, err
	}
	p.Model = shared.ChatModel(model)
	if p.Messages, err = chatMessages(req.Messages); err != nil {
		return p, err
	}
	for _, def := range req.Tools {
		schema, err := schemaMap(def)
		if err != nil {
			return p, err
		}
		fn := shared.FunctionDefinitionParam{Name: def.Name, Parameters: schema}
		if def.Description != "" {
			fn.Description = param.NewOpt(def.Description)
		}
		if c.opts.StrictTools {
			fn.Strict = param.NewOpt(true)
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	o := &c.opts
	if len(p.Tools) > 0 && o.ParallelToolCalls != nil {
		p.ParallelToolCalls = param.NewOpt(*o.ParallelToolCalls)
	}
	if o.MaxOutputTokens > 0 {
		if o.UseMaxTokens {
			p.MaxTokens = param.NewOpt(o.MaxOutputTokens)
		} else {
			p.MaxCompletionTokens = param.NewOpt(o.MaxOutputTokens)
		}
	}
	if o.Temperature != nil {
		p.Temperature = param.NewOpt(*o.Temperature)
	}
	if o.TopP != nil {
		p.TopP = param.NewOpt(*o.TopP)
	}
	if o.Seed != nil {
		p.Seed = param.NewOpt(*o.Seed)
	}
	if o.ReasoningEffort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(o.ReasoningEffort)
	}
	switch {
	case o.PromptCacheKey != "":
		p.PromptCacheKey = param.NewOpt(o.PromptCacheKey)
	case o.CacheKeyPerRun:
		p.PromptCacheKey = param.NewOpt(runCacheKey(req, model))
	}
	if o.SafetyIdentifier != "" {
		p.SafetyIdentifier = param.NewOpt(o.SafetyIdentifier)
	}
	if o.ServiceTier != "" {
		p.ServiceTier = sdk.ChatCompletionNewParamsServiceTier(o.ServiceTier)
	}
	if req.Output != nil {
		if p.ResponseFormat, err = chatResponseFormat(req.Output); err != nil {
			return p, err
		}
	}
	return p, nil
}

// chatMessages maps the history onto Chat Completions messages, one for
// one and in order.
func chatMessages(msgs []llm.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	out := make([]sdk.ChatCompletionMessageParamUnion, 0, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleSystem:
			out = append(out, sdk.SystemMessage(m.Text))
		case llm.RoleUser:
			out = append(out, sdk.UserMessage(m.Text))
		case llm.RoleAssistant:
			a := &sdk.ChatCompletionAssistantMessageParam{}
			if m.Text != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = param.NewOpt(m.Text)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID: tc.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      tc.Name,
							Arguments: callArguments(tc),
						},
					},
				})
			}
			out = append(out, sdk.ChatCompletionMessageParamUnion{OfAssistant: a})
		case llm.RoleTool:
			if m.Result == nil {
				return nil, badRequest(fmt.Errorf("openai: message %d: a tool message without a result", i))
			}
			out = append(out, sdk.ToolMessage(resultContent(m.Result), m.Result.CallID))
		default:
			return nil, badRequest(fmt.Errorf("openai: message %d: unknown role %q", i, m.Role))
		}
	}
	return out, nil
}

// chatResponse maps a completion's first choice onto an llm.Response.
func chatResponse(req *llm.Request, cc *sdk.ChatCompletion, model string) (*llm.Response, error) {
	if cc == nil || len(cc.Choices) == 0 {
		return nil, fmt.Errorf("openai: the chat completion has no choices")
	}
	choice := cc.Choices[0]
	msg := choice.Message
	if msg.Refusal != "" {
		return nil, refusal(msg.Refusal)
	}
	out := llm.Message{Role: llm.RoleAssistant, Text: msg.Content}
	for i, tc := range msg.ToolCalls {
		var call llm.ToolCall
		if tc.Type == "custom" {
			call = llm.ToolCall{ID: tc.ID, Name: tc.Custom.Name, Arguments: rawArguments(tc.Custom.JSON.Input, tc.Custom.Input)}
		} else {
			call = llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: rawArguments(tc.Function.JSON.Arguments, tc.Function.Arguments)}
		}
		if call.ID == "" {
			call.ID = generatedID(req, i, call.Name, call.Arguments)
		}
		out.ToolCalls = append(out.ToolCalls, call)
	}
	if err := llm.CheckCallIDs(out.ToolCalls); err != nil {
		return nil, err
	}
	reason := choice.FinishReason
	if reason == "content_filter" && strings.TrimSpace(out.Text) == "" && len(out.ToolCalls) == 0 {
		return nil, refusal("the reply was withheld by the content filter")
	}
	truncated := reason == "length"
	if reason == "" {
		reason = inferredReason(len(out.ToolCalls))
	}
	if cc.Model != "" {
		model = cc.Model
	}
	return &llm.Response{
		ID:           cc.ID,
		Model:        model,
		Message:      out,
		Usage:        chatUsage(cc.Usage),
		FinishReason: reason,
		Truncated:    truncated,
	}, nil
}

// inferredReason is the finish reason of a reply that gave none (some
// compatible servers never send one): "tool_calls" when it has calls, else
// "stop". Generate and Stream read such a reply alike.
func inferredReason(calls int) string {
	if calls > 0 {
		return "tool_calls"
	}
	return "stop"
}

// chatUsage maps a completion's usage. The parts are reconciled with
// total_tokens, which is what the server billed: xAI's completion_tokens
// leaves the reasoning tokens out, and only the total counts them.
func chatUsage(u sdk.CompletionUsage) llm.Usage {
	return llm.Usage{
		InputTokens:       u.PromptTokens,
		OutputTokens:      u.CompletionTokens,
		CachedInputTokens: u.PromptTokensDetails.CachedTokens,
		ReasoningTokens:   u.CompletionTokensDetails.ReasoningTokens,
	}.WithTotal(u.TotalTokens)
}
