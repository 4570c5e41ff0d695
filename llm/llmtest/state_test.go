package llmtest_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
)

// stateful is an assistant message carrying everything a reasoning model
// attaches: reasoning, state on the message and on its call.
func stateful() llm.Message {
	return llm.Message{
		Role:      llm.RoleAssistant,
		Reasoning: []llm.Reasoning{{Provider: "p", Text: "think"}, {Provider: "p", Hidden: true}},
		State:     &llm.ProviderState{Provider: "p", Data: []byte{0xff, 'a', '+', '/', '='}},
		ToolCalls: []llm.ToolCall{{ID: "c1", Name: "t", Arguments: []byte(`{}`),
			State: &llm.ProviderState{Provider: "p", Data: []byte("sig")}}},
	}
}

// scribble changes every byte a message's reasoning and state hold, in
// place.
func scribble(m *llm.Message) {
	for i := range m.Reasoning {
		m.Reasoning[i].Text = "scribbled"
	}
	if m.State != nil {
		m.State.Provider = "scribbled"
		for i := range m.State.Data {
			m.State.Data[i] = '#'
		}
	}
	for i := range m.ToolCalls {
		if s := m.ToolCalls[i].State; s != nil {
			for j := range s.Data {
				s.Data[j] = '#'
			}
		}
		for j := range m.ToolCalls[i].Arguments {
			m.ToolCalls[i].Arguments[j] = ' '
		}
	}
	if m.Result != nil {
		for i := range m.Result.Content {
			m.Result.Content[i] = ' '
		}
	}
}

// An answer's reasoning and provider state are the caller's own too:
// editing them in place does not change what a repeating script plays.
func TestResponsesCopyState(t *testing.T) {
	want := stateful()
	m := llmtest.Repeating(llmtest.Turn{Response: &llm.Response{Message: stateful()}})
	ctx := context.Background()
	r1, err := m.Generate(ctx, req(1))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r1.Message, want) {
		t.Fatalf("first answer = %+v, want %+v", r1.Message, want)
	}
	scribble(&r1.Message)
	r2, err := m.Generate(ctx, req(2))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r2.Message, want) {
		t.Errorf("second answer = %+v, want the script unchanged %+v", r2.Message, want)
	}
}

// The record keeps each request's messages as they were sent, reasoning,
// provider state, arguments and results included, even if the caller
// later edits them in place.
func TestRecordedRequestsCopyState(t *testing.T) {
	m := llmtest.New(llmtest.Text("a"))
	sent := []llm.Message{llm.UserMessage("q"), stateful(),
		llm.ToolMessage(llm.ToolResult{CallID: "c1", Name: "t", Status: llm.StatusOK, Content: []byte(`{"ok":true}`)})}
	want := []llm.Message{llm.UserMessage("q"), stateful(),
		llm.ToolMessage(llm.ToolResult{CallID: "c1", Name: "t", Status: llm.StatusOK, Content: []byte(`{"ok":true}`)})}
	if _, err := m.Generate(context.Background(), req(1, sent...)); err != nil {
		t.Fatal(err)
	}
	for i := range sent {
		scribble(&sent[i])
	}
	got := m.Requests()[0].Messages
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("recorded messages = %+v\nwant %+v", got, want)
	}
	if !bytes.Equal(got[1].State.Data, []byte{0xff, 'a', '+', '/', '='}) {
		t.Errorf("recorded state = %q", got[1].State.Data)
	}
}
