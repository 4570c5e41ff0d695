package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmhttp"
)

// turnParser turns one API's stream events into deltas. event appends the
// deltas of one event to out; done reports that the turn is complete (its
// finish was appended) and nothing more is to be read. end is called when
// the stream ended cleanly without done: it appends the finish, or fails
// when the turn was cut short; sentinel says the server ended the stream
// with "data: [DONE]". whole is called instead of the others when the
// server answered with one JSON body: it maps the body as Generate would
// and appends the equivalent deltas.
type turnParser[T any] interface {
	event(ev T, out []llm.Delta) (_ []llm.Delta, done bool, err error)
	end(out []llm.Delta, sentinel bool) ([]llm.Delta, error)
	whole(resp *http.Response, body []byte, out []llm.Delta) ([]llm.Delta, error)
}

// openStream starts the SDK's streaming call with ctx and options that
// capture the HTTP response into resp.
type openStream[T any] func(ctx context.Context, resp **http.Response) *ssestream.Stream[T]

// streamTurn is the body of both adapters' Stream: it opens the SDK
// stream, hands every event to p and yields what p makes of it.
//
// A successful reply that is not an event stream is taken for the whole
// reply as JSON (a server that does not stream), read within
// MaxResponseBytes and handed to p.whole.
//
// The request's context is cancelled and the SDK stream (its HTTP body)
// closed before it returns, whether the turn finished, failed or the
// consumer stopped, so that an abandoned turn never holds a connection.
func streamTurn[T any](ctx context.Context, now func() time.Time, open openStream[T], p turnParser[T]) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var httpResp *http.Response
		watch := &sentinelWatch{}
		stream := open(llmhttp.ExpectStream(context.WithValue(ctx, sentinelKey{}, watch)), &httpResp)
		defer stream.Close()

		if err := stream.Err(); err == nil && wholeReply(httpResp) {
			out, err := readWhole(ctx, httpResp, now(), p)
			for _, d := range out {
				if !yield(d, nil) {
					return
				}
			}
			if err != nil {
				yield(llm.Delta{}, err)
			}
			return
		}
		started := false
		var out []llm.Delta
		for stream.Next() {
			var done bool
			var err error
			out, done, err = p.event(stream.Current(), out[:0])
			for _, d := range out {
				started = true
				if !yield(d, nil) {
					return
				}
			}
			if err != nil {
				yield(llm.Delta{}, err)
				return
			}
			if done {
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(llm.Delta{}, streamFailure(ctx, err, httpResp, started, now()))
			return
		}
		out, err := p.end(out[:0], watch.seen)
		for _, d := range out {
			if !yield(d, nil) {
				return
			}
		}
		if err != nil {
			yield(llm.Delta{}, err)
		}
	}
}

// wholeReply reports whether resp is a successful reply to a streamed
// request that is not an event stream: a server that ignored "stream":
// true and sent the whole reply.
func wholeReply(resp *http.Response) bool {
	if resp == nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return err != nil || mt != "text/event-stream"
}

// readWhole reads a whole reply to a streamed request and has p map it.
// The body passed the response guard, which caps it at MaxResponseBytes
// and refuses one that is not JSON (an HTML page). An error object (a
// server that answers 200 with {"error": ...}) is classified as an error
// chunk in a stream is.
func readWhole[T any](ctx context.Context, resp *http.Response, now time.Time, p turnParser[T]) ([]llm.Delta, error) {
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, classify(ctx, err, resp, now)
	}
	var top struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &top) == nil && len(top.Error) > 0 && string(top.Error) != "null" {
		code, typ, msg := errorDetail(string(body))
		return nil, streamError(code, typ, msg)
	}
	return p.whole(resp, body, nil)
}

// notStreamed is the failure of a whole reply to a streamed request that
// is not what the API answers with.
func notStreamed(resp *http.Response, what string, err error) error {
	ct := "no Content-Type"
	if resp != nil && strings.TrimSpace(resp.Header.Get("Content-Type")) != "" {
		ct = "Content-Type " + resp.Header.Get("Content-Type")
	}
	return &llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf(
		"openai: a streamed request was answered with %s, not an event stream, and its body is not %s: %w", ct, what, err)}
}

type sentinelKey struct{}

// sentinelWatch records whether a streamed body held the line
// "data: [DONE]", the end of a Chat Completions stream. The SDK stops at
// it without saying so, and a stream that ends there without a finish
// reason (OpenRouter, Novita) is complete, where one that just stops was
// cut short.
type sentinelWatch struct{ seen bool }

// sentinelBody watches the lines of a streamed body for [DONE].
type sentinelBody struct {
	io.ReadCloser
	w *sentinelWatch
	// line holds the start of the current line, as far as it is needed.
	line []byte
}

// watchSentinel wraps the body of a reply whose request carries a
// sentinelWatch.
func watchSentinel(res *http.Response) {
	if res == nil || res.Body == nil || res.Request == nil {
		return
	}
	if w, ok := res.Request.Context().Value(sentinelKey{}).(*sentinelWatch); ok {
		res.Body = &sentinelBody{ReadCloser: res.Body, w: w}
	}
}

const sentinelLineMax = len("data: [DONE]")

