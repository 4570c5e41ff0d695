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
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/toolloop/toolloop/llm"
)

// ResponsesOptions configures a Responses adapter. The zero value (or nil)
// sends only what the request carries, plus store=false.
type ResponsesOptions struct {
	// Model is used when a request names none (loop.Config.ModelName
	// names one for every request).
	Model string
	// MaxOutputTokens caps each reply, reasoning tokens included; 0 leaves
	// the server's limit.
	MaxOutputTokens int64
	// Temperature and TopP are sent when set; reasoning models reject
	// them. Go 1.26 spells a literal as new(0.2).
	Temperature *float64
	TopP        *float64
	// ParallelToolCalls, when set, turns parallel tool calls on or off;
	// nil leaves the server's default (on). It is only sent with a request
	// that has tools.
	ParallelToolCalls *bool
	// ReasoningEffort ("minimal", "low", "medium", "high", ...) is sent to
	// reasoning models when set.
	ReasoningEffort string
	// ReasoningSummary ("auto", "concise", "detailed") asks a reasoning
	// model for a summary of its reasoning, sent as reasoning.summary:
	// replies then show it in llm.Message.Reasoning. "" asks for none,
	// and the reasoning shows as Hidden.
	ReasoningSummary string
	// KeepReasoning says whether to ask for the encrypted content of
	// reasoning items (include ["reasoning.encrypted_content"]), which
	// lets the model keep its reasoning from one turn to the next (see
	// Responses). nil asks for it when ReasoningEffort or ReasoningSummary
	// is set, that is, when the model is known to reason: models that do
	// not (gpt-4o, gpt-4.1) refuse the include with HTTP 400 "Encrypted
	// content is not supported with this model". Set it to true for a
	// reasoning model used with neither option, or false for a server
	// that does not know the include.
	KeepReasoning *bool
	// StrictTools asks for strict schema adherence on every tool. The
	// Responses API makes function tools strict unless told otherwise; the
	// adapter sends strict=false unless this is set, because strict mode
	// requires every property to be required and additional ones forbidden.
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
	// timeout, extra body fields (option.WithJSONSet), ...
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

// Responses is an llm.Model over OpenAI's Responses API, used statelessly:
// each turn sends the whole history as input items with store=false and no
// previous_response_id, so the run's own history is the only state.
//
// A reasoning model's reasoning items are carried to the next turn in the
// assistant message's State (see KeepReasoning and the package
// documentation): the model keeps its train of thought across tool calls,
// and across a pause and a resume in another process, since the state is
// in the run's log.
//
// The text of a reply with several message items (a preamble before tool
// calls, then an answer) is joined with blank lines.
//
// It is immutable and safe for concurrent use.
type Responses struct {
	service responses.ResponseService
	opts    ResponsesOptions
	now     func() time.Time
}

var _ llm.Model = (*Responses)(nil)

// NewResponses returns a Responses adapter that sends its requests through
// client. opts may be nil; it is copied. Build the client with
// option.WithMaxRetries(0) so that the loop's own retries decide (see the
// package documentation).
func NewResponses(client sdk.Client, opts *ResponsesOptions) *Responses {
	r := &Responses{service: client.Responses, now: time.Now}
	if opts != nil {
		r.opts = *opts
		r.opts.Temperature, r.opts.TopP = clone(opts.Temperature), clone(opts.TopP)
		r.opts.ParallelToolCalls = clone(opts.ParallelToolCalls)
		r.opts.KeepReasoning = clone(opts.KeepReasoning)
		r.opts.RequestOptions = append([]option.RequestOption(nil), opts.RequestOptions...)
	}
	return r
}

// Generate sends the conversation and tool definitions as one response
// request and maps its output items back.
func (r *Responses) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params, dropped, err := r.params(req)
	if err != nil {
		return nil, err
	}
	var httpResp *http.Response
	resp, err := r.service.New(ctx, params, requestOptions(r.opts.RequestOptions, r.opts.MaxResponseBytes, r.opts.MaxStreamBytes, &httpResp)...)
	if err != nil {
		return nil, classify(ctx, err, httpResp, r.now())
	}
	out, err := responsesResponse(req, resp, string(params.Model))
	if err != nil {
		return nil, err
	}
	out.DroppedState = dropped
	return out, nil
}

