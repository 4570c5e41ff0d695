package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolloop/toolloop/llm"
)

// params builds the Messages API request for req.
func (m *Model) params(req *llm.Request) (anthropic.MessageNewParams, error) {
	var p anthropic.MessageNewParams
	if m.err != nil {
		return p, badRequest(m.err)
	}
	name := req.Model
	if name == "" {
		name = m.opts.Model
	}
	if name == "" {
		return p, badRequest(errors.New("anthropic: no model named: set llm.Request.Model or Options.Model"))
	}
	system, msgs, err := messages(req.Messages)
	if err != nil {
		return p, badRequest(err)
	}
	tools, err := toolParams(req.Tools)
	if err != nil {
		return p, badRequest(err)
	}
	p = anthropic.MessageNewParams{
		Model:         name,
		MaxTokens:     m.opts.MaxTokens,
		System:        system,
		Messages:      msgs,
		Tools:         tools,
		StopSequences: m.opts.StopSequences,
	}
	if len(tools) > 0 && m.opts.DisableParallelToolUse {
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{
			DisableParallelToolUse: anthropic.Bool(true),
		}}
	}
	if m.opts.PromptCaching {
		placeBreakpoints(&p, m.opts.cacheControl())
	}
	if m.opts.UserID != "" {
		p.Metadata = anthropic.MetadataParam{UserID: anthropic.String(m.opts.UserID)}
	}
	switch {
	case m.opts.ThinkingBudget > 0:
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(m.opts.ThinkingBudget)
	case m.opts.AdaptiveThinking:
		p.Thinking = anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{}}
	}
	if req.Output != nil && !m.opts.NoOutputFormat {
		// Structured outputs: output_config.format {type: json_schema,
		// schema}. The schema's members go as sent.
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(req.Output.Schema, &fields); err != nil {
			return p, badRequest(fmt.Errorf("anthropic: output schema %q is not a JSON object: %w", req.Output.Name, err))
		}
		schema := make(map[string]any, len(fields))
		for k, v := range fields {
			schema[k] = v
		}
		p.OutputConfig.Format = anthropic.JSONOutputFormatParam{Schema: schema}
	}
	return p, nil
}

// badRequest marks a request the adapter cannot build: no attempt can
// succeed, so it is not retryable.
func badRequest(err error) *llm.Error {
	return &llm.Error{Kind: llm.KindBadRequest, Err: err}
}

// messages splits a history into the system field and the API's messages,
// merging consecutive messages of one role (tool results count as user
// content) into one message.
func messages(history []llm.Message) ([]anthropic.TextBlockParam, []anthropic.MessageParam, error) {
	var (
		system []anthropic.TextBlockParam
		out    []anthropic.MessageParam
		role   llm.Role // role of the message being assembled
		blocks []anthropic.ContentBlockParamUnion
	)
	flush := func() {
		if len(blocks) == 0 {
			return
		}
		switch role {
		case llm.RoleUser:
			out = append(out, anthropic.NewUserMessage(resultsFirst(blocks)...))
		case llm.RoleAssistant:
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		}
		blocks = nil
	}
	add := func(r llm.Role, b ...anthropic.ContentBlockParamUnion) {
		if r != role {
			flush()
			role = r
		}
		blocks = append(blocks, b...)
	}
	for i, msg := range history {
		switch msg.Role {
		case llm.RoleSystem:
			if msg.Text != "" {
				system = append(system, anthropic.TextBlockParam{Text: msg.Text})
			}
		case llm.RoleUser:
			// The API rejects empty text blocks.
			if msg.Text != "" {
				add(llm.RoleUser, anthropic.NewTextBlock(msg.Text))
			}
		case llm.RoleAssistant:
			// Only this adapter's own state is read; another provider's
			// is left out (and counted by Generate).
			if data := msg.State.StateOf(provider); data != nil {
				st, err := decodeState(data)
				if err != nil {
					return nil, nil, fmt.Errorf("anthropic: message %d: %w", i, err)
				}
				add(llm.RoleAssistant, stateBlocks(msg, st)...)
				continue
			}
			add(llm.RoleAssistant, plainBlocks(msg)...)
		case llm.RoleTool:
			if msg.Result == nil {
				return nil, nil, fmt.Errorf("anthropic: message %d is a tool message without a result", i)
			}
			add(llm.RoleUser, toolResult(*msg.Result))
		default:
			return nil, nil, fmt.Errorf("anthropic: message %d has unknown role %q", i, msg.Role)
		}
	}
	flush()
	return system, out, nil
}

