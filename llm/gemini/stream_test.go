package gemini_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/gemini"
)

// streamServer stands in for Gemini: it answers streamGenerateContent
// with an event stream written in small pieces of random size, each
// flushed, and generateContent with a JSON reply, and records the bodies
// of both kinds of request.
type streamServer struct {
	t   *testing.T
	srv *httptest.Server
	// sse is the event stream; unary the generateContent reply.
	sse, unary []byte
	// status, when not 0, answers the stream request with it and the
	// unary body, as Gemini rejects a request before streaming.
	status int
	// dropAt, when > 0, cuts the connection after that many bytes of sse.
	dropAt int
	// hang keeps the stream open after sse until the client goes, then
	// closes gone.
	hang bool
	gone chan struct{}

	mu               sync.Mutex
	rng              *rand.Rand
	streamed, sent   [][]byte
	midRune, midLine int
}

func newStreamServer(t *testing.T, sse, unary []byte) *streamServer {
	t.Helper()
	s := &streamServer{t: t, sse: sse, unary: unary, gone: make(chan struct{}), rng: rand.New(rand.NewPCG(7, uint64(len(sse))))}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *streamServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("reading request: %v", err)
	}
	streaming := strings.HasSuffix(r.URL.Path, ":streamGenerateContent")
	s.mu.Lock()
	if streaming {
		s.streamed = append(s.streamed, body)
	} else {
		s.sent = append(s.sent, body)
	}
	s.mu.Unlock()
	if !streaming {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = w.Write(s.unary)
		return
	}
	if r.URL.Query().Get("alt") != "sse" {
		s.t.Errorf("stream request %s, want alt=sse", r.URL)
	}
	if s.status != 0 {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(s.status)
		_, _ = w.Write(s.unary)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	data := s.sse
	if s.dropAt > 0 {
		data = data[:s.dropAt]
	}
	if s.hang {
		// Also when a write fails: the client went.
		defer func() {
			<-r.Context().Done()
			close(s.gone)
		}()
	}
	fl := w.(http.Flusher)
	for i := 0; i < len(data); {
		s.mu.Lock()
		n := min(1+s.rng.IntN(9), len(data)-i)
		// Every multi-byte UTF-8 sequence is cut after its first byte.
		if k := bytes.IndexFunc(data[i:i+n], func(r rune) bool { return r >= utf8.RuneSelf }); k >= 0 {
			n = k + 1
		}
		if j := i + n; j < len(data) {
			if !utf8.RuneStart(data[j]) {
				s.midRune++
			}
			if data[j-1] != '\n' {
				s.midLine++
			}
		}
		s.mu.Unlock()
		if _, err := w.Write(data[i : i+n]); err != nil {
			return
		}
		fl.Flush()
		i += n
	}
	if s.dropAt > 0 {
		// The connection ends without the chunked body's end.
		panic(http.ErrAbortHandler)
	}
}

func (s *streamServer) client(t *testing.T, hc *http.Client) *genai.Client {
	t.Helper()
	if hc == nil {
		hc = s.srv.Client()
	}
	return clientFor(t, s.srv.URL, hc)
}

func (s *streamServer) bodies() (streamed, sent [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.streamed...), append([][]byte(nil), s.sent...)
}

// sseOf is the one-event stream of a generateContent reply.
func sseOf(t *testing.T, reply []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, reply); err != nil {
		t.Fatal(err)
	}
	return []byte("data: " + b.String() + "\r\n\r\n")
}

// collect drains a stream, keeping its deltas.
func collect(stream func(func(llm.Delta, error) bool)) ([]llm.Delta, *llm.Response, error) {
	var ds []llm.Delta
	resp, err := llm.Collect(func(yield func(llm.Delta, error) bool) {
		stream(func(d llm.Delta, err error) bool {
			if err == nil {
				ds = append(ds, d)
			}
			return yield(d, err)
		})
	})
	return ds, resp, err
}

// nextRequest is the request after resp: its results, or a user question.
func nextRequest(req *llm.Request, resp *llm.Response) *llm.Request {
	next := *req
	next.Step++
	next.Messages = append(append([]llm.Message(nil), req.Messages...), resp.Message)
	for _, c := range resp.Message.ToolCalls {
		next.Messages = append(next.Messages, llm.ToolMessage(llm.ToolResult{CallID: c.ID, Name: c.Name, Status: llm.StatusOK,
			Content: json.RawMessage(`{"ok":true}`)}))
	}
	if len(resp.Message.ToolCalls) == 0 {
		next.Messages = append(next.Messages, llm.UserMessage("And tomorrow?"))
	}
	return &next
}

