package anthropic

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
)

// BenchmarkStream measures what Stream adds to reading the SDK's stream:
// a local server sends a fixed reply of 1,000 text deltas, and each
// iteration reads it whole. "sdk" is the floor, the SDK's own stream read
// event by event with nothing done with the events; "stream" is Stream,
// which also guards the body, accumulates the message, and yields deltas
// and the finish. first-delta-ns is the time from the call to the first
// piece of text, ns/delta the time per op over the 1,000 deltas.
func BenchmarkStream(b *testing.B) {
	const deltas = 1000
	body := manyDeltas(deltas, false)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
	}))
	defer hs.Close()
	client := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(hs.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	m := New(client, nil)
	req := &llm.Request{Model: "claude-sonnet-4-6", Messages: []llm.Message{llm.UserMessage("Tell me about Oslo.")}}
	params, err := m.params(req)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()

	run := func(b *testing.B, read func() (first time.Duration, n int)) {
		b.ReportAllocs()
		var first time.Duration
		start := time.Now()
		for b.Loop() {
			f, n := read()
			if n != deltas {
				b.Fatalf("%d text deltas, want %d", n, deltas)
			}
			first += f
		}
		elapsed := time.Since(start)
		b.ReportMetric(float64(first.Nanoseconds())/float64(b.N), "first-delta-ns")
		b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*deltas), "ns/delta")
	}
	b.Run("sdk", func(b *testing.B) {
		run(b, func() (time.Duration, int) {
			t0 := time.Now()
			var first time.Duration
			n := 0
			stream := client.Messages.NewStreaming(ctx, params)
			for stream.Next() {
				ev := stream.Current()
				if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
					if n == 0 {
						first = time.Since(t0)
					}
					n++
				}
			}
			if err := stream.Err(); err != nil {
				b.Fatal(err)
			}
			stream.Close()
			return first, n
		})
	})
	b.Run("stream", func(b *testing.B) {
		run(b, func() (time.Duration, int) {
			t0 := time.Now()
			var first time.Duration
			n := 0
			for d, err := range m.Stream(ctx, req) {
				if err != nil {
					b.Fatal(err)
				}
				if d.Kind == llm.DeltaText {
					if n == 0 {
						first = time.Since(t0)
					}
					n++
				}
			}
			return first, n
		})
	})
}
