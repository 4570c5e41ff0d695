package gemini

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
	"sync"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmhttp"
)

var _ llm.StreamingModel = (*Model)(nil)

// Stream sends the conversation to Gemini's streamGenerateContent and
// yields the first candidate as it arrives (see the package
// documentation, "Streaming"). The deltas assemble (llm.Collect) into the
// Response Generate returns for the same reply, parts of one kind that
// the stream split into chunks counted as one part; the request is built
// as Generate builds it. Nothing is sent until the sequence is ranged
// over, and each range sends the request anew.
//
// Failures are yielded once, as *llm.Error values classified as for
// Generate, except a canceled or expired ctx, whose error is yielded as
// is. A connection that breaks in the middle of the turn, or a stream
// that ends without a finish reason, is an llm.KindUnavailable error
// wrapping llm.ErrStreamEnded. A consumer that stops ranging closes the
// connection before the iterator returns.
//
// A server or proxy that answers with the whole reply as JSON (one
// response, or the array streamGenerateContent gives without alt=sse)
// gives the turn Generate gives, marked llm.Response.NotStreamed. A text
// or call part after the finish reason is a protocol error, never part
// of the answer; an event that is not JSON is a bad response.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		c, err := m.prepare(req)
		if err != nil {
			yield(llm.Delta{}, err)
			return
		}
		// Canceled when the consumer stops, so that the request and its
		// connection end with the iterator whatever the SDK does.
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		watch := new(readWatch)
		sctx = llmhttp.ExpectStream(context.WithValue(sctx, watchKey{}, watch))
		s := turnStream{req: req, model: c.model, yield: yield}
		for chunk, err := range m.client.Models.GenerateContentStream(sctx, c.model, c.contents, c.cfg) {
			if err != nil {
				yield(llm.Delta{}, m.streamError(ctx, err, watch))
				return
			}
			if !s.chunk(chunk) {
				return
			}
		}
		if body, ok := watch.whole(); ok {
			// The server sent the whole reply as JSON: the SDK saw an
			// empty stream, and the reply's chunks are read here.
			if err := watch.failure(); err != nil {
				yield(llm.Delta{}, m.classify(ctx, err))
				return
			}
			s.notStreamed = true
			if !s.wholeReply(body) {
				return
			}
		}
		s.finish(c.droppedState)
	}
}

// wholeReply reads a whole reply to a streamed request: one
// GenerateContentResponse, or an array of them (what
// streamGenerateContent answers without alt=sse), each taken as a chunk.
// It reports false when it yielded a failure.
func (s *turnStream) wholeReply(body []byte) bool {
	body = bytes.TrimSpace(body)
	var chunks []*genai.GenerateContentResponse
	var err error
	if len(body) > 0 && body[0] == '[' {
		err = json.Unmarshal(body, &chunks)
	} else {
		var one genai.GenerateContentResponse
		err = json.Unmarshal(body, &one)
		chunks = append(chunks, &one)
	}
	if err != nil {
		return s.fail(&llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf(
			"gemini: a streamed request was answered with JSON that is not a GenerateContentResponse: %w", err)})
	}
	for _, c := range chunks {
		if !s.chunk(c) {
			return false
		}
	}
	return true
}

// streamError classifies a failure of the SDK's stream. The SDK reports a
// body that stopped in the middle of an event as that event's undecodable
// JSON, so the body's own read error, which the watch kept, decides: the
// guard's verdict is returned as it is, any other read failure is a
// broken connection. Everything else is classified as for Generate.
func (m *Model) streamError(ctx context.Context, err error, watch *readWatch) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if rerr := watch.failure(); rerr != nil {
		var le *llm.Error
		if errors.As(rerr, &le) {
			return le
		}
		return streamEnded(rerr)
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) {
		return &llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf("gemini: the stream sent an event whose data is not valid JSON: %w", err)}
	}
	return m.classify(ctx, err)
}

// streamEnded is the error of a stream cut short; cause, when not nil, is
// why the connection ended.
func streamEnded(cause error) error {
	err := fmt.Errorf("gemini: %w", llm.ErrStreamEnded)
	if cause != nil {
		err = fmt.Errorf("gemini: %w: %w", llm.ErrStreamEnded, cause)
	}
	return &llm.Error{Kind: llm.KindUnavailable, Retryable: true, Err: err}
}

