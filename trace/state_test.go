package trace_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/trace"
)

// secretState is provider state no log may hold: the tag is easy to look
// for, in the clear and in base64.
func secretState(provider, tag string) *llm.ProviderState {
	return &llm.ProviderState{Provider: provider, Data: append([]byte("SECRET-"+tag+"+/="), 0xff, 0x00)}
}

// reasoningRun is a run of a reasoning model: its opening history holds
// an earlier turn of another provider (with state), its first answer
// shows reasoning (with an API key in it) and hides more, with state on
// the message and the call; its last answer says the adapter dropped the
// other provider's state.
func reasoningRun(t *testing.T) *loop.Result {
	t.Helper()
	earlier := llm.Message{Role: llm.RoleAssistant, Text: "hello again",
		Reasoning: []llm.Reasoning{{Provider: "openai-responses", Hidden: true}},
		State:     secretState("openai-responses", "earlier")}
	first := llm.Message{Role: llm.RoleAssistant,
		Reasoning: []llm.Reasoning{
			{Provider: "anthropic", Text: "the key sk-abcdefghijklmnopqrstuvwx must not leak; look it up"},
			{Provider: "anthropic", Hidden: true},
		},
		State: secretState("anthropic", "msg"),
		ToolCalls: []llm.ToolCall{{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{"q":"a"}`),
			State: secretState("anthropic", "call")}},
	}
	last := llm.Message{Role: llm.RoleAssistant, Text: "found it", State: secretState("anthropic", "last")}
	model := llmtest.New(
		llmtest.Turn{Response: &llm.Response{Message: first, DroppedState: 1,
			Usage: llm.Usage{InputTokens: 100, OutputTokens: 40, ReasoningTokens: 30, CachedInputTokens: 50, CacheWriteTokens: 20}}},
		llmtest.Turn{Response: &llm.Response{Message: last, DroppedState: 1, Usage: llm.Usage{InputTokens: 120, OutputTokens: 5}}},
	)
	lookup := tool.MustNew(tool.Spec[struct {
		Q string `json:"q"`
	}]{Name: "lookup"}, func(_ context.Context, in struct {
		Q string `json:"q"`
	}) (map[string]string, error) {
		return map[string]string{"q": in.Q}, nil
	})
	reg, err := tool.NewRegistry(lookup)
	if err != nil {
		t.Fatal(err)
	}
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: reg, ModelName: "claude-sonnet-4-5"},
		[]llm.Message{llm.UserMessage("hi"), earlier, llm.UserMessage("look up a")})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// noSecrets fails if data holds any state bytes, in the clear or in
// base64.
func noSecrets(t *testing.T, data []byte) {
	t.Helper()
	for _, tag := range []string{"earlier", "msg", "call", "last"} {
		raw := append([]byte("SECRET-"+tag+"+/="), 0xff, 0x00)
		for _, form := range []string{"SECRET-" + tag, base64.StdEncoding.EncodeToString(raw), base64.StdEncoding.EncodeToString(raw[:9])} {
			if bytes.Contains(data, []byte(form)) {
				t.Errorf("the log holds state %s (%q):\n%s", tag, form, data)
			}
		}
	}
}

// The run log never holds provider state: each piece is a summary of
// whose it is and its size, on messages and calls, in the started event
// and in responses. The log still reads back and replays; the events the
// store keeps are untouched; reasoning text is redacted like message text.
func TestLogSummarizesState(t *testing.T) {
	res := reasoningRun(t)
	before, err := json.Marshal(res.Events)
	if err != nil {
		t.Fatal(err)
	}
	data := writeLog(t, res.Events, nil)
	noSecrets(t, data)
	for _, want := range []string{
		`"state":{"provider":"openai-responses","bytes":19}`,
		`"state":{"provider":"anthropic","bytes":15}`,
		`"state":{"provider":"anthropic","bytes":16}}],`, // the call's, its object's last member
		`"text":"found it","state":{"provider":"anthropic","bytes":16}`,
		`"dropped_state":1`,
		`{"provider":"anthropic","hidden":true}`,
		`"reasoning":[{"provider":"anthropic","text":"the key <masked> must not leak; look it up"}`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the log lacks %s:\n%s", want, data)
		}
	}
	if strings.Contains(string(data), "sk-abcdefghijklmnopqrstuvwx") {
		t.Error("the log holds the API key from the reasoning")
	}
	after, _ := json.Marshal(res.Events)
	if !bytes.Equal(before, after) {
		t.Error("writing the log changed the events")
	}

	got, err := trace.ReadLog(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(res.Events) {
		t.Fatalf("read %d events, want %d", len(got), len(res.Events))
	}
	replayed := loop.Replay(got)
	if replayed.Status != res.Status || len(replayed.History()) != len(res.Messages) {
		t.Fatalf("replayed log: %s, %d messages; want %s, %d", replayed.Status, len(replayed.History()), res.Status, len(res.Messages))
	}
	for i, m := range replayed.History() {
		w := res.Messages[i]
		if (m.State == nil) != (w.State == nil) || (m.State != nil && (m.State.Provider != w.State.Provider || m.State.Data != nil)) {
			t.Errorf("message %d state read back as %+v, want provider %+v without data", i, m.State, w.State)
		}
		if len(m.Reasoning) != len(w.Reasoning) {
			t.Errorf("message %d reasoning %+v, want %d pieces", i, m.Reasoning, len(w.Reasoning))
		}
		for j, c := range m.ToolCalls {
			if c.State == nil || c.State.Provider != "anthropic" || c.State.Data != nil || string(c.Arguments) != `{"q":"<string:1>"}` {
				t.Errorf("message %d call %d read back as %+v", i, j, c)
			}
		}
	}

	// Text summaries apply to reasoning too.
	summ := writeLog(t, res.Events, &trace.LogOptions{Redactor: trace.NewRedactor(&trace.RedactOptions{SummarizeText: true})})
	if !strings.Contains(string(summ), `"reasoning":[{"provider":"anthropic","text":"<text:61>"}`) {
		t.Errorf("a text-summarizing log shows reasoning:\n%s", summ)
	}
	noSecrets(t, summ)
}

// RedactEvent drops state data but keeps whose it is.
func TestRedactEventDropsStateData(t *testing.T) {
	res := reasoningRun(t)
	red := trace.NewRedactor(nil)
	for i := range res.Events {
		r := trace.RedactEvent(red, &res.Events[i])
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		noSecrets(t, b)
		if r.Response != nil && r.Response.Message.State != nil && r.Response.Message.State.Provider != "anthropic" {
			t.Errorf("event %d: state %+v", i, r.Response.Message.State)
		}
	}
}

// A log without provider state is encoded as before: the summaries change
// nothing else.
func TestLogWithoutStateUnchanged(t *testing.T) {
	res := scenario(t, "parallel")
	data := writeLog(t, res.Events, nil)
	red := trace.NewRedactor(nil)
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	for i := range res.Events {
		r := trace.RedactEvent(red, &res.Events[i])
		if err := enc.Encode(&r); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(data, want.Bytes()) {
		t.Errorf("log:\n%s\nwant:\n%s", data, want.Bytes())
	}
	// And an event with state encodes its other fields as usual.
	ev := reasoningRun(t).Events[0]
	plain := ev
	start := *ev.Start
	start.Messages = nil
	for _, m := range ev.Start.Messages {
		m.State = nil
		start.Messages = append(start.Messages, m)
	}
	plain.Start = &start
	a, b := writeLog(t, []loop.Event{ev}, nil), writeLog(t, []loop.Event{plain}, nil)
	if got := strings.Replace(string(a), `,"state":{"provider":"openai-responses","bytes":19}`, "", 1); got != string(b) {
		t.Errorf("with state:\n%s\nwithout:\n%s", a, b)
	}
	if !reflect.DeepEqual(ev.Start.Messages[1].State, secretState("openai-responses", "earlier")) {
		t.Error("the event changed")
	}
}

// Show prints each assistant message's reasoning, or a marker where the
// provider hid it, whose state it carries (with its size from the store,
// never its bytes), and a note on answers whose adapter left another
// provider's state out.
func TestShowReasoningAndState(t *testing.T) {
	res := reasoningRun(t)
	fromStore := show(t, res.Events, nil)
	for _, want := range []string{
		`2 assistant reasoning (hidden by the provider)`,
		`text   "hello again"`,
		`state  openai-responses (19 bytes)`,
		`4 assistant reasoning "the key sk-abcdefghijklmnopqrstuvwx must not leak; look it up"`,
		"\n               reasoning (hidden by the provider)\n",
		`call   call_id=c1 tool=lookup args={"q":"a"} state=anthropic (16 bytes)`,
		`state  anthropic (15 bytes)`,
		`note   the model client left out 1 piece(s) of another provider's state`,
		`dropped_state=1`,
	} {
		if !strings.Contains(fromStore, want) {
			t.Errorf("show lacks %q:\n%s", want, fromStore)
		}
	}
	// The note goes with the answers whose responses said so, not with
	// the opening history's assistant message.
	if n := strings.Count(fromStore, "note   the model client left out"); n != 2 {
		t.Errorf("%d notes, want 2 (one per answer):\n%s", n, fromStore)
	}
	noSecrets(t, []byte(fromStore))

	// A redactor masks reasoning like text.
	masked := show(t, res.Events, &trace.ShowOptions{Redactor: trace.NewRedactor(nil)})
	if strings.Contains(masked, "sk-abcdefghijklmnopqrstuvwx") || !strings.Contains(masked, `reasoning "the key <masked> must`) {
		t.Errorf("a redacting show:\n%s", masked)
	}

	// From a log: the provider, no size.
	logged, err := trace.ReadLog(bytes.NewReader(writeLog(t, res.Events, nil)))
	if err != nil {
		t.Fatal(err)
	}
	fromLog := show(t, logged, nil)
	if !strings.Contains(fromLog, "state  anthropic\n") || !strings.Contains(fromLog, "state=anthropic\n") ||
		!strings.Contains(fromLog, `reasoning "the key <masked> must`) || !strings.Contains(fromLog, "left out 1 piece(s)") {
		t.Errorf("show from the log:\n%s", fromLog)
	}
}

// Diagnose reports a provider switch once, when a response first says
// its adapter left state out, and again only if more is left out.
func TestDiagnoseDroppedState(t *testing.T) {
	res := reasoningRun(t)
	var got []trace.Finding
	for _, f := range trace.Diagnose(res.Events) {
		if f.Kind == trace.DroppedState {
			got = append(got, f)
		}
	}
	if len(got) != 1 || got[0].Step != 1 || got[0].Seq != 2 || !strings.Contains(got[0].Message, "left out 1 piece(s)") {
		t.Fatalf("findings %+v, want one at step 1", got)
	}
	// A run whose responses drop nothing has no such finding.
	for _, f := range trace.Diagnose(scenario(t, "parallel").Events) {
		if f.Kind == trace.DroppedState {
			t.Errorf("finding %v in a run without state", f)
		}
	}
}

// providerModel stands in for a provider's adapter: it answers with state
// of its own, and, as adapters do, leaves other providers' state out of
// what it would send and says how much (llm.ForeignState).
func providerModel(name string, turns ...llm.Message) llm.Model {
	return llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		i := 0
		for _, m := range req.Messages {
			if m.Role == llm.RoleAssistant {
				i++
			}
		}
		if i >= len(turns) {
			return nil, fmt.Errorf("%s: no turn %d", name, i+1)
		}
		m := turns[i]
		m.State = &llm.ProviderState{Provider: name, Data: []byte(name + "-state")}
		return &llm.Response{Message: m, DroppedState: llm.ForeignState(req.Messages, name)}, nil
	})
}

