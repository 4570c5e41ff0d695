package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// handler calls the server's tool remote with the arguments toolloop has
// already validated, as the model sent them. effect is the tool's, as
// built: a write whose answer is lost is an unknown outcome.
func (s *Source) handler(remote string, effect tool.Effect) tool.RawHandler {
	return func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		select {
		case <-s.ended:
			// Nothing is sent on a session that has ended.
			return nil, s.unavailable(remote, mcpsdk.ErrConnectionClosed)
		default:
		}
		var sent sendTrace
		res, err := s.session.CallTool(withSendTrace(ctx, &sent), &mcpsdk.CallToolParams{Name: remote, Arguments: args})
		if err != nil {
			return nil, s.callError(ctx, remote, effect, &sent, err)
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
				return nil, &tool.Error{Kind: llm.KindUnavailable, Msg: "the MCP server is shedding load",
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

// codeRejected is the SDK's code for a request its transport could not
// deliver, or whose answer it could not read (jsonrpc2.ErrRejected): not
// an answer from the server.
const codeRejected = -32005

// callError classifies a failed call: one the caller canceled or let
// expire, one the server answered with a JSON-RPC error, or one that got
// no answer. For the last, what matters is whether the request may have
// reached the server: if not, the call failed cleanly (unavailable, which
// the executor retries); if so, a write may have happened, and its
// outcome is unknown.
func (s *Source) callError(ctx context.Context, remote string, effect tool.Effect, sent *sendTrace, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		// Reported as the context's error, so that the executor sees a
		// timeout or a cancellation; the SDK has told the server to stop.
		return fmt.Errorf("MCP tool %q: %w", remote, cerr)
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code != codeRejected {
		switch we.Code {
		case jsonrpc.CodeInvalidParams:
			// The server rejected the request: arguments its own
			// validation refused, or a tool it no longer has.
			return &tool.Error{Kind: llm.KindInvalidArguments, Msg: we.Message, Err: err}
		case jsonrpc.CodeMethodNotFound:
			return &tool.Error{Kind: llm.KindInternal, Msg: "the MCP server does not support tool calls", Err: err}
		}
		return &tool.Error{Kind: llm.KindToolError, Msg: we.Message, Err: err}
	}
	// No answer. Over HTTP the request's fate is known; over a stream
	// (stdio) a request on a live session was written, and the server may
	// have read it before it died.
	mayHaveRun := !s.tracksSends || sent.mayHaveRun()
	if s.tracksSends && sent.status.Load() == http.StatusTooManyRequests {
		return tool.RateLimited(0, fmt.Errorf("MCP tool %q: %w", remote, err))
	}
	if mayHaveRun && effect == tool.Write {
		cause := fmt.Errorf("MCP tool %q: %w", remote, err)
		e := tool.OutcomeUnknown(cause).(*tool.Error)
		if d := s.death(); d != "" {
			e.Msg += "; " + d
		}
		return e
	}
	return s.unavailable(remote, err)
}

// unavailable is a call that failed without reaching the server's tool,
// or a read that may be tried again.
func (s *Source) unavailable(remote string, err error) error {
	msg := "the MCP server is unavailable"
	if d := s.death(); d != "" {
		msg += ": " + d
	}
	return &tool.Error{Kind: llm.KindUnavailable, Msg: msg, Err: fmt.Errorf("MCP tool %q: %w", remote, err)}
}

// death says how a server started by ConnectCommand ended, if it has,
// with the end of its standard error; "" otherwise.
func (s *Source) death() string {
	if s.proc == nil {
		return ""
	}
	// A server's stdout closes as it dies: the failure that brought us
	// here comes a moment before the exit status.
	select {
	case <-s.proc.exited:
	case <-time.After(time.Second):
		return ""
	}
	return s.proc.describe(0)
}

// toolError turns a result marked IsError into a classified error whose
// message is the result's text.
func (s *Source) toolError(remote string, res *mcpsdk.CallToolResult) error {
	kind := llm.KindToolError
	if s.opts.ErrorKind != nil {
		if k := s.opts.ErrorKind(remote, res); k != "" {
			kind = k
		}
	}
	text := errorText(res)
	if kind == llm.KindToolError && invalidParams(text) {
		kind = llm.KindInvalidArguments
	}
	return &tool.Error{Kind: kind, Msg: text}
}

// invalidParams reports whether the text of a failed result says that the
// server's own validation refused the arguments, in the words of the
// common SDKs: the Go SDK's "validating "arguments"", the TypeScript SDK's
// "MCP error -32602" and "Input validation error", Python's (pydantic)
// "validation error for ...Arguments". The specification asks servers to
// report such failures as results, for the model to correct.
func invalidParams(text string) bool {
	return strings.HasPrefix(text, `validating "arguments"`) ||
		strings.Contains(text, "MCP error -32602") || strings.Contains(text, "Input validation error") ||
		strings.Contains(text, "validation error for ") && strings.Contains(text, "Arguments")
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
//
// Structured content gets the same treatment: an object in it that
// carries binary data as base64 (an image or audio block, a resource's
// blob, as servers that mirror their content blocks there send it) is
// replaced by its summary.
func render(res *mcpsdk.CallToolResult) (json.RawMessage, error) {
	if res.StructuredContent != nil {
		return marshal(withoutBinary(res.StructuredContent))
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

// withoutBinary returns v, decoded JSON, with every object that carries
// base64 data replaced by its summary: {"type":"image"|"audio","data":...}
// and {"blob":...}. v itself is not changed.
func withoutBinary(v any) any {
	switch v := v.(type) {
	case map[string]any:
		str := func(k string) string { s, _ := v[k].(string); return s }
		mime := str("mimeType")
		if t := str("type"); (t == "image" || t == "audio") && v["data"] != nil {
			if data, ok := v["data"].(string); ok {
				return summary{Type: t, MIMEType: mime, Bytes: base64Size(data)}
			}
		}
		if blob, ok := v["blob"].(string); ok {
			return summary{Type: "resource", URI: str("uri"), MIMEType: mime, Bytes: base64Size(blob)}
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = withoutBinary(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withoutBinary(e)
		}
		return out
	}
	return v
}

// base64Size is the size of the data that s, standard base64, encodes.
func base64Size(s string) *int64 {
	s = strings.TrimRight(s, "=")
	n := int64(len(s)) * 3 / 4
	return &n
}
