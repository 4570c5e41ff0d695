package llmtest_test

// The real adapters (official SDKs over HTTP) must carry a reasoning
// model's opaque state through a pause in one process and a resume in
// another: the second process never saw the reply, so the state can only
// come from the run's log.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest/reasoningtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
)

// The runs, the SDKs' HTTP clients and the test servers must leave no
// goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func adapterNamed(t *testing.T, name string) reasoningtest.Adapter {
	t.Helper()
	for _, a := range reasoningtest.Adapters("..") {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no adapter named %q", name)
	return reasoningtest.Adapter{}
}

type weatherIn struct {
	City string `json:"city"`
}

// weatherConfig is how both processes drive the run: get_weather is a
// write, so policy.ConfirmWrites pauses for a human before it runs; the
// log is a SQLite file. cities records the arguments of each execution.
func weatherConfig(t *testing.T, st *sqlite.Store, model llm.Model, runID string, cities *[]string) loop.Config {
	t.Helper()
	var mu sync.Mutex
	weather := tool.MustNew(tool.Spec[weatherIn]{Name: "get_weather", Description: "current weather", Effect: tool.Write},
		func(_ context.Context, in weatherIn) (map[string]int, error) {
			mu.Lock()
			defer mu.Unlock()
			*cities = append(*cities, in.City)
			return map[string]int{"temp_c": 12}, nil
		})
	reg, err := tool.NewRegistry(weather)
	if err != nil {
		t.Fatal(err)
	}
	return loop.Config{Model: model, Tools: reg, Store: st, Policy: policy.ConfirmWrites(),
		NewRunID: func() string { return runID }}
}

const (
	reasoningEnvDB      = "TOOLLOOP_REASONING_DB"
	reasoningEnvRun     = "TOOLLOOP_REASONING_RUN"
	reasoningEnvAdapter = "TOOLLOOP_REASONING_ADAPTER"
)

// TestReasoningStateChildProcess is the child's side; it does nothing
// unless TestReasoningStateAcrossProcesses started it. Its adapter gets
// the reasoning reply and the run pauses for confirmation of the call,
// leaving the state only in the SQLite log.
func TestReasoningStateChildProcess(t *testing.T) {
	path := os.Getenv(reasoningEnvDB)
	if path == "" {
		t.Skip("runs only as TestReasoningStateAcrossProcesses's child process")
	}
	a := adapterNamed(t, os.Getenv(reasoningEnvAdapter))
	srv := reasoningtest.NewWireServer(t, a.Testdata, "reasoning_call.json")
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var cities []string
	cfg := weatherConfig(t, st, a.New(t, srv.URL), os.Getenv(reasoningEnvRun), &cities)
	res, err := loop.Run(context.Background(), cfg, []llm.Message{llm.UserMessage("What is the weather in Oslo?")})
	if res == nil || res.Status != loop.ConfirmationRequired {
		t.Fatalf("result %+v, err %v; want confirmation_required", res, err)
	}
	var args weatherIn
	if len(res.Pending) != 1 || res.Pending[0].Tool != "get_weather" ||
		json.Unmarshal(res.Pending[0].Arguments, &args) != nil || args.City != "Oslo" {
		t.Fatalf("pending %+v, want get_weather for Oslo", res.Pending)
	}
	if len(cities) != 0 || len(srv.Requests()) != 1 {
		t.Fatalf("before confirmation: tool ran for %v, %d requests; want none and 1", cities, len(srv.Requests()))
	}
	fmt.Printf("R paused %s %s\n", res.RunID, res.Pending[0].CallID)
}

// A reasoning model's opaque state survives the process that received it,
// through each real adapter: a child process gets the reply carrying
// llmtest.ReasoningToken and pauses for confirmation on a SQLite file;
// this process, with a new adapter and a new server, approves, resumes,
// runs the tool, and its request gives the token back exactly where the
// provider reads it.
func TestReasoningStateAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	if os.Getenv(reasoningEnvDB) != "" {
		t.Skip("inside a child")
	}
	for _, a := range reasoningtest.Adapters("..") {
		t.Run(a.Name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run.db")
			runID := "reasoning-" + a.Name
			cmd := exec.Command(os.Args[0], "-test.run=^TestReasoningStateChildProcess$", "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), reasoningEnvDB+"="+path, reasoningEnvRun+"="+runID, reasoningEnvAdapter+"="+a.Name,
				"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("child: %v\n%s\n%s", err, out, stderr.Bytes())
			}
			callID := ""
			for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
				if rest, ok := strings.CutPrefix(sc.Text(), "R paused "+runID+" "); ok {
					callID = rest
				}
			}
			if callID == "" {
				t.Fatalf("the child did not pause the run:\n%s", out)
			}

			st, err := sqlite.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := loop.Decide(ctx, st, runID, loop.Confirmation{CallID: callID, Approved: true, By: "dana"}, time.Now()); err != nil {
				t.Fatal(err)
			}
			srv := reasoningtest.NewWireServer(t, a.Testdata, "final_answer.json")
			var cities []string
			r, err := loop.NewRunner(weatherConfig(t, st, a.New(t, srv.URL), runID, &cities))
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Resume(ctx, runID)
			if err != nil || res.Status != loop.FinalAnswer {
				t.Fatalf("resume: result %+v, err %v; want final_answer", res, err)
			}
			if got := res.Answer(); got != "It is 12 °C in Oslo." {
				t.Fatalf("answer %q", got)
			}
			if !reflect.DeepEqual(cities, []string{"Oslo"}) {
				t.Fatalf("get_weather ran for %v, want Oslo once", cities)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("the resuming adapter sent %d requests, want 1", len(reqs))
			}
			reasoningtest.MustSendToken(t, a, reqs[0])
		})
	}
}
