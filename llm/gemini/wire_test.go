package gemini_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/gemini"
)

// wantKind fails unless err is a non-retryable *llm.Error of kind saying
// want.
func wantKind(t *testing.T, err error, kind llm.ErrorKind, want string) {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != kind || e.Retryable || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want a non-retryable %s saying %q", err, kind, want)
	}
}

// A streamed request answered with the whole reply as JSON (a proxy that
// does not stream), one GenerateContentResponse or an array of them as
// streamGenerateContent gives without alt=sse, gives the turn Generate
// gives for it, marked NotStreamed.
func TestStreamAnsweredWithJSON(t *testing.T) {
	for _, name := range []string{"parallel_calls", "thoughts_calls", "text_signed", "truncated"} {
		for _, array := range []bool{false, true} {
			t.Run(name, func(t *testing.T) {
				unary := fixture(t, "stream/"+name+".json")
				ref := newStreamServer(t, nil, unary)
				m := gemini.New(ref.client(t, nil), &gemini.Options{Model: "gemini-2.5-flash", IncludeThoughts: true})
				want, err := m.Generate(context.Background(), callRequest(3))
				if err != nil {
					t.Fatal(err)
				}
				body := unary
				if array {
					body = []byte("[" + string(unary) + "]")
				}
				s := newStreamServer(t, nil, body)
				s.status = http.StatusOK
				got, err := llm.Collect(gemini.New(s.client(t, nil), &gemini.Options{Model: "gemini-2.5-flash", IncludeThoughts: true}).Stream(context.Background(), callRequest(3)))
				if err != nil {
					t.Fatal(err)
				}
				if !got.NotStreamed {
					t.Error("the turn is not marked NotStreamed")
				}
				want.NotStreamed = true
				if !reflect.DeepEqual(got, want) {
					gj, _ := json.MarshalIndent(got, "", "  ")
					wj, _ := json.MarshalIndent(want, "", "  ")
					t.Fatalf("array %v: streamed\n%s\nwant (Generate)\n%s", array, gj, wj)
				}
			})
		}
	}
	s := newStreamServer(t, nil, []byte(`{"candidates": "none"}`))
	s.status = http.StatusOK
	_, err := llm.Collect(gemini.New(s.client(t, nil), &gemini.Options{Model: "gemini-2.5-flash"}).Stream(context.Background(), callRequest(3)))
	wantKind(t, err, llm.KindBadResponse, "answered with JSON that is not a GenerateContentResponse")
}

// Wire faults: a stream with \r or \r\n line endings reads as with \n; an
// event that is not JSON is a bad_response that says so; a part after
// the finish reason is a protocol error, never part of the answer; a call
// ID with a control character is a protocol error, streamed and whole.
func TestStreamWireFaults(t *testing.T) {
	opts := &gemini.Options{Model: "gemini-2.5-flash", IncludeThoughts: true}
	sse := string(fixture(t, "stream/parallel_calls.sse"))
	ref := newStreamServer(t, []byte(sse), fixture(t, "stream/parallel_calls.json"))
	want, err := llm.Collect(gemini.New(ref.client(t, nil), opts).Stream(context.Background(), callRequest(3)))
	if err != nil {
		t.Fatal(err)
	}
	for name, eol := range map[string]string{"CR": "\r", "CRLF": "\r\n"} {
		s := newStreamServer(t, []byte(strings.ReplaceAll(sse, "\n", eol)), nil)
		got, err := llm.Collect(gemini.New(s.client(t, nil), opts).Stream(context.Background(), callRequest(3)))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s line endings: %v, %+v", name, err, got)
		}
	}

	answer := fixture(t, "final_answer.json")
	first := sseOf(t, answer)
	s := newStreamServer(t, append(first, "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"x\"}\r\n\r\n"...), nil)
	_, err = llm.Collect(gemini.New(s.client(t, nil), opts).Stream(context.Background(), callRequest(3)))
	wantKind(t, err, llm.KindBadResponse, "an event whose data is not valid JSON")

	after := sseOf(t, []byte(`{"candidates": [{"content": {"parts": [{"text": " Ignore that: 30."}], "role": "model"}, "index": 0}], "responseId": "rJ8daL6nIuLYz7IPqpfRsAk"}`))
	s = newStreamServer(t, append(bytes.Clone(first), after...), nil)
	resp, err := llm.Collect(gemini.New(s.client(t, nil), opts).Stream(context.Background(), callRequest(3)))
	wantKind(t, err, llm.KindProtocolError, "a text part came after the finish reason STOP")
	if resp != nil && strings.Contains(resp.Message.Text, "30") {
		t.Errorf("text after the finish reason reached the answer: %q", resp.Message.Text)
	}

	call := strings.Replace(string(fixture(t, "single_call.json")), `"id": "call_1"`, `"id": "call_1\nforged"`, 1)
	s = newStreamServer(t, sseOf(t, []byte(call)), []byte(call))
	_, err = gemini.New(s.client(t, nil), opts).Generate(context.Background(), callRequest(3))
	wantKind(t, err, llm.KindProtocolError, "control character U+000A")
	_, err = llm.Collect(gemini.New(s.client(t, nil), opts).Stream(context.Background(), callRequest(3)))
	wantKind(t, err, llm.KindProtocolError, "control character U+000A")
}
