package gemini

import (
	"encoding/json"
	"fmt"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
)

// Provider names this adapter in the provider state and reasoning it
// attaches to messages and tool calls (llm.ProviderState.Provider,
// llm.Reasoning.Provider). State tagged with any other name is another
// provider's and is never sent to Gemini.
const Provider = "gemini"

// placeholderSignature is the value Google documents for function calls
// that carry no signature of their own (a history built elsewhere): it
// tells Gemini 3 to skip thought-signature validation for that step.
const placeholderSignature = "skip_thought_signature_validator"

// layoutVersion is the version of the layout encoding written into a
// message's state; a state of another version is refused.
const layoutVersion = 1

// Kinds of the parts of a layout.
const (
	partText    = "text"
	partThought = "thought"
	partCall    = "call"
)

// layout is the encoding of a message's provider state (see the package
// documentation, "Thought signatures"): the model content's parts in the
// order Gemini sent them, each with the signature Gemini attached to it, and
// no content of its own. A text part's text is the next Len bytes of
// Message.Text; a thought part's, the next Gemini entry of
// Message.Reasoning that has text (Len bytes long; Len 0 for a part without
// text, which takes no entry); a call part stands for the next of
// Message.ToolCalls, whose signature is in the call's own state.
type layout struct {
	V     int          `json:"v"`
	Parts []layoutPart `json:"parts"`
}

type layoutPart struct {
	Kind string `json:"kind"`
	Len  int    `json:"len,omitempty"`
	// Sig is the part's thought signature, byte for byte (base64 in JSON).
	Sig []byte `json:"sig,omitempty"`
}

// callState wraps a function call's thought signature as the call's state:
// the signature's bytes as Gemini sent them, nothing added.
func callState(sig []byte) *llm.ProviderState {
	if len(sig) == 0 {
		return nil
	}
	return &llm.ProviderState{Provider: Provider, Data: append([]byte(nil), sig...)}
}

// encodeLayout returns the message state recording l, or nil when no part
// other than a call carries a signature: then the calls' own states hold
// every signature, and the default order (text, then calls) serves.
func encodeLayout(l layout) (*llm.ProviderState, error) {
	signed := false
	for _, p := range l.Parts {
		if p.Kind != partCall && len(p.Sig) > 0 {
			signed = true
		}
	}
	if !signed {
		return nil, nil
	}
	l.V = layoutVersion
	b, err := json.Marshal(l)
	if err != nil { // cannot happen for strings, ints and bytes
		return nil, fmt.Errorf("gemini: encoding a message's thought signatures: %w", err)
	}
	return &llm.ProviderState{Provider: Provider, Data: b}, nil
}

// decodeLayout reads a message state written by encodeLayout.
func decodeLayout(data []byte) (layout, error) {
	var l layout
	if err := json.Unmarshal(data, &l); err != nil {
		return layout{}, fmt.Errorf("its Gemini state is not the adapter's encoding: %w", err)
	}
	if l.V != layoutVersion {
		return layout{}, fmt.Errorf("its Gemini state has encoding version %d, want %d", l.V, layoutVersion)
	}
	for i, p := range l.Parts {
		switch {
		case p.Kind != partText && p.Kind != partThought && p.Kind != partCall:
			return layout{}, fmt.Errorf("part %d of its Gemini state has unknown kind %q", i, p.Kind)
		case p.Len < 0:
			return layout{}, fmt.Errorf("part %d of its Gemini state has negative length %d", i, p.Len)
		}
	}
	return l, nil
}

// parts rebuilds a model content's parts from the layout, taking text from
// msg and calls from calls (already built, signatures on). It reports
// false when the layout no longer fits the message (its text, reasoning or
// calls were changed since Gemini sent them): then the signatures of the
// text and thought parts cannot be put back where they belong.
//
// A thought part is sent back only when it carries a signature: an
// unsigned thought summary is for people, and Gemini reads nothing from it.
func (l layout) parts(msg llm.Message, calls []*genai.Part) ([]*genai.Part, bool) {
	var thoughts []string
	for _, r := range msg.Reasoning {
		if r.Provider == Provider && r.Text != "" {
			thoughts = append(thoughts, r.Text)
		}
	}
	var (
		out                   []*genai.Part
		textAt, thought, call int
	)
	for _, p := range l.Parts {
		switch p.Kind {
		case partText:
			if textAt+p.Len > len(msg.Text) {
				return nil, false
			}
			text := msg.Text[textAt : textAt+p.Len]
			textAt += p.Len
			if text != "" || len(p.Sig) > 0 {
				out = append(out, &genai.Part{Text: text, ThoughtSignature: p.Sig})
			}
		case partThought:
			text := ""
			if p.Len > 0 {
				if thought >= len(thoughts) || len(thoughts[thought]) != p.Len {
					return nil, false
				}
				text = thoughts[thought]
				thought++
			}
			if len(p.Sig) > 0 {
				out = append(out, &genai.Part{Text: text, Thought: true, ThoughtSignature: p.Sig})
			}
		case partCall:
			if call >= len(calls) {
				return nil, false
			}
			out = append(out, calls[call])
			call++
		}
	}
	if textAt != len(msg.Text) || thought != len(thoughts) || call != len(calls) {
		return nil, false
	}
	return out, true
}
