package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
)

// Gemini's role names.
const (
	roleUser  = "user"
	roleModel = "model"
)

// contents maps the history onto Gemini contents and the system
// instruction. Consecutive tool messages, one turn's results, share one
// user content. dropped counts the Gemini state left out: the adapter's
// own message states that no longer fit their message, and the model
// turns sent with the placeholder signature (other providers' state is
// counted by the caller, with llm.ForeignState).
func (m *Model) contents(model string, msgs []llm.Message) (contents []*genai.Content, system *genai.Content, dropped int, err error) {
	var (
		results  *genai.Content // the open content of tool results, if the last message was one
		fallback = !m.opts.NoSignatureFallback && requiresSignatures(model)
		// turn is where the current turn begins, the last user message
		// with text: Gemini validates the signatures of its steps only,
		// so an earlier step needs no placeholder.
		turn = -1
	)
	for i, msg := range msgs {
		if msg.Role == llm.RoleUser && msg.Text != "" {
			turn = i
		}
	}
	for i, msg := range msgs {
		if msg.Role != llm.RoleTool {
			results = nil
		}
		switch msg.Role {
		case llm.RoleSystem:
			if msg.Text == "" {
				continue
			}
			if system == nil {
				system = &genai.Content{Role: roleUser}
			}
			system.Parts = append(system.Parts, &genai.Part{Text: msg.Text})
		case llm.RoleUser:
			if msg.Text == "" {
				continue
			}
			contents = append(contents, &genai.Content{Role: roleUser, Parts: []*genai.Part{{Text: msg.Text}}})
		case llm.RoleAssistant:
			c, lost, err := modelContent(msg, fallback && i > turn)
			if err != nil {
				return nil, nil, 0, fmt.Errorf("gemini: message %d: %w", i, err)
			}
			dropped += lost
			if c != nil {
				contents = append(contents, c)
			}
		case llm.RoleTool:
			if msg.Result == nil {
				return nil, nil, 0, fmt.Errorf("gemini: message %d is a tool message without a result", i)
			}
			if results == nil {
				results = &genai.Content{Role: roleUser}
				contents = append(contents, results)
			}
			results.Parts = append(results.Parts, &genai.Part{FunctionResponse: functionResponse(msg.Result)})
		default:
			return nil, nil, 0, fmt.Errorf("gemini: message %d has unknown role %q", i, msg.Role)
		}
	}
	return contents, system, dropped, nil
}

// modelContent maps an assistant message. Each call carries the thought
// signature in its Gemini state; the message's Gemini state, when it has
// one, puts its text and signed thought parts back in the order and with
// the signatures Gemini sent them; without one, the text comes first, then
// the calls. lost counts the Gemini state left out (see contents). An
// empty message maps to nil: Gemini rejects a content without parts.
func modelContent(msg llm.Message, fallback bool) (c *genai.Content, lost int, err error) {
	calls := make([]*genai.Part, len(msg.ToolCalls))
	signed := false
	for i, call := range msg.ToolCalls {
		sig := call.State.StateOf(Provider)
		signed = signed || len(sig) > 0
		calls[i] = &genai.Part{
			FunctionCall:     &genai.FunctionCall{ID: call.ID, Name: call.Name, Args: argsObject(call.Arguments)},
			ThoughtSignature: sig,
		}
	}
	// A step none of whose calls Gemini signed (a history from another
	// provider, or from before signatures travelled in the messages) gets
	// the placeholder on its first call, where Gemini looks for one.
	if len(calls) > 0 && !signed && fallback {
		calls[0].ThoughtSignature = []byte(placeholderSignature)
		lost++
	}
	c = &genai.Content{Role: roleModel}
	if data := msg.State.StateOf(Provider); data != nil {
		l, err := decodeLayout(data)
		if err != nil {
			return nil, 0, err
		}
		if parts, ok := l.parts(msg, calls); ok {
			c.Parts = parts
		} else {
			lost++
		}
	}
	if c.Parts == nil {
		if msg.Text != "" {
			c.Parts = append(c.Parts, &genai.Part{Text: msg.Text})
		}
		c.Parts = append(c.Parts, calls...)
	}
	if len(c.Parts) == 0 {
		return nil, lost, nil
	}
	return c, lost, nil
}

// argsObject parses stored arguments as a JSON object. Anything else
// (invalid JSON, null, an array, a scalar) becomes the empty object:
// Gemini's args must be an object, and the call's invalid arguments were
// already answered by an error result the model can read.
func argsObject(raw json.RawMessage) map[string]any {
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return map[string]any{}
	}
	return args
}

// functionResponse maps a tool result: {"output": content} when ok; for an
// error or skipped result the content itself when it is an error object,
// else {"error": content}.
func functionResponse(r *llm.ToolResult) *genai.FunctionResponse {
	content := jsonValue(r.Content)
	var resp map[string]any
	if r.Status == llm.StatusOK {
		resp = map[string]any{"output": content}
	} else {
		switch obj, ok := content.(map[string]any); {
		case ok && obj["error"] != nil:
			resp = obj
		case content == nil:
			resp = map[string]any{"error": string(r.Status)}
		default:
			resp = map[string]any{"error": content}
		}
		if _, ok := resp["kind"]; !ok && r.ErrorKind != "" {
			resp["kind"] = string(r.ErrorKind)
		}
	}
	return &genai.FunctionResponse{ID: r.CallID, Name: r.Name, Response: resp}
}

// jsonValue decodes a result's content; content that is not JSON is kept
// as a string, and empty content is null.
func jsonValue(raw json.RawMessage) any {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return v
}

// toolsOf declares the tools as one Tool of function declarations, the
// input schemas passed through as JSON Schema.
func toolsOf(defs []llm.ToolDefinition) ([]*genai.Tool, error) {
	if len(defs) == 0 {
		return nil, nil
	}
	decls := make([]*genai.FunctionDeclaration, len(defs))
	for i, d := range defs {
		decl := &genai.FunctionDeclaration{Name: d.Name, Description: d.Description}
		if len(bytes.TrimSpace(d.InputSchema)) > 0 {
			if !json.Valid(d.InputSchema) {
				return nil, fmt.Errorf("gemini: tool %q has an input schema that is not valid JSON", d.Name)
			}
			decl.ParametersJsonSchema = d.InputSchema
		}
		decls[i] = decl
	}
	return []*genai.Tool{{FunctionDeclarations: decls}}, nil
}

// requiresSignatures reports whether model validates thought signatures on
// replayed function calls: Gemini 3 and later. Names of Gemini 1.x and 2.x
// models, and non-Gemini models, report false; aliases without a version
// ("gemini-flash-latest") report true, since they point at current models.
func requiresSignatures(model string) bool {
	name := model[strings.LastIndex(model, "/")+1:]
	rest, ok := strings.CutPrefix(name, "gemini-")
	if !ok {
		return false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	if end == 0 {
		return true
	}
	major, err := strconv.Atoi(rest[:end])
	return err == nil && major >= 3
}
