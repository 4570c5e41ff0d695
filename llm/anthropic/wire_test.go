package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
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

// rawClient is a client of a server that answers every request with 200,
// the Content-Type ct and body.
func rawClient(t *testing.T, ct, body string) anthropic.Client {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ct)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(hs.Close)
	return anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(hs.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

// A streamed request answered with the whole message as JSON (streaming
// turned off at a proxy) gives the turn Generate gives for it, marked
// NotStreamed; a JSON body that is not a message, or an HTML page, is a
// bad_response that says what came.
func TestStreamAnsweredWithJSON(t *testing.T) {
	for _, file := range []string{"final_answer.json", "parallel_calls.json", "thinking_calls.json"} {
		t.Run(file, func(t *testing.T) {
			s := newServer(t, ok(file))
			want, err := New(s.client(), nil).Generate(context.Background(), streamRequest())
			if err != nil {
				t.Fatal(err)
			}
			got, err := llm.Collect(New(s.client(), nil).Stream(context.Background(), streamRequest()))
			if err != nil {
				t.Fatal(err)
			}
			if !got.NotStreamed {
				t.Error("the turn is not marked NotStreamed")
			}
			want.NotStreamed = true
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("streamed\n%s\nwant (Generate)\n%s", dump(got), dump(want))
			}
		})
	}
	_, err := llm.Collect(New(rawClient(t, "application/json", `{"object":"list","data":[]}`), nil).Stream(context.Background(), streamRequest()))
	wantKind(t, err, llm.KindBadResponse, `its body is not a message: its type is "", not "message"`)
	_, err = llm.Collect(New(rawClient(t, "text/html", `<html>Sign in</html>`), nil).Stream(context.Background(), streamRequest()))
	wantKind(t, err, llm.KindBadResponse, "where JSON was expected")
}

// Events that break the protocol are refused, never added to the answer:
// text after message_delta's stop reason, a block started at a negative
// index, a tool_use ID with a newline in it (which would let the model
// write its own lines into the run's output).
func TestStreamWireFaults(t *testing.T) {
	body := string(readFixture(t, "stream_final_answer.sse"))
	calls := string(readFixture(t, "stream_parallel_calls.sse"))
	after := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" Ignore that: 30.\"}}\n\n"
	for _, c := range []struct{ name, body, want string }{
		{"text after the stop reason", strings.Replace(body, "event: message_stop", after+"event: message_stop", 1), `a content_block_delta arrived after the stop reason "end_turn"`},
		{"a block after the stop reason", strings.Replace(body, "event: message_stop",
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"30\"}}\n\nevent: message_stop", 1),
			`a content_block_start arrived after the stop reason`},
		{"a negative block index", strings.Replace(body, `"type":"content_block_start","index":0`, `"type":"content_block_start","index":-1`, 1), "-1"},
		{"a newline in a call ID", strings.Replace(calls, `"id":"call_1"`, `"id":"call_\n1"`, 1), "control character U+000A"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.body == body || c.body == calls {
				t.Fatal("the fixture was not changed")
			}
			ss := newSSEServer(t, []byte(c.body), 5, 0)
			resp, err := llm.Collect(New(ss.client(), nil).Stream(context.Background(), streamRequest()))
			wantKind(t, err, llm.KindProtocolError, c.want)
			if resp != nil && strings.Contains(resp.Message.Text, "30") {
				t.Errorf("text after the stop reason reached the answer: %q", resp.Message.Text)
			}
		})
	}
	// The same ID in a whole reply.
	js := string(readFixture(t, "single_call.json"))
	_, err := New(rawClient(t, "application/json", strings.Replace(js, `"call_1"`, `"call_1\r\nforged"`, 1)), nil).Generate(context.Background(), streamRequest())
	wantKind(t, err, llm.KindProtocolError, "control character U+000D")
}

// A stream whose lines end in \r alone or in \r\n (both valid SSE) reads as
// one with \n; an event whose data is not JSON is a bad_response that says
// so, not a dropped stream.
func TestStreamWireFormat(t *testing.T) {
	for _, file := range []string{"stream_final_answer.sse", "stream_parallel_calls.sse"} {
		body := string(readFixture(t, file))
		ss := newSSEServer(t, []byte(body), 6, 0)
		want, err := llm.Collect(New(ss.client(), nil).Stream(context.Background(), streamRequest()))
		if err != nil {
			t.Fatal(err)
		}
		for name, eol := range map[string]string{"CR": "\r", "CRLF": "\r\n"} {
			ss := newSSEServer(t, []byte(strings.ReplaceAll(body, "\n", eol)), 7, 0)
			got, err := llm.Collect(New(ss.client(), nil).Stream(context.Background(), streamRequest()))
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s with %s line endings: %v\n%s\nwant\n%s", file, name, err, dump(got), dump(want))
			}
		}
	}
	body := string(readFixture(t, "stream_final_answer.sse"))
	bad := strings.Replace(body, `"text":" is 12 "}}`, `"text":" is 12 "}`, 1)
	ss := newSSEServer(t, []byte(bad), 8, 0)
	resp, err := llm.Collect(New(ss.client(), nil).Stream(context.Background(), streamRequest()))
	wantKind(t, err, llm.KindBadResponse, "an event whose data is not valid JSON")
	if errors.Is(err, llm.ErrStreamEnded) || resp == nil || resp.Message.Text != "It" {
		t.Errorf("err %v, response %+v; want the text before the bad event, and no ErrStreamEnded", err, resp)
	}
}
