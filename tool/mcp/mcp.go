package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// Options configure a Source. A nil *Options is the zero value; the
// Source keeps its own copy.
type Options struct {
	// Client is the MCP client the session is started from, for callers
	// that need client features (middleware, a logger, elicitation). Nil
	// means a plain client that introduces itself as "toolloop".
	Client *mcpsdk.Client
	// Prefix is put before every tool name, e.g. "fs_", so that the tools
	// of several servers cannot collide in one registry. The model sees
	// the prefixed name; the server is called with its own.
	Prefix string
	// Timeout is each tool's timeout (tool.Definition.Timeout). Zero
	// leaves the executor's default.
	Timeout time.Duration
	// Filter, when set, selects the server's tools to build; the others
	// are left out, as if the server did not offer them. Use it as an
	// allowlist, or to leave out a tool whose schema toolloop cannot use.
	Filter func(t *mcpsdk.Tool) bool
	// Adjust, when set, may edit each tool's definition after the
	// server's annotations were applied and before the tool is built:
	// require confirmation, mark fields sensitive, set a timeout or an
	// exclusive group, or, for a server whose hints you do not trust,
	// set Effect to tool.Write and Risk to tool.RiskHigh. A changed Name
	// or InputSchema changes what the model sees and what toolloop
	// validates; the server is still called by its own name.
	Adjust func(t *mcpsdk.Tool, def *tool.Definition)
	// ErrorKind, when set, classifies a result the server marked with
	// IsError, given the server's name for the tool. An empty kind means
	// the default, KindToolError.
	ErrorKind func(name string, res *mcpsdk.CallToolResult) llm.ErrorKind
	// HTTPClient is the HTTP client ConnectURL uses; nil means
	// http.DefaultClient.
	HTTPClient *http.Client
}

// KindToolError is the kind of a call the server answered with IsError:
// the tool ran and reported a failure, whose text the model is shown.
//
// MCP servers use IsError for every failure of a tool's own, from "no
// such file" to "the upstream API timed out", and the protocol says
// nothing about which of them another attempt may cure. So the kind is
// neither retryable (tool.Retryable: the executor does not repeat a call
// that ran, which may be a write, behind the model's back) nor
// deterministic (tool.Deterministic: the loop does not declare a model
// spinning because it tries again later after a failure that may have
// been transient). The loop's hard limits and its other spin checks still
// apply. Options.ErrorKind can classify a server's errors more sharply.
const KindToolError llm.ErrorKind = "tool_error"

// Source is a session with one MCP server, and the tools it offers. It is
// safe for concurrent use; the tools it built call the server through it
// and fail with kind unavailable once it is closed.
type Source struct {
	session *mcpsdk.ClientSession
	opts    Options

	closeOnce sync.Once
	closeErr  error
}

// Connect starts an MCP session over transport: it connects and performs
// the protocol's handshake. ctx bounds the handshake only; the session
// lasts until Close.
func Connect(ctx context.Context, transport mcpsdk.Transport, opts *Options) (*Source, error) {
	if transport == nil {
		return nil, errors.New("mcp: nil transport")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	client := o.Client
	if client == nil {
		client = mcpsdk.NewClient(&mcpsdk.Implementation{Name: "toolloop", Version: "v0"}, nil)
	}
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("mcp: connecting: %w", err)
	}
	return &Source{session: session, opts: o}, nil
}

// ConnectCommand starts cmd, a local MCP server, and connects to it over
// its standard input and output. The caller builds cmd, so its
// environment, working directory and standard error are the caller's
// choice (a nil Stderr discards the server's logs). Close closes the
// server's input, waits for it to exit, and terminates it if it does not
// within five seconds.
func ConnectCommand(ctx context.Context, cmd *exec.Cmd, opts *Options) (*Source, error) {
	if cmd == nil {
		return nil, errors.New("mcp: nil command")
	}
	// If the handshake fails, the SDK closes the session, which ends the
	// process as Close would.
	return Connect(ctx, &mcpsdk.CommandTransport{Command: cmd}, opts)
}

// ConnectURL connects to the MCP server at url over the streamable HTTP
// transport, with Options.HTTPClient. The client does not open the
// optional stream for messages the server starts on its own: toolloop
// only asks and waits for answers.
func ConnectURL(ctx context.Context, url string, opts *Options) (*Source, error) {
	t := &mcpsdk.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}
	if opts != nil {
		t.HTTPClient = opts.HTTPClient
	}
	return Connect(ctx, t, opts)
}

// Session returns the underlying SDK session, for what this package does
// not cover (resources, prompts). Closing it closes the Source.
func (s *Source) Session() *mcpsdk.ClientSession { return s.session }

// Close ends the session and, for ConnectCommand, the server process. It
// returns what ending them reported (for a command, how it exited); it is
// safe to call more than once.
func (s *Source) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.session.Close() })
	return s.closeErr
}
