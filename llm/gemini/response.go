package gemini

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
)

// generatedIDPrefix starts every call ID the adapter made up because Gemini
// gave none.
const generatedIDPrefix = "toolloop_"

// filtered reports whether a finish reason means Gemini's filters withheld
// the answer.
func filtered(r genai.FinishReason) bool {
	switch r {
	case genai.FinishReasonSafety, genai.FinishReasonProhibitedContent, genai.FinishReasonBlocklist,
		genai.FinishReasonSPII, genai.FinishReasonRecitation, genai.FinishReasonImageSafety,
		genai.FinishReasonImageProhibitedContent, genai.FinishReasonImageRecitation:
		return true
	}
	return false
}

// response maps Gemini's reply onto an llm.Response, from its first
// candidate.
func (m *Model) response(req *llm.Request, model string, r *genai.GenerateContentResponse) (*llm.Response, error) {
	if fb := r.PromptFeedback; fb != nil && fb.BlockReason != "" {
		return nil, refusal("prompt blocked: %s%s", fb.BlockReason, suffix(fb.BlockReasonMessage))
	}
	if len(r.Candidates) == 0 || r.Candidates[0] == nil {
		return nil, noCandidate()
	}
	cand := r.Candidates[0]
	if err := finishError(cand); err != nil {
		return nil, err
	}

	out := &llm.Response{
		ID:           r.ResponseID,
		Model:        r.ModelVersion,
		Message:      llm.Message{Role: llm.RoleAssistant},
		Usage:        usage(r.UsageMetadata),
		FinishReason: string(cand.FinishReason),
		Truncated:    cand.FinishReason == genai.FinishReasonMaxTokens,
	}
	if out.Model == "" {
		out.Model = model
	}
	var (
		text     strings.Builder
		parts    layout
		thoughts bool
	)
	if cand.Content != nil {
		for i, p := range cand.Content.Parts {
			if p == nil {
				continue
			}
			switch partKind(p) {
			case partCall:
				call, err := toolCall(req, r.ResponseID, i, p)
				if err != nil {
					return nil, err
				}
				out.Message.ToolCalls = append(out.Message.ToolCalls, call)
				parts.Parts = append(parts.Parts, layoutPart{Kind: partCall})
			case partThought:
				// A thought summary: reasoning, never answer.
				thoughts = true
				if p.Text != "" {
					out.Message.Reasoning = append(out.Message.Reasoning, llm.Reasoning{Provider: Provider, Text: p.Text})
				}
				parts.Parts = append(parts.Parts, layoutPart{Kind: partThought, Len: len(p.Text), Sig: p.ThoughtSignature})
			default:
				text.WriteString(p.Text)
				parts.Parts = append(parts.Parts, layoutPart{Kind: partText, Len: len(p.Text), Sig: p.ThoughtSignature})
			}
		}
	}
	if err := llm.CheckCallIDs(out.Message.ToolCalls); err != nil {
		return nil, err
	}
	out.Message.Text = text.String()
	if hiddenReasoning(thoughts, &out.Usage) {
		// The model thought and showed none of it (no thought summaries
		// were asked for): the signatures carry it, for Gemini only.
		out.Message.Reasoning = []llm.Reasoning{{Provider: Provider, Hidden: true}}
	}
	state, err := encodeLayout(parts)
	if err != nil {
		return nil, &llm.Error{Kind: llm.KindBadResponse, Err: err}
	}
	out.Message.State = state
	return out, nil
}

// noCandidate is the error of a reply without a candidate.
func noCandidate() error {
	return &llm.Error{Kind: llm.KindBadRequest, Err: errors.New("gemini: the response has no candidate")}
}

// finishError returns the error a candidate's finish reason means, nil
// for a reason that ends a turn (STOP, MAX_TOKENS, ...): Gemini's filters
// stopped it, or the model's function call did not parse.
func finishError(cand *genai.Candidate) error {
	switch reason := cand.FinishReason; {
	case filtered(reason):
		return refusal("response stopped: %s%s", reason, suffix(cand.FinishMessage))
	case reason == genai.FinishReasonMalformedFunctionCall:
		return &llm.Error{Kind: llm.KindBadRequest, Retryable: true,
			Err: fmt.Errorf("gemini: the model produced a malformed function call%s", suffix(cand.FinishMessage))}
	}
	return nil
}

// partKind says what a part of the model's reply is in its message: a
// call, a thought or (any other part) text.
func partKind(p *genai.Part) string {
	switch {
	case p.FunctionCall != nil:
		return partCall
	case p.Thought:
		return partThought
	}
	return partText
}

// toolCall maps a functionCall part, generating its ID when Gemini gave
// none; the part's thought signature becomes the call's state.
func toolCall(req *llm.Request, responseID string, index int, p *genai.Part) (llm.ToolCall, error) {
	fc := p.FunctionCall
	args := fc.Args
	if args == nil {
		args = map[string]any{}
	}
	raw, err := json.Marshal(args)
	if err != nil { // cannot happen for args decoded from JSON
		return llm.ToolCall{}, &llm.Error{Kind: llm.KindBadRequest, Err: fmt.Errorf("gemini: arguments of call %q: %w", fc.Name, err)}
	}
	id := fc.ID
	if id == "" {
		id = generatedID(responseID, req.Step, index, fc.Name)
	}
	return llm.ToolCall{ID: id, Name: fc.Name, Arguments: raw, State: callState(p.ThoughtSignature)}, nil
}

// generatedID makes a call ID from what identifies the call: the response,
// the turn, the part's position and the tool. The same response always
// yields the same IDs; different parts of one response, different IDs.
func generatedID(responseID string, step, index int, name string) string {
	h := sha256.New()
	var n [16]byte
	binary.BigEndian.PutUint64(n[:8], uint64(step))
	binary.BigEndian.PutUint64(n[8:], uint64(index))
	h.Write([]byte(responseID))
	h.Write([]byte{0})
	h.Write(n[:])
	h.Write([]byte(name))
	return generatedIDPrefix + hex.EncodeToString(h.Sum(nil)[:8])
}

// usage maps Gemini's usage metadata; see the package documentation for
// what each count includes.
func usage(u *genai.GenerateContentResponseUsageMetadata) llm.Usage {
	if u == nil {
		return llm.Usage{}
	}
	return llm.Usage{
		InputTokens:       int64(u.PromptTokenCount) + int64(u.ToolUsePromptTokenCount),
		OutputTokens:      int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount),
		CachedInputTokens: int64(u.CachedContentTokenCount),
		ReasoningTokens:   int64(u.ThoughtsTokenCount),
	}.WithTotal(int64(u.TotalTokenCount))
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}
