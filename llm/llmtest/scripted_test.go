package llmtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
)

func req(step int, msgs ...llm.Message) *llm.Request {
	return &llm.Request{Model: "scripted", Step: step, Messages: msgs}
}

func TestPlaysTurnsInOrder(t *testing.T) {
	m := llmtest.New(
		llmtest.Calls(llmtest.Call("c1", "get_order", map[string]string{"order_id": "A1"})),
		llmtest.Text("done"),
	)
	ctx := context.Background()

	r1, err := m.Generate(ctx, req(1, llm.UserMessage("q")))
	if err != nil {
		t.Fatal(err)
	}
	if r1.Message.Role != llm.RoleAssistant || len(r1.Message.ToolCalls) != 1 {
		t.Fatalf("turn 1 = %+v, want one tool call", r1.Message)
	}
	c := r1.Message.ToolCalls[0]
	if c.ID != "c1" || c.Name != "get_order" || string(c.Arguments) != `{"order_id":"A1"}` {
		t.Errorf("turn 1 call = %+v", c)
	}
	if r1.FinishReason != "tool_calls" {
		t.Errorf("turn 1 finish reason = %q", r1.FinishReason)
	}

	r2, err := m.Generate(ctx, req(2))
	if err != nil {
		t.Fatal(err)
	}
	if r2.Message.Text != "done" || len(r2.Message.ToolCalls) != 0 || r2.FinishReason != "stop" {
		t.Errorf("turn 2 = %+v", r2)
	}

	if _, err := m.Generate(ctx, req(3)); !errors.Is(err, llmtest.ErrScriptExhausted) {
		t.Errorf("turn 3 error = %v, want ErrScriptExhausted", err)
	}
	// Still exhausted afterwards, and the failed request is recorded too.
	if _, err := m.Generate(ctx, req(4)); !errors.Is(err, llmtest.ErrScriptExhausted) {
		t.Errorf("turn 4 error = %v, want ErrScriptExhausted", err)
	}
	if n := len(m.Requests()); n != 4 {
		t.Errorf("recorded %d requests, want 4", n)
	}
}

func TestEmptyScriptIsExhausted(t *testing.T) {
	for name, m := range map[string]*llmtest.Model{"New": llmtest.New(), "Repeating": llmtest.Repeating()} {
		if _, err := m.Generate(context.Background(), req(1)); !errors.Is(err, llmtest.ErrScriptExhausted) {
			t.Errorf("%s(): error = %v, want ErrScriptExhausted", name, err)
		}
	}
}

func TestRecordsRequests(t *testing.T) {
	m := llmtest.New(llmtest.Text("a"), llmtest.Text("b"))
	ctx := context.Background()
	tools := []llm.ToolDefinition{{Name: "get_order", InputSchema: json.RawMessage(`{"type":"object"}`)}}

	history := []llm.Message{llm.SystemMessage("sys"), llm.UserMessage("q1")}
	if _, err := m.Generate(ctx, &llm.Request{Model: "m1", Messages: history, Tools: tools, Step: 1}); err != nil {
		t.Fatal(err)
	}
	history = append(history, llm.Message{Role: llm.RoleAssistant, Text: "a"}, llm.UserMessage("q2"))
	if _, err := m.Generate(ctx, &llm.Request{Model: "m1", Messages: history, Tools: tools, Step: 2}); err != nil {
		t.Fatal(err)
	}

	got := m.Requests()
	if len(got) != 2 {
		t.Fatalf("Requests() has %d entries, want 2", len(got))
	}
	if got[0].Step != 1 || got[1].Step != 2 || got[0].Model != "m1" {
		t.Errorf("requests = %+v", got)
	}
	if len(got[0].Messages) != 2 || len(got[1].Messages) != 4 {
		t.Errorf("message counts = %d, %d; want 2, 4", len(got[0].Messages), len(got[1].Messages))
	}
	if got[1].Messages[3].Text != "q2" {
		t.Errorf("second request's last message = %+v", got[1].Messages[3])
	}
	if len(got[0].Tools) != 1 || got[0].Tools[0].Name != "get_order" {
		t.Errorf("tools = %+v", got[0].Tools)
	}

	// Requests returns a copy: changing it does not change the record.
	got[0].Step = 99
	if m.Requests()[0].Step != 1 {
		t.Error("Requests() exposes the model's own slice")
	}
}

