package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool/mcp"
)

// maxMCPConfigBytes bounds an --mcp-config file.
const maxMCPConfigBytes = 1 << 20

// mcpServerConfig is one server's part of an --mcp-config file: what MCP
// cannot say about its tools (mcp.Options.AtomicGroup, Tools and Trust).
type mcpServerConfig struct {
	// AtomicGroup puts every write of the server in one all-or-nothing
	// group.
	AtomicGroup string `json:"atomic_group,omitempty"`
	// Tools configures tools by the server's names for them.
	Tools map[string]mcp.ToolConfig `json:"tools,omitempty"`
	// Trust declares the trust of all the server's tools (mcp.Options.Trust).
	Trust *mcp.TrustConfig `json:"trust,omitempty"`
}

// readMCPConfig reads an --mcp-config file: a JSON object keyed by the
// servers' prefixes without their '_' ("mcp1", "mcp2", ... in flag order,
// commands first), each a mcpServerConfig. servers is how many --mcp and
// --mcp-url servers the flags name; a key past them is an error. The tools
// are checked against each server's listing when it is loaded (Tools).
func readMCPConfig(path string, servers int) (map[string]mcpServerConfig, error) {
	if path == "" {
		return nil, nil
	}
	bad := func(format string, a ...any) error {
		return &usageErr{fmt.Sprintf("--mcp-config %s: ", path) + fmt.Sprintf(format, a...)}
	}
	if servers == 0 {
		return nil, &usageErr{"--mcp-config configures the tools of the --mcp and --mcp-url servers: add one"}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &usageErr{fmt.Sprintf("--mcp-config: %v", err)}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &usageErr{fmt.Sprintf("--mcp-config: %v", err)}
	}
	if !st.Mode().IsRegular() {
		return nil, bad("not a regular file (%s); want a JSON file", fileKind(st.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxMCPConfigBytes+1))
	if err != nil {
		return nil, &usageErr{fmt.Sprintf("--mcp-config: %v", err)}
	}
	if len(data) > maxMCPConfigBytes {
		return nil, bad("more than the %d bytes it may have", maxMCPConfigBytes)
	}
	var cfg map[string]mcpServerConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) {
			where := te.Field
			if where == "" {
				where = "the file"
			}
			err = fmt.Errorf("%s: a JSON %s where another kind of value belongs", where, te.Value)
		}
		return nil, bad("%v; want {\"mcp1\": {\"atomic_group\": \"G\", \"tools\": {\"TOOL\": {\"compensation\": {\"tool\": \"UNDO\", \"args\": {\"ARG\": \"result.FIELD\"}}, \"atomic_group\": \"G\", \"trust\": {\"trusted_fields\": [\"FIELD\"], \"destinations\": [\"ARG\"]}}}}}", err)
	}
	if dec.More() {
		return nil, bad("more than one JSON value")
	}
	for key := range cfg {
		var n int
		if _, err := fmt.Sscanf(key, "mcp%d", &n); err != nil || fmt.Sprintf("mcp%d", n) != key || n < 1 || n > servers {
			return nil, bad("server %q: want mcp1 to mcp%d, the --mcp and --mcp-url servers in flag order, commands first", key, servers)
		}
	}
	return cfg, nil
}

// compensationPolicy is the policy --compensate asks for.
func compensationPolicy(compensate bool) loop.CompensationPolicy {
	if compensate {
		return loop.CompensateWrites
	}
	return loop.LeaveWrites
}

// compensated prints a line on standard error per compensation of an
// all-or-nothing group, once they are done: the write it was to undo, the
// compensating call, and whether it undid the write, failed or left it,
// and why.
func (p *streamPrinter) compensated(outs []loop.CompensationOutcome) {
	for _, o := range outs {
		what := string(o.State)
		if ex := o.Outcome; ex != nil {
			what += fmt.Sprintf(" in %v", roundDuration(ex.Duration))
		}
		if o.Reason != "" {
			what += ": " + strings.Join(strings.Fields(o.Reason), " ")
		}
		by := ""
		if c := o.Call; c != nil {
			by = fmt.Sprintf(" by %s (%s)", c.Name, c.ID)
		}
		fmt.Fprintf(p.errw, "toolloop: undo call %s%s: %s\n", o.CallID, by, what)
	}
}
