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

// diesWithThread reports whether the server is killed when the thread that
// started it ends; never here.
func diesWithThread(*exec.Cmd) bool { return false }

// startReaper does nothing here: there are no process groups to reap.
func startReaper(int) *reaper { return nil }

type reaper struct{}

func (*reaper) stop() {}
