//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/trace"
)

// childEnv makes the test binary run main with its arguments: the
// toolloop command, as a process a signal can be sent to.
const childEnv = "TOOLLOOP_MAIN_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// A SIGTERM (what a service manager, a container runtime or kill sends)
// ends a run like Ctrl-C: recorded as canceled in the store and the log,
// with the stop line printed and exit status 1, not a process killed in
// the middle of a run left "running" for ever.
func TestSIGTERMEndsTheRunCanceled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	asked := make(chan struct{}, 1)
	// A provider that takes the request and never answers it.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// With the body read, the request's context ends when the client
		// goes away.
		io.Copy(io.Discard, r.Body)
		select {
		case asked <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	defer srv.Close()

	dir := t.TempDir()
	db, logs := filepath.Join(dir, "toolloop.db"), filepath.Join(dir, "runs")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "run", "--provider", "openai", "--base-url", srv.URL+"/v1", "--model", "m",
		"--db", db, "--log", logs, "--id", "run-term", "hello")
	cmd.Env = append(os.Environ(), childEnv+"=1", "HOME="+dir, "XDG_DATA_HOME="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the model was never asked\nstdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running 30 s after SIGTERM\nstderr:\n%s", &stderr)
	}
	var exit *exec.ExitError
	if !errors.As(werr, &exit) || exit.ExitCode() != 1 {
		t.Errorf("exit %v, want status 1 (a run that did not end in a final answer)\nstderr:\n%s", werr, &stderr)
	}
	if !strings.Contains(stdout.String(), "status=canceled") {
		t.Errorf("stdout lacks the stop line with status=canceled:\n%s\nstderr:\n%s", &stdout, &stderr)
	}

	st, err := sqlite.Open(db, &sqlite.Options{Existing: true, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	events, err := loop.LoadEvents(context.Background(), st, "run-term")
	if err != nil {
		t.Fatal(err)
	}
	if s := loop.Replay(events); !s.Done || s.Status != loop.Canceled {
		t.Errorf("the store says done=%v status=%s, want a run that stopped canceled", s.Done, s.Status)
	}
	logged, _, err := trace.Open("run-term", logs)
	if err != nil {
		t.Fatal(err)
	}
	if len(logged) != len(events) || logged[len(logged)-1].Status != loop.Canceled {
		t.Errorf("the log holds %d events ending %+v, the store %d", len(logged), logged[len(logged)-1], len(events))
	}
}
