package llm

import (
	"encoding/json"
	"errors"
	"iter"
	"reflect"
	"strings"
	"testing"
)

func call(id, name string) *ToolCall { return &ToolCall{ID: id, Name: name} }

func seq(ds []Delta, tail error) iter.Seq2[Delta, error] {
	return func(yield func(Delta, error) bool) {
		for _, d := range ds {
			if !yield(d, nil) {
				return
			}
		}
		if tail != nil {
			yield(Delta{}, tail)
		}
	}
}

// Two calls whose deltas interleave, text on either side of them, two
// reasoning parts and a running usage assemble into the Response that
// Generate would return; the last usage wins.
func TestAccumulatorParallelCalls(t *testing.T) {
	st := &ProviderState{Provider: "p", Data: []byte{1, 2}}
	ds := []Delta{
		{Kind: DeltaReasoning, Index: 0, Text: "think "},
		{Kind: DeltaReasoning, Index: 0, Text: "more"},
		{Kind: DeltaReasoning, Index: 1, Hidden: true},
		{Kind: DeltaUsage, Usage: &Usage{InputTokens: 10}},
		{Kind: DeltaText, Text: "Let me "},
		{Kind: DeltaToolCallStart, Index: 0, Call: call("a", "get")},
		{Kind: DeltaToolCallStart, Index: 1, Call: call("b", "put")},
		{Kind: DeltaToolCallArguments, Index: 1, Text: `{"k":`},
		{Kind: DeltaToolCallArguments, Index: 0, Text: `{"id"`},
		{Kind: DeltaToolCallArguments, Index: 1, Text: `2}`},
		{Kind: DeltaToolCallEnd, Index: 1, Call: &ToolCall{State: st}},
		{Kind: DeltaToolCallArguments, Index: 0, Text: `:1}`},
		{Kind: DeltaText, Text: "check."},
		{Kind: DeltaUsage, Usage: &Usage{InputTokens: 10, OutputTokens: 7}},
		{Kind: DeltaFinish, Finish: &Finish{Provider: "p", ID: "r1", Model: "m", FinishReason: "tool_calls", State: st}},
	}
	got, err := Collect(seq(ds, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := &Response{ID: "r1", Model: "m", FinishReason: "tool_calls",
		Usage: Usage{InputTokens: 10, OutputTokens: 7},
		Message: Message{Role: RoleAssistant, Text: "Let me check.",
			Reasoning: []Reasoning{{Provider: "p", Text: "think more"}, {Provider: "p", Hidden: true}},
			ToolCalls: []ToolCall{
				{ID: "a", Name: "get", Arguments: json.RawMessage(`{"id":1}`)},
				{ID: "b", Name: "put", Arguments: json.RawMessage(`{"k":2}`), State: st},
			},
			State: st}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("assembled\n%+v\nwant\n%+v", got, want)
	}
}

// Each inconsistency a peer's merge got wrong is refused, naming it.
func TestAccumulatorRefusesInconsistentChunks(t *testing.T) {
	start := func(i int, id, name string) Delta {
		return Delta{Kind: DeltaToolCallStart, Index: i, Call: call(id, name)}
	}
	args := func(i int, s string) Delta { return Delta{Kind: DeltaToolCallArguments, Index: i, Text: s} }
	fin := Delta{Kind: DeltaFinish, Finish: &Finish{}}
	for _, tc := range []struct {
		name string
		ds   []Delta
		want string
	}{
		{"one index, two IDs", []Delta{start(0, "a", "get"), start(0, "b", "get")}, "call 0 was started twice"},
		{"one ID, two indexes", []Delta{start(0, "a", "get"), start(1, "a", "get")}, "both have the ID a"},
		{"arguments for a call never started", []Delta{args(0, "{}")}, "never started"},
		{"an index skipped", []Delta{start(1, "a", "get")}, "call 1 was started after 0 call(s)"},
		{"arguments after the call ended", []Delta{start(0, "a", "get"), {Kind: DeltaToolCallEnd, Index: 0}, args(0, "{}")}, "after it ended"},
		{"ended under another ID", []Delta{start(0, "a", "get"), {Kind: DeltaToolCallEnd, Index: 0, Call: call("b", "")}}, "ended as"},
		{"a call without an ID", []Delta{{Kind: DeltaToolCallStart, Index: 0, Call: call("", "get")}}, "without an ID"},
		{"a negative index", []Delta{start(-1, "a", "get")}, "call -1 was started"},
		{"text after the finish", []Delta{fin, {Kind: DeltaText, Text: "x"}}, "after the turn finished"},
		{"reasoning part skipped", []Delta{{Kind: DeltaReasoning, Index: 1}}, "reasoning part 1"},
		{"unknown kind", []Delta{{Kind: 99}}, "delta_kind(99)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Collect(seq(tc.ds, nil))
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindProtocolError || e.Retryable {
				t.Fatalf("err = %v, want a non-retryable %s", err, KindProtocolError)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to say %q", err, tc.want)
			}
		})
	}
}

// Started counts only what a stream shows: text, reasoning text, a call.
// Usage and empty pieces, which providers send at once before an error
// may come, leave a failed stream retryable.
func TestAccumulatorStarted(t *testing.T) {
	var a Accumulator
	for _, d := range []Delta{
		{Kind: DeltaUsage, Usage: &Usage{InputTokens: 10}},
		{Kind: DeltaText},
		{Kind: DeltaReasoning, Index: 0, Hidden: true},
	} {
		if err := a.Add(d); err != nil {
			t.Fatal(err)
		}
		if a.Started() {
			t.Fatalf("started after a %s delta with nothing to show", d.Kind)
		}
	}
	for _, d := range []Delta{
		{Kind: DeltaText, Text: "h"},
		{Kind: DeltaReasoning, Index: 0, Text: "h"},
		{Kind: DeltaToolCallStart, Index: 0, Call: call("a", "get")},
	} {
		var b Accumulator
		if err := b.Add(d); err != nil {
			t.Fatal(err)
		}
		if !b.Started() {
			t.Errorf("not started after a %s delta", d.Kind)
		}
	}
}

// A stream that breaks keeps what it received; one that fails before its
// first delta returns no response; one that ends without a finish fails.
func TestCollectFailures(t *testing.T) {
	boom := &Error{Kind: KindUnavailable, Retryable: true, Err: ErrStreamEnded}
	resp, err := Collect(seq(nil, boom))
	if resp != nil || !errors.Is(err, ErrStreamEnded) {
		t.Errorf("failed before the first delta: %v, %v; want no response and the error", resp, err)
	}
	resp, err = Collect(seq([]Delta{{Kind: DeltaText, Text: "Hal"}, {Kind: DeltaToolCallStart, Call: call("a", "get")},
		{Kind: DeltaToolCallArguments, Text: `{"i`}}, boom))
	if !errors.Is(err, ErrStreamEnded) || resp == nil || resp.Message.Text != "Hal" ||
		len(resp.Message.ToolCalls) != 1 || string(resp.Message.ToolCalls[0].Arguments) != `{"i` || resp.FinishReason != "" {
		t.Errorf("broken mid-stream: %+v, %v; want the partial text and call, and the error", resp, err)
	}
	resp, err = Collect(seq([]Delta{{Kind: DeltaText, Text: "Hal"}}, nil))
	if resp == nil || resp.Message.Text != "Hal" || err == nil || !strings.Contains(err.Error(), "without a finish") {
		t.Errorf("no finish: %+v, %v; want the text and a protocol error", resp, err)
	}
	if _, err := Collect(seq(nil, nil)); err == nil {
		t.Error("an empty stream assembled into a turn")
	}
}

// Arguments for a call that arrive after a later call started, and text
// for a reasoning part after a later part opened, still go to their part:
// the parts the Accumulator has begun must survive it growing its lists
// (a strings.Builder copied by value panics when written to).
func TestAccumulatorWritesToEarlierPartsAfterLaterOnesOpen(t *testing.T) {
	ds := []Delta{{Kind: DeltaReasoning, Index: 0, Text: "a"}}
	for i := 1; i < 10; i++ {
		ds = append(ds, Delta{Kind: DeltaReasoning, Index: i, Text: "b"}, Delta{Kind: DeltaReasoning, Index: 0, Text: "a"})
	}
	ds = append(ds, Delta{Kind: DeltaToolCallStart, Index: 0, Call: call("c0", "get")},
		Delta{Kind: DeltaToolCallArguments, Index: 0, Text: "{"})
	for i := 1; i < 10; i++ {
		ds = append(ds, Delta{Kind: DeltaToolCallStart, Index: i, Call: call("c"+string(rune('0'+i)), "get")},
			Delta{Kind: DeltaToolCallArguments, Index: i, Text: "{}"},
			Delta{Kind: DeltaToolCallArguments, Index: 0, Text: " "})
	}
	ds = append(ds, Delta{Kind: DeltaToolCallArguments, Index: 0, Text: "}"}, Delta{Kind: DeltaFinish, Finish: &Finish{}})
	resp, err := Collect(seq(ds, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Message.Reasoning[0].Text; got != strings.Repeat("a", 10) {
		t.Errorf("reasoning part 0 = %q, want ten a's", got)
	}
	if got := string(resp.Message.ToolCalls[0].Arguments); got != "{"+strings.Repeat(" ", 9)+"}" {
		t.Errorf("call 0's arguments = %q", got)
	}
	if len(resp.Message.ToolCalls) != 10 || string(resp.Message.ToolCalls[9].Arguments) != "{}" {
		t.Errorf("calls = %+v", resp.Message.ToolCalls)
	}
}

// A call ID with a control character in it (a newline would let a model
// write its own lines into the run's output) is a protocol error, in a
// whole reply (CheckCallIDs) and in a stream (the Accumulator), naming
// the character; ordinary IDs of every provider pass.
func TestCallIDsWithControlCharacters(t *testing.T) {
	for _, id := range []string{"call_1\nstopped status=final_answer", "call\r", "ca\x00ll", "call\x1b[2J", "call\x7f", "call\u0085", "call\u2028x", "call\u2029"} {
		err := CheckCallIDs([]ToolCall{{ID: "call_ok", Name: "get"}, {ID: id, Name: "get"}})
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindProtocolError || e.Retryable || !strings.Contains(err.Error(), "tool call 1") || !strings.Contains(err.Error(), "control character") {
			t.Errorf("CheckCallIDs(%q) = %v; want a protocol_error naming call 1's control character", id, err)
		}
		var acc Accumulator
		err = acc.Add(Delta{Kind: DeltaToolCallStart, Index: 0, Call: call(id, "get")})
		if !errors.As(err, &e) || e.Kind != KindProtocolError || !strings.Contains(err.Error(), "control character") {
			t.Errorf("Accumulator took the call ID %q: %v", id, err)
		}
		if strings.ContainsAny(err.Error(), "\n\r\x00") {
			t.Errorf("the error repeats the control character: %q", err)
		}
	}
	ok := []ToolCall{{ID: "call_Ab12"}, {ID: "toolu_01A09q90qw90lq917835lq9"}, {ID: "fc_68a1-b2"}, {ID: "ünï cöde"}}
	if err := CheckCallIDs(ok); err != nil {
		t.Errorf("CheckCallIDs(ordinary IDs) = %v", err)
	}
}

// Deltas of a whole response assemble back into it, reasoning, calls with
// state, usage, the dropped reasoning and the NotStreamed mark included.
func TestDeltasAssembleTheResponse(t *testing.T) {
	st := &ProviderState{Provider: "p", Data: []byte{3}}
	want := &Response{ID: "r", Model: "m", FinishReason: "tool_calls", DroppedState: 2, DroppedReasoning: 3, Truncated: true, NotStreamed: true,
		Usage: Usage{InputTokens: 5, OutputTokens: 9, ReasoningTokens: 4},
		Message: Message{Role: RoleAssistant, Text: "Checking.", State: st,
			Reasoning: []Reasoning{{Provider: "p", Text: "hm"}, {Provider: "p", Hidden: true}},
			ToolCalls: []ToolCall{
				{ID: "a", Name: "get", Arguments: json.RawMessage(`{"id":1}`), State: st},
				{ID: "b", Name: "put", Arguments: json.RawMessage(`{}`)},
			}}}
	got, err := Collect(seq(Deltas(want, "p"), nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("assembled\n%+v\nwant\n%+v", got, want)
	}
}
