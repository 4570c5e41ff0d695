package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolloop/toolloop/tool"
)

// handler calls the server's tool remote with the arguments toolloop has
// already validated, as the model sent them.
func (s *Source) handler(remote string) tool.RawHandler {
	return func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		res, err := s.session.CallTool(ctx, &mcpsdk.CallToolParams{Name: remote, Arguments: args})
		if err != nil {
			return nil, callError(ctx, remote, err)
		}
		if res == nil {
			res = &mcpsdk.CallToolResult{}
		}
		switch {
		case res.IsError:
			return nil, s.toolError(remote, res)
		case res.NeedsInput():
			// The SDK answers the server's input requests itself where
			// the client has a handler for them; a result that still
			// asks for input is one this client cannot give.
			if len(res.InputRequests) == 0 {
				return nil, &tool.Error{Kind: tool.KindUnavailable, Msg: "the MCP server is shedding load",
					Err: fmt.Errorf("MCP tool %q: input required without input requests", remote)}
			}
			return nil, tool.NeedsInput("the MCP server needs input this client cannot provide")
		}
		out, err := render(res)
		if err != nil {
			return nil, fmt.Errorf("MCP tool %q: encoding its result: %w", remote, err)
		}
		return out, nil
	}
}

// callError classifies a failed call: one the caller canceled or let
// expire, one the server refused with a JSON-RPC error, or one that never
// got an answer (the connection or the server is gone).
func callError(ctx context.Context, remote string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		// Reported as the context's error, so that the executor sees a
		// timeout or a cancellation; the SDK has told the server to stop.
		return fmt.Errorf("MCP tool %q: %w", remote, cerr)
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		switch we.Code {
		case jsonrpc.CodeInvalidParams:
			// The server rejected the request: arguments its own
			// validation refused, or a tool it no longer has.
			return &tool.Error{Kind: tool.KindInvalidArguments, Msg: we.Message, Err: err}
		case jsonrpc.CodeMethodNotFound:
			return &tool.Error{Kind: tool.KindInternal, Msg: "the MCP server does not support tool calls", Err: err}
		}
		return &tool.Error{Kind: KindToolError, Msg: we.Message, Err: err}
	}
	return &tool.Error{Kind: tool.KindUnavailable, Msg: "the MCP server is unavailable", Err: fmt.Errorf("MCP tool %q: %w", remote, err)}
}

// toolError turns a result marked IsError into a classified error whose
// message is the result's text.
func (s *Source) toolError(remote string, res *mcpsdk.CallToolResult) error {
	kind := KindToolError
	if s.opts.ErrorKind != nil {
		if k := s.opts.ErrorKind(remote, res); k != "" {
			kind = k
		}
	}
	return &tool.Error{Kind: kind, Msg: errorText(res)}
}

// errorText is the text blocks of a failed result, or a rendering of the
// whole result when it has none.
func errorText(res *mcpsdk.CallToolResult) string {
	var texts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcpsdk.TextContent); ok && t.Text != "" {
			texts = append(texts, t.Text)
		}
	}
	if len(texts) > 0 {
		return strings.Join(texts, "\n")
	}
	if res.StructuredContent != nil || len(res.Content) > 0 {
		if b, err := render(res); err == nil {
			return string(b)
		}
	}
	return "the tool failed without saying why"
}

// render is a successful result as the model sees it: the structured
// content when the server gave some; otherwise the content blocks, where
// text is a JSON string and anything else is summarized (its type, MIME
// type and size), never copied, since a model cannot use base64 and it
// would spend the context window. One block stands alone; several, or
// none, make an array.
func render(res *mcpsdk.CallToolResult) (json.RawMessage, error) {
	if res.StructuredContent != nil {
		return marshal(res.StructuredContent)
	}
	if len(res.Content) == 1 {
		return marshal(block(res.Content[0]))
	}
	blocks := make([]any, len(res.Content))
	for i, c := range res.Content {
		blocks[i] = block(c)
	}
	return marshal(blocks)
}

// summary describes a content block that is not text.
type summary struct {
	Type        string `json:"type"`
	URI         string `json:"uri,omitempty"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
	Text        string `json:"text,omitempty"`
	// Bytes is the size of the data the block stands for, which is
	// never included.
	Bytes *int64 `json:"bytes,omitempty"`
}

func block(c mcpsdk.Content) any {
	size := func(n int) *int64 { v := int64(n); return &v }
	switch c := c.(type) {
	case *mcpsdk.TextContent:
		return c.Text
	case *mcpsdk.ImageContent:
		return summary{Type: "image", MIMEType: c.MIMEType, Bytes: size(len(c.Data))}
	case *mcpsdk.AudioContent:
		return summary{Type: "audio", MIMEType: c.MIMEType, Bytes: size(len(c.Data))}
	case *mcpsdk.ResourceLink:
		return summary{Type: "resource_link", URI: c.URI, Name: c.Name, Description: c.Description,
			MIMEType: c.MIMEType, Bytes: c.Size}
	case *mcpsdk.EmbeddedResource:
		s := summary{Type: "resource"}
		if r := c.Resource; r != nil {
			s.URI, s.MIMEType, s.Text = r.URI, r.MIMEType, r.Text
			if r.Blob != nil {
				s.Bytes = size(len(r.Blob))
			}
		}
		return s
	}
	// Sampling content (tool_use, tool_result) has no place in a tool
	// result; say that something was there without guessing what.
	return summary{Type: "unsupported"}
}
