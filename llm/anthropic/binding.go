package anthropic

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
)

// Preserved thinking. Newer models check each thinking or
// redacted_thinking block sent back against the request that produced it:
// the system prompt, the tools and every message before the block must be
// unchanged, or the block is bound to a different conversation and the API
// refuses the request with a 400 (its default for accounts created from
// 2026-08-31), unless the request's
// thinking.block_binding.prefix_mismatch_behavior is "drop_block" (beta
// thinking-binding-controls-2026-08-01): then the API drops the failing
// blocks, and every later thinking block with them, and lists them in the
// reply's input_transformations.
//
// A loop's context management edits the history under such blocks: a
// cleared tool result, a compaction's summary, cleared reasoning. So the
// adapter records with each turn's thinking a digest of the prefix it was
// made under (turnState.Prefix), and a request whose history no longer
// matches one of those digests asks the API to drop the blocks instead of
// failing. The digest is a pure function of the history, so the choice is
// the same every turn for the same history (the requests stay byte-stable
// for the prompt cache), and a request whose history was never edited
// never carries the setting.

// thinkingBindingBeta is the beta that lets a request choose what the API
// does with a thinking block whose prefix changed.
const thinkingBindingBeta = anthropic.AnthropicBetaThinkingBindingControls2026_08_01

// ErrThinkingPrefixMismatch is matched (errors.Is) by the error of a
// request the API refused because a thinking block sent back was made
// under a different prefix: the system prompt, the tools or an earlier
// message changed since the model wrote it. The adapter asks the API to
// drop such blocks itself when it can tell the history changed (see the
// package documentation, Preserved thinking); this error means it could
// not tell, for example a history edited before this adapter recorded
// prefixes, or a changed system prompt or tool list.
var ErrThinkingPrefixMismatch = errors.New("anthropic: the API refused a thinking block sent back because the conversation before it changed since the model wrote it (preserved thinking's prefix check); send the history as it was, or set thinking.block_binding.prefix_mismatch_behavior to \"drop_block\"")

// prefixError is the llm.Error's cause for a refused thinking block: it
// matches ErrThinkingPrefixMismatch and keeps the API's message, which
// names the block.
type prefixError struct{ api error }

func (e *prefixError) Error() string {
	return ErrThinkingPrefixMismatch.Error() + ": " + e.api.Error()
}

func (e *prefixError) Unwrap() []error { return []error{ErrThinkingPrefixMismatch, e.api} }

// isPrefixMismatch reports whether an invalid_request_error's message is
// the prefix check's: the API's text names the block's signature as bound
// to a different conversation, and the setting that would drop it.
func isPrefixMismatch(apiErr *anthropic.Error) bool {
	if apiErr.Type() != anthropic.ErrorTypeInvalidRequestError {
		return false
	}
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(apiErr.RawJSON()), &body) != nil {
		return false
	}
	msg := body.Error.Message
	return strings.Contains(msg, "bound to a different conversation") || strings.Contains(msg, "prefix_mismatch_behavior")
}

// prefixDigest is a running digest of a request's prefix: the tools, then
// each message in turn. Digest after the tools and messages[:k] is the
// prefix of a thinking block that begins message k. It reads every field
// that reaches the wire (a message's reasoning text does not: its thinking
// goes back from the state), each with its length, so that no two
// histories run together.
type prefixDigest struct {
	sum [sha256.Size]byte
	h   hash.Hash
	buf []byte
}

// newPrefixDigest starts the digest with the request's tools.
func newPrefixDigest(tools []llm.ToolDefinition) *prefixDigest {
	d := &prefixDigest{h: sha256.New()}
	for _, t := range tools {
		d.write(t.Name)
		d.write(t.Description)
		d.writeBytes(t.InputSchema)
	}
	d.h.Sum(d.sum[:0])
	return d
}

func (d *prefixDigest) writeBytes(b []byte) {
	d.buf = binary.AppendUvarint(d.buf[:0], uint64(len(b)))
	d.h.Write(d.buf)
	d.h.Write(b)
}

func (d *prefixDigest) write(s string) {
	d.buf = binary.AppendUvarint(d.buf[:0], uint64(len(s)))
	d.buf = append(d.buf, s...)
	d.h.Write(d.buf)
}

func (d *prefixDigest) writeState(s *llm.ProviderState) {
	if s == nil {
		d.write("")
		return
	}
	d.write(s.Provider)
	d.writeBytes(s.Data)
}

