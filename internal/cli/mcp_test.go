package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpChildArg makes the test binary, run with it as an argument, serve
// addServer on stdin and stdout (see TestMain): the MCP server a --mcp
// command starts.
const mcpChildArg = "toolloop-test-mcp-server"

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

// addServer is an MCP server with one read-only tool, add, whose sums are
// offset by base so that tests can tell two servers apart.
func addServer(base int) *mcpsdk.Server {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "adder", Version: "v1"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "add", Description: "add two integers",
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in addIn) (*mcpsdk.CallToolResult, addOut, error) {
			return nil, addOut{Sum: base + in.A + in.B}, nil
		})
	return srv
}

// serveMCPChild serves addServer on stdio, if this process is the child.
func serveMCPChild() bool {
	if !slices.Contains(os.Args[1:], mcpChildArg) {
		return false
	}
	srv := addServer(0)
	// The environment tool, for TestRunMCPEnv.
	type envIn struct {
		Names []string `json:"names"`
	}
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "getenv", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in envIn) (*mcpsdk.CallToolResult, map[string]string, error) {
			env := map[string]string{}
			for _, name := range in.Names {
				if v, ok := os.LookupEnv(name); ok {
					env[name] = v
				}
			}
			return nil, env, nil
		})
	if err := srv.Run(context.Background(), &mcpsdk.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// TestRunMCP gives a run the tools of two MCP servers, one a command on
// stdio and one over streamable HTTP: each server's tools get their own
// prefix, and the model's calls reach the right server.
func TestRunMCP(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return addServer(1000) }, nil))
	defer web.Close()
	srv := newChatServer(t,
		chatCalls([3]string{"call_1", "mcp1_add", `{"a":2,"b":3}`}, [3]string{"call_2", "mcp2_add", `{"a":4,"b":5}`}),
		chatText("5 and 1009."))
	dir := t.TempDir()
	code, out, errOut := call("run", "--provider", "openai", "--base-url", srv.srv.URL+"/v1", "--model", "any",
		"--mcp", shellQuote(exe)+" -test.run=^$ "+mcpChildArg, "--mcp-url", web.URL,
		"--db", filepath.Join(dir, "t.db"), "--log", dir, "Add 2 and 3 here, 4 and 5 there.")
	if code != exitOK || lines(out)[0] != "5 and 1009." {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	reqs := srv.requests()
	var names []string
	for _, tl := range reqs[0].Tools {
		names = append(names, tl.Function.Name)
	}
	if strings.Join(names, " ") != "mcp1_add mcp1_getenv mcp2_add" {
		t.Errorf("tools offered %v, want mcp1_add and mcp2_add", names)
	}
	results := map[string]string{}
	for _, m := range reqs[1].Messages {
		if m.Role == "tool" {
			s, _ := m.Content.(string)
			results[m.ToolCallID] = s
		}
	}
	if !strings.Contains(results["call_1"], `"sum":5`) || !strings.Contains(results["call_2"], `"sum":1009`) {
		t.Errorf("results %v, want sum 5 from the command and 1009 from the URL", results)
	}
	for _, bad := range [][]string{{"--mcp", "'unterminated"}, {"--mcp-url", "ftp://x"}} {
		code, out, errOut := call(append([]string{"run", "--provider", "openai", "--base-url", srv.srv.URL, "--model", "m",
			"--db", filepath.Join(dir, "t.db"), "--log", dir}, append(bad, "q")...)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, bad[0]) {
			t.Errorf("%v: exit %d %q %q", bad, code, out, errOut)
		}
	}
}

// TestRunMCPEnv: an --mcp server gets the variables --mcp-env names, and
// not the rest of the environment (an API key).
func TestRunMCPEnv(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The secret is in the process's environment, where a server would
	// inherit it; the named variable in the one the program is given.
	t.Setenv("TOOLLOOP_CLI_TEST_SECRET", "s3cret")
	srv := newChatServer(t,
		chatCalls([3]string{"call_1", "mcp1_getenv", `{"names":["TOOLLOOP_CLI_TEST_SECRET","NAMED","SET","UNSET"]}`}),
		chatText("seen."))
	dir := t.TempDir()
	code, out, errOut := callEnv(map[string]string{"NAMED": "from the environment"}, "run", "--provider", "openai",
		"--base-url", srv.srv.URL+"/v1", "--model", "any",
		"--mcp", shellQuote(exe)+" -test.run=^$ "+mcpChildArg, "--mcp-env", "NAMED", "--mcp-env", "SET=given", "--mcp-env", "UNSET",
		"--db", filepath.Join(dir, "t.db"), "--log", dir, "What do you see?")
	if code != exitOK {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	var result string
	for _, m := range srv.requests()[1].Messages {
		if m.Role == "tool" {
			result, _ = m.Content.(string)
		}
	}
	if result != `{"NAMED":"from the environment","SET":"given"}` {
		t.Errorf("the server saw %s", result)
	}
	for _, bad := range [][]string{{"--mcp-env", "1BAD"}, {"--mcp-env", "X"}} {
		args := []string{"run", "--provider", "openai", "--base-url", srv.srv.URL, "--model", "m",
			"--db", filepath.Join(dir, "t.db"), "--log", dir}
		if bad[1] != "X" {
			args = append(args, "--mcp", shellQuote(exe)+" -test.run=^$ "+mcpChildArg)
		}
		code, out, errOut := call(append(args, append(bad, "q")...)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "--mcp-env") {
			t.Errorf("%v: exit %d %q %q", bad, code, out, errOut)
		}
	}
}

// TestRunMCPSkipsUnusableTool: a server tool whose input schema toolloop
// cannot use (a duplicate in required) is left out with a warning naming
// the server and the tool, and the server's other tools still run.
func TestRunMCPSkipsUnusableTool(t *testing.T) {
	web := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server {
		srv := addServer(0)
		srv.AddTool(&mcpsdk.Tool{Name: "sloppy", InputSchema: json.RawMessage(
			`{"type":"object","properties":{"a":{"type":"string"}},"required":["a","a"]}`)},
			func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				return &mcpsdk.CallToolResult{}, nil
			})
		return srv
	}, nil))
	defer web.Close()
	srv := newChatServer(t, chatCalls([3]string{"call_1", "mcp1_add", `{"a":2,"b":3}`}), chatText("5."))
	dir := t.TempDir()
	code, out, errOut := call("run", "--provider", "openai", "--base-url", srv.srv.URL+"/v1", "--model", "any",
		"--mcp-url", web.URL, "--db", filepath.Join(dir, "t.db"), "--log", dir, "Add 2 and 3.")
	if code != exitOK || lines(out)[0] != "5." {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	var names []string
	for _, tl := range srv.requests()[0].Tools {
		names = append(names, tl.Function.Name)
	}
	if !slices.Equal(names, []string{"mcp1_add"}) {
		t.Errorf("tools offered %v, want only mcp1_add", names)
	}
	warning := "toolloop: warning: MCP server " + web.URL + `: tool "sloppy" left out: `
	var found string
	for _, l := range lines(errOut) {
		if strings.HasPrefix(l, warning) {
			found = l
		}
	}
	if found == "" || !strings.Contains(found, "items at 0 and 1 are equal") {
		t.Errorf("stderr %q; want one line %q... saying why", errOut, warning)
	}
}
