package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
)

// sseServer stands in for api.anthropic.com answering a streamed request:
// it sends body as an event stream in small writes of random size (1 to 12
// bytes, from a fixed seed), flushing each, and splits every multi-byte
// character after its first byte, so that the client meets every awkward
// boundary: mid-line, mid-field, inside a UTF-8 sequence. With cut
// > 0 it stops after that many bytes and drops the connection.
type sseServer struct {
	URL  string
	body []byte

	mu     sync.Mutex
	bodies [][]byte
	splits []int // offsets in body at which a write ended
}

func newSSEServer(t *testing.T, body []byte, seed uint64, cut int) *sseServer {
	t.Helper()
	s := &sseServer{body: body}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rng := rand.New(rand.NewPCG(seed, 18))
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Request-Id", "req_stream")
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		end := len(body)
		if cut > 0 {
			end = cut
		}
		for off := 0; off < end; {
			n := min(1+rng.IntN(12), end-off)
			// End a write right after the first byte of a multi-byte
			// character, so that every such character arrives in pieces.
			if j := bytes.IndexFunc(body[off:off+n], func(r rune) bool { return r > 0x7f }); j >= 0 {
				n = j + 1
			}
			if _, err := w.Write(body[off : off+n]); err != nil {
				return
			}
			f.Flush()
			off += n
			s.mu.Lock()
			s.splits = append(s.splits, off)
			s.mu.Unlock()
		}
		if cut > 0 {
			panic(http.ErrAbortHandler) // drop the connection mid-stream
		}
	}))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

func (s *sseServer) client(opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithBaseURL(s.URL),
		option.WithAPIKey("test"), option.WithMaxRetries(0)}, opts...)...)
}

func (s *sseServer) requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies)
}

