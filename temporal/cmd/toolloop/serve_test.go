package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/internal/cli"
	"github.com/toolloop/toolloop/temporal"
)

// toolloop serve --temporal (after a run started with --model-timeout,
// which its input carries): the console lists a run paused on the server
// with its pending call, an approval through the JSON API is signalled to
// the workflow (which goes on by itself, on its worker), and the run's
// page then shows it finished, with the approver's name and note in its
// events.
func TestServeOnTemporal(t *testing.T) {
	addr := devAddr(t)
	ctx := context.Background()
	dir := t.TempDir()
	queue := "serve-test-" + suffix()
	stopWorker := runWorker(t, "--temporal", addr, "--task-queue", queue, "--provider", "sandbox",
		"--tools", "orders", "--confirm-writes", "--db", filepath.Join(dir, "worker.db"))
	defer stopWorker()

	id := "toolloop-serve-" + suffix()
	if code, out, errOut := call(ctx, "run", "--temporal", addr, "--task-queue", queue, "--model", orders.DeskModelName,
		"--id", id, "--detach", "--model-timeout", "45s", "Please refund A103, the arm arrived broken."); code != cli.ExitOK {
		t.Fatalf("run --detach: %d %s%s", code, out, errOut)
	}
	// run's --model-timeout is the workflow's input.
	cl, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	first, err := cl.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT).Next()
	if err != nil {
		t.Fatal(err)
	}
	var in temporal.RunInput
	if err := converter.GetDefaultDataConverter().FromPayloads(first.GetWorkflowExecutionStartedEventAttributes().GetInput(), &in); err != nil ||
		in.ModelTimeout != 45*time.Second {
		t.Fatalf("the run's input has ModelTimeout %v (%v), want --model-timeout's 45s", in.ModelTimeout, err)
	}

	users := filepath.Join(dir, "users")
	const token = "3f9c2a7d41e0b8c6"
	if err := os.WriteFile(users, []byte("dana "+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sctx, stopServe := context.WithCancel(ctx)
	serveDone := make(chan int, 1)
	var sout syncBuffer
	go func() {
		serveDone <- cli.Main(sctx, []string{"serve", "--temporal", addr, "--users", users, "--addr", "127.0.0.1:0"},
			&sout, &sout, func(string) string { return "" }, extension())
	}()
	defer func() {
		stopServe()
		if code := <-serveDone; code != cli.ExitOK {
			t.Errorf("serve exit %d\n%s", code, sout.String())
		}
	}()
	listening := regexp.MustCompile(`toolloop console on (http://\S+) `)
	var base string
	waitFor(t, "the console to listen", func() bool {
		m := listening.FindStringSubmatch(sout.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	})

	api := func(method, path string, body any, into any) int {
		t.Helper()
		var rd *bytes.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		if into != nil && resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
		}
		return resp.StatusCode
	}

	type pending struct {
		CallID string `json:"call_id"`
		Tool   string `json:"tool"`
	}
	type runRow struct {
		RunID   string    `json:"run_id"`
		Status  string    `json:"status"`
		Pending []pending `json:"pending"`
	}
	var rows struct {
		Runs []runRow `json:"runs"`
	}
	waitFor(t, "the paused run in the console's list", func() bool {
		if code := api("GET", "/api/runs?pending=1&per_page=200", nil, &rows); code != http.StatusOK {
			t.Fatalf("GET /api/runs: HTTP %d", code)
		}
		for _, r := range rows.Runs {
			if r.RunID == id {
				return r.Status == "confirmation_required" && len(r.Pending) == 1 && r.Pending[0].CallID == "desk_1_1"
			}
		}
		return false
	})

	var answer struct {
		Approved bool   `json:"approved"`
		By       string `json:"by"`
		Resume   string `json:"resume"`
	}
	if code := api("POST", "/api/runs/"+id+"/calls/desk_1_1/approve", map[string]string{"note": "photo checked"}, &answer); code != http.StatusOK ||
		!answer.Approved || answer.By != "dana" || answer.Resume != "goes_on" {
		t.Fatalf("approve: HTTP %d, %+v; want approved by dana, the run going on by itself", code, answer)
	}
	if code := api("POST", "/api/runs/"+id+"/calls/desk_1_1/approve", map[string]string{}, nil); code != http.StatusConflict {
		t.Errorf("a second approve: HTTP %d, want 409", code)
	}

	var run struct {
		Summary struct {
			Status string `json:"status"`
		} `json:"summary"`
		Events json.RawMessage `json:"events"`
	}
	waitFor(t, "the approved run to finish", func() bool {
		if code := api("GET", "/api/runs/"+id, nil, &run); code != http.StatusOK {
			t.Fatalf("GET /api/runs/%s: HTTP %d", id, code)
		}
		return run.Summary.Status == "final_answer"
	})
	if ev := string(run.Events); !strings.Contains(ev, `"dana"`) || !strings.Contains(ev, "photo checked") {
		t.Errorf("the run's events do not record dana's approval and note:\n%s", ev)
	}
	// The run ID stays its own once the run has finished.
	if code, out, errOut := call(ctx, "run", "--temporal", addr, "--task-queue", queue, "--model", orders.DeskModelName,
		"--id", id, "--detach", "Please refund A103 again."); code != cli.ExitUsage || !strings.Contains(errOut, "already in use") {
		t.Errorf("a second run under a finished run's ID: exit %d\n%s%s\nwant it refused", code, out, errOut)
	}
	if code := api("GET", "/api/runs/"+id+"-nope", nil, nil); code != http.StatusNotFound {
		t.Errorf("a run that does not exist: HTTP %d, want 404", code)
	}
}

// waitFor polls cond for up to 30 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
