//go:build linux

package mcp_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
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
