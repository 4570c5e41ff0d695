package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-shellwords"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/tool/mcp"
)

// Tool sets --tools knows.
const toolsOrders = "orders"

// toolSets returns the --tools values, split at commas, checked.
func (f *sourceFlags) toolSets() ([]string, error) {
	var sets []string
	for _, v := range f.tools {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if name != toolsOrders {
				return nil, &usageErr{fmt.Sprintf("--tools %q: unknown tool set; want %s (add others with --mcp or --mcp-url)", name, toolsOrders)}
			}
			if !slices.Contains(sets, name) {
				sets = append(sets, name)
			}
		}
	}
	return sets, nil
}

// toolBox is the tools of a toolloop run run and what they hold open.
type toolBox struct {
	reg     *tool.Registry
	sources []*mcp.Source
}

func (b *toolBox) close() {
	for _, s := range b.sources {
		_ = s.Close()
	}
}

// BookOpener opens the order book the order desk's tools work on; it is
// called only when the flags ask for those tools, so that a run without
// them leaves the store's database as it was.
type BookOpener func(ctx context.Context) (orders.OrderBook, error)

// sqliteBook opens the order book in the SQLite store st.
func sqliteBook(st *sqlite.Store) BookOpener {
	return func(ctx context.Context) (orders.OrderBook, error) { return orders.OpenSQLiteBook(ctx, st.DB()) }
}

// toolsFor builds the run's tools: the built-in sets over the order book
// openBook opens, then each MCP server's, its names prefixed "mcpN_" in
// the order the flags give the servers (commands first), so that servers
// never collide with each other or with the built-in tools.
func (c *cli) toolsFor(ctx context.Context, f *sourceFlags, openBook BookOpener) (*toolBox, error) {
	sets, err := f.toolSets()
	if err != nil {
		return nil, err
	}
	if f.slowWrites < 0 {
		return nil, &usageErr{"--slow-writes must not be negative"}
	}
	if f.slowWrites > 0 && !slices.Contains(sets, toolsOrders) {
		return nil, &usageErr{"--slow-writes applies to the order desk's tools: add --tools orders"}
	}
	box := &toolBox{}
	var all []*tool.Tool
	if slices.Contains(sets, toolsOrders) {
		book, err := openBook(ctx)
		if err != nil {
			return nil, err
		}
		reg, err := orders.Tools(orders.SlowWrites(book, f.slowWrites))
		if err != nil {
			return nil, err
		}
		for _, name := range reg.Names() {
			t, _ := reg.Lookup(name)
			all = append(all, t)
		}
	}
	env, err := c.mcpEnv(f)
	if err != nil {
		return nil, err
	}
	mcpCfg, err := readMCPConfig(f.mcpConfig, len(f.mcp)+len(f.mcpURL))
	if err != nil {
		return nil, err
	}
	n := 0
	connect := func(what string, dial func(ctx context.Context, opts *mcp.Options) (*mcp.Source, error)) error {
		n++
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		// A tool the server describes with a schema toolloop cannot use
		// is left out with a warning; the server's other tools still load.
		sc := mcpCfg[fmt.Sprintf("mcp%d", n)]
		src, err := dial(cctx, &mcp.Options{Prefix: fmt.Sprintf("mcp%d_", n), Tools: sc.Tools, AtomicGroup: sc.AtomicGroup, Trust: sc.Trust, OnSkipped: func(t *mcpsdk.Tool, err error) {
			fmt.Fprintf(c.stderr, "toolloop: warning: MCP server %s: tool %q left out: %s\n", what, t.Name, strings.Join(strings.Fields(err.Error()), " "))
		}})
		if err != nil {
			return fmt.Errorf("MCP server %s: %w", what, err)
		}
		box.sources = append(box.sources, src)
		tools, err := src.Tools(cctx)
		if ce := (*mcp.ConfigError)(nil); errors.As(err, &ce) {
			return &usageErr{fmt.Sprintf("--mcp-config %s: MCP server %s (mcp%d): %s", f.mcpConfig, what, n, strings.Join(strings.Fields(err.Error()), " "))}
		}
		if err != nil {
			return fmt.Errorf("MCP server %s: %w", what, err)
		}
		all = append(all, tools...)
		return nil
	}
	for _, line := range f.mcp {
		argv, err := splitCommand(line)
		if err == nil && len(argv) == 0 {
			err = errors.New("no command")
		}
		if err != nil {
			box.close()
			return nil, &usageErr{fmt.Sprintf("--mcp %q: %v; want a command and its arguments, e.g. --mcp 'npx -y @modelcontextprotocol/server-everything'", line, err)}
		}
		err = connect(shellQuote(line), func(ctx context.Context, opts *mcp.Options) (*mcp.Source, error) {
			// The server outlives the handshake's context: no CommandContext.
			opts.Env = env
			return mcp.ConnectCommand(ctx, exec.Command(argv[0], argv[1:]...), opts)
		})
		if err != nil {
			box.close()
			return nil, err
		}
	}
	for _, u := range f.mcpURL {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			box.close()
			return nil, &usageErr{fmt.Sprintf("--mcp-url %q: want an http or https URL", u)}
		}
		err := connect(redactURL(u), func(ctx context.Context, opts *mcp.Options) (*mcp.Source, error) {
			return mcp.ConnectURL(ctx, u, opts)
		})
		if err != nil {
			box.close()
			return nil, err
		}
	}
	reg, err := tool.NewRegistry(all...)
	if err != nil {
		box.close()
		return nil, err
	}
	box.reg = reg
	return box, nil
}

// mcpEnv checks the --mcp-env values and returns them as NAME=VALUE, a
// bare NAME taking its value from the environment (left out when unset).
func (c *cli) mcpEnv(f *sourceFlags) ([]string, error) {
	if len(f.mcpEnv) > 0 && len(f.mcp) == 0 {
		return nil, &usageErr{"--mcp-env applies to the servers of --mcp: add one"}
	}
	var env []string
	for _, e := range f.mcpEnv {
		name, val, hasVal := strings.Cut(e, "=")
		if !envName.MatchString(name) {
			return nil, &usageErr{fmt.Sprintf("--mcp-env %q: want NAME or NAME=VALUE, NAME of letters, digits and '_'", e)}
		}
		if !hasVal {
			if val = c.getenv(name); val == "" {
				continue
			}
		}
		env = append(env, name+"="+val)
	}
	return env, nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// splitCommand splits an --mcp command line into words as a POSIX shell
// would: blanks separate words, quotes and backslashes keep them together.
// Variables and backquotes are passed on as written, not expanded; a pipe,
// a list or a redirection is refused.
func splitCommand(s string) ([]string, error) {
	p := shellwords.NewParser()
	words, err := p.Parse(s)
	if err != nil {
		return nil, err
	}
	if p.Position >= 0 {
		return nil, fmt.Errorf("%q at byte %d: --mcp takes one command, not a pipeline or a redirection", s[p.Position:], p.Position)
	}
	return words, nil
}
