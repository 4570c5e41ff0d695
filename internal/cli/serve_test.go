package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/loop"
)

const serveToken = "alice-serve-token-0123"

// writeUsers writes a users file with alice and returns its path.
func writeUsers(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "users")
	if err := os.WriteFile(p, []byte("alice "+serveToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServeFlags: serve refuses a command line that would serve nobody, or
// everybody, with the fix.
func TestServeFlags(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.db")
	if code, _, errOut := call("demo", "--db", db, "--mode", "normal"); code != 0 {
		t.Fatalf("demo: %d %s", code, errOut)
	}
	users := writeUsers(t, dir)
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("# x\nalice short\n"), 0o600)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"serve", "--db", db}, "--users FILE is missing"},
		{[]string{"serve", "--db", db, "--users", users, "--addr", "0.0.0.0:0"}, "pass --allow-remote"},
		{[]string{"serve", "--db", db, "--users", users, "--addr", ":8080"}, "beyond loopback"},
		{[]string{"serve", "--db", db, "--users", users, "--addr", "nonsense"}, "want HOST:PORT"},
		{[]string{"serve", "--db", db, "--users", bad}, "line 2: the token of alice is 5 characters long"},
		{[]string{"serve", "--db", db, "--users", filepath.Join(dir, "none")}, "users file"},
		{[]string{"serve", "--db", filepath.Join(dir, "none.db"), "--users", users, "--addr", "127.0.0.1:0"}, "no store at"},
		{[]string{"serve", "--db", db, "--users", users, "extra"}, `unexpected argument "extra"`},
	} {
		code, _, errOut := call(c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.says) {
			t.Errorf("%v: exit %d, stderr %q; want 2 saying %q", c.args, code, errOut, c.says)
		}
	}
	if code, out, _ := call("help", "serve"); code != 0 || !strings.Contains(out, "--allow-remote") {
		t.Errorf("help serve: %d %s", code, out)
	}
}

// lockedBuffer is a buffer two goroutines can share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeWalkthrough is the README's walk-through: toolloop demo --db F
// leaves a run paused for confirmation, toolloop serve --db F shows it,
// and an approval through the console's API resumes it in the server to
// a final answer, recorded under the approver's name. The interactive
// scenario's refund lands in the store's book.
func TestServeWalkthrough(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "walk.db")
	for _, mode := range []string{"confirmation_required", "confirm_refund"} {
		if code, _, errOut := call("demo", "--db", db, "--mode", mode); code != 0 {
			t.Fatalf("demo --mode %s: %d %s", mode, code, errOut)
		}
	}
	users := writeUsers(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut lockedBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- Main(ctx, []string{"serve", "--db", db, "--users", users, "--addr", "127.0.0.1:0"}, &out, &errOut, func(string) string { return "" }, nil)
	}()
	addrRE := regexp.MustCompile(`toolloop console on (http://127\.0\.0\.1:\d+) for 1 user\(s\)`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; {
		if m := addrRE.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %q %q", out.String(), errOut.String())
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	do := func(method, path, body string, v any) int {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+serveToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if v != nil {
			if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode
	}
	var list struct{ Runs []console.Run }
	if code := do("GET", "/api/runs?pending=1", "", &list); code != http.StatusOK || len(list.Runs) != 2 {
		t.Fatalf("pending runs: %d %+v", code, list)
	}
	for _, r := range list.Runs {
		var d console.Decision
		if code := do("POST", "/api/runs/"+r.RunID+"/calls/call_r1/approve", `{"note":"checked"}`, &d); code != http.StatusOK ||
			d.Resume != console.ResumeDone || d.Status != "final_answer" || d.By != "alice" {
			t.Errorf("approve %s: %d %+v", r.RunID, code, d)
		}
	}
	// The run's page reads the store's events (console.RecordReader).
	for _, r := range list.Runs {
		var doc struct {
			Summary console.Summary
			Events  []loop.Event
		}
		var ev loop.Event
		if code := do("GET", "/api/runs/"+r.RunID, "", &doc); code != http.StatusOK || doc.Summary.Status != "final_answer" || len(doc.Events) == 0 {
			t.Errorf("GET /api/runs/%s: %d %+v", r.RunID, code, doc.Summary)
		}
		if code := do("GET", "/api/runs/"+r.RunID+"/events/1", "", &ev); code != http.StatusOK || ev.Kind != loop.Started {
			t.Errorf("GET /api/runs/%s/events/1: %d %+v", r.RunID, code, ev)
		}
		// The replay view re-decides the run, answers and resume
		// included, with its scenario's configuration: no difference.
		var rep struct {
			Equal     bool
			NewStatus string `json:"new_status"`
		}
		if code := do("GET", "/api/runs/"+r.RunID+"/replay", "", &rep); code != http.StatusOK || !rep.Equal || rep.NewStatus != "final_answer" {
			t.Errorf("GET /api/runs/%s/replay: %d %+v", r.RunID, code, rep)
		}
	}
	if code := do("GET", "/api/runs?pending=1", "", &list); code != http.StatusOK || len(list.Runs) != 0 {
		t.Errorf("pending runs after approving: %+v", list.Runs)
	}
	// Another host name for the same address (DNS rebinding) is refused.
	req, _ := http.NewRequest("GET", base+"/api/runs", nil)
	req.Host = "rebound.example:" + base[strings.LastIndex(base, ":")+1:]
	req.Header.Set("Authorization", "Bearer "+serveToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a request for host %s: %v %v; want 421", req.Host, resp, err)
	} else {
		resp.Body.Close()
	}
	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("serve exited %d: %s", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop when its context ended")
	}
	code, runs, _ := call("runs", "--db", db, "--status", "final_answer")
	if code != 0 || strings.Count(runs, "final_answer") != 2 {
		t.Errorf("runs after approving:\n%s", runs)
	}
	code, shown, _ := call("trace", "show", "--db", db, list2ID(t, runs, "confirm_refund"))
	if code != 0 || !strings.Contains(shown, "approved by alice") || !strings.Contains(shown, `"checked"`) {
		t.Errorf("trace show of the approved run:\n%s", shown)
	}
}

// list2ID finds the ID of the run of a sandbox mode in toolloop runs's
// output.
func list2ID(t *testing.T, runs, mode string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^(run-` + mode + `-\S+)`).FindStringSubmatch(runs)
	if m == nil {
		t.Fatalf("no run of %s in:\n%s", mode, runs)
	}
	return m[1]
}