// The record shows what was sent, even if the caller later edits the
// history it passed in (the Model contract forbids retaining req.Messages).
func TestRecordedRequestsAreSnapshots(t *testing.T) {
	m := llmtest.New(llmtest.Text("a"))
	history := []llm.Message{llm.UserMessage("original")}
	if _, err := m.Generate(context.Background(), req(1, history...)); err != nil {
		t.Fatal(err)
	}
	history[0].Text = "edited"
	if got := m.Requests()[0].Messages[0].Text; got != "original" {
		t.Errorf("recorded message = %q, want %q", got, "original")
	}
}

func TestRepeatingRepeatsLastTurn(t *testing.T) {
	call := llmtest.Call("c1", "search", `{"q":"x"}`)
	m := llmtest.Repeating(llmtest.Text("first"), llmtest.Calls(call))
	ctx := context.Background()
	r, err := m.Generate(ctx, req(1))
	if err != nil || r.Message.Text != "first" {
		t.Fatalf("turn 1 = %+v, %v", r, err)
	}
	for i := 2; i <= 10; i++ {
		r, err := m.Generate(ctx, req(i))
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		if len(r.Message.ToolCalls) != 1 || r.Message.ToolCalls[0].ID != "c1" {
			t.Fatalf("turn %d = %+v, want the last turn again", i, r.Message)
		}
	}
	if n := len(m.Requests()); n != 10 {
		t.Errorf("recorded %d requests, want 10", n)
	}
}

// Each answer is the caller's own: editing it does not change what the
// script plays next.
func TestResponsesAreCopies(t *testing.T) {
	m := llmtest.Repeating(llmtest.Calls(llmtest.Call("c1", "search", `{"q":"x"}`)))
	ctx := context.Background()
	r1, err := m.Generate(ctx, req(1))
	if err != nil {
		t.Fatal(err)
	}
	r1.Message.Text = "edited"
	r1.Message.ToolCalls[0].ID = "edited"
	r2, err := m.Generate(ctx, req(2))
	if err != nil {
		t.Fatal(err)
	}
	if r2.Message.Text != "" || r2.Message.ToolCalls[0].ID != "c1" {
		t.Errorf("second answer = %+v, want the script unchanged", r2.Message)
	}
}

func TestErrTurn(t *testing.T) {
	boom := &llm.Error{StatusCode: 503, Retryable: true, Err: errors.New("overloaded")}
	m := llmtest.New(llmtest.Turn{Err: boom}, llmtest.Text("ok"))
	ctx := context.Background()
	if _, err := m.Generate(ctx, req(1)); !errors.Is(err, boom) || !llm.IsRetryable(err) {
		t.Errorf("turn 1 error = %v, want the scripted error", err)
	}
	if r, err := m.Generate(ctx, req(2)); err != nil || r.Message.Text != "ok" {
		t.Errorf("turn 2 = %+v, %v; the script must move on after an error turn", r, err)
	}
}

func TestFuncTurn(t *testing.T) {
	var seen *llm.Request
	m := llmtest.New(llmtest.Turn{Func: func(r *llm.Request) (*llm.Response, error) {
		seen = r
		return &llm.Response{Message: llm.Message{
			Role: llm.RoleAssistant,
			Text: fmt.Sprintf("step %d saw %d messages", r.Step, len(r.Messages)),
		}}, nil
	}}, llmtest.Turn{Func: func(*llm.Request) (*llm.Response, error) {
		return nil, errors.New("func failed")
	}})
	ctx := context.Background()
	in := req(7, llm.UserMessage("a"), llm.UserMessage("b"))
	r, err := m.Generate(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Message.Text != "step 7 saw 2 messages" {
		t.Errorf("Func answer = %q", r.Message.Text)
	}
	if seen != in {
		t.Error("Func did not receive the request")
	}
	if _, err := m.Generate(ctx, req(8)); err == nil || err.Error() != "func failed" {
		t.Errorf("Func error = %v, want %q", err, "func failed")
	}
}

// Func takes precedence over Response and Err, as documented ("exactly one
// decides"; when several are set, Func wins, then Err).
func TestTurnPrecedence(t *testing.T) {
	boom := errors.New("boom")
	text := llmtest.Text("response")
	m := llmtest.New(
		llmtest.Turn{Response: text.Response, Err: boom},
		llmtest.Turn{Response: text.Response, Func: func(*llm.Request) (*llm.Response, error) {
			return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Text: "func"}}, nil
		}},
	)
	ctx := context.Background()
	if _, err := m.Generate(ctx, req(1)); !errors.Is(err, boom) {
		t.Errorf("Err+Response turn: error = %v, want boom", err)
	}
	if r, err := m.Generate(ctx, req(2)); err != nil || r.Message.Text != "func" {
		t.Errorf("Func+Response turn = %+v, %v", r, err)
	}
}

