package gemini_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/gemini"
	"github.com/toolloop/toolloop/llm/llmhttp"
	"github.com/toolloop/toolloop/llm/llmhttp/llmhttptest"
)

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

func clientFor(t *testing.T, url string, hc *http.Client) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: "test", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: url}, HTTPClient: hc,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A 30 MB reply fails at the default 8 MiB cap, naming the cap and the
// provider, and no more than about the cap is read from the server. The
// caller's client and its HTTP client are not changed.
func TestResponseTooLarge(t *testing.T) {
	f := llmhttptest.NewFloodServer(t, 30<<20)
	hc := f.Client()
	transport := hc.Transport
	client := clientFor(t, f.URL, hc)
	_, err := gemini.New(client, nil).Generate(context.Background(), &llm.Request{Model: "gemini-2.5-flash", Messages: wireHistory().Messages})
	wantBadResponse(t, err, "gemini sent a reply larger than the 8 MiB cap", "MaxResponseBytes")
	if n := f.Written(); n > llmhttp.DefaultMaxResponseBytes+2<<20 {
		t.Errorf("the server sent %d bytes; the cap should stop the read at about %d", n, llmhttp.DefaultMaxResponseBytes)
	}
	if hc.Transport != transport || client.ClientConfig().HTTPClient != hc {
		t.Error("New changed the caller's client")
	}

	f = llmhttptest.NewFloodServer(t, 2<<20)
	_, err = gemini.New(clientFor(t, f.URL, f.Client()), &gemini.Options{MaxResponseBytes: 1 << 20}).
		Generate(context.Background(), &llm.Request{Model: "gemini-2.5-flash", Messages: wireHistory().Messages})
	wantBadResponse(t, err, "the 1 MiB cap")
}

// An event stream where JSON was expected is named plainly (the SDK would
// otherwise put the whole body into its error).
func TestNotJSONReply(t *testing.T) {
	stream := strings.Repeat("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"It\"}],\"role\": \"model\"},\"index\": 0}]}\r\n\r\n", 200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, stream)
	}))
	defer srv.Close()
	_, err := gemini.New(clientFor(t, srv.URL, srv.Client()), nil).
		Generate(context.Background(), &llm.Request{Model: "gemini-2.5-flash", Messages: wireHistory().Messages})
	wantBadResponse(t, err, "gemini answered with Content-Type text/event-stream where JSON was expected (is streaming turned on at a proxy?)",
		`it began "data: {\"candidates\"`)
	if len(err.Error()) > 700 {
		t.Errorf("the error quotes %d bytes; it should quote the beginning only", len(err.Error()))
	}
}

// finishReason MAX_TOKENS marks the answer truncated; STOP does not.
func TestTruncatedAnswer(t *testing.T) {
	s := newServer(t, ok("truncated.json"), ok("final_answer.json"))
	m := s.model(t, nil)
	for _, want := range []bool{true, false} {
		resp, err := m.Generate(context.Background(), &llm.Request{Model: "gemini-2.5-flash", Messages: wireHistory().Messages})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Truncated != want {
			t.Errorf("finish reason %q: Truncated = %v, want %v", resp.FinishReason, resp.Truncated, want)
		}
	}
}

// A reply cut off by its connection is a retryable unavailable error, as
// a connection refused is: the server went away in the middle.
func TestConnectionCutIsRetryable(t *testing.T) {
	body := fixture(t, "final_answer.json")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	_, err := gemini.New(clientFor(t, srv.URL, srv.Client()), nil).Generate(context.Background(), callRequest(1))
	assertKind(t, err, llm.KindUnavailable, true)
}
