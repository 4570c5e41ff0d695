//go:build unix && !linux

package mcp

import (
	"os/exec"
	"syscall"
)

// ownGroup puts the server in a process group of its own, unless the
// caller set the command's process attributes, and reports whether it
// leads one: then signals reach the helpers it starts too (npx starts
// node, a shell script its commands). Only Linux also ties the group's
// life to this process (see proc_linux.go).
func ownGroup(cmd *exec.Cmd) bool {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	return cmd.SysProcAttr.Setpgid && cmd.SysProcAttr.Pgid == 0
}

// diesWithThread reports whether the server is killed when the thread that
// started it ends; never here.
func diesWithThread(*exec.Cmd) bool { return false }

// startReaper does nothing here: a server's group outlives a process that
// is killed without closing it.
func startReaper(int) *reaper { return nil }

type reaper struct{}

func (*reaper) stop() {}
