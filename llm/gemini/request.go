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

// placeholderSignature is the value Google documents for function calls
// that carry no signature of their own (a history built elsewhere): it
// tells Gemini 3 to skip thought-signature validation for that turn.
const placeholderSignature = "skip_thought_signature_validator"

// contents maps the history onto Gemini contents and the system
// instruction. Consecutive tool messages, one turn's results, share one
// user content.
func (m *Model) contents(model string, msgs []llm.Message) ([]*genai.Content, *genai.Content, error) {
	var (
		contents []*genai.Content
		system   *genai.Content
		results  *genai.Content // the open content of tool results, if the last message was one
		fallback = !m.opts.NoSignatureFallback && requiresSignatures(model)
	)
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
			if c := m.modelContent(msg, fallback); c != nil {
				contents = append(contents, c)
			}
		case llm.RoleTool:
			if msg.Result == nil {
				return nil, nil, fmt.Errorf("gemini: message %d is a tool message without a result", i)
			}
			if results == nil {
				results = &genai.Content{Role: roleUser}
				contents = append(contents, results)
			}
			results.Parts = append(results.Parts, &genai.Part{FunctionResponse: functionResponse(msg.Result)})
		default:
			return nil, nil, fmt.Errorf("gemini: message %d has unknown role %q", i, msg.Role)
		}
	}
	return contents, system, nil
}

// modelContent maps an assistant message: its text, then its calls, each
// with the thought signature Gemini gave it when this Model returned it.
// An empty message maps to nil: Gemini rejects a content without parts.
func (m *Model) modelContent(msg llm.Message, fallback bool) *genai.Content {
	c := &genai.Content{Role: roleModel}
	if msg.Text != "" {
		c.Parts = append(c.Parts, &genai.Part{Text: msg.Text})
	}
	signed := false
	first := -1
	for _, call := range msg.ToolCalls {
		p := &genai.Part{FunctionCall: &genai.FunctionCall{ID: call.ID, Name: call.Name, Args: argsObject(call.Arguments)}}
		if sig := m.sigs.get(call.ID, call.Name); sig != nil {
			p.ThoughtSignature = sig
			signed = true
		}
		if first < 0 {
			first = len(c.Parts)
		}
		c.Parts = append(c.Parts, p)
	}
	if first >= 0 && !signed && fallback {
		c.Parts[first].ThoughtSignature = []byte(placeholderSignature)
	}
	if len(c.Parts) == 0 {
		return nil
	}
	return c
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
