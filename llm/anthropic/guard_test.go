package anthropic

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
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

// A 30 MB reply fails at the default 8 MiB cap, naming the cap and the
// provider, and no more than about the cap is read from the server.
func TestResponseTooLarge(t *testing.T) {
	f := llmhttptest.NewFloodServer(t, 30<<20)
	client := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(f.URL), option.WithHTTPClient(f.Client()),
		option.WithAPIKey("test"), option.WithMaxRetries(0))
	_, err := New(client, nil).Generate(context.Background(), &llm.Request{Model: "claude-sonnet-4-6", Messages: weatherHistory()})
	wantBadResponse(t, err, "anthropic sent a reply larger than the 8 MiB cap", "MaxResponseBytes")
	if n := f.Written(); n > llmhttp.DefaultMaxResponseBytes+2<<20 {
		t.Errorf("the server sent %d bytes; the cap should stop the read at about %d", n, llmhttp.DefaultMaxResponseBytes)
	}

	f = llmhttptest.NewFloodServer(t, 2<<20)
	client = anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(f.URL), option.WithHTTPClient(f.Client()),
		option.WithAPIKey("test"), option.WithMaxRetries(0))
	_, err = New(client, &Options{MaxResponseBytes: 1 << 20}).Generate(context.Background(), &llm.Request{Model: "claude-sonnet-4-6", Messages: weatherHistory()})
	wantBadResponse(t, err, "the 1 MiB cap")
}

// An event stream (streaming turned on at a proxy) where JSON was expected
// is named plainly, with its first bytes.
func TestNotJSONReply(t *testing.T) {
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01S\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}}\n\n" +
		strings.Repeat("event: ping\ndata: {\"type\": \"ping\"}\n\n", 40)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, stream)
	}))
	defer srv.Close()
	client := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	_, err := New(client, nil).Generate(context.Background(), &llm.Request{Model: "claude-sonnet-4-6", Messages: weatherHistory()})
	wantBadResponse(t, err, "anthropic answered with Content-Type text/event-stream where JSON was expected (is streaming turned on at a proxy?)",
		`it began "event: message_start\ndata:`)
	if len(err.Error()) > 700 {
		t.Errorf("the error quotes %d bytes; it should quote the beginning only", len(err.Error()))
	}
}

// stop_reason max_tokens marks the answer truncated; end_turn does not.
func TestTruncatedAnswer(t *testing.T) {
	s := newServer(t, ok("truncated.json"), ok("final_answer.json"))
	m := New(s.client(), nil)
	for _, want := range []bool{true, false} {
		resp, err := m.Generate(context.Background(), &llm.Request{Model: "claude-sonnet-4-6", Messages: weatherHistory()})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Truncated != want {
			t.Errorf("stop reason %q: Truncated = %v, want %v", resp.FinishReason, resp.Truncated, want)
		}
	}
}