// awkward reports whether some write ended inside a UTF-8 sequence and
// some inside a line.
func (s *sseServer) awkward() (midRune, midLine bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.splits {
		if p <= 0 || p >= len(s.body) {
			continue
		}
		midRune = midRune || s.body[p]&0xC0 == 0x80
		midLine = midLine || s.body[p-1] != '\n'
	}
	return midRune, midLine
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// streamRequest is the request of the stream tests: a finished tool round
// whose history carries another provider's state, which both Generate and
// Stream must count as dropped.
func streamRequest() *llm.Request {
	h := weatherHistory()
	h[2].State = &llm.ProviderState{Provider: "openai", Data: []byte(`{"item":"rs_1"}`)}
	return &llm.Request{Model: "claude-sonnet-4-6", Messages: h, Tools: weatherTools()}
}

// collectDeltas drains a stream, keeping every delta and the error.
func collectDeltas(seq func(func(llm.Delta, error) bool)) ([]llm.Delta, error) {
	var ds []llm.Delta
	for d, err := range seq {
		if err != nil {
			return ds, err
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// nextBody is the body of the request that follows resp's turn: its
// message and a result for each of its calls, sent by Generate to a
// recording server.
func nextBody(t *testing.T, req *llm.Request, resp *llm.Response) []byte {
	t.Helper()
	h := append(slices.Clone(req.Messages), resp.Message)
	for _, c := range resp.Message.ToolCalls {
		h = append(h, llm.ToolMessage(llm.ToolResult{CallID: c.ID, Name: c.Name, Status: llm.StatusOK, Content: json.RawMessage(`{"ok":true}`)}))
	}
	if len(resp.Message.ToolCalls) == 0 {
		h = append(h, llm.UserMessage("And Bergen?"))
	}
	s := newServer(t, ok("final_answer.json"))
	if _, err := New(s.client(), nil).Generate(context.Background(), &llm.Request{Model: req.Model, Messages: h, Tools: req.Tools}); err != nil {
		t.Fatal(err)
	}
	return s.last()
}

// Each streamed reply, sent in small writes split at awkward bytes,
// assembles into the Response Generate returns for the same reply as JSON
// (text, reasoning, calls with their arguments byte for byte, usage, IDs,
// the finish reason, Truncated, DroppedState and the thinking State), and
// the turn after it sends the same request either way. The streamed
// request is Generate's with "stream": true.
func TestStreamEqualsGenerate(t *testing.T) {
	for i, c := range []struct{ sse, json string }{
		{"stream_final_answer.sse", "final_answer.json"},
		{"stream_truncated.sse", "truncated.json"},
		{"stream_parallel_calls.sse", "parallel_calls.json"},
		{"stream_thinking_calls.sse", "thinking_calls.json"},
		{"stream_empty_input.sse", "empty_input.json"},
		{"stream_blank_input.sse", "empty_input.json"},
	} {
		t.Run(c.sse, func(t *testing.T) {
			req := streamRequest()
			ss := newSSEServer(t, readFixture(t, c.sse), uint64(i), 0)
			streamed, err := llm.Collect(New(ss.client(), nil).Stream(context.Background(), req))
			if err != nil {
				t.Fatal(err)
			}
			js := newServer(t, ok(c.json))
			generated, err := New(js.client(), nil).Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(streamed, generated) {
				t.Fatalf("streamed\n%s\ngenerated\n%s", dump(streamed), dump(generated))
			}
			if generated.DroppedState != 1 {
				t.Errorf("DroppedState = %d, want the 1 foreign state counted", generated.DroppedState)
			}
			if a, b := nextBody(t, req, streamed), nextBody(t, req, generated); !bytes.Equal(a, b) {
				t.Fatalf("the next request differs:\nafter the stream  %s\nafter Generate    %s", a, b)
			}
			var sent, plain map[string]any
			if err := json.Unmarshal(ss.requests()[0], &sent); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(js.last(), &plain); err != nil {
				t.Fatal(err)
			}
			if sent["stream"] != true {
				t.Errorf("the streamed request has stream = %v, want true", sent["stream"])
			}
			delete(sent, "stream")
			if !reflect.DeepEqual(sent, plain) {
				t.Errorf("the streamed request is not Generate's:\n%s\n%s", ss.requests()[0], js.last())
			}
			if midRune, midLine := ss.awkward(); !midLine || (!midRune && bytes.ContainsFunc(ss.body, func(r rune) bool { return r > 0x7f })) {
				t.Errorf("no write ended mid-line (%v) or inside a multi-byte character (%v); pick another seed", midLine, midRune)
			}
		})
	}
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// The deltas say what arrived as it arrived: the usage from message_start
// first (with the cached prompt), each thinking block as its own
// reasoning part (redacted_thinking hidden, signatures in no delta), the
// text, the call opened, its arguments and its end, the cumulative usage
// of message_delta, and one finish last.
func TestStreamDeltas(t *testing.T) {
	ss := newSSEServer(t, readFixture(t, "stream_thinking_calls.sse"), 7, 0)
	ds, err := collectDeltas(New(ss.client(), nil).Stream(context.Background(), streamRequest()))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range ds {
		k := d.Kind.String()
		switch d.Kind {
		case llm.DeltaReasoning, llm.DeltaToolCallStart, llm.DeltaToolCallArguments, llm.DeltaToolCallEnd:
			k += fmt.Sprint(d.Index)
		}
		if d.Hidden {
			k += "(hidden)"
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != k {
			kinds = append(kinds, k) // runs of one kind count once
		}
		if strings.Contains(d.Text, "EqQBCkgI") || strings.Contains(d.Text, "EmwKAhgB") {
			t.Errorf("a %s delta carries a signature or redacted data: %q", d.Kind, d.Text)
		}
	}
	want := []string{"usage", "reasoning0", "reasoning1(hidden)", "text", "tool_call_start0", "tool_call_arguments0", "tool_call_end0", "usage", "finish"}
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("deltas %v, want %v", kinds, want)
	}
	if u := ds[0].Usage; u.InputTokens != 512 || u.OutputTokens != 1 {
		t.Errorf("first usage %+v, want message_start's", u)
	}
	if u := ds[len(ds)-2].Usage; u.OutputTokens != 240 || u.ReasoningTokens != 196 || u.InputTokens != 512 {
		t.Errorf("last usage %+v, want message_delta's totals", u)
	}
	f := ds[len(ds)-1].Finish
	if f.Provider != provider || f.ID != "msg_01Th1nKq7Zp3Lm8Vw2Rx5Ncd" || f.FinishReason != "tool_use" || f.State == nil {
		t.Fatalf("finish %+v", f)
	}
	st, err := decodeState(f.State.Data)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Blocks) != 4 || st.Blocks[0].Signature == "" || st.Blocks[1].Data == "" {
		t.Errorf("state %+v, want the thinking block with its signature and the redacted data", st)
	}

	// Two calls, each opened, fed and ended in order; the empty fragment
	// that opens the first one is not passed on.
	ss = newSSEServer(t, readFixture(t, "stream_parallel_calls.sse"), 8, 0)
	ds, err = collectDeltas(New(ss.client(), nil).Stream(context.Background(), streamRequest()))
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, d := range ds {
		switch d.Kind {
		case llm.DeltaToolCallStart:
			calls = append(calls, fmt.Sprintf("start %d %s %s", d.Index, d.Call.ID, d.Call.Name))
		case llm.DeltaToolCallArguments:
			calls = append(calls, fmt.Sprintf("args %d %s", d.Index, d.Text))
		case llm.DeltaToolCallEnd:
			calls = append(calls, fmt.Sprintf("end %d", d.Index))
		}
	}
	want = []string{"start 0 call_1 get_weather", `args 0 {"city": `, `args 0 "Os`, `args 0 lo"}`, "end 0",
		"start 1 call_2 get_time", `args 1 {"zone"`, `args 1 : "Europe/`, `args 1 Oslo"}`, "end 1"}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("call deltas\n%q\nwant\n%q", calls, want)
	}
}

// An error event after the first delta ends the stream with an *llm.Error
// that names the server's type and message, classified as that type is
// outside a stream: overloaded_error and api_error are retryable
// unavailable failures, rate_limit_error rate_limited, an invalid request
// not retryable. What came before it is kept, and nothing follows it.
func TestStreamErrorEvent(t *testing.T) {
	body := readFixture(t, "stream_overloaded.sse")
	for _, c := range []struct {
		typ, msg  string
		kind      llm.ErrorKind
		retryable bool
	}{
		{"overloaded_error", "Overloaded", llm.KindUnavailable, true},
		{"api_error", "Internal server error", llm.KindUnavailable, true},
		{"rate_limit_error", "Rate limited", llm.KindRateLimited, true},
		{"invalid_request_error", "messages: too long", llm.KindBadRequest, false},
	} {
		t.Run(c.typ, func(t *testing.T) {
			b := bytes.Replace(body, []byte(`"type":"overloaded_error","message":"Overloaded"`),
				[]byte(`"type":"`+c.typ+`","message":"`+c.msg+`"`), 1)
			ss := newSSEServer(t, b, 3, 0)
			resp, err := llm.Collect(New(ss.client(), nil).Stream(context.Background(), streamRequest()))
			var me *llm.Error
			if !errors.As(err, &me) || me.Kind != c.kind || me.Retryable != c.retryable {
				t.Fatalf("err = %v, want %s retryable %v", err, c.kind, c.retryable)
			}
			for _, w := range []string{c.typ, c.msg, "req_stream"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to name %q", err, w)
				}
			}
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Errorf("the SDK's error is not kept as the cause: %v", err)
			}
			if resp == nil || resp.Message.Text != "Looking up Oslo's weather" || resp.FinishReason != "" {
				t.Errorf("response %+v, want the text received before the error", resp)
			}
			n, after := 0, 0
			for _, err := range New(ss.client(), nil).Stream(context.Background(), streamRequest()) {
				if err != nil {
					n++
				} else if n > 0 {
					after++
				}
			}
			if n != 1 || after != 0 {
				t.Errorf("%d errors and %d deltas after the first; want one error, last", n, after)
			}
		})
	}
}

// A connection dropped mid-stream, or a body that ends cleanly before
// message_stop, is llm.ErrStreamEnded, a retryable unavailable failure,
// with what arrived before it.
func TestStreamDropped(t *testing.T) {
	body := readFixture(t, "stream_final_answer.sse")
	cut := bytes.Index(body, []byte("in Oslo")) + 3 // inside the fourth text delta's line
	for _, c := range []struct {
		name string
		body []byte
		cut  int
	}{
		{"connection dropped", body, cut},
		{"body ended early", body[:cut], 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ss := newSSEServer(t, c.body, 5, c.cut)
			resp, err := llm.Collect(New(ss.client(), nil).Stream(context.Background(), streamRequest()))
			var me *llm.Error
			if !errors.Is(err, llm.ErrStreamEnded) || !errors.As(err, &me) || me.Kind != llm.KindUnavailable || !me.Retryable {
				t.Fatalf("err = %v, want a retryable unavailable llm.ErrStreamEnded", err)
			}
			if resp == nil || resp.Message.Text != "It is 12 °C" {
				t.Errorf("response %+v, want the text before the cut", resp)
			}
		})
	}
}