// params maps a request onto the SDK's parameters. dropped counts the
// provider state in the history left out of them.
func (r *Responses) params(req *llm.Request) (p responses.ResponseNewParams, dropped int, err error) {
	model, err := modelName(req, r.opts.Model)
	if err != nil {
		return p, 0, err
	}
	p.Model = shared.ResponsesModel(model)
	p.Store = param.NewOpt(false)
	items, dropped, err := inputItems(req.Messages)
	if err != nil {
		return p, 0, err
	}
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
	for _, def := range req.Tools {
		schema, err := schemaMap(def)
		if err != nil {
			return p, 0, err
		}
		fn := &responses.FunctionToolParam{Name: def.Name, Parameters: schema, Strict: param.NewOpt(r.opts.StrictTools)}
		if def.Description != "" {
			fn.Description = param.NewOpt(def.Description)
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: fn})
	}
	o := &r.opts
	if len(p.Tools) > 0 && o.ParallelToolCalls != nil {
		p.ParallelToolCalls = param.NewOpt(*o.ParallelToolCalls)
	}
	if o.MaxOutputTokens > 0 {
		p.MaxOutputTokens = param.NewOpt(o.MaxOutputTokens)
	}
	if o.Temperature != nil {
		p.Temperature = param.NewOpt(*o.Temperature)
	}
	if o.TopP != nil {
		p.TopP = param.NewOpt(*o.TopP)
	}
	if o.ReasoningEffort != "" {
		p.Reasoning.Effort = shared.ReasoningEffort(o.ReasoningEffort)
	}
	if o.ReasoningSummary != "" {
		p.Reasoning.Summary = shared.ReasoningSummary(o.ReasoningSummary)
	}
	keep := o.ReasoningEffort != "" || o.ReasoningSummary != ""
	if o.KeepReasoning != nil {
		keep = *o.KeepReasoning
	}
	if keep {
		p.Include = []responses.ResponseIncludable{includeEncryptedReasoning}
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
		p.ServiceTier = responses.ResponseNewParamsServiceTier(o.ServiceTier)
	}
	if req.Output != nil {
		if p.Text, err = responsesTextFormat(req.Output); err != nil {
			return p, 0, err
		}
	}
	return p, dropped, nil
}

// inputItems maps the history onto Responses input items, in order: a
// message item per system, user and assistant text; a function_call item
// per tool call; a function_call_output item per result.
//
// An assistant message with this adapter's state goes back as the reply's
// own items instead (replayItems): its reasoning items, and its messages
// and function calls with their item IDs, in the reply's order. State that
// another provider made, or that no longer matches its message, is left
// out and counted in dropped; the message then goes back without item IDs,
// which needs no reasoning item.
func inputItems(msgs []llm.Message) (_ responses.ResponseInputParam, dropped int, _ error) {
	dropped = llm.ForeignState(msgs, ProviderResponses)
	out := make(responses.ResponseInputParam, 0, len(msgs))
	message := func(role responses.EasyInputMessageRole, text string) responses.ResponseInputItemUnionParam {
		return responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
			Role:    role,
			Content: responses.EasyInputMessageContentUnionParam{OfString: param.NewOpt(text)},
		}}
	}
	for i := range msgs {
		m := &msgs[i]
		for _, tc := range m.ToolCalls {
			// The adapter keeps no state on calls: one of its own
			// there came from elsewhere and is not sent.
			if ownState(tc.State) {
				dropped++
			}
		}
		own := ownState(m.State)
		if own && m.Role != llm.RoleAssistant {
			dropped++
		}
		switch m.Role {
		case llm.RoleSystem:
			out = append(out, message(responses.EasyInputMessageRoleSystem, m.Text))
		case llm.RoleUser:
			out = append(out, message(responses.EasyInputMessageRoleUser, m.Text))
		case llm.RoleAssistant:
			if own {
				items, err := replayItems(m, m.State.Data)
				if err == nil {
					out = append(out, items...)
					continue
				}
				dropped++
			}
			if m.Text != "" {
				out = append(out, message(responses.EasyInputMessageRoleAssistant, m.Text))
			}
			for _, tc := range m.ToolCalls {
				out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCall: &responses.ResponseFunctionToolCallParam{
					CallID:    tc.ID,
					Name:      tc.Name,
					Arguments: callArguments(tc),
				}})
			}
		case llm.RoleTool:
			if m.Result == nil {
				return nil, 0, badRequest(fmt.Errorf("openai: message %d: a tool message without a result", i))
			}
			out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: param.NewOpt(m.Result.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(resultContent(m.Result))},
			}})
		default:
			return nil, 0, badRequest(fmt.Errorf("openai: message %d: unknown role %q", i, m.Role))
		}
	}
	return out, dropped, nil
}

