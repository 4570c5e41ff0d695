package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/tool/mcp"
)

// childEnv marks the test binary re-executed as an MCP server on stdio;
// modeEnv picks how the server misbehaves (see serveChild).
const (
	childEnv = "TOOLLOOP_MCP_TEST_CHILD"
	modeEnv  = "TOOLLOOP_MCP_TEST_MODE"
)

// serveChild runs the fixture server on stdin and stdout when this process
// is the child, and exits when the client closes stdin. It does so from
// TestMain, before the testing package prints anything on stdout, which is
// the protocol's channel here. The modes:
//
//   - die: print why on stderr and exit 2 before the handshake;
//   - mute: read the input, never answer, exit when it closes;
//   - linger: serve, then ignore the end of the input and SIGTERM;
//   - spawn: start a helper process (mode sleep) first, and name its PID
//     in the result of the tool helper_pid;
//   - sleep: sleep an hour.
func serveChild() bool {
	if os.Getenv(clientEnv) == "1" {
		clientChild()
	}
	if os.Getenv(childEnv) != "1" {
		return false
	}
	mode := os.Getenv(modeEnv)
	switch mode {
	case "die":
		fmt.Fprintln(os.Stderr, "starting the fixture server")
		fmt.Fprintln(os.Stderr, "fatal: /no/such/dir: no such directory")
		os.Exit(2)
	case "mute":
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "sleep":
		time.Sleep(time.Hour)
		os.Exit(0)
	case "linger":
		ignoreTerm()
	}
	f := newFixture(nil)
	mcpsdk.AddTool(f.srv, &mcpsdk.Tool{Name: "crash", Description: "exit the server mid-call",
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "panic: the index is corrupt")
			os.Exit(3)
			return nil, nil, nil
		})
	mcpsdk.AddTool(f.srv, &mcpsdk.Tool{Name: "crash_write", Description: "write, then exit the server mid-call"},
		func(context.Context, *mcpsdk.CallToolRequest, pathIn) (*mcpsdk.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "wrote the file, now dying")
			os.Exit(4)
			return nil, nil, nil
		})
	mcpsdk.AddTool(f.srv, &mcpsdk.Tool{Name: "env", Description: "the server's environment",
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, map[string]string, error) {
			env := map[string]string{}
			for _, kv := range os.Environ() {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			return nil, env, nil
		})
	var helper *exec.Cmd
	if mode == "spawn" {
		helper = exec.Command(os.Args[0], "-test.run=^TestMCPServerChild$")
		helper.Env = append(os.Environ(), modeEnv+"=sleep")
		if err := helper.Start(); err != nil {
			os.Exit(1)
		}
	}
	mcpsdk.AddTool(f.srv, &mcpsdk.Tool{Name: "helper_pid", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, struct{ PID int }, error) {
			if helper == nil {
				return nil, struct{ PID int }{}, errors.New("no helper")
			}
			return nil, struct{ PID int }{helper.Process.Pid}, nil
		})
	if err := f.srv.Run(context.Background(), &mcpsdk.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	if mode == "linger" {
		select {} // until killed
	}
	os.Exit(0)
	return true
}

// clientEnv marks the test binary re-executed as a client of the fixture
// server: see clientChild.
const clientEnv = "TOOLLOOP_MCP_TEST_CLIENT"

// clientChild is a process that uses this package: it starts the fixture
// server in mode spawn with ConnectCommand, prints "SERVER_PID HELPER_PID"
// on a line of its standard output once the server runs, and waits to be
// killed. It never returns.
func clientChild() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMCPServerChild$")
	cmd.Env = append(os.Environ(), childEnv+"=1", clientEnv+"=", modeEnv+"=spawn", raceEnv())
	src, err := mcp.ConnectCommand(context.Background(), cmd, nil)
	if err != nil {
		fail(err)
	}
	tools, err := src.Tools(context.Background())
	if err != nil {
		fail(err)
	}
	for _, tt := range tools {
		if tt.Name() != "helper_pid" {
			continue
		}
		out, err := tt.Call(context.Background(), json.RawMessage(`{}`))
		var helper struct{ PID int }
		if err == nil {
			err = json.Unmarshal(out, &helper)
		}
		if err != nil {
			fail(err)
		}
		fmt.Printf("%d %d\n", cmd.Process.Pid, helper.PID)
		select {} // until killed
	}
	fail(errors.New("the server has no tool helper_pid"))
}

// TestMCPServerChild names the test the child runs; the child never gets
// here (see serveChild), and in the parent it has nothing to do.
func TestMCPServerChild(t *testing.T) {
	t.Skip("the MCP server child of the stdio tests")
}

// raceEnv keeps a child built with -race from sleeping a second before it
// exits, for reports of other goroutines; there is nothing to wait for.
func raceEnv() string { return "GORACE=" + os.Getenv("GORACE") + " atexit_sleep_ms=0" }

// childCommand is the fixture server as a command with an environment of
// its own, in the given mode.
func childCommand(t *testing.T, mode ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testExe(t), "-test.run=^TestMCPServerChild$")
	cmd.Env = append(os.Environ(), childEnv+"=1", raceEnv())
	if len(mode) > 0 {
		cmd.Env = append(cmd.Env, modeEnv+"="+mode[0])
	}
	return cmd
}

func testExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func callTool(t *testing.T, src *mcp.Source, name, args string) (json.RawMessage, error) {
	t.Helper()
	tools, err := src.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tools {
		if tt.Name() == name {
			return tt.Call(context.Background(), json.RawMessage(args))
		}
	}
	t.Fatalf("no tool %q", name)
	return nil, nil
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
	if _, err := search.Call(ctx, json.RawMessage(`{"query":"late"}`)); tool.KindOf(err) != llm.KindUnavailable {
		t.Fatalf("call after close: %v, want unavailable", err)
	}
}

// A server that dies in a read is unavailable, and the error says how it
// exited and what it printed last.
func TestStdioServerDeathIsUnavailable(t *testing.T) {
	cmd := childCommand(t)
	src, err := mcp.ConnectCommand(context.Background(), cmd, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_, err = callTool(t, src, "crash", `{}`)
	if tool.KindOf(err) != llm.KindUnavailable || !strings.Contains(err.Error(), "exit status 3") ||
		!strings.Contains(err.Error(), "panic: the index is corrupt") {
		t.Fatalf("err = %v, want unavailable with the exit status and the end of stderr", err)
	}
	closeErr := src.Close()
	if ps := cmd.ProcessState; ps == nil || ps.ExitCode() != 3 {
		t.Fatalf("process state %v (close: %v), want exit status 3", ps, closeErr)
	}
}

// A server that dies in a write may have written: the outcome is unknown,
// not a failure the model may simply repeat.
func TestStdioServerDeathInAWriteIsAnUnknownOutcome(t *testing.T) {
	src, err := mcp.ConnectCommand(context.Background(), childCommand(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_, err = callTool(t, src, "crash_write", `{"path":"/tmp/x"}`)
	if tool.KindOf(err) != llm.KindOutcomeUnknown || !strings.Contains(err.Error(), "exit status 4") ||
		!strings.Contains(err.Error(), "wrote the file, now dying") {
		t.Fatalf("err = %v, want outcome_unknown with the exit status and stderr", err)
	}
}

// A server that exits before the handshake is reported with its exit
// status and the end of its stderr, not as a bare EOF.
func TestStdioServerDeadAtStart(t *testing.T) {
	_, err := mcp.ConnectCommand(context.Background(), childCommand(t, "die"), nil)
	if err == nil || !strings.Contains(err.Error(), "exit status 2") ||
		!strings.Contains(err.Error(), "starting the fixture server\nfatal: /no/such/dir: no such directory") {
		t.Fatalf("err = %v, want the exit status and the end of stderr", err)
	}
}

// A server that never answers the handshake fails within the connect
// timeout, with an error that says so.
func TestStdioHandshakeTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	start := time.Now()
	_, err := mcp.ConnectCommand(ctx, childCommand(t, "mute"), &mcp.Options{ConnectTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "did not complete the handshake within 300ms") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

// A server started with a nil Env gets a minimal environment plus the
// variables named: a secret of the parent's does not reach it.
func TestStdioEnvironment(t *testing.T) {
	t.Setenv("TOOLLOOP_MCP_TEST_SECRET", "s3cret")
	t.Setenv("TOOLLOOP_MCP_TEST_NAMED", "passed on")
	t.Setenv("PATH", os.Getenv("PATH")+string(os.PathListSeparator)+"/toolloop-test")
	cmd := exec.Command(testExe(t), "-test.run=^TestMCPServerChild$")
	src, err := mcp.ConnectCommand(context.Background(), cmd, &mcp.Options{
		Env: []string{childEnv + "=1", raceEnv(), "TOOLLOOP_MCP_TEST_NAMED", "TOOLLOOP_MCP_TEST_UNSET"}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out, err := callTool(t, src, "env", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	if err := json.Unmarshal(out, &env); err != nil {
		t.Fatal(err)
	}
	if _, ok := env["TOOLLOOP_MCP_TEST_SECRET"]; ok {
		t.Errorf("the secret reached the server: %v", slices.Sorted(maps.Keys(env)))
	}
	if _, ok := env["TOOLLOOP_MCP_TEST_UNSET"]; ok {
		t.Errorf("a variable unset here was set there")
	}
	if env["TOOLLOOP_MCP_TEST_NAMED"] != "passed on" || env[childEnv] != "1" || env["PATH"] != os.Getenv("PATH") {
		t.Errorf("server environment %v lacks the named and base variables", env)
	}

	// A command with an environment of its own keeps exactly that one.
	cmd = childCommand(t)
	src2, err := mcp.ConnectCommand(context.Background(), cmd, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	out, err = callTool(t, src2, "env", `{}`)
	if err != nil || !strings.Contains(string(out), `"TOOLLOOP_MCP_TEST_SECRET":"s3cret"`) {
		t.Fatalf("explicit Env: %s, %v", out, err)
	}
	if _, err := mcp.ConnectCommand(context.Background(), childCommand(t), &mcp.Options{Env: []string{"X"}}); err == nil {
		t.Fatal("Options.Env with an explicit cmd.Env was accepted")
	}
}
