package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/tool/mcp"
)

// childEnv marks the test binary re-executed as an MCP server on stdio.
const childEnv = "TOOLLOOP_MCP_TEST_CHILD"

// serveChild runs the fixture server on stdin and stdout when this process
// is the child, and exits when the client closes stdin. It does so from
// TestMain, before the testing package prints anything on stdout, which is
// the protocol's channel here.
func serveChild() bool {
	if os.Getenv(childEnv) != "1" {
		return false
	}
	f := newFixture(nil)
	mcpsdk.AddTool(f.srv, &mcpsdk.Tool{Name: "crash", Description: "exit the server mid-call"},
		func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	if err := f.srv.Run(context.Background(), &mcpsdk.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// TestMCPServerChild names the test the child runs; the child never gets
// here (see serveChild), and in the parent it has nothing to do.
func TestMCPServerChild(t *testing.T) {
	t.Skip("the MCP server child of the stdio tests")
}

func childCommand(t *testing.T) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestMCPServerChild$")
	// Under -race the child would sleep a second before it exits, for
	// reports of other goroutines; there is nothing to wait for.
	cmd.Env = append(os.Environ(), childEnv+"=1", "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	return cmd
}

func TestStdioCommand(t *testing.T) {
	ctx := context.Background()
	cmd := childCommand(t)
	src, err := mcp.ConnectCommand(ctx, cmd, &mcp.Options{Prefix: "child_"})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := src.Tools(ctx)
	if err != nil {
		src.Close()
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(tools...)
	if err != nil {
		src.Close()
		t.Fatal(err)
	}
	search, _ := reg.Lookup("child_search")
	out, err := search.Call(ctx, json.RawMessage(`{"query":"stdio","limit":1}`))
	if err != nil || string(out) != `{"hits":["stdio-1"]}` {
		src.Close()
		t.Fatalf("search = %s, %v", out, err)
	}

	if err := src.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if ps := cmd.ProcessState; ps == nil || !ps.Exited() || !ps.Success() {
		t.Fatalf("the server process did not exit cleanly: %v", ps)
	}
	if err := src.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := search.Call(ctx, json.RawMessage(`{"query":"late"}`)); tool.KindOf(err) != tool.KindUnavailable {
		t.Fatalf("call after close: %v, want unavailable", err)
	}
}

func TestStdioServerDeathIsUnavailable(t *testing.T) {
	ctx := context.Background()
	cmd := childCommand(t)
	src, err := mcp.ConnectCommand(ctx, cmd, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tools, err := src.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var crash *tool.Tool
	for _, tt := range tools {
		if tt.Name() == "crash" {
			crash = tt
		}
	}
	_, err = crash.Call(ctx, json.RawMessage(`{}`))
	if tool.KindOf(err) != tool.KindUnavailable {
		t.Fatalf("err = %v, want unavailable", err)
	}
	closeErr := src.Close()
	if ps := cmd.ProcessState; ps == nil || ps.ExitCode() != 3 {
		t.Fatalf("process state %v (close: %v), want exit status 3", ps, closeErr)
	}
}