// Each streamed reply, written in pieces that split lines and UTF-8
// sequences, assembles into the Response Generate returns for the same
// reply unstreamed: text, thought summaries as reasoning (never text),
// calls numbered across chunks with Generate's IDs and signatures, usage,
// finish reason, truncation and the message's State. The stream request
// carries Generate's body, and the next request is the same byte for byte
// whichever way the turn came.
func TestStreamEqualsGenerate(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    gemini.Options
		check   func(t *testing.T, ds []llm.Delta, resp *llm.Response)
		minText int
	}{
		{name: "text_signed", opts: gemini.Options{Model: "gemini-3-flash-preview"}, minText: 3,
			check: func(t *testing.T, ds []llm.Delta, resp *llm.Response) {
				// The signature of the last, empty piece is on the whole text.
				if resp.Message.State == nil || len(resp.Message.Reasoning) != 1 || !resp.Message.Reasoning[0].Hidden {
					t.Errorf("message %+v, want the text's signature in State and hidden reasoning", resp.Message)
				}
				if n := kinds(ds)[llm.DeltaUsage]; n != 3 {
					t.Errorf("%d usage deltas, want one per change of the running totals (3)", n)
				}
			}},
		{name: "thoughts_calls", opts: gemini.Options{Model: "gemini-3-flash-preview", IncludeThoughts: true}, minText: 2,
			check: func(t *testing.T, ds []llm.Delta, resp *llm.Response) {
				var reasoning []int
				for _, d := range ds {
					if d.Kind == llm.DeltaReasoning {
						reasoning = append(reasoning, d.Index)
					}
				}
				if !reflect.DeepEqual(reasoning, []int{0, 0, 1}) || len(resp.Message.Reasoning) != 2 ||
					resp.Message.Text != "Let me check both." || len(resp.Message.ToolCalls) != 2 ||
					resp.Message.ToolCalls[0].State == nil || resp.Message.ToolCalls[1].State != nil {
					t.Errorf("reasoning deltas %v, message %+v", reasoning, resp.Message)
				}
			}},
		{name: "parallel_calls", opts: gemini.Options{Model: "gemini-2.5-flash"},
			check: func(t *testing.T, ds []llm.Delta, resp *llm.Response) {
				k := kinds(ds)
				calls := resp.Message.ToolCalls
				if k[llm.DeltaToolCallStart] != 3 || k[llm.DeltaToolCallArguments] != 3 || k[llm.DeltaToolCallEnd] != 3 ||
					len(calls) != 3 || calls[0].ID == calls[1].ID || calls[0].State == nil {
					t.Errorf("deltas %v, calls %+v", k, calls)
				}
			}},
		{name: "truncated", opts: gemini.Options{Model: "gemini-2.5-flash"}, minText: 2,
			check: func(t *testing.T, ds []llm.Delta, resp *llm.Response) {
				if !resp.Truncated || resp.FinishReason != "MAX_TOKENS" {
					t.Errorf("response %+v, want it truncated", resp)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStreamServer(t, fixture(t, "stream/"+c.name+".sse"), fixture(t, "stream/"+c.name+".json"))
			m := gemini.New(s.client(t, nil), &c.opts)
			req := callRequest(3)
			req.Model = ""
			ds, got, err := collect(m.Stream(context.Background(), req))
			if err != nil {
				t.Fatal(err)
			}
			want, err := m.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.MarshalIndent(got, "", "  ")
				wj, _ := json.MarshalIndent(want, "", "  ")
				t.Fatalf("streamed\n%s\nwant what Generate returns\n%s", gj, wj)
			}
			if n := kinds(ds)[llm.DeltaText]; n < c.minText {
				t.Errorf("%d text deltas, want the text as it came (at least %d)", n, c.minText)
			}
			if ds[len(ds)-1].Kind != llm.DeltaFinish {
				t.Errorf("the last delta is %s", ds[len(ds)-1].Kind)
			}
			c.check(t, ds, got)
			s.mu.Lock()
			midRune, midLine := s.midRune, s.midLine
			s.mu.Unlock()
			if midRune == 0 || midLine == 0 {
				t.Errorf("the server split %d UTF-8 sequences and %d lines; the test wants both split", midRune, midLine)
			}

			streamed, sent := s.bodies()
			if !bytes.Equal(streamed[0], sent[0]) {
				t.Errorf("stream request\n%s\ndiffers from Generate's\n%s", streamed[0], sent[0])
			}
			for _, resp := range []*llm.Response{got, want} {
				if _, err := m.Generate(context.Background(), nextRequest(req, resp)); err != nil {
					t.Fatal(err)
				}
			}
			_, sent = s.bodies()
			if !bytes.Equal(sent[1], sent[2]) {
				t.Errorf("the next request after the streamed turn\n%s\ndiffers from the one after Generate's\n%s", sent[1], sent[2])
			}
		})
	}
}

