//go:build linux

package mcp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
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

// The reaper of a server's process group is a member of that group, so
// the group's ID stays taken for as long as the reaper lives: a server
// that exits by itself cannot free the ID for another program's group,
// which the reaper, fired by the client's death, would then kill. Close
// (the caller's, or the one the client makes when the server's output
// ends) stops the reaper and lets the ID go. Before, the reaper had a
// group of its own and outlived the server's.
func TestStdioServerGroupIDHeldUntilClose(t *testing.T) {
	cmd := childCommand(t)
	src, err := mcp.ConnectCommand(context.Background(), cmd, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	pgid := cmd.Process.Pid
	reapers := reapersOf(t, pgid)
	if len(reapers) != 1 {
		t.Fatalf("%d reapers of process group %d, want 1", len(reapers), pgid)
	}
	for pid, group := range reapers {
		if group != pgid {
			t.Fatalf("the reaper %d is in process group %d, not the server's %d: the server's ID can be freed while it lives", pid, group, pgid)
		}
	}
	if _, err := callTool(t, src, "crash", `{}`); !strings.Contains(fmt.Sprint(err), "exit status 3") {
		t.Fatalf("the crash tool: %v, want the server's exit status 3", err)
	}
	// The server is gone. Whether or not the client has closed the
	// connection yet, a reaper still running keeps the group's ID.
	if len(reapersOf(t, pgid)) > 0 {
		if err := syscall.Kill(-pgid, 0); err != nil {
			t.Fatalf("a reaper of process group %d runs, but the group is gone (%v)", pgid, err)
		}
	}
	src.Close()
	if n := len(reapersOf(t, pgid)); n > 0 {
		t.Fatalf("%d reapers of process group %d left after Close", n, pgid)
	}
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process group %d after Close: %v, want no such group", pgid, err)
	}
}

// reapersOf returns the running reapers of process group pgid (found by
// their argument list in /proc), each with the process group it is in.
func reapersOf(t *testing.T, pgid int) map[int]int {
	t.Helper()
	want := "toolloop-mcp-reaper\x00" + strconv.Itoa(pgid) + "\x00"
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cmdline), want) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// Fields after the command's closing parenthesis: state, ppid,
		// pgrp.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 3 || f[0] == "Z" {
			continue // a zombie is no longer a member that runs
		}
		group, _ := strconv.Atoi(f[2])
		out[pid] = group
	}
	return out
}
