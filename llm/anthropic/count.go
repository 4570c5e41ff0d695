package anthropic

import (
	"context"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolloop/toolloop/llm"
)

// CountTokens counts the input tokens of the request Generate would send
// for req, with the Messages API's token counting
// (POST /v1/messages/count_tokens): system prompt, tools, thinking and
// output format included, the cache breakpoints as placed. The count
// is free of charge but rate limited; a failure is classified as
// Generate's are.
func (m *Model) CountTokens(ctx context.Context, req *llm.Request) (int64, error) {
	p, err := m.params(req)
	if err != nil {
		return 0, err
	}
	c := anthropic.MessageCountTokensParams{
		Model:        p.Model,
		Messages:     p.Messages,
		Thinking:     p.Thinking,
		ToolChoice:   p.ToolChoice,
		OutputConfig: p.OutputConfig,
	}
	if len(p.System) > 0 {
		c.System = anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: p.System}
	}
	for _, t := range p.Tools {
		c.Tools = append(c.Tools, anthropic.MessageCountTokensToolUnionParam{OfTool: t.OfTool})
	}
	n, err := m.client.Messages.CountTokens(ctx, c, m.reqOpts...)
	if err != nil {
		return 0, classify(ctx, err, m.opts.Now())
	}
	return n.InputTokens, nil
}

var _ llm.TokenCounter = (*Model)(nil)
