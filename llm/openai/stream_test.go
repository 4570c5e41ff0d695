package openai_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/llm/openai"
)

// streamer is either adapter, seen as a streaming model.
type streamer interface {
	llm.StreamingModel
}

// adapters builds the adapter of api ("chat" or "responses") over client.
func adapter(api string, client sdk.Client) streamer {
	if api == "chat" {
		return openai.NewChat(client, nil)
	}
	return openai.NewResponses(client, &openai.ResponsesOptions{ReasoningSummary: "auto"})
}

// sseServer answers every request with body as an event stream, written
// in pieces of 1 to 23 bytes chosen by seed, each flushed on its own: a
// piece boundary falls inside lines, JSON strings and UTF-8 sequences. cut
// > 0 stops after that many bytes and drops the connection without ending
// the chunked body. It records each request's body.
type sseServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests [][]byte
	// gone is closed when the handler of the first request sees its
	// request's context done (the client closed the connection).
	gone     chan struct{}
	goneOnce sync.Once
}

func newSSEServer(t *testing.T, body []byte, seed uint64, cut int, hold bool) *sseServer {
	t.Helper()
	s := &sseServer{gone: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.requests = append(s.requests, req)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		rng := rand.New(rand.NewPCG(seed, 17))
		out := body
		if cut > 0 {
			out = body[:cut]
		}
		for len(out) > 0 {
			n := min(1+rng.IntN(23), len(out))
			if _, err := w.Write(out[:n]); err != nil {
				break
			}
			if err := rc.Flush(); err != nil {
				break
			}
			out = out[n:]
		}
		if cut > 0 {
			// Drop the connection mid-body: the client reads an
			// unexpected EOF, not the end of the chunked body.
			conn, _, err := rc.Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		if hold {
			select {
			case <-r.Context().Done():
				s.goneOnce.Do(func() { close(s.gone) })
			case <-time.After(10 * time.Second):
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sseServer) client() sdk.Client {
	return sdk.NewClient(option.WithBaseURL(s.URL), option.WithHTTPClient(s.Client()),
		option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
}

func (s *sseServer) request(i int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[i]
}

func readFixture(t *testing.T, api, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", api, file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// streamPairs are the streamed fixtures and the non-streamed replies they
// are equivalent to.
var streamPairs = map[string][][2]string{
	"chat": {
		{"stream_final_answer.sse", "final_answer.json"},
		{"stream_single_call.sse", "single_call.json"},
		{"stream_parallel_calls.sse", "parallel_calls.json"},
		{"stream_truncated.sse", "truncated.json"},
		{"stream_invalid_arguments.sse", "invalid_arguments.json"},
		{"stream_refusal.sse", "refusal.json"},
		{"stream_compatible.sse", "compatible_stream.json"},
		{"stream_empty_arguments.sse", "empty_arguments.json"},
		{"stream_mixed_call_ids.sse", "mixed_call_ids.json"},
		{"stream_no_finish_reason.sse", "no_finish_reason.json"},
		{"stream_xai_reasoning.sse", "xai_reasoning.json"},
	},
	"responses": {
		{"stream_final_answer.sse", "final_answer.json"},
		{"stream_single_call.sse", "single_call.json"},
		{"stream_parallel_calls.sse", "parallel_calls.json"},
		{"stream_reasoning_call.sse", "reasoning_call.json"},
		{"stream_reasoning_calls.sse", "reasoning_calls.json"},
		{"stream_reasoning_answer.sse", "reasoning_answer.json"},
		{"stream_truncated.sse", "truncated.json"},
		{"stream_reasoning_cut.sse", "reasoning_cut.json"},
		{"stream_invalid_arguments.sse", "invalid_arguments.json"},
		{"stream_missing_call_id.sse", "missing_call_id.json"},
		{"stream_mixed_call_ids.sse", "mixed_call_ids.json"},
		{"stream_refusal.sse", "refusal.json"},
		{"stream_failed.sse", "failed.json"},
		{"stream_two_messages.sse", "two_messages.json"},
	},
}

// sameError fails unless a and b are both nil, or both *llm.Error alike
// in everything but the wrapped cause's identity.
func sameError(t *testing.T, got, want error) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("stream error %v, generate error %v", got, want)
	}
	if got == nil {
		return
	}
	var g, w *llm.Error
	if !errors.As(got, &g) || !errors.As(want, &w) {
		t.Fatalf("stream error %T %v, generate error %T %v: want both *llm.Error", got, got, want, want)
	}
	if g.Kind != w.Kind || g.Retryable != w.Retryable || g.StatusCode != w.StatusCode || g.RetryAfter != w.RetryAfter || got.Error() != want.Error() {
		t.Fatalf("stream error  %+v (%v)\ngenerate error %+v (%v)", g, got, w, want)
	}
}

// nextTurn is the history of the request after resp: the request's
// messages, resp's message, and a result for each of its calls.
func nextTurn(req *llm.Request, resp *llm.Response) *llm.Request {
	next := *req
	next.Messages = append(append([]llm.Message(nil), req.Messages...), resp.Message)
	for _, c := range resp.Message.ToolCalls {
		next.Messages = append(next.Messages, llm.ToolMessage(llm.ToolResult{CallID: c.ID, Name: c.Name, Status: llm.StatusOK, Content: json.RawMessage(`{"ok":true}`)}))
	}
	next.Step++
	return &next
}

// For every fixture, in both APIs, written in random pieces with flushes
// under several seeds: the Response llm.Collect assembles from Stream is
// the one Generate returns for the equivalent non-streamed reply (or the
// same error), the next turn's request body is the same byte for byte,
// and the streamed request is Generate's plus "stream" (and, for Chat,
// stream_options.include_usage).
func TestStreamMatchesGenerate(t *testing.T) {
	for api, pairs := range streamPairs {
		for _, pair := range pairs {
			t.Run(api+"/"+pair[0], func(t *testing.T) {
				req := &llm.Request{Model: "gpt-test", Messages: history(), Tools: weatherTools(), Step: 2}
				js := newServer(t, api, ok(pair[1]))
				want, wantErr := adapter(api, js.client()).Generate(context.Background(), req)
				body := readFixture(t, api, pair[0])
				for seed := range uint64(4) {
					ss := newSSEServer(t, body, seed, 0, false)
					got, err := llm.Collect(adapter(api, ss.client()).Stream(context.Background(), req))
					sameError(t, err, wantErr)
					if wantErr != nil {
						continue
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("seed %d: streamed\n%+v\nwant (Generate)\n%+v", seed, dump(got), dump(want))
					}
					if seed == 0 {
						assertStreamRequest(t, api, ss.request(0), js.request(0))
					}
					// The next turn sends the same request whether this
					// one was streamed or not.
					js2 := newServer(t, api, ok("final_answer.json"))
					m := adapter(api, js2.client())
					if _, err := m.Generate(context.Background(), nextTurn(req, got)); err != nil {
						t.Fatal(err)
					}
					if _, err := m.Generate(context.Background(), nextTurn(req, want)); err != nil {
						t.Fatal(err)
					}
					if a, b := js2.request(0), js2.request(1); !bytes.Equal(a, b) {
						t.Fatalf("next request after the streamed turn\n%s\nafter the generated one\n%s", a, b)
					}
				}
			})
		}
	}
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// assertStreamRequest fails unless the streamed request body is the
// generated one's plus the streaming fields.
func assertStreamRequest(t *testing.T, api string, streamed, generated []byte) {
	t.Helper()
	var s, g map[string]any
	if err := json.Unmarshal(streamed, &s); err != nil {
		t.Fatalf("streamed request: %v\n%s", err, streamed)
	}
	if err := json.Unmarshal(generated, &g); err != nil {
		t.Fatal(err)
	}
	g["stream"] = true
	if api == "chat" {
		g["stream_options"] = map[string]any{"include_usage": true}
	}
	if !reflect.DeepEqual(s, g) {
		t.Fatalf("streamed request\n%s\nwant Generate's with stream set\n%s", streamed, generated)
	}
}

// collectDeltas drains a stream into its deltas and its error.
func collectDeltas(stream iter.Seq2[llm.Delta, error]) ([]llm.Delta, error) {
	var ds []llm.Delta
	for d, err := range stream {
		if err != nil {
			return ds, err
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// The deltas come as the chunks do, not all at the end: text in pieces,
// two calls' arguments interleaved by index, each call ended at the
// finish reason, the usage from the last chunk (whose choices are empty)
// before the finish, and the finish last.
func TestChatStreamDeltas(t *testing.T) {
	req := &llm.Request{Model: "gpt-test", Messages: history(), Tools: weatherTools()}
	ss := newSSEServer(t, readFixture(t, "chat", "stream_parallel_calls.sse"), 1, 0, false)
	ds, err := collectDeltas(openai.NewChat(ss.client(), nil).Stream(context.Background(), req))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range ds {
		k := d.Kind.String()
		if d.Kind >= llm.DeltaToolCallStart && d.Kind <= llm.DeltaToolCallEnd {
			k += fmt.Sprint(d.Index)
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != k {
			kinds = append(kinds, k)
		}
	}
	want := "tool_call_start0 tool_call_start1 tool_call_arguments0 tool_call_arguments1 tool_call_arguments0 tool_call_arguments1"
	if got := strings.Join(kinds, " "); !strings.HasPrefix(got, want) ||
		!strings.HasSuffix(got, "tool_call_end0 tool_call_end1 usage finish") {
		t.Fatalf("delta kinds: %s", got)
	}
	fin := ds[len(ds)-1].Finish
	if fin.FinishReason != "tool_calls" || fin.ID != "chatcmpl-BxkQ7Jd9sWm4nT2aXo5pLc8rVe3Zc" || fin.Provider != "openai-chat" {
		t.Errorf("finish = %+v", fin)
	}
	if u := ds[len(ds)-2].Usage; u == nil || u.InputTokens != 82 || u.OutputTokens != 48 {
		t.Errorf("usage = %+v", u)
	}

	ss = newSSEServer(t, readFixture(t, "chat", "stream_final_answer.sse"), 2, 0, false)
	ds, err = collectDeltas(openai.NewChat(ss.client(), nil).Stream(context.Background(), req))
	if err != nil {
		t.Fatal(err)
	}
	if n := countKind(ds, llm.DeltaText); n < 4 {
		t.Errorf("%d text deltas; want the text in the pieces it came in", n)
	}
}

func countKind(ds []llm.Delta, k llm.DeltaKind) int {
	n := 0
	for _, d := range ds {
		if d.Kind == k {
			n++
		}
	}
	return n
}

// The Responses deltas follow the events: the reasoning part opens when
// its item is added and its summary streams, the commentary text comes
// before the calls, each call ends with its item.
func TestResponsesStreamDeltas(t *testing.T) {
	req := &llm.Request{Model: "gpt-test", Messages: history(), Tools: weatherTools()}
	ss := newSSEServer(t, readFixture(t, "responses", "stream_reasoning_calls.sse"), 3, 0, false)
	ds, err := collectDeltas(adapter("responses", ss.client()).Stream(context.Background(), req))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range ds {
		k := d.Kind.String()
		if d.Kind != llm.DeltaText && d.Kind != llm.DeltaUsage && d.Kind != llm.DeltaFinish {
			k += fmt.Sprint(d.Index)
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != k {
			kinds = append(kinds, k)
		}
	}
	want := "reasoning0 text tool_call_start0 tool_call_arguments0 tool_call_end0 reasoning1 tool_call_start1 tool_call_arguments1 tool_call_end1 usage finish"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("delta kinds:\n%s\nwant\n%s", got, want)
	}
	if n := countKind(ds, llm.DeltaReasoning); n < 10 {
		t.Errorf("%d reasoning deltas; want the summary in pieces", n)
	}
	if fin := ds[len(ds)-1].Finish; fin.State == nil || fin.State.Provider != openai.ProviderResponses {
		t.Errorf("finish state = %+v; want the reasoning items kept", fin.State)
	}
}

// chunk is one Chat Completions stream chunk with the given delta JSON.
func chunk(delta string, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `data: {"id":"chatcmpl-X","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":` +
		delta + `,"logprobs":null,"finish_reason":` + f + `}],"usage":null}` + "\n\n"
}

// Chunks that contradict each other reach the accumulator as a
// contradiction: a known index with another ID, a later chunk naming
// another function, arguments after the finish. Collect fails with a
// non-retryable protocol_error; nothing is merged.
func TestChatStreamContradictions(t *testing.T) {
	start := func(i int, id, name string) string {
		return chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}]}`, i, id, name), "")
	}
	args := func(i int, a string) string {
		return chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%q}}]}`, i, a), "")
	}
	done := chunk(`{}`, "tool_calls") + "data: [DONE]\n\n"
	for _, c := range []struct {
		name, body, want string
	}{
		{"an ID changes for a known index", start(0, "call_a", "get_weather") + args(0, `{"city":`) + start(0, "call_b", "get_weather") + done, "call 0 was started twice"},
		{"a later chunk names another function", start(0, "call_a", "get_weather") + args(0, `{}`) +
			chunk(`{"tool_calls":[{"index":0,"function":{"name":"get_time","arguments":""}}]}`, "") + done, "call 0 was started twice"},
		{"arguments after the finish", start(0, "call_a", "get_weather") + args(0, `{}`) + chunk(`{}`, "tool_calls") + args(0, `{}`) + "data: [DONE]\n\n", "after it ended"},
		{"one ID for two indexes", start(0, "call_a", "get_weather") + start(1, "call_a", "get_time") + done, "both have the ID call_a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ss := newSSEServer(t, []byte(c.body), 5, 0, false)
			req := &llm.Request{Model: "gpt-4.1", Messages: history(), Tools: weatherTools()}
			_, err := llm.Collect(openai.NewChat(ss.client(), nil).Stream(context.Background(), req))
			var e *llm.Error
			if !errors.As(err, &e) || e.Kind != llm.KindProtocolError || e.Retryable || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want a non-retryable %s saying %q", err, llm.KindProtocolError, c.want)
			}
		})
	}
}

// Events that contradict the response they end with are a protocol
// error, not a silent fix: text streamed other than the response's, a
// call started under one ID and done under another.
func TestResponsesStreamContradictions(t *testing.T) {
	req := &llm.Request{Model: "gpt-test", Messages: history(), Tools: weatherTools()}
	for _, c := range []struct{ name, file, old, new, want string }{
		{"text", "stream_final_answer.sse", `"delta":"s 12"`, `"delta":"s 13"`, "the text was streamed as"},
		{"call ID", "stream_single_call.sse", `"call_id":"call_1"`, `"call_id":"call_9"`, "call 0 was started as"},
		{"arguments", "stream_single_call.sse", `"delta":"Osl"`, `"delta":"Ber"`, "the arguments of call call_1 were streamed as"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := string(readFixture(t, "responses", c.file))
			if !strings.Contains(body, c.old) {
				t.Fatalf("%s has no %s", c.file, c.old)
			}
			ss := newSSEServer(t, []byte(strings.Replace(body, c.old, c.new, 1)), 23, 0, false)
			_, err := llm.Collect(adapter("responses", ss.client()).Stream(context.Background(), req))
			var e *llm.Error
			if !errors.As(err, &e) || e.Kind != llm.KindProtocolError || e.Retryable || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want a non-retryable %s saying %q", err, llm.KindProtocolError, c.want)
			}
		})
	}
}