// ownState reports whether s is the Responses adapter's.
func ownState(s *llm.ProviderState) bool {
	return s != nil && s.Provider == ProviderResponses
}

// responsesResponse maps a response's output items onto an llm.Response.
func responsesResponse(req *llm.Request, resp *responses.Response, model string) (*llm.Response, error) {
	if resp == nil {
		return nil, fmt.Errorf("openai: empty response")
	}
	if err := responseFailed(resp); err != nil {
		return nil, err
	}
	out := llm.Message{Role: llm.RoleAssistant}
	var texts []string
	state := newStateBuilder()
	for i := range resp.Output {
		item := &resp.Output[i]
		switch item.Type {
		case "reasoning":
			out.Reasoning = append(out.Reasoning, reasoningOf(item))
			state.reasoningItem(item)
		case "message":
			var parts []string
			for _, part := range item.Content {
				switch part.Type {
				case "output_text":
					parts = append(parts, part.Text)
				case "refusal":
					return nil, refusal(part.Refusal)
				}
			}
			if text := strings.Join(parts, ""); text != "" {
				texts = append(texts, text)
			}
			state.message(item, parts)
		case "function_call":
			fc := item.AsFunctionCall()
			call := llm.ToolCall{ID: fc.CallID, Name: fc.Name, Arguments: rawArguments(fc.JSON.Arguments, fc.Arguments)}
			if call.ID == "" {
				call.ID = generatedID(req, len(out.ToolCalls), call.Name, call.Arguments)
			}
			out.ToolCalls = append(out.ToolCalls, call)
			state.functionCall(item, call.ID)
		}
		// Built-in tool calls (none are requested) are not part of the
		// provider-neutral history.
	}
	if err := llm.CheckCallIDs(out.ToolCalls); err != nil {
		return nil, err
	}
	out.Text = strings.Join(texts, paragraph)
	out.State = state.state()

	reason := "stop"
	switch {
	case resp.Status == responses.ResponseStatusIncomplete:
		switch r := resp.IncompleteDetails.Reason; r {
		case "max_output_tokens":
			reason = "length"
		case "content_filter":
			if strings.TrimSpace(out.Text) == "" && len(out.ToolCalls) == 0 {
				return nil, refusal("the reply was withheld by the content filter")
			}
			reason = "content_filter"
		case "":
			reason = "incomplete"
		default:
			reason = r
		}
	case len(out.ToolCalls) > 0:
		reason = "tool_calls"
	}
	if resp.Model != "" {
		model = string(resp.Model)
	}
	u := resp.Usage
	return &llm.Response{
		ID:      resp.ID,
		Model:   model,
		Message: out,
		Usage: llm.Usage{
			InputTokens:       u.InputTokens,
			OutputTokens:      u.OutputTokens,
			CachedInputTokens: u.InputTokensDetails.CachedTokens,
			ReasoningTokens:   u.OutputTokensDetails.ReasoningTokens,
		}.WithTotal(u.TotalTokens),
		FinishReason: reason,
		Truncated:    reason == "length",
	}, nil
}

// responseFailed reports a response that came back with HTTP 200 but did
// not finish: status failed (with the error it carries), cancelled, or
// still queued or in progress (background mode, which the adapter does not
// request).
func responseFailed(resp *responses.Response) error {
	switch resp.Status {
	case responses.ResponseStatusFailed:
		e := &llm.Error{Kind: llm.KindBadRequest}
		switch resp.Error.Code {
		case responses.ResponseErrorCodeServerError:
			e.Kind, e.Retryable = llm.KindUnavailable, true
		case responses.ResponseErrorCodeRateLimitExceeded:
			e.Kind, e.Retryable = llm.KindRateLimited, true
		}
		msg := resp.Error.Message
		if msg == "" {
			msg = "the response failed"
		}
		if resp.Error.Code != "" {
			msg = "code " + string(resp.Error.Code) + ": " + msg
		}
		contextLength(e, msg)
		e.Err = fmt.Errorf("openai: response %s failed: %s", resp.ID, msg)
		return e
	case responses.ResponseStatusCancelled, responses.ResponseStatusQueued, responses.ResponseStatusInProgress:
		// Only background mode (set through RequestOptions) or a cancel
		// from elsewhere gets here; retrying the same request cannot help.
		return &llm.Error{Kind: llm.KindBadRequest, Err: fmt.Errorf("openai: response %s has status %q; the adapter needs a finished response (no background mode)", resp.ID, resp.Status)}
	}
	return nil
}