// plainBlocks renders an assistant message without state: its text, then
// its calls.
func plainBlocks(msg llm.Message) []anthropic.ContentBlockParamUnion {
	var b []anthropic.ContentBlockParamUnion
	if msg.Text != "" {
		b = append(b, anthropic.NewTextBlock(msg.Text))
	}
	for _, c := range msg.ToolCalls {
		b = append(b, toolUseBlock(c))
	}
	return b
}

// toolUseBlock renders one call as a tool_use block.
func toolUseBlock(c llm.ToolCall) anthropic.ContentBlockParamUnion {
	return anthropic.ContentBlockParamUnion{OfToolUse: &anthropic.ToolUseBlockParam{
		ID:    c.ID,
		Name:  c.Name,
		Input: toolInput(c.Arguments),
	}}
}

// resultsFirst moves tool_result blocks ahead of the other blocks of a user
// message, keeping the order within each group: the API wants the results
// of the previous turn first.
func resultsFirst(blocks []anthropic.ContentBlockParamUnion) []anthropic.ContentBlockParamUnion {
	out := make([]anthropic.ContentBlockParamUnion, 0, len(blocks))
	for _, b := range blocks {
		if b.OfToolResult != nil {
			out = append(out, b)
		}
	}
	for _, b := range blocks {
		if b.OfToolResult == nil {
			out = append(out, b)
		}
	}
	return out
}

// emptyObject is the tool_use input sent for arguments that are not a JSON
// object.
var emptyObject = json.RawMessage(`{}`)

// toolInput returns the arguments to send as a tool_use block's input. The
// API accepts only a JSON object there; anything else (the model's broken
// JSON, which the loop has already answered with an invalid-arguments
// result) is replaced by {} so that the conversation can go on.
func toolInput(args json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(args)
	if len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return json.RawMessage(t)
	}
	return emptyObject
}

// toolResult renders one result as a tool_result block. Its content is the
// result's JSON as text; error and skipped results set is_error.
func toolResult(r llm.ToolResult) anthropic.ContentBlockParamUnion {
	text := string(r.Content)
	failed := r.Status != llm.StatusOK
	if text == "" && failed {
		kind := r.ErrorKind
		if kind == "" {
			kind = llm.KindInternal
			if r.Status == llm.StatusSkipped {
				kind = llm.KindRunStopped
			}
		}
		text = string(llm.ErrorContent(kind, "the tool call was "+string(r.Status)))
	}
	b := &anthropic.ToolResultBlockParam{ToolUseID: r.CallID}
	if text != "" { // the API rejects empty text blocks; no content is allowed
		b.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: text}}}
	}
	if failed {
		b.IsError = anthropic.Bool(true)
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: b}
}

// toolParams maps tool definitions to the API's custom tools.
func toolParams(defs []llm.ToolDefinition) ([]anthropic.ToolUnionParam, error) {
	if len(defs) == 0 {
		return nil, nil
	}
	out := make([]anthropic.ToolUnionParam, len(defs))
	for i, d := range defs {
		schema, err := inputSchema(d.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("anthropic: tool %q: %w", d.Name, err)
		}
		t := &anthropic.ToolParam{Name: d.Name, InputSchema: schema}
		if d.Description != "" {
			t.Description = anthropic.String(d.Description)
		}
		out[i] = anthropic.ToolUnionParam{OfTool: t}
	}
	return out, nil
}

// inputSchema carries a JSON Schema into the SDK's schema type. Values are
// kept as raw JSON, so nothing is lost or reformatted beyond whitespace.
// The API needs an object schema; an empty schema means an object with no
// declared properties.
func inputSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var s anthropic.ToolInputSchemaParam
	if len(bytes.TrimSpace(raw)) == 0 {
		return s, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return s, fmt.Errorf("input schema is not a JSON object: %w", err)
	}
	for k, v := range fields {
		switch k {
		case "type":
			var typ string
			if err := json.Unmarshal(v, &typ); err != nil || typ != "object" {
				return s, fmt.Errorf("input schema has type %s; the Messages API takes only object schemas", v)
			}
		case "properties":
			s.Properties = v
		case "required":
			if err := json.Unmarshal(v, &s.Required); err != nil {
				return s, fmt.Errorf("input schema's required is not a list of names: %w", err)
			}
		default:
			if s.ExtraFields == nil {
				s.ExtraFields = make(map[string]any)
			}
			s.ExtraFields[k] = v
		}
	}
	return s, nil
}