func TestEmptyTurnFails(t *testing.T) {
	m := llmtest.New(llmtest.Turn{})
	_, err := m.Generate(context.Background(), req(1))
	if err == nil || errors.Is(err, llmtest.ErrScriptExhausted) {
		t.Errorf("empty turn error = %v, want a distinct error", err)
	}
}

func TestDelayHonoursCancel(t *testing.T) {
	m := llmtest.New(llmtest.Turn{Delay: time.Hour, Response: llmtest.Text("late").Response})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := m.Generate(ctx, req(1))
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Generate ignored the canceled context during Delay")
	}
}

func TestDelayHonoursDeadline(t *testing.T) {
	m := llmtest.New(llmtest.Turn{Delay: time.Hour, Response: llmtest.Text("late").Response})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := m.Generate(ctx, req(1))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Generate took %v with a 20ms deadline", d)
	}
}

func TestDelayThenAnswer(t *testing.T) {
	m := llmtest.New(llmtest.Turn{Delay: 10 * time.Millisecond, Response: llmtest.Text("ok").Response})
	start := time.Now()
	r, err := m.Generate(context.Background(), req(1))
	if err != nil || r.Message.Text != "ok" {
		t.Fatalf("Generate = %+v, %v", r, err)
	}
	if d := time.Since(start); d < 10*time.Millisecond {
		t.Errorf("answered after %v, before the 10ms delay", d)
	}
}

func TestCanceledContextWithoutDelay(t *testing.T) {
	m := llmtest.New(llmtest.Text("ok"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Generate(ctx, req(1)); !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}

func TestWithUsage(t *testing.T) {
	base := llmtest.Text("hi")
	withU := base.WithUsage(100, 7)
	if withU.Response.Usage != (llm.Usage{InputTokens: 100, OutputTokens: 7}) {
		t.Errorf("usage = %+v", withU.Response.Usage)
	}
	if base.Response.Usage != (llm.Usage{}) {
		t.Error("WithUsage modified the original turn")
	}
	if withU.Response.Message.Text != "hi" {
		t.Errorf("WithUsage lost the message: %+v", withU.Response.Message)
	}
	// A turn without a response is returned unchanged.
	errTurn := llmtest.Turn{Err: errors.New("x")}
	if got := errTurn.WithUsage(1, 1); got.Response != nil || got.Err == nil {
		t.Errorf("WithUsage on an error turn = %+v", got)
	}
	m := llmtest.New(withU)
	r, err := m.Generate(context.Background(), req(1))
	if err != nil || r.Usage.Total() != 107 {
		t.Errorf("Generate = %+v, %v; want usage 107", r, err)
	}
}

func TestCall(t *testing.T) {
	tests := []struct {
		name string
		args any
		want string
	}{
		{"struct", struct {
			OrderID string `json:"order_id"`
		}{"A1"}, `{"order_id":"A1"}`},
		{"map", map[string]int{"n": 1}, `{"n":1}`},
		{"string verbatim", `{"broken":`, `{"broken":`},
		{"raw verbatim", json.RawMessage(`{ "a" : 1 }`), `{ "a" : 1 }`},
		{"nil", nil, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := llmtest.Call("id1", "tool1", tt.args)
			if c.ID != "id1" || c.Name != "tool1" || string(c.Arguments) != tt.want {
				t.Errorf("Call = {%q %q %s}, want arguments %s", c.ID, c.Name, c.Arguments, tt.want)
			}
		})
	}
}

func TestCallPanicsOnUnencodableArgs(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Call with a channel argument did not panic")
		}
	}()
	llmtest.Call("id", "name", make(chan int))
}

// The model is safe for concurrent use: every request gets exactly one
// distinct turn, and every request is recorded.
func TestConcurrentUse(t *testing.T) {
	const n = 50
	turns := make([]llmtest.Turn, n)
	for i := range turns {
		turns[i] = llmtest.Text(fmt.Sprint(i))
	}
	m := llmtest.New(turns...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := m.Generate(context.Background(), req(i+1))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[r.Message.Text] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d distinct turns played, want %d", len(seen), n)
	}
	if got := len(m.Requests()); got != n {
		t.Errorf("recorded %d requests, want %d", got, n)
	}
}

// Model satisfies the llm.Model interface.
var _ llm.Model = (*llmtest.Model)(nil)