// A run paused under provider A and resumed under provider B: B's
// adapter leaves A's two pieces of state (the message's and the call's)
// out and says so; the decider records it in the model_responded event,
// the store and the run log keep it, and show and diagnose mention it.
func TestProviderSwitch(t *testing.T) {
	first := llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "send_note", Arguments: json.RawMessage(`{"to":"dana"}`),
		State: &llm.ProviderState{Provider: "provider-a", Data: []byte("call-sig")}}}}
	final := llm.Message{Role: llm.RoleAssistant, Text: "sent"}
	send := tool.MustNew(tool.Spec[struct {
		To string `json:"to"`
	}]{Name: "send_note", Effect: tool.Write}, func(_ context.Context, in struct {
		To string `json:"to"`
	}) (map[string]string, error) {
		return map[string]string{"sent_to": in.To}, nil
	})
	reg, err := tool.NewRegistry(send)
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory()
	cfg := loop.Config{Model: providerModel("provider-a", first, final), Tools: reg, Store: st, Policy: policy.ConfirmWrites()}
	ctx := context.Background()
	res, _ := loop.Run(ctx, cfg, []llm.Message{llm.UserMessage("send dana a note")})
	if res.Status != loop.ConfirmationRequired {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	if err := loop.Decide(ctx, st, res.RunID, loop.Confirmation{CallID: "c1", Approved: true, By: "dana"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	cfg.Model = providerModel("provider-b", first, final)
	r, err := loop.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err = r.Resume(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	events, err := loop.LoadEvents(ctx, st, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var dropped []int
	for _, ev := range events {
		if ev.Kind == loop.ModelResponded {
			dropped = append(dropped, ev.Response.DroppedState)
		}
	}
	if !reflect.DeepEqual(dropped, []int{0, 2}) {
		t.Fatalf("dropped state per response %v, want [0 2]", dropped)
	}
	// The history keeps both providers' state: dropping is the adapter's
	// business, per request.
	if s := res.Messages[1].State; s == nil || s.Provider != "provider-a" {
		t.Errorf("provider A's state left the history: %+v", res.Messages[1])
	}

	data := writeLog(t, events, nil)
	if !strings.Contains(string(data), `"dropped_state":2`) {
		t.Errorf("the log lacks the dropped state:\n%s", data)
	}
	logged, err := trace.ReadLog(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for name, evs := range map[string][]loop.Event{"store": events, "log": logged} {
		out := show(t, evs, nil)
		if strings.Count(out, "left out 2 piece(s) of another provider's state") != 1 || !strings.Contains(out, "dropped_state=2") {
			t.Errorf("show from the %s:\n%s", name, out)
		}
		var kinds []trace.FindingKind
		for _, f := range trace.Diagnose(evs) {
			kinds = append(kinds, f.Kind)
		}
		if !slices.Contains(kinds, trace.DroppedState) {
			t.Errorf("diagnose from the %s: %v, want %s", name, kinds, trace.DroppedState)
		}
	}
}
