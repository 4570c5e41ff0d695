package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolloop/toolloop/tool"
)

// Tools lists the server's tools, following its pagination, and builds a
// toolloop tool for each one Options.Filter keeps:
//
//   - the name is Options.Prefix followed by the server's name, with every
//     character providers do not accept in tool names ('.', '/', ...)
//     replaced by '_';
//   - the description is the server's, or its title when it gives none;
//   - the input schema is the server's, which toolloop validates the
//     model's arguments against before the server is called (a server
//     that gives none gets an object schema that accepts any object);
//   - effect and risk come from the server's annotations through
//     tool.Annotations.ApplyTo, and the timeout from Options.Timeout;
//   - a compensation and an all-or-nothing group come from Options.Tools
//     and Options.AtomicGroup, checked against the listing;
//   - results are untrusted (tool.Trust.Untrusted) unless
//     Options.TrustResults or Options.TrustedTools says otherwise, a
//     tool whose openWorldHint is not false sends data out
//     (tool.Trust.Outward), and its destination arguments are unknown
//     (tool.Trust.DestinationsUnknown); Options.Trust and the tool's
//     ToolConfig.Trust declare what they say of these, checked against
//     the listing;
//   - Options.Adjust has the last word.
//
// A tool that cannot be built (a schema toolloop cannot use, a name that
// is too long or collides with another after the mapping) is an error
// naming the server and the tool. By default such a tool fails the whole
// listing; with Options.OnSkipped set it is left out and reported there,
// and the rest are built. Options.Filter leaves out a tool known to be
// unusable before it is tried. Listing again after the server's tools
// changed gives new tools; the ones built before keep calling the server
// by their own name.
func (s *Source) Tools(ctx context.Context) ([]*tool.Tool, error) {
	var (
		tools []*tool.Tool
		errs  []error
		names = map[string]string{} // toolloop name -> server name
		// For the check of Options.Tools: the tools offered (server name
		// -> toolloop name), built (by toolloop name), and those that
		// could not be built, with why.
		offered  = map[string]string{}
		built    = map[string]*tool.Tool{}
		buildErr = map[string]error{}
		listed   = map[string]*mcpsdk.Tool{}
	)
	for t, err := range s.session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp: listing tools: %w", err)
		}
		if t == nil || (s.opts.Filter != nil && !s.opts.Filter(t)) {
			continue
		}
		tt, err := s.build(t)
		offered[t.Name] = localName(s.opts.Prefix, t.Name)
		listed[t.Name] = t
		if err == nil {
			if other, dup := names[tt.Name()]; dup {
				err = fmt.Errorf("%s: server tools %q and %q are both named %q here", s.describe(t), other, t.Name, tt.Name())
			}
		}
		if err != nil {
			buildErr[t.Name] = err
			if _, configured := s.opts.Tools[t.Name]; configured {
				continue // checkConfig reports it, whatever OnSkipped says
			}
			if s.opts.OnSkipped != nil {
				s.opts.OnSkipped(t, err)
			} else {
				errs = append(errs, err)
			}
			continue
		}
		names[tt.Name()] = t.Name
		built[tt.Name()] = tt
		tools = append(tools, tt)
	}
	if err := s.checkConfig(built, offered, listed, buildErr); err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w (Options.OnSkipped leaves out the tools that cannot be built and builds the rest)", err)
	}
	return tools, nil
}

// describe names t and, when it introduced itself, the server offering
// it, as the errors about t start.
func (s *Source) describe(t *mcpsdk.Tool) string {
	if r := s.session.InitializeResult(); r != nil && r.ServerInfo != nil && r.ServerInfo.Name != "" {
		return fmt.Sprintf("mcp: server %q: tool %q", r.ServerInfo.Name, t.Name)
	}
	return fmt.Sprintf("mcp: tool %q", t.Name)
}

func (s *Source) build(t *mcpsdk.Tool) (*tool.Tool, error) {
	schema, err := inputSchema(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.describe(t), err)
	}
	def := tool.Definition{
		Name:           localName(s.opts.Prefix, t.Name),
		Description:    t.Description,
		InputSchema:    schema,
		Timeout:        s.opts.Timeout,
		MaxResultBytes: s.opts.MaxResultBytes,
	}
	if def.Description == "" {
		def.Description = t.Title
		if def.Description == "" && t.Annotations != nil {
			def.Description = t.Annotations.Title
		}
	}
	hints(t.Annotations).ApplyTo(&def)
	def.Trust.Untrusted = !s.opts.TrustResults && !slices.Contains(s.opts.TrustedTools, t.Name)
	s.configure(t, &def)
	if s.opts.Adjust != nil {
		s.opts.Adjust(t, &def)
	}
	tt, err := tool.NewRaw(def, s.handler(t.Name, def.Effect), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.describe(t), err)
	}
	return tt, nil
}

// localName maps a server's tool name to one every provider accepts.
func localName(prefix, name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, prefix+name)
}

// hints converts the SDK's annotations. The SDK keeps readOnlyHint and
// idempotentHint as plain bools, so "absent" reads as false, which is also
// what the specification says an absent hint means.
func hints(a *mcpsdk.ToolAnnotations) tool.Annotations {
	if a == nil {
		return tool.Annotations{}
	}
	ro, idem := a.ReadOnlyHint, a.IdempotentHint
	return tool.Annotations{
		ReadOnlyHint:    &ro,
		DestructiveHint: a.DestructiveHint,
		IdempotentHint:  &idem,
		OpenWorldHint:   a.OpenWorldHint,
	}
}

// inputSchema encodes the schema the SDK decoded (a map[string]any on the
// client side, but any value that encodes to JSON is accepted).
func inputSchema(v any) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	b, err := marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the input schema: %w", err)
	}
	if bytes.Equal(b, []byte("null")) {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	return b, nil
}

// marshal encodes v as compact JSON without escaping <, > and &, which
// would only make schemas and results harder for a model to read.
func marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
