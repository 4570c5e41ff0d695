//go:build unix

package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolloop/toolloop/tool/mcp"
)

// ignoreTerm makes the child deaf to SIGTERM (mode linger).
func ignoreTerm() { signal.Ignore(syscall.SIGTERM) }

// A server that does not exit when its input closes, nor on SIGTERM, is
// killed after two grace periods: Close does not hang on it.
func TestStdioCloseEndsAStubbornServer(t *testing.T) {
	cmd := childCommand(t, "linger")
	src, err := mcp.ConnectCommand(context.Background(), cmd, &mcp.Options{ShutdownTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := callTool(t, src, "search", `{"query":"q"}`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = src.Close()
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Close took %v", d)
	}
	if err == nil || !strings.Contains(err.Error(), "was killed") {
		t.Fatalf("close: %v, want one saying the server was killed", err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("process state %v", cmd.ProcessState)
	}
}

// Close ends the helpers a server started, not only the server.
func TestStdioCloseLeavesNoOrphan(t *testing.T) {
	src, err := mcp.ConnectCommand(context.Background(), childCommand(t, "spawn"), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := callTool(t, src, "helper_pid", `{}`)
	if err != nil {
		src.Close()
		t.Fatal(err)
	}
	var helper struct{ PID int }
	if err := json.Unmarshal(out, &helper); err != nil || helper.PID <= 0 {
		src.Close()
		t.Fatalf("helper_pid = %s, %v", out, err)
	}
	if !alive(helper.PID) {
		t.Fatal("the helper is not running")
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(helper.PID) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(helper.PID, syscall.SIGKILL)
			t.Fatal("the server's helper outlived Close")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs and is not a zombie waiting to be reaped
// (its parent, the server, is gone; whoever adopted it may be slow).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err) // no /proc: trust kill
	}
	// The state follows the command name in parentheses.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
