package llm

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Role says who wrote a message.
type Role string

// The four roles of a conversation.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a conversation. Which fields are set depends on
// Role: Text for system and user messages; Text and/or ToolCalls for
// assistant messages; Result for tool messages.
type Message struct {
	Role      Role        `json:"role"`
	Text      string      `json:"text,omitempty"`
	ToolCalls []ToolCall  `json:"tool_calls,omitempty"`
	Result    *ToolResult `json:"result,omitempty"`
	// Reasoning is what an assistant message's model thought before its
	// text and calls, in order, as far as the provider shows it: for
	// people, the trace and redaction. What the provider needs back is
	// in State, not here.
	Reasoning []Reasoning `json:"reasoning,omitempty"`
	// State is what the provider attached to this message for itself and
	// needs back, unchanged, with the next request: Anthropic's thinking
	// blocks with their signatures, the Responses API's reasoning items
	// with their encrypted content. Nil for most messages.
	State *ProviderState `json:"state,omitempty"`
}

// Reasoning is one piece of a model's thinking, as its provider shows it.
type Reasoning struct {
	// Provider names the adapter that received it (ProviderState.Provider).
	Provider string `json:"provider"`
	// Text is the thinking or its summary, "" when the provider shows none.
	Text string `json:"text,omitempty"`
	// Hidden is set when the provider kept the thinking to itself
	// (Anthropic's redacted_thinking, encrypted reasoning without a
	// summary): there was thinking here, and only the provider can read it.
	Hidden bool `json:"hidden,omitempty"`
}

// ProviderState is data a provider attached to a message or a tool call
// for itself: opaque to everyone else, and required back exactly as it
// came, in the next request to that provider. It belongs to one provider:
// adapters send back only their own (Provider) and leave out any other's,
// which a history switched from one provider to another holds.
type ProviderState struct {
	// Provider names the adapter that made it, e.g. "anthropic",
	// "openai-responses", "gemini".
	Provider string `json:"provider"`
	// Data is the adapter's own encoding of the state, kept byte for byte
	// (base64 in JSON, so that no encoder can rewrite it).
	Data []byte `json:"data"`
}

// StateOf returns the state's data if it belongs to provider, else nil.
func (s *ProviderState) StateOf(provider string) []byte {
	if s == nil || s.Provider != provider {
		return nil
	}
	return s.Data
}

// ForeignState counts the provider state in msgs, on messages and on tool
// calls, that provider did not make: what an adapter for provider leaves
// out of its request (and reports in Response.DroppedState).
func ForeignState(msgs []Message, provider string) int {
	n := 0
	foreign := func(s *ProviderState) {
		if s != nil && s.Provider != provider {
			n++
		}
	}
	for i := range msgs {
		foreign(msgs[i].State)
		for j := range msgs[i].ToolCalls {
			foreign(msgs[i].ToolCalls[j].State)
		}
	}
	return n
}

// ToolCall is a model's proposal to call a tool. Arguments are kept exactly as
// the model sent them: they may not even be valid JSON, which validation
// reports back to the model as a recoverable error.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// State is what the provider attached to this call for itself (a
	// Gemini thought signature); see Message.State.
	State *ProviderState `json:"state,omitempty"`
}

// toolCallJSON is how a ToolCall is encoded. A log must give back the
// arguments byte for byte, whatever the model sent, so they take one of
// three forms:
//
//   - arguments: embedded as they are, when encoding/json would give the
//     same bytes back (see embeddable);
//   - raw_arguments: as a JSON string, for anything else that is valid
//     UTF-8: a model's cut-off or garbled output, white space or HTML
//     characters the encoder would rewrite, or nesting too deep to embed;
//   - raw_arguments_b64: in base64, for the rest (invalid UTF-8, which a
//     JSON string cannot carry).
//
// Embedding keeps ordinary logs readable; the other two forms trade that
// for exactness, which is what replay needs.
type toolCallJSON struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Arguments    json.RawMessage `json:"arguments,omitempty"`
	RawArguments *string         `json:"raw_arguments,omitempty"`
	RawBase64    []byte          `json:"raw_arguments_b64,omitempty"`
	State        *ProviderState  `json:"state,omitempty"`
}

// maxEmbedDepth is the deepest nesting of arguments embedded in an
// encoded ToolCall. encoding/json refuses to decode a document nested more
// than 10000 levels, counted from its root: arguments close to that depth
// would encode but not decode once a log event or a workflow payload wraps
// them, so deeper ones are kept as a string. No sane tool takes arguments
// even this deep; validation refuses them long before (loop.Budgets).
const maxEmbedDepth = 1000

// MarshalJSON implements json.Marshaler.
func (c ToolCall) MarshalJSON() ([]byte, error) {
	out := toolCallJSON{ID: c.ID, Name: c.Name, State: c.State}
	switch {
	case len(c.Arguments) == 0:
	case embeddable(c.Arguments):
		out.Arguments = c.Arguments
	case utf8.Valid(c.Arguments):
		raw := string(c.Arguments)
		out.RawArguments = &raw
	default:
		out.RawBase64 = c.Arguments
	}
	// Escaping HTML is the outer encoder's choice, not this method's.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *ToolCall) UnmarshalJSON(b []byte) error {
	var in toolCallJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	c.ID, c.Name, c.Arguments, c.State = in.ID, in.Name, in.Arguments, in.State
	switch {
	case in.RawArguments != nil:
		c.Arguments = json.RawMessage(*in.RawArguments)
	case in.RawBase64 != nil:
		c.Arguments = json.RawMessage(in.RawBase64)
	}
	return nil
}

// embeddable reports whether b can be embedded in an encoding as it is and
// decode to the same bytes: valid JSON, nested at most maxEmbedDepth
// deep, and already in the form encoding/json writes a json.RawMessage in
// (compact, with <, >, &, U+2028 and U+2029 escaped, as json.Marshal does
// by default and an encoder that escapes HTML would do to it).
func embeddable(b []byte) bool {
	if !json.Valid(b) {
		return false
	}
	depth, inString, escaped := 0, false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			return false
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9):
			return false
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > maxEmbedDepth {
				return false
			}
		case c == '}' || c == ']':
			depth--
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return true
}

// ResultStatus says how a tool call ended.
type ResultStatus string

// Result statuses. Skipped marks a call that never ran because the run
// stopped (or paused) before reaching it; it keeps the history valid.
const (
	StatusOK      ResultStatus = "ok"
	StatusError   ResultStatus = "error"
	StatusSkipped ResultStatus = "skipped"
)

// ToolResult answers one tool call. Content is JSON: the tool's output when
// Status is ok, or an object {"error": "..."} describing the failure.
type ToolResult struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Status    ResultStatus    `json:"status"`
	ErrorKind ErrorKind       `json:"error_kind,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

// UserMessage returns a user message with the given text.
func UserMessage(text string) Message { return Message{Role: RoleUser, Text: text} }

// SystemMessage returns a system message with the given text.
func SystemMessage(text string) Message { return Message{Role: RoleSystem, Text: text} }

// ToolMessage wraps a result in a tool message.
func ToolMessage(r ToolResult) Message { return Message{Role: RoleTool, Result: &r} }

// ErrorContent renders a failure as the JSON content of a tool result, so the
// model receives a readable object rather than a bare string.
func ErrorContent(kind ErrorKind, msg string) json.RawMessage {
	b, err := json.Marshal(struct {
		Error string    `json:"error"`
		Kind  ErrorKind `json:"kind"`
	}{msg, kind})
	if err != nil { // cannot happen for two strings
		return json.RawMessage(`{"error":"unrenderable error"}`)
	}
	return b
}
