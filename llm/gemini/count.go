package gemini

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
)

// CountTokens counts the input tokens of the request Generate would send
// for req, with Gemini's countTokens (Models.CountTokens). On Vertex AI
// the count carries the system instruction and the tools as Generate
// sends them. The Gemini Developer API's countTokens, as the SDK sends
// it, takes the contents alone: there the system instruction and the
// tool declarations (as JSON) go as text in a leading content, so that
// the count includes them, close to what generateContent counts though
// not exactly. A failure is classified as Generate's are.
func (m *Model) CountTokens(ctx context.Context, req *llm.Request) (int64, error) {
	c, err := m.prepare(req)
	if err != nil {
		return 0, err
	}
	contents, cfg := c.contents, &genai.CountTokensConfig{}
	if m.client.ClientConfig().Backend == genai.BackendVertexAI {
		cfg.SystemInstruction, cfg.Tools = c.cfg.SystemInstruction, c.cfg.Tools
	} else if lead := countedAsText(c.cfg); lead != nil {
		contents = append([]*genai.Content{lead}, contents...)
	}
	resp, err := m.client.Models.CountTokens(ctx, c.model, contents, cfg)
	if err != nil {
		return 0, m.classify(ctx, err)
	}
	return int64(resp.TotalTokens), nil
}

// countedAsText is the system instruction and the tool declarations of
// cfg as one user content of text parts, for a count that takes no
// other; nil when cfg has neither.
func countedAsText(cfg *genai.GenerateContentConfig) *genai.Content {
	var parts []*genai.Part
	if s := cfg.SystemInstruction; s != nil {
		for _, p := range s.Parts {
			if p != nil && p.Text != "" {
				parts = append(parts, genai.NewPartFromText(p.Text))
			}
		}
	}
	for _, t := range cfg.Tools {
		for _, d := range t.FunctionDeclarations {
			b, err := json.Marshal(d)
			if err != nil {
				b = fmt.Appendf(nil, "%s: %s", d.Name, d.Description)
			}
			parts = append(parts, genai.NewPartFromText(string(b)))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return genai.NewContentFromParts(parts, genai.RoleUser)
}

var _ llm.TokenCounter = (*Model)(nil)