func (b *sentinelBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	for _, c := range p[:n] {
		switch {
		case c == '\n' || c == '\r':
			b.check()
			b.line = b.line[:0]
		case len(b.line) < sentinelLineMax:
			b.line = append(b.line, c)
		}
	}
	if err == io.EOF {
		b.check()
	}
	return n, err
}

// check looks at the line just ended: the SDK ends the stream at an event
// whose data begins with [DONE].
func (b *sentinelBody) check() {
	v, ok := bytes.CutPrefix(b.line, []byte("data:"))
	if !ok {
		return
	}
	v = bytes.TrimPrefix(v, []byte(" "))
	if bytes.HasPrefix(v, []byte("[DONE]")) {
		b.w.seen = true
	}
}

// streamFailure classifies the error that ended a stream. Before the first
// delta it is the request's failure, classified as Generate's are; after
// it, a broken connection is llm.ErrStreamEnded. An error the server sent
// in the stream is classified by its code either way, and one caused by
// ctx is returned as it is.
func streamFailure(ctx context.Context, err error, resp *http.Response, started bool, now time.Time) error {
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		code, typ, msg := errorDetail(string(se.Event.Data))
		if msg == "" {
			msg = strings.TrimSpace(string(se.Event.Data))
		}
		return streamError(code, typ, msg)
	}
	if !started {
		return classify(ctx, err, resp, now)
	}
	var le *llm.Error
	if ctx.Err() != nil || errors.As(err, &le) {
		// The caller's cancellation, or the response guard's verdict.
		return err
	}
	if malformed(err) {
		return &llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf("openai: the stream sent an event whose data is not valid JSON: %w", err)}
	}
	return &llm.Error{Kind: llm.KindUnavailable, Retryable: true, Err: fmt.Errorf("openai: %w: %w", llm.ErrStreamEnded, err)}
}

// malformed reports whether err is the SDK's failure to decode an event's
// data: invalid JSON, or JSON of the wrong shape.
func malformed(err error) bool {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &te)
}

// streamEnded is the failure of a stream that closed before the turn
// finished, without a transport error.
func streamEnded() error {
	return &llm.Error{Kind: llm.KindUnavailable, Retryable: true, Err: fmt.Errorf("openai: %w", llm.ErrStreamEnded)}
}

// streamError classifies an error the server reported inside a stream (a
// Responses "error" event, or an {"error": {...}} chunk of Chat
// Completions), by its code or type as HTTP errors are. There is no
// status; what a code does not name is taken for a failure on the
// server's side, which a new attempt may not meet.
func streamError(code, typ, msg string) *llm.Error {
	e := &llm.Error{Kind: llm.KindUnavailable, Retryable: true}
	overflow := &llm.Error{Kind: llm.KindBadRequest}
	contextLength(overflow, code+" "+typ+" "+msg)
	switch {
	case code == "rate_limit_exceeded" || typ == "rate_limit_exceeded" || typ == "tokens" || typ == "requests":
		e.Kind = llm.KindRateLimited
	case overflow.Kind == llm.KindContextLengthExceeded:
		e.Kind, e.Retryable = llm.KindContextLengthExceeded, false
	case typ == "invalid_request_error" || strings.HasPrefix(code, "invalid_"):
		e.Kind, e.Retryable = llm.KindBadRequest, false
	}
	if msg == "" {
		msg = "the server reported an error"
	}
	if code != "" && strings.Trim(code, "0123456789") != "" {
		msg = "code " + code + ": " + msg
	}
	e.Err = fmt.Errorf("openai: the stream failed: %s", msg)
	return e
}

// protocolError is a stream whose events contradict each other or the
// complete response they end with.
func protocolError(format string, args ...any) error {
	return &llm.Error{Kind: llm.KindProtocolError, Err: fmt.Errorf("openai: inconsistent stream: "+format, args...)}
}

// argStream passes a call's argument fragments on as they come, except
// for leading white space, which it holds back until something else
// follows: arguments that are only white space are "{}", as Generate reads
// them, and a delta once sent cannot be taken back.
type argStream struct {
	pending string
	begun   bool
	sent    strings.Builder
}

// add takes a fragment and returns what to send now ("" for nothing).
func (a *argStream) add(s string) string {
	if !a.begun {
		a.pending += s
		if strings.TrimSpace(a.pending) == "" {
			return ""
		}
		s, a.pending, a.begun = a.pending, "", true
	}
	a.sent.WriteString(s)
	return s
}

// rest returns what to send for the arguments to end as final, or false
// when what was sent is not the beginning of final.
func (a *argStream) rest(final string) (string, bool) {
	sent := a.sent.String()
	if !strings.HasPrefix(final, sent) {
		return "", false
	}
	r := final[len(sent):]
	a.sent.WriteString(r)
	a.begun = a.begun || r != ""
	a.pending = ""
	return r, true
}

// finish returns what to send for the arguments to be complete when the
// stream itself has the last word: "{}" for arguments that never began.
func (a *argStream) finish() string {
	if a.begun {
		return ""
	}
	a.pending, a.begun = "", true
	a.sent.WriteString("{}")
	return "{}"
}