// A request that fails before the first event fails as Generate's does:
// same kind, retryability, Retry-After and status, and no response.
func TestStreamErrorsBeforeFirstDelta(t *testing.T) {
	for _, r := range []reply{
		{status: 529, header: map[string]string{"Retry-After": "7"}, file: "overloaded.json"},
		{status: 429, header: map[string]string{"Retry-After": "2"}, file: "rate_limited.json"},
		{status: 429, file: "spend_limit.json"},
		{status: 500, file: "server_error.json"},
		{status: 401, file: "unauthorized.json"},
		{status: 404, file: "not_found.json"},
		{status: 400, file: "context_length.json"},
	} {
		t.Run(fmt.Sprint(r.status, r.file), func(t *testing.T) {
			s := newServer(t, r)
			m := New(s.client(), &Options{Model: "m"})
			req := &llm.Request{Messages: []llm.Message{llm.UserMessage("Hi.")}}
			_, gerr := m.Generate(context.Background(), req)
			resp, serr := llm.Collect(m.Stream(context.Background(), req))
			var g, st *llm.Error
			if !errors.As(gerr, &g) || !errors.As(serr, &st) {
				t.Fatalf("errors %v and %v, want *llm.Error values", gerr, serr)
			}
			if resp != nil || st.Kind != g.Kind || st.Retryable != g.Retryable || st.RetryAfter != g.RetryAfter || st.StatusCode != g.StatusCode {
				t.Fatalf("stream: %v (%+v); generate: %v (%+v)", serr, st, gerr, g)
			}
			if n := len(s.requests()); n != 2 {
				t.Errorf("%d requests, want 2: no retries of the SDK's own", n)
			}
		})
	}

	m := New(anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL("http://127.0.0.1:1"),
		option.WithAPIKey("test"), option.WithMaxRetries(0)), &Options{Model: "m"})
	_, err := llm.Collect(m.Stream(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("Hi.")}}))
	var me *llm.Error
	if !errors.As(err, &me) || me.Kind != llm.KindUnavailable || !me.Retryable {
		t.Errorf("connection refused: %v, want a retryable unavailable error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := newSSEServer(t, readFixture(t, "stream_final_answer.sse"), 1, 0)
	_, err = llm.Collect(New(s.client(), &Options{Model: "m"}).Stream(ctx, &llm.Request{Messages: []llm.Message{llm.UserMessage("Hi.")}}))
	if !errors.Is(err, context.Canceled) || llm.IsRetryable(err) {
		t.Errorf("canceled: %v, want context.Canceled, not retryable", err)
	}
	_, err = llm.Collect(New(s.client(), &Options{ThinkingBudget: 10}).Stream(context.Background(), &llm.Request{Model: "m"}))
	if !errors.As(err, &me) || me.Kind != llm.KindBadRequest || len(s.requests()) != 0 {
		t.Errorf("invalid options: %v after %d requests, want a bad request and nothing sent", err, len(s.requests()))
	}
}

// closeRecorder is a transport that records whether each reply's body was
// closed.
type closeRecorder struct {
	closed atomic.Int32
	bodies atomic.Int32
}

func (c *closeRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		c.bodies.Add(1)
		res.Body = &recordedBody{ReadCloser: res.Body, closed: &c.closed}
	}
	return res, err
}

