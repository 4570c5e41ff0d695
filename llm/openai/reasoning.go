package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolloop/toolloop/llm"
)

// ProviderResponses names the Responses adapter in the provider state it
// attaches to assistant messages (llm.ProviderState.Provider) and in the
// reasoning it reports (llm.Reasoning.Provider). Only a Responses adapter
// sends such state back; every other adapter leaves it out.
const ProviderResponses = "openai-responses"

// providerChat names the Chat adapter when it counts the provider state it
// leaves out: Chat Completions has no reasoning items to send back, so all
// state is foreign to it.
const providerChat = "openai-chat"

// includeEncryptedReasoning asks the Responses API for each reasoning
// item's encrypted content: what a stateless request (store=false) must
// send back for the model to keep its reasoning.
const includeEncryptedReasoning responses.ResponseIncludable = "reasoning.encrypted_content"

// paragraph joins the texts of a reply's message items into one
// llm.Message.Text, and the pieces of a reasoning item's summary into one
// llm.Reasoning.Text.
const paragraph = "\n\n"

// stateVersion is the version of the encoding in responsesState. A state of
// another version is not sent back (the message goes without it, as from a
// provider that keeps none), since its meaning is unknown.
const stateVersion = 1

// responsesState is the Data of the provider state the Responses adapter
// attaches to an assistant message: the reply's output items in the order
// they came, each with what the next request needs to send it back as an
// input item. The API checks that order: a reasoning item must be followed
// by the items it produced, and a function call or message that carries
// its item ID must come after its reasoning item. Texts, call names and
// arguments are not repeated here; they are the message's own Text and
// ToolCalls, which the state only lays out.
type responsesState struct {
	Version int         `json:"v"`
	Items   []stateItem `json:"items"`
}

// stateItem is one output item of a reply, by its type: "reasoning",
// "message" or "function_call".
type stateItem struct {
	Type string `json:"type"`
	// ID is the item's ID (rs_..., msg_..., fc_...).
	ID string `json:"id"`

	// EncryptedContent is a reasoning item's encrypted reasoning, kept
	// exactly as it came; Summary and Content its summary and reasoning
	// texts, sent back as they came.
	EncryptedContent string   `json:"encrypted_content,omitempty"`
	Summary          []string `json:"summary,omitempty"`
	Content          []string `json:"content,omitempty"`

	// Parts are a message item's output_text parts, as byte lengths: its
	// text is the next part of the message's Text (after a paragraph
	// break unless it is the first text). Status and Phase are sent back
	// as they came ("" for status means completed).
	Parts  []int  `json:"parts,omitempty"`
	Status string `json:"status,omitempty"`
	Phase  string `json:"phase,omitempty"`

	// CallID is a function call's ID in the message: the next of its
	// ToolCalls must have it.
	CallID string `json:"call_id,omitempty"`
}

// reasoningOf maps a reasoning output item to the reasoning a message
// shows: its summary, else its reasoning text, else hidden.
func reasoningOf(item *responses.ResponseOutputItemUnion) llm.Reasoning {
	var texts []string
	for _, s := range item.Summary {
		if s.Text != "" {
			texts = append(texts, s.Text)
		}
	}
	if len(texts) == 0 {
		for _, c := range item.AsReasoning().Content {
			if c.Text != "" {
				texts = append(texts, c.Text)
			}
		}
	}
	r := llm.Reasoning{Provider: ProviderResponses, Text: strings.Join(texts, paragraph)}
	r.Hidden = r.Text == ""
	return r
}

// stateBuilder collects a reply's output items, as the response mapping
// reads them, into the state that sends them back.
type stateBuilder struct {
	items []stateItem
	// complete is false once an item cannot be sent back: a reasoning
	// item without encrypted content (not asked for, or a server that
	// gives none) or an item without an ID.
	complete bool
	// reasoning is set once a reasoning item was seen: a reply without
	// one needs no state, its items go back without their IDs.
	reasoning bool
}

func newStateBuilder() *stateBuilder { return &stateBuilder{complete: true} }

func (b *stateBuilder) reasoningItem(item *responses.ResponseOutputItemUnion) {
	b.reasoning = true
	if item.ID == "" || item.EncryptedContent == "" {
		b.complete = false
		return
	}
	s := stateItem{Type: "reasoning", ID: item.ID, EncryptedContent: item.EncryptedContent}
	for _, sum := range item.Summary {
		s.Summary = append(s.Summary, sum.Text)
	}
	for _, c := range item.AsReasoning().Content {
		s.Content = append(s.Content, c.Text)
	}
	b.items = append(b.items, s)
}

// message records a message item whose output_text parts are parts.
func (b *stateBuilder) message(item *responses.ResponseOutputItemUnion, parts []string) {
	if item.ID == "" {
		b.complete = false
		return
	}
	s := stateItem{Type: "message", ID: item.ID, Phase: string(item.Phase), Parts: make([]int, len(parts))}
	if item.Status != "completed" {
		s.Status = item.Status
	}
	for i, p := range parts {
		s.Parts[i] = len(p)
	}
	b.items = append(b.items, s)
}

// functionCall records a function call item, which became the tool call
// with the given ID.
func (b *stateBuilder) functionCall(item *responses.ResponseOutputItemUnion, callID string) {
	if item.ID == "" {
		b.complete = false
		return
	}
	b.items = append(b.items, stateItem{Type: "function_call", ID: item.ID, CallID: callID})
}