// An error the server sends in the middle of the stream ends it with an
// *llm.Error that carries the server's message, after the deltas that
// came before it; Collect keeps those.
func TestStreamErrorEvent(t *testing.T) {
	req := &llm.Request{Model: "gpt-test", Messages: history(), Tools: weatherTools()}
	for _, c := range []struct {
		api, body string
		kind      llm.ErrorKind
		retryable bool
		want      string
	}{
		{"chat", chunk(`{"role":"assistant","content":"It is "}`, "") + chunk(`{"content":"12"}`, "") +
			`data: {"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}` + "\n\n",
			llm.KindUnavailable, true, "The server had an error while processing your request."},
		{"responses", streamPrefix(t, "stream_final_answer.sse", `"It i`) +
			"event: error\ndata: " + `{"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached for gpt-5-mini.","param":null,"sequence_number":9}` + "\n\n",
			llm.KindRateLimited, true, "code rate_limit_exceeded: Rate limit reached for gpt-5-mini."},
		{"responses", streamPrefix(t, "stream_final_answer.sse", `"It i`) +
			"event: error\ndata: " + `{"type":"error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model.","param":"input","sequence_number":9}` + "\n\n",
			llm.KindContextLengthExceeded, false, "Your input exceeds the context window"},
	} {
		t.Run(c.api+"/"+string(c.kind), func(t *testing.T) {
			ss := newSSEServer(t, []byte(c.body), 7, 0, false)
			resp, err := llm.Collect(adapter(c.api, ss.client()).Stream(context.Background(), req))
			var e *llm.Error
			if !errors.As(err, &e) || e.Kind != c.kind || e.Retryable != c.retryable || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want %s (retryable %v) saying %q", err, c.kind, c.retryable, c.want)
			}
			if resp == nil || !strings.HasPrefix(resp.Message.Text, "It i") || resp.FinishReason != "" {
				t.Errorf("partial response = %+v; want the text received before the error", resp)
			}
		})
	}
}

