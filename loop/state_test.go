package loop_test

// Provider state (llm.ProviderState) and reasoning must reach the next
// request exactly as the model sent them, whichever driver carries the
// run: in one process, and through a SQLite log into a fresh process.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
)

// opaque returns state bytes that an encoder could rewrite if it were not
// careful: a signature in base64 (+, / and =), bytes that are not UTF-8,
// a NUL, characters JSON encoders escape (<, >, &, U+2028), quotes,
// backslashes and white space at both ends.
func opaque(tag string) []byte {
	b := []byte(" \n" + tag + ":EqQBCkgIARABGAIiQL+/9w==\x00\xff\xfe\x80<>&\u2028\"\\ \t")
	return append(b, 0xc3, 0x28, 0xed, 0xa0, 0x80) // invalid UTF-8 sequences
}

// statefulCalls is a turn a reasoning model might answer: its thinking
// (shown and hidden), state on the message and on each call.
func statefulCalls(step int, calls ...llm.ToolCall) llm.Message {
	for i := range calls {
		calls[i].State = &llm.ProviderState{Provider: "gemini", Data: opaque(fmt.Sprintf("call%d.%d", step, i))}
	}
	return llm.Message{
		Role: llm.RoleAssistant,
		Text: fmt.Sprintf("turn %d", step),
		Reasoning: []llm.Reasoning{
			{Provider: "anthropic", Text: fmt.Sprintf("step %d: the user wants a+b/c=d <ok> & \u00e9", step)},
			{Provider: "anthropic", Hidden: true},
		},
		State:     &llm.ProviderState{Provider: "anthropic", Data: opaque(fmt.Sprintf("msg%d", step))},
		ToolCalls: calls,
	}
}

// respond wraps a message as a scripted turn.
func respond(m llm.Message) llmtest.Turn {
	return llmtest.Turn{Response: &llm.Response{Message: m, FinishReason: "end_turn",
		Usage: llm.Usage{InputTokens: 10, OutputTokens: 5, ReasoningTokens: 3}}}
}

// mustCarry checks that sent holds want at index i exactly, state bytes
// and reasoning included.
func mustCarry(t *testing.T, sent []llm.Message, i int, want llm.Message) {
	t.Helper()
	if i >= len(sent) {
		t.Fatalf("the request has %d messages, want message %d: %+v", len(sent), i, want)
	}
	got := sent[i]
	if !bytes.Equal(got.State.StateOf(want.State.Provider), want.State.Data) {
		t.Fatalf("message %d state = %q, want %q", i, got.State.StateOf(want.State.Provider), want.State.Data)
	}
	for j := range want.ToolCalls {
		if j >= len(got.ToolCalls) || got.ToolCalls[j].State == nil ||
			!bytes.Equal(got.ToolCalls[j].State.Data, want.ToolCalls[j].State.Data) {
			t.Fatalf("message %d call %d = %+v, want state %q", i, j, got.ToolCalls, want.ToolCalls[j].State.Data)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("message %d = %+v\nwant %+v", i, got, want)
	}
}

func readTool() *tool.Tool {
	return tool.MustNew(tool.Spec[struct {
		Q string `json:"q"`
	}]{Name: "lookup"}, func(_ context.Context, in struct {
		Q string `json:"q"`
	}) (map[string]string, error) {
		return map[string]string{"q": in.Q}, nil
	})
}

// In one process, every turn's state and reasoning go back with every
// later request, byte for byte, whether the run has no store or a
// memory store, and the final answer's state is in the result.
func TestStateReachesNextRequest(t *testing.T) {
	for _, withStore := range []bool{false, true} {
		t.Run(fmt.Sprintf("store=%v", withStore), func(t *testing.T) {
			m1 := statefulCalls(1, call("c1", "lookup", `{"q":"a"}`))
			m2 := statefulCalls(2, call("c2", "lookup", `{"q":"b"}`), call("c3", "lookup", `{"q":"c"}`))
			m3 := statefulCalls(3)
			model := llmtest.New(respond(m1), respond(m2), respond(m3))
			reg, err := tool.NewRegistry(readTool())
			if err != nil {
				t.Fatal(err)
			}
			cfg := loop.Config{Model: model, Tools: reg}
			if withStore {
				cfg.Store = store.NewMemory()
			}
			res, err := loop.Run(context.Background(), cfg, user("look up a, b and c"))
			mustStatus(t, res, err, loop.FinalAnswer)
			reqs := model.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want 3", len(reqs))
			}
			mustCarry(t, reqs[1].Messages, 1, m1)
			mustCarry(t, reqs[2].Messages, 1, m1)
			mustCarry(t, reqs[2].Messages, 3, m2)
			mustCarry(t, res.Messages, 6, m3)
			if res.Usage.ReasoningTokens != 9 {
				t.Errorf("reasoning tokens = %d, want 9", res.Usage.ReasoningTokens)
			}
			if withStore {
				events, err := loop.LoadEvents(context.Background(), cfg.Store, res.RunID)
				if err != nil {
					t.Fatal(err)
				}
				mustCarry(t, loop.Replay(events).Messages, 1, m1)
			}
		})
	}
}