type recordedBody struct {
	io.ReadCloser
	closed *atomic.Int32
	once   sync.Once
}

func (b *recordedBody) Close() error {
	b.once.Do(func() { b.closed.Add(1) })
	return b.ReadCloser.Close()
}

// A consumer that breaks out of its loop has the HTTP stream closed by the
// time the loop ends, and the server sees the connection go, while it
// still had more to send.
func TestStreamConsumerBreak(t *testing.T) {
	head := readFixture(t, "stream_final_answer.sse")
	head = head[:bytes.Index(head, []byte("event: content_block_stop"))]
	gone := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(head)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(gone)
		case <-time.After(10 * time.Second):
		}
	}))
	defer hs.Close()
	rec := &closeRecorder{}
	client := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(hs.URL), option.WithAPIKey("test"),
		option.WithMaxRetries(0), option.WithHTTPClient(&http.Client{Transport: rec}))
	texts := 0
	for d, err := range New(client, nil).Stream(context.Background(), streamRequest()) {
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind == llm.DeltaText {
			texts++
			break
		}
	}
	if texts != 1 || rec.bodies.Load() != 1 || rec.closed.Load() != 1 {
		t.Fatalf("after the break: %d text deltas, %d bodies, %d closed; want the one body closed", texts, rec.bodies.Load(), rec.closed.Load())
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not see the connection close")
	}
}

