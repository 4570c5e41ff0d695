//go:build linux

package mcp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolloop/toolloop/tool/mcp"
)

// A process that uses a stdio server and is killed with SIGKILL, so that
// it closes nothing, takes the server and the helper the server started
// with it: the kernel kills the server (Pdeathsig) and the reaper the rest
// of its process group. Before, both lived on, adopted by init.
func TestStdioServerDiesWithItsClient(t *testing.T) {
	client := exec.Command(testExe(t), "-test.run=^TestMCPServerChild$")
	client.Env = append(os.Environ(), clientEnv+"=1", raceEnv())
	client.Stderr = os.Stderr
	out, err := client.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	var server, helper int
	line, err := bufio.NewReader(out).ReadString('\n')
	if _, serr := fmt.Sscan(line, &server, &helper); err != nil || serr != nil || server <= 0 || helper <= 0 {
		client.Process.Kill()
		client.Wait()
		t.Fatalf("client said %q (%v, %v)", line, err, serr)
	}
	t.Cleanup(func() {
		// Whatever the outcome, leave nothing running.
		syscall.Kill(-server, syscall.SIGKILL)
		syscall.Kill(helper, syscall.SIGKILL)
	})
	if !alive(server) || !alive(helper) {
		t.Fatalf("server %d alive %v, helper %d alive %v", server, alive(server), helper, alive(helper))
	}
	if err := client.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	client.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for alive(server) || alive(helper) {
		if time.Now().After(deadline) {
			t.Fatalf("5s after the client was killed: server %d alive %v, helper %d alive %v", server, alive(server), helper, alive(helper))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A server that exits by itself before Close leaves its process group's
// ID held (by the reaper, a member of it) until Close, so that the
// reaper, fired by the client's death, cannot kill another program's
// group that got the ID meanwhile; Close then lets the ID go. Before, the
// group was gone once the server was, and a later kill -9 of the client
// had its reaper kill whatever group had the ID by then.
func TestStdioServerGroupIDHeldUntilClose(t *testing.T) {
	cmd := childCommand(t)
	src, err := mcp.ConnectCommand(context.Background(), cmd, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	pgid := cmd.Process.Pid
	if _, err := callTool(t, src, "crash", `{}`); !strings.Contains(fmt.Sprint(err), "exit status 3") {
		t.Fatalf("the crash tool: %v, want the server's exit status 3", err)
	}
	if err := syscall.Kill(-pgid, 0); err != nil {
		t.Fatalf("process group %d, of a server that exited, is gone before Close (%v): its ID can go to another group, which the reaper would kill", pgid, err)
	}
	src.Close()
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process group %d after Close: %v, want no such group", pgid, err)
	}
}