// streamPrefix returns the events of a Responses fixture up to and
// including the first whose data contains marker.
func streamPrefix(t *testing.T, file, marker string) string {
	t.Helper()
	body := string(readFixture(t, "responses", file))
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatalf("%s has no %s", file, marker)
	}
	j := strings.Index(body[i:], "\n\n")
	return body[:i+j+2]
}

// A connection dropped in the middle of the stream (the server goes away
// without ending the body) ends it with an unavailable *llm.Error that
// wraps llm.ErrStreamEnded; what came before is kept. A stream that ends
// cleanly but before the turn finished (no finish reason, no terminal
// event) fails the same way.
func TestStreamDropped(t *testing.T) {
	req := &llm.Request{Model: "gpt-test", Messages: history(), Tools: weatherTools()}
	for _, c := range []struct{ api, file string }{
		{"chat", "stream_parallel_calls.sse"},
		{"responses", "stream_reasoning_calls.sse"},
	} {
		body := readFixture(t, c.api, c.file)
		for _, clean := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/clean=%v", c.api, clean), func(t *testing.T) {
				var ss *sseServer
				if clean {
					ss = newSSEServer(t, body[:len(body)*2/3], 11, 0, false)
				} else {
					ss = newSSEServer(t, body, 11, len(body)*2/3, false)
				}
				resp, err := llm.Collect(adapter(c.api, ss.client()).Stream(context.Background(), req))
				var e *llm.Error
				if !errors.As(err, &e) || e.Kind != llm.KindUnavailable || !errors.Is(err, llm.ErrStreamEnded) {
					t.Fatalf("err = %v; want unavailable wrapping ErrStreamEnded", err)
				}
				if resp == nil || len(resp.Message.ToolCalls) == 0 || resp.FinishReason != "" {
					t.Errorf("partial response = %+v; want the calls received so far", resp)
				}
			})
		}
	}
}