// turnStream turns the chunks of one streamed reply into deltas. It keeps
// the reply's parts as Generate would see them in one response: parts of
// the same kind (text, or thought) that follow one another are one part
// until a thought signature closes it, as Gemini streams a part's text in
// pieces and its signature with the last piece (often an empty one).
// Calls, whole in every chunk, are parts of their own. So call IDs,
// reasoning entries and the message's State come out as Generate makes
// them for the reply with the pieces joined.
type turnStream struct {
	req   *llm.Request
	model string
	yield func(llm.Delta, error) bool

	id, version string
	parts       layout
	// open is set while the last of parts is a text or thought part that
	// the next piece of its kind continues.
	open bool
	// reasoning is the Reasoning index of the open thought part, -1 while
	// it has no text; reasonings counts the indexes given.
	reasoning, reasonings int
	thoughts              bool
	calls                 int
	usage                 *llm.Usage
	chunks                int
	candidate             bool
	finishReason          genai.FinishReason
	// notStreamed is set when the reply came whole, as JSON.
	notStreamed bool
}

// chunk handles one chunk; false means stop (the consumer did, or the
// chunk's error was yielded).
func (s *turnStream) chunk(r *genai.GenerateContentResponse) bool {
	if r == nil {
		return true
	}
	s.chunks++
	if s.id == "" {
		s.id = r.ResponseID
	}
	if s.version == "" {
		s.version = r.ModelVersion
	}
	if fb := r.PromptFeedback; fb != nil && fb.BlockReason != "" {
		return s.fail(refusal("prompt blocked: %s%s", fb.BlockReason, suffix(fb.BlockReasonMessage)))
	}
	if len(r.Candidates) > 0 && r.Candidates[0] != nil {
		cand := r.Candidates[0]
		s.candidate = true
		// Checked before the chunk's parts, as Generate checks it before
		// the response's: a reply stopped in its first chunk yields the
		// error alone.
		if err := finishError(cand); err != nil {
			return s.fail(err)
		}
		if s.finishReason != "" && cand.Content != nil {
			for _, p := range cand.Content.Parts {
				if p != nil && (p.Text != "" || p.FunctionCall != nil) {
					// The finish reason ended the reply: a part after it
					// is not part of the answer.
					return s.fail(&llm.Error{Kind: llm.KindProtocolError, Err: fmt.Errorf(
						"gemini: inconsistent stream: a %s part came after the finish reason %s", partKind(p), s.finishReason)})
				}
			}
		}
		if cand.Content != nil {
			for _, p := range cand.Content.Parts {
				if p != nil && !s.part(p) {
					return false
				}
			}
		}
		if cand.FinishReason != "" {
			s.finishReason = cand.FinishReason
		}
	}
	if r.UsageMetadata != nil {
		u := usage(r.UsageMetadata)
		if s.usage == nil || *s.usage != u {
			s.usage = &u
			shown := u // the consumer's copy, which it may change
			return s.yield(llm.Delta{Kind: llm.DeltaUsage, Usage: &shown}, nil)
		}
	}
	return true
}

// part handles one part of a chunk's candidate.
func (s *turnStream) part(p *genai.Part) bool {
	switch kind := partKind(p); kind {
	case partCall:
		s.open = false
		call, err := toolCall(s.req, s.id, len(s.parts.Parts), p)
		if err != nil {
			return s.fail(err)
		}
		s.parts.Parts = append(s.parts.Parts, layoutPart{Kind: partCall})
		i := s.calls
		s.calls++
		return s.yield(llm.Delta{Kind: llm.DeltaToolCallStart, Index: i,
			Call: &llm.ToolCall{ID: call.ID, Name: call.Name, State: call.State}}, nil) &&
			s.yield(llm.Delta{Kind: llm.DeltaToolCallArguments, Index: i, Text: string(call.Arguments)}, nil) &&
			s.yield(llm.Delta{Kind: llm.DeltaToolCallEnd, Index: i}, nil)
	case partThought:
		s.thoughts = true
		s.extend(kind, p)
		if p.Text == "" {
			return true
		}
		if s.reasoning < 0 {
			s.reasoning = s.reasonings
			s.reasonings++
		}
		return s.yield(llm.Delta{Kind: llm.DeltaReasoning, Index: s.reasoning, Text: p.Text}, nil)
	default:
		s.extend(kind, p)
		if p.Text == "" {
			return true
		}
		return s.yield(llm.Delta{Kind: llm.DeltaText, Text: p.Text}, nil)
	}
}

