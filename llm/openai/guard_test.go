package openai_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmhttp"
	"github.com/toolloop/toolloop/llm/llmhttp/llmhttptest"
	"github.com/toolloop/toolloop/llm/openai"
)

// floodSize is the reply of a runaway server: 30 MB, which cost 429 MB of
// memory before the cap.
const floodSize = 30 << 20

// wantBadResponse fails unless err is a non-retryable bad_response whose
// text has every one of want.
func wantBadResponse(t *testing.T, err error, want ...string) {
	t.Helper()
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindBadResponse || me.Retryable {
		t.Fatalf("err = %v, want a non-retryable %s", err, llm.KindBadResponse)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("err = %q, want it to say %q", err, w)
		}
	}
}

// A 30 MB reply fails at the default 8 MiB cap, with an error naming the
// cap and the provider, and the adapter reads no more than about the cap
// from the server: the Chat adapter, the Responses adapter and a
// compatible server alike.
func TestResponseTooLarge(t *testing.T) {
	req := &llm.Request{Model: "gpt-4.1", Messages: history()}
	for _, c := range []struct {
		name string
		gen  func(f *llmhttptest.FloodServer) error
	}{
		{"chat", func(f *llmhttptest.FloodServer) error {
			_, err := openai.NewChat(floodClient(f), nil).Generate(context.Background(), req)
			return err
		}},
		{"responses", func(f *llmhttptest.FloodServer) error {
			_, err := openai.NewResponses(floodClient(f), nil).Generate(context.Background(), req)
			return err
		}},
		{"compatible", func(f *llmhttptest.FloodServer) error {
			_, err := openai.NewCompatible(f.URL, "", nil, option.WithHTTPClient(f.Client())).Generate(context.Background(), req)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := llmhttptest.NewFloodServer(t, floodSize)
			err := c.gen(f)
			wantBadResponse(t, err, "openai sent a reply larger than the 8 MiB cap", "MaxResponseBytes")
			if n := f.Written(); n > llmhttp.DefaultMaxResponseBytes+2<<20 {
				t.Errorf("the server sent %d bytes; the cap should stop the read at about %d", n, llmhttp.DefaultMaxResponseBytes)
			}
		})
	}
}

// MaxResponseBytes sets the cap; negative turns it off.
func TestMaxResponseBytesOption(t *testing.T) {
	req := &llm.Request{Model: "gpt-4.1", Messages: history()}
	f := llmhttptest.NewFloodServer(t, 2<<20)
	_, err := openai.NewChat(floodClient(f), &openai.ChatOptions{MaxResponseBytes: 1 << 20}).Generate(context.Background(), req)
	wantBadResponse(t, err, "the 1 MiB cap")
	if n := f.Written(); n > 2<<20-256<<10 {
		t.Errorf("the server sent %d of its 2 MiB past a 1 MiB cap", n)
	}

	f = llmhttptest.NewFloodServer(t, 2<<20)
	_, err = openai.NewChat(floodClient(f), &openai.ChatOptions{MaxResponseBytes: -1}).Generate(context.Background(), req)
	// The SDK reads the whole body, then finds the JSON unfinished.
	var me *llm.Error
	if n := f.Written(); n != 2<<20 || (errors.As(err, &me) && me.Kind == llm.KindBadResponse) {
		t.Fatalf("without a cap: %d bytes sent, err %v; want the whole body read", n, err)
	}
}

func floodClient(f *llmhttptest.FloodServer) sdk.Client {
	return sdk.NewClient(option.WithBaseURL(f.URL), option.WithHTTPClient(f.Client()), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
}

// A proxy that turned streaming on answers with an event stream where the
// adapter expects JSON; an HTML page comes from a wrong base URL. Both are
// named plainly, with the first bytes of the body.
func TestNotJSONReply(t *testing.T) {
	stream := "data: {\"id\":\"chatcmpl-C1\",\"object\":\"chat.completion.chunk\",\"created\":1755443394,\"model\":\"gpt-4.1\"," +
		"\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n" +
		strings.Repeat("data: {\"id\":\"chatcmpl-C1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n", 50) +
		"data: [DONE]\n\n"
	for _, c := range []struct {
		name, ct, body string
		want           []string
	}{
		{"event stream", "text/event-stream; charset=utf-8", stream, []string{
			"openai answered with Content-Type text/event-stream; charset=utf-8 where JSON was expected (is streaming turned on at a proxy?)",
			`it began "data: {\"id\":\"chatcmpl-C1\"`}},
		{"html", "text/html", "<!DOCTYPE html><html><head><title>Sign in</title></head><body>" + strings.Repeat("x", 5000), []string{
			"Content-Type text/html where JSON was expected", "login portal", `"<!DOCTYPE html><html><head><title>Sign in`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", c.ct)
				_, _ = io.WriteString(w, c.body)
			}))
			defer srv.Close()
			req := &llm.Request{Model: "gpt-4.1", Messages: history()}
			_, err := openai.NewCompatible(srv.URL, "", nil).Generate(context.Background(), req)
			wantBadResponse(t, err, c.want...)
			if len(err.Error()) > 700 {
				t.Errorf("the error quotes %d bytes; it should quote the beginning only", len(err.Error()))
			}
			client := sdk.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
			_, err = openai.NewResponses(client, nil).Generate(context.Background(), req)
			wantBadResponse(t, err, c.want[0])
		})
	}
}

// An answer cut off at the output token limit is marked truncated.
func TestTruncatedAnswer(t *testing.T) {
	req := &llm.Request{Model: "gpt-4.1", Messages: history()}
	s := newServer(t, "chat", ok("truncated.json"), ok("final_answer.json"))
	m := openai.NewChat(s.client(), nil)
	for _, want := range []bool{true, false} {
		resp, err := m.Generate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Truncated != want {
			t.Errorf("chat: finish reason %q, Truncated = %v, want %v", resp.FinishReason, resp.Truncated, want)
		}
	}
	rs := newServer(t, "responses", ok("truncated.json"), ok("final_answer.json"))
	r := openai.NewResponses(rs.client(), nil)
	for _, want := range []bool{true, false} {
		resp, err := r.Generate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Truncated != want {
			t.Errorf("responses: finish reason %q, Truncated = %v, want %v", resp.FinishReason, resp.Truncated, want)
		}
	}
}