const (
	stateEnvDB  = "TOOLLOOP_STATE_DB"
	stateEnvRun = "TOOLLOOP_STATE_RUN"
)

type noteIn struct {
	To string `json:"to"`
}

// stateProcConfig is how both processes drive the run: a write that needs
// confirmation, on a SQLite file.
func stateProcConfig(t *testing.T, st *sqlite.Store, model llm.Model, runID string) loop.Config {
	t.Helper()
	send := tool.MustNew(tool.Spec[noteIn]{Name: "send_note", Effect: tool.Write},
		func(_ context.Context, in noteIn) (map[string]string, error) {
			return map[string]string{"sent_to": in.To}, nil
		})
	reg, err := tool.NewRegistry(send)
	if err != nil {
		t.Fatal(err)
	}
	return loop.Config{Model: model, Tools: reg, Store: st, Policy: policy.ConfirmWrites(),
		NewRunID: func() string { return runID }}
}

// stateProcFirst is the turn the child's model answers.
func stateProcFirst() llm.Message {
	return statefulCalls(1, call("c1", "send_note", `{"to":"dana"}`))
}

// TestStateChildProcess is the child's side; it does nothing unless
// TestStateAcrossProcesses started it. It starts the run, which pauses
// for confirmation with the model's state in the SQLite log.
func TestStateChildProcess(t *testing.T) {
	path := os.Getenv(stateEnvDB)
	if path == "" {
		t.Skip("runs only as TestStateAcrossProcesses's child process")
	}
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := stateProcConfig(t, st, llmtest.New(respond(stateProcFirst())), os.Getenv(stateEnvRun))
	res, err := loop.Run(context.Background(), cfg, user("send dana a note"))
	mustStatus(t, res, err, loop.ConfirmationRequired)
	fmt.Printf("M paused %s\n", res.RunID)
}

// A run's state survives the process that received it: a child process
// gets the model's first turn (state on the message and the call,
// reasoning) and pauses for confirmation on a SQLite file; this process,
// which never held the state in memory, approves and resumes, and its
// model's request carries the turn byte for byte.
func TestStateAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	if os.Getenv(stateEnvDB) != "" {
		t.Skip("inside a child")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	const runID = "state-run"
	cmd := exec.Command(os.Args[0], "-test.run=^TestStateChildProcess$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), stateEnvDB+"="+path, stateEnvRun+"="+runID,
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, out, stderr.Bytes())
	}
	paused := false
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		paused = paused || sc.Text() == "M paused "+runID
	}
	if !paused {
		t.Fatalf("the child did not pause the run:\n%s", out)
	}

	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := loop.Decide(ctx, st, runID, loop.Confirmation{CallID: "c1", Approved: true, By: "dana"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	final := statefulCalls(2)
	model := llmtest.New(respond(final))
	r, err := loop.NewRunner(stateProcConfig(t, st, model, runID))
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Resume(ctx, runID)
	mustStatus(t, res, err, loop.FinalAnswer)
	reqs := model.Requests()
	if len(reqs) != 1 || reqs[0].Step != 2 {
		t.Fatalf("requests %+v, want step 2 only", reqs)
	}
	mustCarry(t, reqs[0].Messages, 1, stateProcFirst())
	mustCarry(t, res.Messages, 3, final)
}