func kinds(ds []llm.Delta) map[llm.DeltaKind]int {
	k := map[llm.DeltaKind]int{}
	for _, d := range ds {
		k[d.Kind]++
	}
	return k
}

// A failure before the first delta (the request rejected with a status, or
// the first event an error, a refusal or a malformed call) is the error
// Generate returns for the same reply, and no response.
func TestStreamErrorsBeforeFirstDeltaAsGenerate(t *testing.T) {
	for _, c := range []struct {
		file   string
		status int // 0: the reply is the stream's first event
	}{
		{"rate_limited.json", http.StatusTooManyRequests},
		{"overloaded.json", http.StatusServiceUnavailable},
		{"api_key_invalid.json", http.StatusBadRequest},
		{"model_not_found.json", http.StatusNotFound},
		{"context_length.json", http.StatusBadRequest},
		{"safety.json", 0},
		// Stopped in its first chunk: the chunk's text is not shown.
		{"stream/safety_with_text.json", 0},
		{"prompt_blocked.json", 0},
		{"malformed_call.json", 0},
	} {
		t.Run(c.file, func(t *testing.T) {
			body := fixture(t, c.file)
			s := newStreamServer(t, sseOf(t, body), body)
			s.status = c.status
			m := gemini.New(s.client(t, nil), nil)
			ds, resp, err := collect(m.Stream(context.Background(), callRequest(1)))
			if len(ds) != 0 || resp != nil || err == nil {
				t.Fatalf("deltas %v, response %+v, err %v; want the error alone", ds, resp, err)
			}
			// Generate sees the same reply with the same status.
			g := newServer(t, reply{max(c.status, http.StatusOK), c.file})
			_, want := g.model(t, nil).Generate(context.Background(), callRequest(1))
			var ge, se *llm.Error
			if !errors.As(err, &se) || !errors.As(want, &ge) {
				t.Fatalf("stream err %v, Generate err %v: want *llm.Error values", err, want)
			}
			if se.Kind != ge.Kind || se.Retryable != ge.Retryable || se.RetryAfter != ge.RetryAfter ||
				se.StatusCode != ge.StatusCode || err.Error() != want.Error() {
				t.Fatalf("stream err %#v (%v)\nwant Generate's %#v (%v)", se, err, ge, want)
			}
		})
	}
}

// Failures after the first delta come after what was received, as
// *llm.Error values: an error event in the stream is classified like
// Generate's error replies, a filtered finish is a refusal, a connection
// cut in the middle of an event (or before any) and a stream that ends
// without a finish reason are unavailable errors wrapping
// llm.ErrStreamEnded.
func TestStreamFailsMidway(t *testing.T) {
	calls := fixture(t, "stream/thoughts_calls.sse")
	fourth := 0
	for range 3 {
		fourth += bytes.Index(calls[fourth:], []byte("\r\n\r\n")) + 4
	}
	for _, c := range []struct {
		name      string
		sse       []byte
		dropAt    int
		kind      llm.ErrorKind
		retryable bool
		ended     bool   // wraps llm.ErrStreamEnded
		text      string // received before the failure
		reasoning int
		started   bool
	}{
		{name: "error event", sse: fixture(t, "stream/error_midstream.sse"), kind: llm.KindUnavailable, retryable: true,
			text: "It is 12 °C in Oslo", started: true},
		{name: "safety finish", sse: fixture(t, "stream/safety_midstream.sse"), kind: llm.KindRefusal,
			text: "Here is how ", started: true},
		{name: "no finish", sse: fixture(t, "stream/no_finish.sse"), kind: llm.KindUnavailable, retryable: true, ended: true,
			text: "It is 12 °C in Oslo", started: true},
		{name: "dropped mid-event", sse: calls, dropAt: fourth + 40, kind: llm.KindUnavailable, retryable: true, ended: true,
			reasoning: 2, started: true},
		{name: "dropped before any event", sse: calls, dropAt: 20, kind: llm.KindUnavailable, retryable: true, ended: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStreamServer(t, c.sse, nil)
			s.dropAt = c.dropAt
			m := gemini.New(s.client(t, nil), &gemini.Options{Model: "gemini-3-flash-preview", IncludeThoughts: true})
			req := callRequest(1)
			req.Model = ""
			_, resp, err := collect(m.Stream(context.Background(), req))
			assertKind(t, err, c.kind, c.retryable)
			if errors.Is(err, llm.ErrStreamEnded) != c.ended {
				t.Errorf("err %v: wraps ErrStreamEnded = %v, want %v", err, !c.ended, c.ended)
			}
			if !c.started {
				if resp != nil {
					t.Fatalf("a response %+v from a stream that failed before its first delta", resp)
				}
				return
			}
			if resp == nil || resp.Message.Text != c.text || len(resp.Message.Reasoning) != c.reasoning || resp.FinishReason != "" {
				t.Fatalf("received %+v, want text %q and %d reasoning part(s), unfinished", resp, c.text, c.reasoning)
			}
		})
	}
}

