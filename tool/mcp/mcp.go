package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
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
	// OnSkipped, when set, makes Source.Tools leave out each tool it
	// cannot build (an input schema that breaks its draft's meta-schema
	// or names another document, a name taken by another tool) and build
	// the rest; it is called once per such tool, from the goroutine
	// calling Tools, with the server's tool and an error naming the
	// server, the tool and what is wrong. Nil means strict: Tools fails,
	// naming every such tool, and builds none.
	//
	// Strict is the default because this package has no log of its own:
	// without a callback to hear of it, a tool left out would be dropped
	// without a word, and a model would be missing a tool nobody knew
	// about. Real servers do publish sloppy schemas, so a program that
	// talks to servers it does not control (the toolloop command does)
	// should set OnSkipped and show the user what was left out.
	OnSkipped func(t *mcpsdk.Tool, err error)
	// Adjust, when set, may edit each tool's definition after the
	// server's annotations were applied and before the tool is built:
	// require confirmation, mark fields sensitive, set a timeout or an
	// exclusive group, or, for a server whose hints you do not trust,
	// set Effect to tool.Write and Risk to tool.RiskHigh. A changed Name
	// or InputSchema changes what the model sees and what toolloop
	// validates; the server is still called by its own name.
	Adjust func(t *mcpsdk.Tool, def *tool.Definition)
	// TrustResults declares that the server's results are trusted: it is
	// the application's own and shows the model no outside content. By
	// default every MCP tool's results are untrusted (tool.Trust), so
	// that a run that reads them is tainted; TrustedTools trusts only the
	// tools it names (the server's names), and Adjust may set any tool's
	// tool.Definition.Trust, per field too.
	TrustResults bool
	TrustedTools []string
	// Trust declares, for every tool of the server, what it does with
	// data (results trusted or not, private data read, data sent out,
	// credentials written); a tool's ToolConfig.Trust has the last word
	// on what it sets. Destinations and result fields are per tool.
	Trust *TrustConfig
	// ErrorKind, when set, classifies a result the server marked with
	// IsError, given the server's name for the tool. An empty kind means
	// the default, llm.KindToolError.
	ErrorKind func(name string, res *mcpsdk.CallToolResult) llm.ErrorKind
	// HTTPClient is the HTTP client ConnectURL uses; nil means
	// http.DefaultClient.
	HTTPClient *http.Client
	// MaxResultBytes caps the size of each of the server's results the
	// model is shown (tool.Definition.MaxResultBytes of every tool); zero
	// leaves the executor's cap, negative means no cap.
	MaxResultBytes int
	// ConnectTimeout bounds the handshake, so that a server that never
	// answers fails soon with an error that says so. Default 10s.
	ConnectTimeout time.Duration
	// Env names the variables a server started by ConnectCommand gets
	// besides HOME, LOGNAME, PATH, SHELL, TERM and USER (on Windows, the
	// system's equivalents): NAME passes this process's value on, when
	// it has one, and NAME=VALUE sets a value. Nothing else is inherited,
	// so that secrets in this process's environment (API keys) reach a
	// server, and through its tools the model, only when named. It
	// applies only to a command whose Env is nil: a command with its own
	// Env runs with exactly that environment, and Env must then be empty.
	Env []string
	// Tools configures the server's tools, by the server's names for
	// them: a compensation, an all-or-nothing group and trust
	// (ToolConfig), which MCP has no way to say. Source.Tools checks it:
	// a configured tool the server does not offer, a compensation that
	// is not one of the server's writes, a mapping that cannot work or a
	// trust declaration that cannot hold (ToolConfig.Trust) fails the
	// listing with a *ConfigError naming the tool and what is wrong, with
	// or without OnSkipped.
	Tools map[string]ToolConfig
	// AtomicGroup, when set, puts every write of the server in that
	// all-or-nothing group (tool.Definition.AtomicGroup), unless its
	// ToolConfig names another.
	AtomicGroup string
	// ShutdownTimeout is how long Close waits for a server started by
	// ConnectCommand to exit after its input is closed, and again after
	// SIGTERM, before it kills it. Default 2s.
	ShutdownTimeout time.Duration
}