// state returns the provider state for the reply, or nil when it needs
// none or some item cannot be sent back (then the message goes back as it
// did before reasoning was kept: without reasoning items or item IDs, which
// the API accepts). Reasoning items at the end, followed by no item they
// produced (a reply cut off while it was reasoning), are left out: the API
// refuses a reasoning item without its following item.
func (b *stateBuilder) state() *llm.ProviderState {
	if !b.reasoning || !b.complete {
		return nil
	}
	items := b.items
	for len(items) > 0 && items[len(items)-1].Type == "reasoning" {
		items = items[:len(items)-1]
	}
	hasReasoning := false
	for _, it := range items {
		hasReasoning = hasReasoning || it.Type == "reasoning"
	}
	if !hasReasoning {
		return nil
	}
	data, err := json.Marshal(responsesState{Version: stateVersion, Items: items})
	if err != nil { // strings, ints and slices of them: cannot fail
		return nil
	}
	return &llm.ProviderState{Provider: ProviderResponses, Data: data}
}

// replayItems rebuilds the input items of assistant message m from its
// Responses state: its reasoning items with their IDs and encrypted
// content, its messages and function calls with their item IDs, all in the
// order the reply gave them. It fails when the state does not match the
// message (an edited text, calls added or removed) or cannot be read; the
// caller then sends the message without its state.
func replayItems(m *llm.Message, data []byte) ([]responses.ResponseInputItemUnionParam, error) {
	var st responsesState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("the state cannot be read: %w", err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("the state has version %d, not %d", st.Version, stateVersion)
	}
	// A reasoning item must be followed by an item it produced.
	last := -1
	for i, it := range st.Items {
		if it.Type != "reasoning" {
			last = i
		}
	}
	out := make([]responses.ResponseInputItemUnionParam, 0, len(st.Items))
	pos, texts, calls := 0, 0, 0
	for i, it := range st.Items {
		if it.ID == "" {
			return nil, fmt.Errorf("item %d has no ID", i)
		}
		switch it.Type {
		case "reasoning":
			if it.EncryptedContent == "" {
				return nil, fmt.Errorf("reasoning item %s has no encrypted content", it.ID)
			}
			if i > last {
				return nil, fmt.Errorf("reasoning item %s is followed by no item it produced", it.ID)
			}
			r := &responses.ResponseReasoningItemParam{
				ID:               it.ID,
				EncryptedContent: param.NewOpt(it.EncryptedContent),
				// The API requires the summary, even an empty one.
				Summary: make([]responses.ResponseReasoningItemSummaryParam, len(it.Summary)),
			}
			for k, s := range it.Summary {
				r.Summary[k].Text = s
			}
			for _, c := range it.Content {
				r.Content = append(r.Content, responses.ResponseReasoningItemContentParam{Text: c})
			}
			out = append(out, responses.ResponseInputItemUnionParam{OfReasoning: r})
		case "message":
			n := 0
			for _, p := range it.Parts {
				if p < 0 {
					return nil, fmt.Errorf("message item %s has a part of negative length", it.ID)
				}
				n += p
			}
			if n > 0 {
				if texts > 0 {
					if !strings.HasPrefix(m.Text[pos:], paragraph) {
						return nil, fmt.Errorf("the text does not match message item %s", it.ID)
					}
					pos += len(paragraph)
				}
				if n > len(m.Text)-pos {
					return nil, fmt.Errorf("the text is shorter than message item %s", it.ID)
				}
				texts++
			}
			msg := &responses.ResponseOutputMessageParam{
				ID:      it.ID,
				Status:  responses.ResponseOutputMessageStatus(it.Status),
				Phase:   responses.ResponseOutputMessagePhase(it.Phase),
				Content: make([]responses.ResponseOutputMessageContentUnionParam, len(it.Parts)),
			}
			if msg.Status == "" {
				msg.Status = responses.ResponseOutputMessageStatusCompleted
			}
			for k, p := range it.Parts {
				msg.Content[k].OfOutputText = &responses.ResponseOutputTextParam{
					Text:        m.Text[pos : pos+p],
					Annotations: []responses.ResponseOutputTextAnnotationUnionParam{},
				}
				pos += p
			}
			out = append(out, responses.ResponseInputItemUnionParam{OfOutputMessage: msg})
		case "function_call":
			if calls == len(m.ToolCalls) || m.ToolCalls[calls].ID != it.CallID {
				return nil, fmt.Errorf("the tool calls do not match function call item %s", it.ID)
			}
			tc := m.ToolCalls[calls]
			calls++
			out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCall: &responses.ResponseFunctionToolCallParam{
				ID:        param.NewOpt(it.ID),
				CallID:    tc.ID,
				Name:      tc.Name,
				Arguments: callArguments(tc),
			}})
		default:
			return nil, fmt.Errorf("item %s has unknown type %q", it.ID, it.Type)
		}
	}
	if pos != len(m.Text) {
		return nil, fmt.Errorf("the text is longer than the state's message items")
	}
	if calls != len(m.ToolCalls) {
		return nil, fmt.Errorf("the message has %d tool calls, the state %d", len(m.ToolCalls), calls)
	}
	return out, nil
}