// extend adds a text or thought piece to the open part of its kind, or
// opens a new part; a signature closes the part.
func (s *turnStream) extend(kind string, p *genai.Part) {
	n := len(s.parts.Parts)
	if !s.open || s.parts.Parts[n-1].Kind != kind {
		s.parts.Parts = append(s.parts.Parts, layoutPart{Kind: kind})
		n++
		s.open = true
		s.reasoning = -1
	}
	last := &s.parts.Parts[n-1]
	last.Len += len(p.Text)
	if len(p.ThoughtSignature) > 0 {
		last.Sig = p.ThoughtSignature
		s.open = false
	}
}

// finish ends a stream the SDK ended without an error: with the finish,
// when Gemini sent its finish reason, else with the error of a turn cut
// short.
func (s *turnStream) finish(droppedState int) {
	if s.finishReason == "" {
		if s.chunks > 0 && !s.candidate {
			s.fail(noCandidate())
			return
		}
		s.fail(streamEnded(nil))
		return
	}
	if hiddenReasoning(s.thoughts, s.usage) {
		if !s.yield(llm.Delta{Kind: llm.DeltaReasoning, Index: s.reasonings, Hidden: true}, nil) {
			return
		}
	}
	state, err := encodeLayout(s.parts)
	if err != nil {
		s.fail(&llm.Error{Kind: llm.KindBadResponse, Err: err})
		return
	}
	model := s.version
	if model == "" {
		model = s.model
	}
	s.yield(llm.Delta{Kind: llm.DeltaFinish, Finish: &llm.Finish{
		Provider:     Provider,
		ID:           s.id,
		Model:        model,
		FinishReason: string(s.finishReason),
		Truncated:    s.finishReason == genai.FinishReasonMaxTokens,
		DroppedState: droppedState,
		State:        state,
		NotStreamed:  s.notStreamed,
	}}, nil)
}

func (s *turnStream) fail(err error) bool {
	s.yield(llm.Delta{}, err)
	return false
}

// hiddenReasoning reports whether a reply spent thinking tokens without
// showing a thought: its Reasoning is then one Hidden entry.
func hiddenReasoning(thoughts bool, u *llm.Usage) bool {
	return !thoughts && u != nil && u.ReasoningTokens > 0
}

type watchKey struct{}

// readWatch keeps the first read error of a streamed reply's body. The
// SDK turns a body cut in the middle of an event into a JSON error about
// the piece it got; the watch tells the adapter what really happened.
type readWatch struct {
	mu  sync.Mutex
	err error
	// body is a whole JSON reply the transport took out of the SDK's way,
	// set when json is.
	body []byte
	json bool
}

// keep records a whole JSON reply, or the failure to read it.
func (w *readWatch) keep(body []byte, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.body, w.json = body, true
	if w.err == nil {
		w.err = err
	}
}

// whole returns the whole JSON reply kept, if there was one.
func (w *readWatch) whole() ([]byte, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body, w.json
}

func (w *readWatch) set(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

func (w *readWatch) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// watchTransport hands the body of a request whose context carries a
// readWatch to that watch. Other requests pass through untouched.
//
// A successful reply to such a request that is not an event stream is the
// whole reply as JSON (a server or proxy that does not stream): it is read
// (the guard below caps it at MaxResponseBytes and refuses an HTML page)
// and kept in the watch, and the SDK is given an empty stream; Stream then
// reads the reply's chunks from the watch.
type watchTransport struct{ next http.RoundTripper }

func (t watchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	w, ok := req.Context().Value(watchKey{}).(*readWatch)
	if !ok || err != nil || resp == nil || resp.Body == nil {
		return resp, err
	}
	if mt, _, perr := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode/100 == 2 && (perr != nil || mt != "text/event-stream") {
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		w.keep(body, rerr)
		resp.Body = io.NopCloser(bytes.NewReader(nil))
		return resp, nil
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, w: w}
	return resp, err
}

type watchedBody struct {
	io.ReadCloser
	w *readWatch
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.w.set(err)
	}
	return n, err
}