// closeTracker records whether each response body was closed.
type closeTracker struct {
	next   http.RoundTripper
	closed atomic.Int32
}

func (c *closeTracker) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if resp != nil && resp.Body != nil {
		resp.Body = &trackedBody{ReadCloser: resp.Body, closed: &c.closed}
	}
	return resp, err
}

type trackedBody struct {
	io.ReadCloser
	closed *atomic.Int32
}

func (b *trackedBody) Close() error {
	b.closed.Add(1)
	return b.ReadCloser.Close()
}

// A consumer that breaks out after the first delta gets its iterator back
// only once the HTTP body is closed, and the server sees the request go
// away while it still holds the stream open.
func TestStreamBreakClosesConnection(t *testing.T) {
	req := &llm.Request{Model: "gpt-test", Messages: history(), Tools: weatherTools()}
	for _, c := range []struct{ api, file string }{
		{"chat", "stream_final_answer.sse"},
		{"responses", "stream_final_answer.sse"},
	} {
		t.Run(c.api, func(t *testing.T) {
			body := readFixture(t, c.api, c.file)
			// The server writes all but the end, then waits.
			ss := newSSEServer(t, body[:len(body)/2], 13, 0, true)
			tr := &closeTracker{next: ss.Client().Transport}
			client := sdk.NewClient(option.WithBaseURL(ss.URL), option.WithHTTPClient(&http.Client{Transport: tr}),
				option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
			n := 0
			for _, err := range adapter(c.api, client).Stream(context.Background(), req) {
				if err != nil {
					t.Fatal(err)
				}
				n++
				break
			}
			if n != 1 || tr.closed.Load() == 0 {
				t.Fatalf("after the break: %d deltas, body closed %d times; want it closed before the iterator returned", n, tr.closed.Load())
			}
			select {
			case <-ss.gone:
			case <-time.After(5 * time.Second):
				t.Fatal("the server did not see the request end")
			}
		})
	}
}

// Before the first delta a failure is the request's, classified exactly as
// Generate classifies it: the status, Retry-After, the provider's message.
func TestStreamErrorBeforeFirstDelta(t *testing.T) {
	req := &llm.Request{Model: "gpt-test", Messages: history(), Tools: weatherTools()}
	for _, api := range []string{"chat", "responses"} {
		for _, r := range []reply{
			caseReplies[llmtest.CaseRateLimited], caseReplies[llmtest.CaseServerError],
			caseReplies[llmtest.CaseUnauthorized], caseReplies[llmtest.CaseContextLength],
		} {
			t.Run(api+"/"+r.file, func(t *testing.T) {
				s := newServer(t, api, r)
				_, want := adapter(api, s.client()).Generate(context.Background(), req)
				resp, got := llm.Collect(adapter(api, s.client()).Stream(context.Background(), req))
				if resp != nil || want == nil {
					t.Fatalf("stream gave %+v; generate's error %v", resp, want)
				}
				sameError(t, got, want)
			})
		}
	}
	// A server that is not there: unavailable and retryable, as for
	// Generate.
	s := httptest.NewServer(http.NotFoundHandler())
	url := s.URL
	s.Close()
	client := sdk.NewClient(option.WithBaseURL(url), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	_, err := llm.Collect(openai.NewChat(client, nil).Stream(context.Background(), req))
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindUnavailable || !e.Retryable {
		t.Errorf("connection refused: %v; want retryable unavailable", err)
	}
}

// textStream is an event stream of n chat chunks of text, then the
// finish, the usage and [DONE].
func textStream(n int) []byte {
	var b bytes.Buffer
	b.WriteString(chunk(`{"role":"assistant","content":""}`, ""))
	for i := range n {
		b.WriteString(chunk(fmt.Sprintf(`{"content":"word%d "}`, i), ""))
	}
	b.WriteString(chunk(`{}`, "stop"))
	b.WriteString(`data: {"id":"chatcmpl-X","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":1000,"total_tokens":1010}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// A streamed reply longer than MaxStreamBytes fails with a non-retryable
// bad_response naming the cap, after the deltas that fit; the same reply
// under the cap streams whole. The cap on a streamed reply is its own:
// MaxResponseBytes does not apply to it.
func TestStreamTooLarge(t *testing.T) {
	req := &llm.Request{Model: "gpt-4.1", Messages: history()}
	body := textStream(1000)
	ss := newSSEServer(t, body, 19, 0, false)
	_, err := llm.Collect(openai.NewChat(ss.client(), &openai.ChatOptions{MaxStreamBytes: 64 << 10}).Stream(context.Background(), req))
	wantBadResponse(t, err, "larger than the 64 KiB cap on a streamed model response (MaxStreamBytes)")

	resp, err := llm.Collect(openai.NewChat(ss.client(), &openai.ChatOptions{MaxResponseBytes: 1 << 10}).Stream(context.Background(), req))
	if err != nil || resp.Usage.OutputTokens != 1000 || !strings.HasSuffix(resp.Message.Text, "word999 ") {
		t.Fatalf("under the stream cap: %v, %+v", err, resp)
	}

	rs := newSSEServer(t, []byte(strings.Repeat(streamPrefix(t, "stream_final_answer.sse", `"It i`), 40)), 19, 0, false)
	_, err = llm.Collect(openai.NewResponses(rs.client(), &openai.ResponsesOptions{MaxStreamBytes: 16 << 10}).Stream(context.Background(), req))
	wantBadResponse(t, err, "16 KiB cap on a streamed model response")
}

// Benchmarks: a fixed stream of 1,000 text chunks served from memory. The
// SDK case reads the SDK's stream directly (the floor); the adapter case
// ranges over Stream. first-delta-ns is the time from the call to the
// first text, ns/delta the time per chunk after it.
func BenchmarkChatStream(b *testing.B) {
	const chunks = 1000
	body := textStream(chunks)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriterSize(w, 32<<10)
		_, _ = bw.Write(body)
		_ = bw.Flush()
	}))
	defer srv.Close()
	client := sdk.NewClient(option.WithBaseURL(srv.URL), option.WithHTTPClient(srv.Client()),
		option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	req := &llm.Request{Model: "gpt-4.1", Messages: history()}
	report := func(b *testing.B, first, total time.Duration, deltas int) {
		b.ReportMetric(float64(first.Nanoseconds())/float64(b.N), "first-delta-ns")
		b.ReportMetric(float64((total-first).Nanoseconds())/float64(deltas), "ns/delta")
	}
	b.Run("sdk", func(b *testing.B) {
		params := sdk.ChatCompletionNewParams{Model: "gpt-4.1", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hi")}}
		params.StreamOptions.IncludeUsage = sdk.Bool(true)
		var first, total time.Duration
		deltas := 0
		b.ReportAllocs()
		for b.Loop() {
			t0 := time.Now()
			stream := client.Chat.Completions.NewStreaming(context.Background(), params)
			seen := false
			for stream.Next() {
				ch := stream.Current()
				if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
					if !seen {
						first += time.Since(t0)
						seen = true
					}
					deltas++
				}
			}
			if err := stream.Err(); err != nil {
				b.Fatal(err)
			}
			total += time.Since(t0)
		}
		report(b, first, total, deltas)
	})
	b.Run("adapter", func(b *testing.B) {
		m := openai.NewChat(client, nil)
		var first, total time.Duration
		deltas := 0
		b.ReportAllocs()
		for b.Loop() {
			t0 := time.Now()
			seen := false
			for d, err := range m.Stream(context.Background(), req) {
				if err != nil {
					b.Fatal(err)
				}
				if d.Kind == llm.DeltaText {
					if !seen {
						first += time.Since(t0)
						seen = true
					}
					deltas++
				}
			}
			total += time.Since(t0)
		}
		report(b, first, total, deltas)
	})
}