// bodyCloses is a transport that counts the reply bodies closed.
type bodyCloses struct {
	next   http.RoundTripper
	mu     sync.Mutex
	closed int
}

func (b *bodyCloses) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err == nil {
		resp.Body = &closeCounter{ReadCloser: resp.Body, b: b}
	}
	return resp, err
}

func (b *bodyCloses) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

type closeCounter struct {
	io.ReadCloser
	b *bodyCloses
}

func (c *closeCounter) Close() error {
	c.b.mu.Lock()
	c.b.closed++
	c.b.mu.Unlock()
	return c.ReadCloser.Close()
}

// A consumer that breaks out after the first delta gets control back only
// once the reply's body is closed, and the server sees the connection go
// while the stream would still be open.
func TestStreamConsumerBreakClosesConnection(t *testing.T) {
	s := newStreamServer(t, fixture(t, "stream/no_finish.sse"), nil)
	s.hang = true
	hc := s.srv.Client()
	closes := &bodyCloses{next: hc.Transport}
	hc.Transport = closes
	m := gemini.New(s.client(t, hc), &gemini.Options{Model: "gemini-2.5-flash"})
	n := 0
	for d, err := range m.Stream(context.Background(), callRequest(1)) {
		if err != nil || d.Kind != llm.DeltaText {
			t.Fatalf("delta %+v, err %v", d, err)
		}
		n++
		break
	}
	if got := closes.count(); n != 1 || got != 1 {
		t.Fatalf("after %d delta(s) and a break, %d body closed; want the body closed before the iterator returned", n, got)
	}
	select {
	case <-s.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server still has the connection 5s after the consumer stopped")
	}
}

// A canceled context ends the stream with the context's error, not a
// model error, even in the middle of the turn.
func TestStreamCanceledMidway(t *testing.T) {
	s := newStreamServer(t, fixture(t, "stream/no_finish.sse"), nil)
	s.hang = true
	m := gemini.New(s.client(t, nil), &gemini.Options{Model: "gemini-2.5-flash"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last error
	deltas := 0
	for _, err := range m.Stream(ctx, callRequest(1)) {
		if err != nil {
			last = err
			break
		}
		deltas++
		cancel()
	}
	var me *llm.Error
	if deltas == 0 || !errors.Is(last, context.Canceled) || errors.As(last, &me) {
		t.Fatalf("after %d delta(s): err %v, want the context's cancellation", deltas, last)
	}
}

// A streamed reply larger than Options.MaxStreamBytes fails with
// bad_response naming that cap; MaxResponseBytes does not apply to
// streams, nor MaxStreamBytes to Generate.
func TestStreamTooLarge(t *testing.T) {
	piece := fixture(t, "stream/no_finish.sse")
	big := bytes.Repeat(piece[:bytes.Index(piece, []byte("\r\n\r\n"))+4], 40)
	s := newStreamServer(t, big, fixture(t, "final_answer.json"))
	m := gemini.New(s.client(t, nil), &gemini.Options{Model: "gemini-2.5-flash", MaxStreamBytes: 1 << 10})
	_, resp, err := collect(m.Stream(context.Background(), callRequest(1)))
	wantBadResponse(t, err, "the 1 KiB cap on a streamed model response (MaxStreamBytes)")
	if resp == nil || !strings.HasPrefix(resp.Message.Text, "It is 12 °C It is 12 °C") {
		t.Errorf("received %+v, want the text before the cap", resp)
	}
	if _, err := m.Generate(context.Background(), callRequest(1)); err != nil {
		t.Errorf("Generate under MaxStreamBytes: %v", err)
	}

	s = newStreamServer(t, fixture(t, "stream/text_signed.sse"), nil)
	m = gemini.New(s.client(t, nil), &gemini.Options{Model: "gemini-3-flash-preview", MaxResponseBytes: 256})
	if _, _, err := collect(m.Stream(context.Background(), callRequest(1))); err != nil {
		t.Errorf("a stream longer than MaxResponseBytes: %v", err)
	}
}

// A request that cannot be built fails before anything is sent.
func TestStreamBadRequestSendsNothing(t *testing.T) {
	s := newStreamServer(t, nil, nil)
	_, resp, err := collect(gemini.New(s.client(t, nil), nil).Stream(context.Background(),
		&llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}}))
	assertKind(t, err, llm.KindBadRequest, false)
	if streamed, _ := s.bodies(); resp != nil || len(streamed) != 0 {
		t.Fatalf("response %+v, %d request(s) sent", resp, len(streamed))
	}
}
