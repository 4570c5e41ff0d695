package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"
)

// baseEnv are the variables a server started by ConnectCommand inherits
// without being named in Options.Env: what a program needs to find its
// tools, its home and its terminal, and nothing that usually holds a
// secret.
func baseEnv() []string {
	if runtime.GOOS == "windows" {
		return []string{"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PROCESSOR_ARCHITECTURE",
			"PROGRAMFILES", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "USERNAME", "USERPROFILE"}
	}
	return []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}
}

// serverEnv builds the environment of a server from the base variables and
// extra (Options.Env): NAME passes this process's value on, when it has
// one; NAME=VALUE sets the variable. A later entry for a name wins.
func serverEnv(extra []string) ([]string, error) {
	vals := map[string]string{}
	var order []string
	set := func(name, val string) {
		if _, ok := vals[name]; !ok {
			order = append(order, name)
		}
		vals[name] = val
	}
	for _, name := range baseEnv() {
		if v, ok := os.LookupEnv(name); ok {
			set(name, v)
		}
	}
	for _, e := range extra {
		name, val, hasVal := strings.Cut(e, "=")
		if name == "" || strings.ContainsAny(name, "\x00") {
			return nil, fmt.Errorf("mcp: environment entry %q: want NAME or NAME=VALUE", e)
		}
		if !hasVal {
			v, ok := os.LookupEnv(name)
			if !ok {
				continue // unset here: the server does not get it either
			}
			val = v
		}
		set(name, val)
	}
	env := make([]string, 0, len(order))
	for _, name := range order {
		env = append(env, name+"="+vals[name])
	}
	return env, nil
}

// Bounds of the end of a server's standard error that errors quote.
const (
	tailLines = 20
	tailBytes = 4 << 10
)

// tail keeps the last lines of what is written to it, at most tailLines
// lines and tailBytes bytes, for the error of a server that died.
type tail struct {
	mu  sync.Mutex
	buf []byte
	cut bool // something was dropped from the front
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if n := len(t.buf) - tailBytes; n > 0 {
		t.buf, t.cut = t.buf[n:], true
	}
	// Count the lines, a line still being written included.
	body := bytes.TrimSuffix(t.buf, []byte("\n"))
	if n := bytes.Count(body, []byte("\n")) + 1; n > tailLines {
		drop := 0
		for range n - tailLines {
			drop += bytes.IndexByte(t.buf[drop:], '\n') + 1
		}
		t.buf, t.cut = t.buf[drop:], true
	}
	// Keep the buffer from growing its capacity without bound.
	if cap(t.buf) > 4*tailBytes {
		t.buf = append([]byte(nil), t.buf...)
	}
	return len(p), nil
}

// String is the kept text, trimmed, with "..." before it when its start
// was dropped.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(strings.ToValidUTF8(string(t.buf), "\uFFFD"))
	if s != "" && t.cut {
		s = "..." + s
	}
	return s
}

// process is a server ConnectCommand started: its pipes, the end of its
// standard error, and how it exited. Its stdin and stdout are pipes of
// our own (not exec's StdoutPipe), so that the process can be waited for
// as soon as it starts, and how it exited is known the moment it dies.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	stderr *tail
	grace  time.Duration
	group  bool // the server leads a process group of its own
	// reaper kills the server's group if this process dies without
	// closing it (Linux; nil elsewhere, or if it could not start).
	reaper *reaper

	exited  chan struct{} // closed once cmd.Wait returned
	waitErr error         // what cmd.Wait returned; read after exited

	closeOnce sync.Once
	closeErr  error
}