// A streamed reply larger than Options.MaxStreamBytes fails as a
// non-retryable bad response naming the cap, having read about that much;
// the smaller cap on JSON replies (MaxResponseBytes) does not apply to a
// stream.
func TestStreamTooLarge(t *testing.T) {
	var written atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		start := readFixture(t, "stream_final_answer.sse")
		start = start[:bytes.Index(start, []byte("event: content_block_delta"))]
		n, _ := w.Write(start)
		written.Add(int64(n))
		chunk := []byte(`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"more and more "}}` + "\n\n")
		for written.Load() < 64<<20 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer hs.Close()
	client := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(hs.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	resp, err := llm.Collect(New(client, &Options{MaxStreamBytes: 256 << 10}).Stream(context.Background(), streamRequest()))
	wantBadResponse(t, err, "anthropic sent a reply larger than the 256 KiB cap", "MaxStreamBytes")
	if resp == nil || !strings.HasPrefix(resp.Message.Text, "more and more ") {
		t.Errorf("response %+v, want the text before the cap", resp)
	}
	if n := written.Load(); n > 16<<20 {
		t.Errorf("the server wrote %d bytes; the cap should stop the read at about 256 KiB", n)
	}

	ss := newSSEServer(t, readFixture(t, "stream_final_answer.sse"), 2, 0)
	if _, err := llm.Collect(New(ss.client(), &Options{MaxResponseBytes: 512}).Stream(context.Background(), streamRequest())); err != nil {
		t.Errorf("a %d-byte stream under MaxResponseBytes 512: %v", len(ss.body), err)
	}
}

// Events that contradict each other are a non-retryable protocol error
// naming what was wrong; a refusal's stop reason is the refusal Generate
// reports.
func TestStreamProtocolErrors(t *testing.T) {
	body := string(readFixture(t, "stream_final_answer.sse"))
	firstDelta := strings.Index(body, "event: content_block_delta")
	for _, c := range []struct {
		name, body string
		kind       llm.ErrorKind
		want       string
	}{
		{"delta for a block never started", body[:firstDelta] + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n",
			llm.KindProtocolError, "index 3"},
		{"no message_start", body[strings.Index(body, "event: content_block_start"):], llm.KindProtocolError, "not message_start"},
		{"delta after its block stopped", strings.Replace(body, "event: message_delta", "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\nevent: message_delta", 1),
			llm.KindProtocolError, "after it stopped"},
		{"refusal", strings.Replace(body, `"stop_reason":"end_turn"`, `"stop_reason":"refusal"`, 1), llm.KindRefusal, "refused"},
		{"content in message_start", strings.Replace(body, `"content":[]`, `"content":[{"type":"text","text":"x"}]`, 1),
			llm.KindProtocolError, "message_start carried 1 content block"},
		{"a block started out of order", strings.Replace(body, `"type":"content_block_start","index":0`, `"type":"content_block_start","index":1`, 1),
			llm.KindProtocolError, "index 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ss := newSSEServer(t, []byte(c.body), 4, 0)
			_, err := llm.Collect(New(ss.client(), nil).Stream(context.Background(), streamRequest()))
			var me *llm.Error
			if !errors.As(err, &me) || me.Kind != c.kind || me.Retryable || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want a non-retryable %s saying %q", err, c.kind, c.want)
			}
		})
	}
}

// manyDeltas is an event stream whose text block (or thinking block)
// arrives in n deltas of a few bytes each.
func manyDeltas(n int, thinking bool) []byte {
	var b bytes.Buffer
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_many\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-6\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
	block, delta := `{"type":"text","text":""}`, `{"type":"text_delta","text":"tok `
	if thinking {
		block, delta = `{"type":"thinking","thinking":"","signature":""}`, `{"type":"thinking_delta","thinking":"tok `
	}
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":" + block + "}\n\n")
	for range n {
		b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":" + delta + "\"}}\n\n")
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":" + fmt.Sprint(n) + "}}\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.Bytes()
}

// Assembling a turn costs memory in proportion to the stream, not to the
// square of its deltas: four times the deltas allocate about four times
// the bytes. (Appending each delta to a string, as the SDK's Accumulate
// does, copies the text so far every time; a server within the stream
// cap could then keep a process busy for hours.)
func TestStreamLinearInDeltas(t *testing.T) {
	for _, thinking := range []bool{false, true} {
		alloc := func(n int) uint64 {
			body := manyDeltas(n, thinking)
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write(body)
			}))
			defer hs.Close()
			client := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(hs.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
			m := New(client, nil)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp, err := llm.Collect(m.Stream(context.Background(), streamRequest()))
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(resp.Message.Text) + len(strings.Join(func() []string {
				var s []string
				for _, r := range resp.Message.Reasoning {
					s = append(s, r.Text)
				}
				return s
			}(), "")); got != 4*n {
				t.Fatalf("assembled %d bytes of text, want %d", got, 4*n)
			}
			return after.TotalAlloc - before.TotalAlloc
		}
		small, large := alloc(2000), alloc(8000)
		if ratio := float64(large) / float64(small); ratio > 6 {
			t.Errorf("thinking %v: 2,000 deltas allocated %d bytes, 8,000 deltas %d: %.1f times, want about 4", thinking, small, large, ratio)
		}
	}
}
