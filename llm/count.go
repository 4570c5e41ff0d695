package llm

import "context"

// TokenCounter is a Model whose provider can count a request's input
// tokens without generating anything (Anthropic's count_tokens, Gemini's
// countTokens, OpenAI Responses' input_tokens). The loop asks it only
// when its own estimate comes near the model's window, and falls back to
// the estimate when counting fails: a count is advice, never a reason to
// stop a run.
//
// CountTokens must count the request Generate would send for req (system
// prompt, tools and output format included), and like Generate must not
// modify req.
type TokenCounter interface {
	CountTokens(ctx context.Context, req *Request) (int64, error)
}
