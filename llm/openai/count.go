package openai

import (
	"context"
	"net/http"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolloop/toolloop/llm"
)

// CountTokens counts the input tokens of the request Generate would send
// for req, with the Responses API's input token count
// (POST /v1/responses/input_tokens): input items, tools, reasoning and
// output format as Generate sends them. A failure is classified as
// Generate's are. (Chat Completions has no such count: Chat does not
// implement llm.TokenCounter, and the loop keeps its estimate.)
func (r *Responses) CountTokens(ctx context.Context, req *llm.Request) (int64, error) {
	p, _, err := r.params(req)
	if err != nil {
		return 0, err
	}
	c := responses.InputTokenCountParams{
		Model:             param.NewOpt(string(p.Model)),
		Input:             responses.InputTokenCountParamsInputUnion{OfResponseInputItemArray: p.Input.OfInputItemList},
		Tools:             p.Tools,
		ParallelToolCalls: p.ParallelToolCalls,
		Reasoning:         p.Reasoning,
		Text:              responses.InputTokenCountParamsText{Format: p.Text.Format},
	}
	var httpResp *http.Response
	n, err := r.service.InputTokens.Count(ctx, c, requestOptions(r.opts.RequestOptions, r.opts.MaxResponseBytes, r.opts.MaxStreamBytes, &httpResp)...)
	if err != nil {
		return 0, classify(ctx, err, httpResp, r.now())
	}
	return n.InputTokens, nil
}

var _ llm.TokenCounter = (*Responses)(nil)