// Source is a session with one MCP server, and the tools it offers. It is
// safe for concurrent use; the tools it built call the server through it
// and fail with kind unavailable once it is closed.
type Source struct {
	session *mcpsdk.ClientSession
	opts    Options
	// proc is the server ConnectCommand started; nil for other transports.
	proc *process
	// tracksSends says that the transport records, per call, whether the
	// request went out (ConnectURL's HTTP client does; see sendTrace).
	tracksSends bool
	// ended is closed once the session has ended, for whatever reason.
	ended chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// Connect starts an MCP session over transport: it connects and performs
// the protocol's handshake, within ctx and Options.ConnectTimeout. ctx
// bounds the handshake only; the session lasts until Close.
//
// The default client announces no capabilities: toolloop offers a server
// no roots, no sampling and no elicitation, so a server does not ask for
// them. Options.Client can announce and handle them.
func Connect(ctx context.Context, transport mcpsdk.Transport, opts *Options) (*Source, error) {
	if transport == nil {
		return nil, errors.New("mcp: nil transport")
	}
	var o Options
	if opts != nil {
		o = *opts
		o.TrustedTools = slices.Clone(o.TrustedTools)
	}
	return connect(ctx, transport, o, nil, false)
}

func connect(ctx context.Context, transport mcpsdk.Transport, o Options, proc *process, tracksSends bool) (*Source, error) {
	client := o.Client
	if client == nil {
		client = mcpsdk.NewClient(&mcpsdk.Implementation{Name: "toolloop", Version: "v0"},
			// Not the SDK's default, which announces roots this client
			// cannot list.
			&mcpsdk.ClientOptions{Capabilities: &mcpsdk.ClientCapabilities{}})
	}
	timeout := o.ConnectTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	hctx, cancel := context.WithTimeoutCause(ctx, timeout, errHandshakeTimeout)
	defer cancel()
	session, err := client.Connect(hctx, transport, nil)
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(hctx), errHandshakeTimeout) {
			err = fmt.Errorf("the server did not complete the handshake within %v (set Options.ConnectTimeout for a slower one): %w", timeout, err)
		}
		if proc != nil {
			// The SDK has closed the session, and with it ended the
			// process: say how, and what it printed.
			_ = proc.Close()
			if d := proc.describe(0); d != "" {
				err = fmt.Errorf("%w; %s", err, d)
			}
		}
		return nil, fmt.Errorf("mcp: connecting: %w", err)
	}
	s := &Source{session: session, opts: o, proc: proc, tracksSends: tracksSends, ended: make(chan struct{})}
	go func() {
		_ = session.Wait()
		close(s.ended)
	}()
	return s, nil
}

var errHandshakeTimeout = errors.New("the MCP handshake timed out")

// ConnectCommand starts cmd, a local MCP server, and connects to it over
// its standard input and output, which must be left nil.
//
// A command whose Env is nil runs with a minimal environment plus the
// variables Options.Env names; one with an Env of its own runs with
// exactly that. The working directory is the caller's choice. The last
// lines of the server's standard error are kept for errors (a server that
// dies says why); it also goes to cmd.Stderr when that is set. Unless the
// caller set cmd.SysProcAttr, on Unix the server runs in a process group
// of its own, so that Close ends the helpers it started too; a terminal's
// Ctrl-C does not reach it directly, the caller's shutdown does. On Linux
// the group also dies with this process however it ends, SIGKILL
// included: the kernel kills the server when the thread that started it
// ends (Pdeathsig; the thread is kept for as long as the server runs),
// and a small /bin/sh process waiting on a pipe from this one kills the
// rest of the group when that pipe closes. A program that exits without
// Close thus kills its servers rather than letting them see their input
// close.
//
// Close closes the server's input, waits up to Options.ShutdownTimeout
// for it to exit, then sends SIGTERM, waits as long again, and kills it.
func ConnectCommand(ctx context.Context, cmd *exec.Cmd, opts *Options) (*Source, error) {
	if cmd == nil {
		return nil, errors.New("mcp: nil command")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	proc, err := startProcess(cmd, &o)
	if err != nil {
		return nil, err
	}
	// Our own pipes, not the SDK's CommandTransport: how the server exits
	// and what it prints are ours to report, and its shutdown ours to run.
	return connect(ctx, &mcpsdk.IOTransport{Reader: readEnd{proc}, Writer: proc}, o, proc, false)
}

// readEnd is the server's output as the SDK's transport reads it; closing
// it does nothing, as the process's Close ends both directions.
type readEnd struct{ p *process }

func (r readEnd) Read(b []byte) (int, error) { return r.p.Read(b) }
func (readEnd) Close() error                 { return nil }

// ConnectURL connects to the MCP server at url over the streamable HTTP
// transport, with Options.HTTPClient. The client does not open the
// optional stream for messages the server starts on its own: toolloop
// only asks and waits for answers.
func ConnectURL(ctx context.Context, url string, opts *Options) (*Source, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	hc := http.DefaultClient
	if o.HTTPClient != nil {
		hc = o.HTTPClient
	}
	t := &mcpsdk.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true, HTTPClient: traceSends(hc)}
	return connect(ctx, t, o, nil, true)
}

// Session returns the underlying SDK session, for what this package does
// not cover (resources, prompts). Closing it closes the Source.
func (s *Source) Session() *mcpsdk.ClientSession { return s.session }

// Close ends the session and, for ConnectCommand, the server process (see
// there). It returns what ending them reported (for a command, how it
// exited); it is safe to call more than once.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.session.Close()
		if s.proc != nil {
			// Usually the session's close has ended the process already,
			// and this returns how; if the session had ended on its own
			// (the server died), it reports the exit.
			if err := s.proc.Close(); s.closeErr == nil || errors.Is(s.closeErr, mcpsdk.ErrConnectionClosed) {
				s.closeErr = err
			}
		}
		<-s.ended
	})
	return s.closeErr
}
