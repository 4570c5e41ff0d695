package llmhttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/toolloop/toolloop/llm"
)

// DefaultMaxResponseBytes is the cap on one reply's body that adapters apply
// when their options set none. A model turn's JSON is a few kilobytes to a
// few hundred; 8 MiB leaves room for long answers and many tool calls, and
// stops a runaway or hostile server (an SDK decodes a body several times
// over: 30 MB of JSON took over 400 MB) long before it costs the process.
const DefaultMaxResponseBytes int64 = 8 << 20

// DefaultMaxStreamBytes is the cap on one streamed reply's body when the
// guard's options set none: eight times DefaultMaxResponseBytes, since an
// event stream repeats its framing (event names, indexes, IDs) with every
// piece of text, which for a chat completion is several times the text.
const DefaultMaxStreamBytes int64 = 8 * DefaultMaxResponseBytes

type streamKey struct{}

// ExpectStream returns a context for a request that asks for a streamed
// reply. A ResponseGuard then accepts a text/event-stream body for it
// (and caps it at MaxStreamBytes), where for any other request an event
// stream is a misconfigured proxy and refused. Adapters wrap the context
// they pass to their SDK's streaming call with it.
func ExpectStream(ctx context.Context) context.Context {
	return context.WithValue(ctx, streamKey{}, true)
}

func streamExpected(req *http.Request) bool {
	if req == nil {
		return false
	}
	v, _ := req.Context().Value(streamKey{}).(bool)
	return v
}

// ResponseGuard checks a provider's HTTP replies before an SDK reads them:
// a body longer than MaxBytes, or a successful reply that is not JSON (an
// event stream, an HTML page), fails the read with an *llm.Error of kind
// llm.KindBadResponse that says what came back. Adapters install it through
// their SDK's middleware or HTTP client; the SDK then returns that error,
// wrapped, from the request.
//
// The zero value caps at DefaultMaxResponseBytes.
type ResponseGuard struct {
	// Provider names the provider in error messages ("openai").
	Provider string
	// MaxBytes caps each reply's body: 0 means DefaultMaxResponseBytes,
	// a negative value no cap.
	MaxBytes int64
	// MaxStreamBytes caps a streamed reply's body (see ExpectStream): 0
	// means DefaultMaxStreamBytes, a negative value no cap.
	MaxStreamBytes int64
}

// limit is the cap in force, or -1 for none.
func (g ResponseGuard) limit(stream bool) int64 {
	n, def := g.MaxBytes, DefaultMaxResponseBytes
	if stream {
		n, def = g.MaxStreamBytes, DefaultMaxStreamBytes
	}
	switch {
	case n == 0:
		return def
	case n < 0:
		return -1
	}
	return n
}

// Check wraps resp's body in the guard's checks and returns resp. A nil
// resp, or one without a body, is returned as it is. The body of an event
// stream a request asked for (ExpectStream) is also read with its line
// endings made \n, so that a stream whose lines end in \r alone, which the
// SSE format allows and the SDKs' decoders do not read, decodes as any
// other.
func (g ResponseGuard) Check(resp *http.Response) *http.Response {
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp
	}
	ct := resp.Header.Get("Content-Type")
	stream := streamExpected(resp.Request) && isEventStream(ct)
	b := &guardedBody{rc: resp.Body, provider: g.Provider, max: g.limit(stream), stream: stream}
	if b.provider == "" {
		b.provider = "the provider"
	}
	if b.max >= 0 && resp.ContentLength > b.max {
		b.err = b.tooLarge(resp.ContentLength, true)
	}
	if !stream && resp.StatusCode >= 200 && resp.StatusCode < 300 && !isJSONType(ct) {
		// Only a successful reply must be JSON: an error page's status
		// classifies it, whatever its body.
		b.contentType = resp.Header.Get("Content-Type")
		b.sniff = true
	}
	resp.Body = b
	return resp
}

// Transport returns a RoundTripper that sends requests through next
// (http.DefaultTransport when nil) and checks every reply. Use it for an
// SDK that takes an *http.Client but no middleware.
func (g ResponseGuard) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return guardTransport{g: g, next: next}
}

// Client returns a copy of c (of a zero http.Client when c is nil) whose
// transport checks every reply; c itself is not changed.
func (g ResponseGuard) Client(c *http.Client) *http.Client {
	var cc http.Client
	if c != nil {
		cc = *c
	}
	cc.Transport = g.Transport(cc.Transport)
	return &cc
}

type guardTransport struct {
	g    ResponseGuard
	next http.RoundTripper
}

func (t guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	return t.g.Check(resp), nil
}

// isJSONType reports whether a Content-Type names JSON, as the SDKs decide
// it: application/json or any +json type.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(ct))
	}
	return strings.Contains(mt, "application/json") || strings.HasSuffix(mt, "+json")
}