// add folds one message into the digest.
func (d *prefixDigest) add(m *llm.Message) {
	d.h.Reset()
	d.h.Write(d.sum[:])
	d.write(string(m.Role))
	d.write(m.Text)
	d.buf = binary.AppendUvarint(d.buf[:0], uint64(len(m.ToolCalls)))
	d.h.Write(d.buf)
	for _, c := range m.ToolCalls {
		d.write(c.ID)
		d.write(c.Name)
		d.writeBytes(c.Arguments)
		d.writeState(c.State)
	}
	if r := m.Result; r != nil {
		d.write(r.CallID)
		d.write(r.Name)
		d.write(string(r.Status))
		d.write(string(r.ErrorKind))
		d.writeBytes(r.Content)
	} else {
		d.write("")
	}
	d.writeState(m.State)
	d.h.Sum(d.sum[:0])
}

// String is the digest as stored in a turnState: 32 hex digits (128 bits
// are plenty to tell two prefixes apart).
func (d *prefixDigest) String() string { return hex.EncodeToString(d.sum[:16]) }

// requestBinding is what a request's history says about the thinking it
// sends back and the thinking its reply will carry, worked out once per
// request (one pass over the history) and only when asked.
type requestBinding struct {
	req     *llm.Request
	scanned bool
	changed bool   // some thinking sent back was made under another prefix
	prefix  string // the digest of the whole request: what the reply's thinking is bound to
	// bounds holds each message's recorded prefix (bound), once read;
	// any is set if one is not empty.
	bounds []string
	any    bool
}

// readBounds reads the prefix recorded with each message's thinking.
func (b *requestBinding) readBounds() {
	if b.bounds != nil {
		return
	}
	b.bounds = make([]string, len(b.req.Messages))
	for i := range b.req.Messages {
		b.bounds[i] = bound(&b.req.Messages[i])
		b.any = b.any || b.bounds[i] != ""
	}
}

// scan digests the history, comparing the prefix recorded with each
// message's thinking with the one it now has.
func (b *requestBinding) scan() {
	if b.scanned {
		return
	}
	b.scanned = true
	b.readBounds()
	d := newPrefixDigest(b.req.Tools)
	for i := range b.req.Messages {
		if p := b.bounds[i]; p != "" && !b.changed && p != d.String() {
			b.changed = true
		}
		d.add(&b.req.Messages[i])
	}
	b.prefix = d.String()
}

// prefixChanged reports whether the request sends back thinking made
// under a prefix other than the one it now has: a message of this
// adapter whose state carries thinking and a recorded prefix that the
// history before it no longer matches. A state without a recorded prefix
// (written before the adapter recorded them) is taken as unchanged. A
// history without such thinking is not digested.
func (b *requestBinding) prefixChanged() bool {
	b.readBounds()
	if !b.any {
		return false
	}
	b.scan()
	return b.changed
}

// replyPrefix is the digest of the request's whole prefix: what a
// thinking block of the reply is bound to.
func (b *requestBinding) replyPrefix() string {
	b.scan()
	return b.prefix
}

// bound returns the prefix recorded with an assistant message's thinking,
// or "" when it has none.
func bound(m *llm.Message) string {
	if m.Role != llm.RoleAssistant {
		return ""
	}
	data := m.State.StateOf(provider)
	if data == nil {
		return ""
	}
	st, err := decodeState(data)
	if err != nil {
		return "" // the request fails on it when it is built
	}
	for _, b := range st.Blocks {
		if b.Type == blockThinking || b.Type == blockRedactedThinking {
			return st.Prefix
		}
	}
	return ""
}

// dropBlockOptions are the request options that ask the API to drop a
// thinking block whose prefix changed instead of refusing the request:
// the beta header and thinking.block_binding, set on the thinking the
// request already has (adaptive when it has none, as the models that
// check prefixes think by default).
func (m *Model) dropBlockOptions(p *anthropic.MessageNewParams) []option.RequestOption {
	opts := []option.RequestOption{option.WithMiddleware(addBeta(thinkingBindingBeta))}
	if p.Thinking.OfEnabled == nil && p.Thinking.OfAdaptive == nil {
		opts = append(opts, option.WithJSONSet("thinking.type", "adaptive"))
	}
	return append(opts, option.WithJSONSet("thinking.block_binding.prefix_mismatch_behavior", "drop_block"))
}

// droppedThinking counts the thinking blocks the API dropped from the
// request, as the reply's input_transformations lists them (entries of
// type thinking_dropped, whatever their reason; other types, such as
// thinking_mismatch_allowed for a block shown all the same, are not
// drops).
func droppedThinking(raw string) int {
	if !strings.Contains(raw, "input_transformations") {
		return 0
	}
	var body struct {
		InputTransformations []struct {
			Type string `json:"type"`
		} `json:"input_transformations"`
	}
	if json.Unmarshal([]byte(raw), &body) != nil {
		return 0
	}
	n := 0
	for _, t := range body.InputTransformations {
		if t.Type == "thinking_dropped" {
			n++
		}
	}
	return n
}