// startProcess starts cmd with its stdin and stdout connected to the
// returned process, its environment built per Options.Env when cmd.Env is
// nil, and its stderr copied to the process's tail (and to cmd.Stderr if
// set).
func startProcess(cmd *exec.Cmd, o *Options) (*process, error) {
	if cmd.Stdin != nil || cmd.Stdout != nil {
		return nil, errors.New("mcp: the command's Stdin and Stdout must be nil: they carry the protocol")
	}
	if cmd.Process != nil {
		return nil, errors.New("mcp: the command was already started")
	}
	if cmd.Env == nil {
		env, err := serverEnv(o.Env)
		if err != nil {
			return nil, err
		}
		cmd.Env = env
	} else if len(o.Env) > 0 {
		return nil, errors.New("mcp: Options.Env applies to a command whose Env is nil; this one has its own environment")
	}
	p := &process{cmd: cmd, stderr: &tail{}, grace: o.ShutdownTimeout, exited: make(chan struct{})}
	if p.grace <= 0 {
		p.grace = 2 * time.Second
	}
	if cmd.Stderr != nil {
		cmd.Stderr = io.MultiWriter(p.stderr, cmd.Stderr)
	} else {
		cmd.Stderr = p.stderr
	}
	if cmd.WaitDelay == 0 {
		// A descendant that keeps the server's stderr open must not keep
		// Wait, and so the exit status, from us.
		cmd.WaitDelay = time.Second
	}
	p.group = ownGroup(cmd)

	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("mcp: %w", err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	// One goroutine starts the server and waits for it. Where the server
	// is to die with the thread that started it (Pdeathsig on Linux: the
	// kernel signals on the end of the thread, not of the process), that
	// goroutine holds its OS thread from before the start until the server
	// has exited. Otherwise the start could run on any thread, and the
	// runtime ends threads of its own accord (one whose goroutine exits
	// while locked to it, as another package's may), which would kill a
	// server this process still uses. The cost is one blocked thread per
	// running server; one shared starter goroutine would have to be locked
	// for as long as any server runs anyway, and adds a hand-off.
	started := make(chan error, 1)
	go func() {
		if diesWithThread(cmd) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	err = <-started
	// The child has its own copies of these ends (or never will).
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("mcp: starting the server: %w", err)
	}
	p.stdin, p.stdout = inW, outR
	if p.group {
		p.reaper = startReaper(cmd.Process.Pid)
	}
	return p, nil
}

// Read reads the server's standard output.
func (p *process) Read(b []byte) (int, error) { return p.stdout.Read(b) }

// Write writes to the server's standard input.
func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// Close ends the server as the specification asks: it closes the
// server's input and waits for it to exit, sends SIGTERM if it does not
// within the grace period, and kills it if it still has not after another.
// The signals go to the server's process group, and whatever is left of
// the group afterwards is killed, so that no helper the server started is
// left behind; the group's reaper, a member of it that holds its ID until
// then, is killed with it and waited for. Close returns how the server
// exited.
func (p *process) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.shutdown() })
	return p.closeErr
}

func (p *process) shutdown() error {
	p.stdin.Close()
	var stopped string
	if !p.waitExit(p.grace) {
		stopped = "terminated"
		p.signal(sigTerm)
		if !p.waitExit(p.grace) {
			stopped = "killed"
			p.signal(sigKill)
			<-p.exited // a killed process always exits
		}
	}
	if p.group {
		p.signal(sigKill) // what is left of the group; usually nothing
	}
	p.reaper.stop()
	// The server is gone; descendants that left its group may still hold
	// its stdout, and must not keep the reader waiting.
	p.stdout.Close()
	if stopped != "" {
		return fmt.Errorf("mcp: the server did not exit within %v of its input closing and was %s: %w", p.grace, stopped, p.waitErr)
	}
	return p.waitErr
}

// waitExit waits up to d for the server to exit, and reports whether it
// did.
func (p *process) waitExit(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	default:
	}
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// describe says how the server ended, and the end of its standard error,
// if it has exited within wait; "" if it is still running and said
// nothing on stderr.
func (p *process) describe(wait time.Duration) string {
	var parts []string
	if p.waitExit(wait) {
		if p.waitErr != nil {
			parts = append(parts, "the server exited: "+p.waitErr.Error())
		} else {
			parts = append(parts, "the server exited with status 0")
		}
	}
	if s := p.stderr.String(); s != "" {
		parts = append(parts, "its standard error ends:\n"+s)
	}
	return strings.Join(parts, "; ")
}
