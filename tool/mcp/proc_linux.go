//go:build linux

package mcp

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// ownGroup puts the server in a process group of its own, unless the
// caller set the command's process attributes, and reports whether it
// leads one: then signals reach the helpers it starts too (npx starts
// node, a shell script its commands).
//
// On Linux the server is also bound to this process's life, so that a
// kill -9 of it leaves no server behind: the kernel sends the server
// SIGKILL when the thread that started it ends (Pdeathsig), and a reaper
// (startReaper) kills the rest of its group, which Pdeathsig does not
// reach.
func ownGroup(cmd *exec.Cmd) bool {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	return cmd.SysProcAttr.Setpgid && cmd.SysProcAttr.Pgid == 0
}

// diesWithThread reports whether the kernel kills the server when the OS
// thread that started it ends (Pdeathsig, set by ownGroup or by the
// caller): then the server must be started from a thread that lives as
// long as the server does (see startProcess).
func diesWithThread(cmd *exec.Cmd) bool {
	return cmd.SysProcAttr != nil && cmd.SysProcAttr.Pdeathsig != 0
}

// reaper is a small process that kills a server's process group once this
// process is gone, however it went: it waits for the end of a pipe whose
// only writer is this process, which the kernel closes when this process
// dies, even by SIGKILL. It runs /bin/sh's read and kill built-ins. It is
// a member of the group it kills: a group ID is not given to another
// process while a member lives, so that, should the server and its
// helpers all exit before Close, the reaper can never kill another
// program's group that got the ID since. It ignores SIGTERM, SIGINT and
// SIGHUP, which Close and the server may send the group before it is
// done; the SIGKILL that ends the group ends the reaper too.
type reaper struct {
	cmd   *exec.Cmd
	alive *os.File // the pipe's write end: closing it (or dying) fires the reaper
}

// startReaper starts the reaper of process group pgid, or returns nil if it
// cannot (no /bin/sh, or the group is gone): the server itself still dies
// with this process, by Pdeathsig, and only its helpers may be left.
func startReaper(pgid int) *reaper {
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", `trap '' HUP INT TERM; read -r _; kill -s KILL -- "-$1"`, "toolloop-mcp-reaper", strconv.Itoa(pgid))
	cmd.Stdin = r
	cmd.Env = []string{}
	// Joining fails if the group has no member left (the server exited
	// at once): then there is nothing to reap.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil
	}
	return &reaper{cmd: cmd, alive: w}
}

// stop ends the reaper without letting it fire, and waits for it: Close
// has killed the rest of the group, and once the reaper is gone too its ID
// may name another group.
func (r *reaper) stop() {
	if r == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.alive.Close()
}
