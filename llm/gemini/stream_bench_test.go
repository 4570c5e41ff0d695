package gemini_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/gemini"
)

// benchChunks is the number of text chunks of the benchmark's stream.
const benchChunks = 1000

// benchStream is a streamed answer of benchChunks text chunks, the last
// with the finish reason and usage, as Gemini sends them.
func benchStream() []byte {
	var b bytes.Buffer
	for i := range benchChunks - 1 {
		fmt.Fprintf(&b, `data: {"candidates": [{"content": {"parts": [{"text": "word%d "}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash","responseId": "bench"}`+"\r\n\r\n", i)
	}
	b.WriteString(`data: {"candidates": [{"content": {"parts": [{"text": "end."}],"role": "model"},"finishReason": "STOP","index": 0}],` +
		`"usageMetadata": {"promptTokenCount": 10,"candidatesTokenCount": 1000,"totalTokenCount": 1010},"modelVersion": "gemini-2.5-flash","responseId": "bench"}` + "\r\n\r\n")
	return b.Bytes()
}

func benchServer(b *testing.B) (*httptest.Server, *genai.Client) {
	body := benchStream()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: "test", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}, HTTPClient: srv.Client(),
	})
	if err != nil {
		b.Fatal(err)
	}
	return srv, c
}

// BenchmarkStream compares Stream with ranging over the SDK's
// GenerateContentStream directly (the floor) on one request: first_delta
// is the time to the first delta (the request, the first chunk, closing
// the connection on the break), turn the whole 1,000-chunk reply, also
// reported per delta.
func BenchmarkStream(b *testing.B) {
	_, client := benchServer(b)
	m := gemini.New(client, &gemini.Options{Model: "gemini-2.5-flash"})
	req := &llm.Request{Messages: []llm.Message{llm.UserMessage("Talk.")}}
	sdk := func(ctx context.Context) iterSDK {
		return client.Models.GenerateContentStream(ctx, "gemini-2.5-flash", genai.Text("Talk."), &genai.GenerateContentConfig{})
	}

	b.Run("first_delta/adapter", func(b *testing.B) {
		for b.Loop() {
			for _, err := range m.Stream(context.Background(), req) {
				if err != nil {
					b.Fatal(err)
				}
				break
			}
		}
	})
	b.Run("first_delta/sdk", func(b *testing.B) {
		for b.Loop() {
			for _, err := range sdk(context.Background()) {
				if err != nil {
					b.Fatal(err)
				}
				break
			}
		}
	})
	b.Run("turn/adapter", func(b *testing.B) {
		n := 0
		for b.Loop() {
			for _, err := range m.Stream(context.Background(), req) {
				if err != nil {
					b.Fatal(err)
				}
				n++
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/delta")
	})
	b.Run("turn/sdk", func(b *testing.B) {
		n := 0
		for b.Loop() {
			for _, err := range sdk(context.Background()) {
				if err != nil {
					b.Fatal(err)
				}
				n++
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/delta")
	})
}

type iterSDK = func(yield func(*genai.GenerateContentResponse, error) bool)
