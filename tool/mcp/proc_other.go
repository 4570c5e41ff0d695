//go:build !unix

package mcp

import (
	"os"
	"os/exec"
)

// Without process groups a server is ended alone: terminating it and
// killing it are the same.
var (
	sigTerm = os.Kill
	sigKill = os.Kill
)

func ownGroup(*exec.Cmd) bool { return false }

func (p *process) signal(sig os.Signal) { _ = p.cmd.Process.Signal(sig) }
