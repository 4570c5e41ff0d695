package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolloop/toolloop/llm"
)

// provider names this adapter in llm.ProviderState and llm.Reasoning.
const provider = "anthropic"

// stateVersion is the version of the encoding in turnState. A state of
// another version is refused rather than guessed at: a turn rebuilt wrong
// costs a 400 from the API at best.
const stateVersion = 1

// turnState is what an assistant message's llm.ProviderState holds (Data is
// its JSON): the reply's content blocks in their original order, as far as
// they are needed to send the turn back as the API wants it with thinking
// on. Thinking blocks are kept whole (thinking text and signature, which
// the API checks), redacted_thinking blocks with their encrypted data;
// text blocks keep their text, so that text interleaved with thinking is
// sent back where it stood; tool_use blocks keep only their ID, the call
// itself being the message's llm.ToolCall.
type turnState struct {
	V      int          `json:"v"`
	Blocks []stateBlock `json:"blocks"`
	// Prefix is the digest of the request the reply answered (its tools
	// and messages, requestPrefix): what the thinking is bound to. A later
	// request whose history before this message differs asks the API to
	// drop the thinking rather than refuse it (binding.go).
	Prefix string `json:"prefix,omitempty"`
}

// stateBlock is one content block of a turnState; which fields are set
// depends on Type.
type stateBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
	Text      string `json:"text,omitempty"`
	ID        string `json:"id,omitempty"`
}

// Content block types kept in a turnState.
const (
	blockThinking         = "thinking"
	blockRedactedThinking = "redacted_thinking"
	blockText             = "text"
	blockToolUse          = "tool_use"
)

// replyState maps a reply's thinking onto the message's Reasoning and
// State. A reply without thinking has neither: its turn is rebuilt from the
// message's text and calls alone.
//
// prefix, when it is not nil, gives the digest of the request's prefix to
// record with the thinking; it is called only for a reply with thinking.
func replyState(content []anthropic.ContentBlockUnion, prefix func() string) ([]llm.Reasoning, *llm.ProviderState, error) {
	var (
		reasoning []llm.Reasoning
		st        = turnState{V: stateVersion}
	)
	for _, b := range content {
		switch b.Type {
		case blockThinking:
			// With display "omitted" the thinking comes back empty, its
			// signature intact: there was thinking, not shown.
			reasoning = append(reasoning, llm.Reasoning{Provider: provider, Text: b.Thinking, Hidden: b.Thinking == ""})
			st.Blocks = append(st.Blocks, stateBlock{Type: blockThinking, Thinking: b.Thinking, Signature: b.Signature})
		case blockRedactedThinking:
			reasoning = append(reasoning, llm.Reasoning{Provider: provider, Hidden: true})
			st.Blocks = append(st.Blocks, stateBlock{Type: blockRedactedThinking, Data: b.Data})
		case blockText:
			st.Blocks = append(st.Blocks, stateBlock{Type: blockText, Text: b.Text})
		case blockToolUse:
			st.Blocks = append(st.Blocks, stateBlock{Type: blockToolUse, ID: b.ID})
		}
	}
	if len(reasoning) == 0 {
		return nil, nil, nil
	}
	if prefix != nil {
		st.Prefix = prefix()
	}
	data, err := json.Marshal(st)
	if err != nil { // strings only: cannot happen
		return nil, nil, fmt.Errorf("anthropic: encoding the thinking blocks: %w", err)
	}
	return reasoning, &llm.ProviderState{Provider: provider, Data: data}, nil
}

// decodeState reads a turnState, refusing what this adapter did not write.
func decodeState(data []byte) (turnState, error) {
	var st turnState
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("its anthropic state is not valid: %w", err)
	}
	if st.V != stateVersion {
		return st, fmt.Errorf("its anthropic state has version %d; this adapter reads version %d", st.V, stateVersion)
	}
	for i, b := range st.Blocks {
		switch b.Type {
		case blockThinking, blockRedactedThinking, blockText, blockToolUse:
		default:
			return st, fmt.Errorf("its anthropic state's block %d has unknown type %q", i, b.Type)
		}
	}
	return st, nil
}

// stateBlocks rebuilds an assistant turn from its state: the thinking and
// redacted_thinking blocks exactly as they came, and the text and tool_use
// blocks where they stood among them, the calls taken from the message.
//
// That layout holds only while the message still says what the reply
// said. A message whose text or calls were changed afterwards keeps its
// thinking blocks, unchanged and in their order, followed by its text and
// then its calls; the API may refuse such a turn, but it is what the
// history now says.
func stateBlocks(msg llm.Message, st turnState) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	if matches(msg, st) {
		next := 0 // the next of msg.ToolCalls, in the order of the state's tool_use blocks
		for _, b := range st.Blocks {
			switch b.Type {
			case blockThinking, blockRedactedThinking:
				out = append(out, thinkingBlock(b))
			case blockText:
				if b.Text != "" { // the API rejects empty text blocks
					out = append(out, anthropic.NewTextBlock(b.Text))
				}
			case blockToolUse:
				out = append(out, toolUseBlock(msg.ToolCalls[next]))
				next++
			}
		}
		return out
	}
	for _, b := range st.Blocks {
		if b.Type == blockThinking || b.Type == blockRedactedThinking {
			out = append(out, thinkingBlock(b))
		}
	}
	return append(out, plainBlocks(msg)...)
}

// matches reports whether msg still has the text and the calls (by ID, in
// order) of the reply its state was taken from.
func matches(msg llm.Message, st turnState) bool {
	var text strings.Builder
	calls := 0
	for _, b := range st.Blocks {
		switch b.Type {
		case blockText:
			text.WriteString(b.Text)
		case blockToolUse:
			if calls >= len(msg.ToolCalls) || msg.ToolCalls[calls].ID != b.ID {
				return false
			}
			calls++
		}
	}
	return calls == len(msg.ToolCalls) && text.String() == msg.Text
}

// thinkingBlock sends a kept thinking or redacted_thinking block back as it
// came.
func thinkingBlock(b stateBlock) anthropic.ContentBlockParamUnion {
	if b.Type == blockRedactedThinking {
		return anthropic.ContentBlockParamUnion{OfRedactedThinking: &anthropic.RedactedThinkingBlockParam{Data: b.Data}}
	}
	return anthropic.ContentBlockParamUnion{OfThinking: &anthropic.ThinkingBlockParam{Thinking: b.Thinking, Signature: b.Signature}}
}
