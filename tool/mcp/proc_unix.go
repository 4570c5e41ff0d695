//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// ownGroup puts the server in a process group of its own, unless the
// caller set the command's process attributes, and reports whether it
// leads one: then signals reach the helpers it starts too (npx starts
// node, a shell script its commands).
func ownGroup(cmd *exec.Cmd) bool {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	return cmd.SysProcAttr.Setpgid && cmd.SysProcAttr.Pgid == 0
}

// signal sends sig to the server's process group, or to the server alone
// when it has none of its own.
func (p *process) signal(sig syscall.Signal) {
	if p.group {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
		return
	}
	_ = p.cmd.Process.Signal(sig)
}
