package llmhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/toolloop/toolloop/llm"
)

func guarded(status int, ct, body string, contentLength int64, g ResponseGuard) ([]byte, error) {
	h := http.Header{}
	if ct != "" {
		h.Set("Content-Type", ct)
	}
	resp := &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: contentLength}
	return io.ReadAll(g.Check(resp).Body)
}

func badResponse(t *testing.T, err error, want ...string) {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindBadResponse || e.Retryable {
		t.Fatalf("err = %v, want a non-retryable %s *llm.Error", err, llm.KindBadResponse)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("err = %q, want it to say %q", err, w)
		}
	}
}

func TestResponseGuardSize(t *testing.T) {
	g := ResponseGuard{Provider: "acme", MaxBytes: 1 << 10}
	body := `{"x":"` + strings.Repeat("a", 2000) + `"}`
	got, err := guarded(200, "application/json", body, -1, g)
	badResponse(t, err, "acme", "1 KiB cap", "MaxResponseBytes")
	if len(got) != 1<<10 {
		t.Errorf("read %d bytes, want exactly the cap, 1024", len(got))
	}
	_, err = guarded(200, "application/json", body, int64(len(body)), g)
	badResponse(t, err, "Content-Length is 2008 bytes")

	// At the cap exactly, and without a cap, the body comes through.
	for _, g := range []ResponseGuard{{MaxBytes: int64(len(body))}, {MaxBytes: -1}} {
		if got, err := guarded(200, "application/json", body, -1, g); err != nil || string(got) != body {
			t.Errorf("MaxBytes %d: read %d bytes, err %v; want the whole body", g.MaxBytes, len(got), err)
		}
	}
	if (ResponseGuard{}).limit(false) != DefaultMaxResponseBytes || (ResponseGuard{}).limit(true) != DefaultMaxStreamBytes {
		t.Error("the zero guard does not cap at DefaultMaxResponseBytes and DefaultMaxStreamBytes")
	}
	// An error reply is capped too.
	_, err = guarded(500, "text/html", strings.Repeat("<p>", 1000), -1, g)
	badResponse(t, err, "1 KiB cap")
}

func TestResponseGuardNotJSON(t *testing.T) {
	g := ResponseGuard{Provider: "openai"}
	sse := "data: {\"id\":\"chatcmpl-1\",\"choices\":[]}\n\n" + strings.Repeat("data: {}\n\n", 100)
	_, err := guarded(200, "text/event-stream", sse, -1, g)
	badResponse(t, err, "openai answered with Content-Type text/event-stream where JSON was expected",
		"streaming turned on at a proxy", `it began "data: {\"id\"`)
	if len(err.Error()) > 600 {
		t.Errorf("the message quotes too much of the body: %d bytes", len(err.Error()))
	}
	_, err = guarded(200, "text/html; charset=utf-8", "<!DOCTYPE html><title>Sign in</title>", -1, g)
	badResponse(t, err, "Content-Type text/html; charset=utf-8", "web page", "<!DOCTYPE html>")
	_, err = guarded(200, "", "", -1, g)
	badResponse(t, err, "no Content-Type", "began empty")

	// JSON under a wrong or missing type, and error pages, pass: the SDK
	// or the status decides.
	for _, c := range []struct {
		status   int
		ct, body string
	}{
		{200, "text/plain", ` {"ok":true}`},
		{200, "", `[1]`},
		{200, "application/vnd.api+json", `{}`},
		{502, "text/html", "<html>bad gateway</html>"},
	} {
		if got, err := guarded(c.status, c.ct, c.body, -1, g); err != nil || string(got) != c.body {
			t.Errorf("%d %q: got %q, %v; want the body unchanged", c.status, c.ct, got, err)
		}
	}
}

func TestResponseGuardClient(t *testing.T) {
	base := &http.Client{Timeout: time.Minute}
	c := ResponseGuard{}.Client(base)
	if base.Transport != nil || c.Timeout != time.Minute || c.Transport == nil {
		t.Fatalf("Client changed its argument or lost its settings: %+v", c)
	}
}

// An event stream passes the guard only for a request that asked for one
// (ExpectStream), and is then capped at MaxStreamBytes, not MaxBytes.
func TestResponseGuardStream(t *testing.T) {
	body := "data: " + strings.Repeat("a", 3000) + "\n\n"
	read := func(ctx context.Context, g ResponseGuard) ([]byte, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/", nil)
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}},
			Body: io.NopCloser(strings.NewReader(body)), ContentLength: -1, Request: req}
		return io.ReadAll(g.Check(resp).Body)
	}
	g := ResponseGuard{Provider: "acme", MaxBytes: 1 << 10, MaxStreamBytes: 4 << 10}
	_, err := read(context.Background(), g)
	badResponse(t, err, "text/event-stream", "streaming turned on at a proxy")

	got, err := read(ExpectStream(context.Background()), g)
	if err != nil || string(got) != body {
		t.Fatalf("an expected stream under its cap: read %d bytes, err %v; want the whole body", len(got), err)
	}
	g.MaxStreamBytes = 2 << 10
	_, err = read(ExpectStream(context.Background()), g)
	badResponse(t, err, "2 KiB cap", "MaxStreamBytes")
}

// An expected event stream comes out of the guard with every line ending
// \n, whichever of the three the SSE format allows the server used, also
// when a \r\n is split between two reads; other bodies are untouched.
func TestResponseGuardStreamLineEndings(t *testing.T) {
	want := "event: a\ndata: {\"x\":1}\n\ndata: [DONE]\n\n"
	for name, body := range map[string]string{
		"CR":    strings.ReplaceAll(want, "\n", "\r"),
		"CRLF":  strings.ReplaceAll(want, "\n", "\r\n"),
		"LF":    want,
		"mixed": "event: a\r\ndata: {\"x\":1}\r\r\ndata: [DONE]\n\r",
	} {
		for _, oneByte := range []bool{false, true} {
			var r io.Reader = strings.NewReader(body)
			if oneByte {
				r = iotest.OneByteReader(r)
			}
			req, _ := http.NewRequestWithContext(ExpectStream(context.Background()), http.MethodPost, "http://x/", nil)
			resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
				Body: io.NopCloser(r), ContentLength: -1, Request: req}
			got, err := io.ReadAll(ResponseGuard{}.Check(resp).Body)
			if err != nil || string(got) != want {
				t.Errorf("%s (one byte a read: %v): read %q, %v; want %q", name, oneByte, got, err, want)
			}
		}
	}
	js := "{\"a\":\r\"b\"}"
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(js)), ContentLength: -1}
	if got, _ := io.ReadAll(ResponseGuard{}.Check(resp).Body); string(got) != js {
		t.Errorf("a JSON body was changed: %q", got)
	}
}