func isEventStream(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// sniffBytes is how much of a non-JSON reply is read to tell whether it is
// JSON after all (a server with the wrong Content-Type), and quoteBytes how
// much of it an error message quotes.
const (
	sniffBytes = 512
	quoteBytes = 160
)

// guardedBody enforces a ResponseGuard on one body.
type guardedBody struct {
	rc       io.ReadCloser
	provider string
	max      int64 // -1: no cap
	stream   bool  // an event stream the request asked for
	read     int64
	// sniff is set until the beginning of a body whose Content-Type is
	// not JSON has been looked at; head holds what was read for that and
	// not yet returned.
	sniff       bool
	contentType string
	head        []byte
	err         error
	// cr is set when the last byte of an event stream read was \r.
	cr bool
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.sniff {
		b.sniff = false
		if err := b.sniffJSON(); err != nil {
			b.err = err
			return 0, err
		}
	}
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	if b.max >= 0 {
		// Read at most one byte past the cap: enough to know it was
		// passed, and no more of the body than that.
		if room := b.max - b.read + 1; int64(len(p)) > room {
			p = p[:room]
		}
	}
	for {
		n, err := b.rc.Read(p)
		b.read += int64(n)
		if b.max >= 0 && b.read > b.max {
			b.err = b.tooLarge(b.read, false)
			n -= int(b.read - b.max)
			if b.stream {
				n = b.lineEnds(p[:n])
			}
			return n, b.err
		}
		if !b.stream {
			return n, err
		}
		// A piece that was only the \n of a \r\n is read past: a reader
		// that returns nothing and no error makes its caller spin.
		if n = b.lineEnds(p[:n]); n > 0 || err != nil {
			return n, err
		}
	}
}

// lineEnds rewrites an event stream's line endings in p to \n, in place,
// and returns the length left. The SSE format ends a line with \r\n, \n
// or \r alone; the SDKs' decoders split lines at \n only (and drop a \r
// before it), so a stream with \r alone would read as one long line and
// no events. A \r\n split across two reads is one line ending.
func (b *guardedBody) lineEnds(p []byte) int {
	w := 0
	for _, c := range p {
		switch {
		case c == '\r':
			p[w] = '\n'
			w++
			b.cr = true
			continue
		case c == '\n' && b.cr:
			// The \n of a \r\n, whose \r was written as \n.
		default:
			p[w] = c
			w++
		}
		b.cr = false
	}
	return w
}

// sniffJSON reads the beginning of a body whose Content-Type is not JSON
// and fails unless it looks like JSON anyway.
func (b *guardedBody) sniffJSON() error {
	buf := make([]byte, 0, sniffBytes)
	for len(buf) < sniffBytes {
		n, err := b.rc.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if t := bytes.TrimLeft(buf, " \t\r\n"); len(t) > 0 || err != nil {
			if err != nil && err != io.EOF {
				return err
			}
			break
		}
	}
	b.read += int64(len(buf))
	if b.max >= 0 && b.read > b.max {
		return b.tooLarge(b.read, false)
	}
	if t := bytes.TrimLeft(buf, " \t\r\n"); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		b.head = buf
		return nil
	}
	return &llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf("%s answered with %s where JSON was expected%s; it began %s",
		b.provider, describeType(b.contentType), typeHint(b.contentType), quoteStart(buf))}
}

func (b *guardedBody) Close() error { return b.rc.Close() }

// tooLarge is the error of a body past the cap: n bytes read so far, or
// announced by Content-Length when announced is set.
func (b *guardedBody) tooLarge(n int64, announced bool) error {
	what := fmt.Sprintf("stopped reading it after %d bytes", n)
	if announced {
		what = fmt.Sprintf("its Content-Length is %d bytes", n)
	}
	name := "a model response (MaxResponseBytes)"
	if b.stream {
		name = "a streamed model response (MaxStreamBytes)"
	}
	return &llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf(
		"%s sent a reply larger than the %s cap on %s: %s", b.provider, byteSize(b.max), name, what)}
}

// byteSize writes a size as people read it: "8 MiB", "512 KiB", "1000 bytes".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

func describeType(ct string) string {
	if strings.TrimSpace(ct) == "" {
		return "no Content-Type"
	}
	return "Content-Type " + ct
}

// typeHint guesses, from a reply's Content-Type, what sent it.
func typeHint(ct string) string {
	mt, _, _ := mime.ParseMediaType(ct)
	switch {
	case mt == "text/event-stream":
		return " (is streaming turned on at a proxy?)"
	case mt == "text/html":
		return " (is the base URL a web page, a login portal or a proxy's error page rather than the API?)"
	}
	return ""
}

// quoteStart quotes the first bytes of a body for an error message.
func quoteStart(b []byte) string {
	if len(b) == 0 {
		return "empty"
	}
	if len(b) > quoteBytes {
		return strconv.Quote(string(b[:quoteBytes])) + "..."
	}
	return strconv.Quote(string(b))
}
