package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmhttp"
)

// Stream sends req as a streamed Messages API request and yields the reply
// as it arrives (see llm.StreamingModel). The request is the one Generate
// sends, with "stream": true; it is sent when the iteration begins, once
// for each iteration.
//
// The SDK accumulates the events into the reply's anthropic.Message, and
// the finish carries what Generate would make of that message: its ID,
// model, stop reason and the thinking blocks' State, so that the next
// request is the same whichever way the turn came. Failures are *llm.Error
// values: before the first event they are classified as Generate's are;
// after it, an error event is classified by its type, a connection that
// drops is llm.ErrStreamEnded (unavailable), and a reply larger than
// Options.MaxStreamBytes is a bad response. The caller's own cancellation
// is returned as is.
//
// A server or proxy that answers with the whole message as JSON instead
// of an event stream gives the turn Generate gives, marked
// llm.Response.NotStreamed. A content block or delta after
// message_delta's stop reason is a protocol error, never part of the
// answer; an event that is not JSON is a bad response.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		params, err := m.params(req)
		if err != nil {
			yield(llm.Delta{}, err)
			return
		}
		bind := &requestBinding{req: req}
		s := streamer{yield: yield, dropped: llm.ForeignState(req.Messages, provider), prefix: bind.replyPrefix}
		// The request's own context ends with the iteration, whichever way
		// it ends; the stream's Close (deferred last, so run first) has
		// closed the body by then.
		sctx, cancel := context.WithCancel(llmhttp.ExpectStream(ctx))
		defer cancel()
		var httpResp *http.Response
		stream := m.client.Messages.NewStreaming(sctx, params, append(m.requestOptions(bind, &params), option.WithResponseInto(&httpResp))...)
		defer stream.Close()
		if stream.Err() == nil && wholeReply(httpResp) {
			s.whole(ctx, httpResp, m.opts.Now())
			return
		}
		for stream.Next() {
			if !s.event(stream.Current()) || s.finished {
				return
			}
		}
		err = stream.Err()
		switch {
		case err == nil && s.events == 0:
			// An event stream without a single event.
			err = &llm.Error{Kind: llm.KindBadResponse, Err: errors.New(
				"anthropic: the reply to a streamed request held no events (is streaming turned off at a proxy?)")}
		case err == nil:
			// The body ended cleanly, but before message_stop.
			err = io.ErrUnexpectedEOF
		}
		yield(llm.Delta{}, s.failure(ctx, err, m.opts.Now()))
	}
}

// wholeReply reports whether resp is a successful reply to a streamed
// request that is not an event stream: a server or a proxy that ignored
// "stream": true and sent the whole message.
func wholeReply(resp *http.Response) bool {
	if resp == nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return err != nil || mt != "text/event-stream"
}

// whole reads a whole message sent for a streamed request (capped at
// MaxResponseBytes by the response guard, which also refuses an HTML
// page), maps it as Generate does and yields the deltas of a stream that
// carried it, the turn marked NotStreamed.
func (s *streamer) whole(ctx context.Context, resp *http.Response, now time.Time) {
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		s.fail(classify(ctx, err, now))
		return
	}
	var msg anthropic.Message
	if err := json.Unmarshal(body, &msg); err != nil || msg.Type != "message" {
		if err == nil {
			err = fmt.Errorf(`its type is %q, not "message"`, msg.Type)
		}
		s.fail(&llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf(
			"anthropic: a streamed request was answered with Content-Type %s, not an event stream, and its body is not a message: %w",
			resp.Header.Get("Content-Type"), err)})
		return
	}
	r, err := response(&msg, s.prefix)
	if err != nil {
		s.fail(err)
		return
	}
	r.DroppedState, r.NotStreamed = s.dropped, true
	for _, d := range llm.Deltas(r, provider) {
		if !s.yield(d, nil) {
			return
		}
	}
}

// Kinds of content block, as the stream maps them.
const (
	kindOther uint8 = iota // server-tool blocks and the like: dropped, as Generate drops them
	kindText
	kindThinking
	kindRedacted
	kindToolUse
)

// streamer turns one reply's events into deltas.
type streamer struct {
	yield func(llm.Delta, error) bool
	// msg is the reply as the SDK accumulates it; the finish is built from
	// it by the code that builds Generate's response.
	msg      anthropic.Message
	blocks   []streamBlock // by content block index
	calls    int           // tool calls started
	parts    int           // reasoning parts started
	events   int
	usage    llm.Usage // the last usage reported
	reported bool      // whether any usage was
	dropped  int       // Response.DroppedState
	// prefix gives the digest the reply's thinking is bound to.
	prefix func() string
	// droppedThinking is Response.DroppedReasoning, from message_start.
	droppedThinking int
	// finished is set once the finish (or the turn's failure) has been
	// yielded.
	finished bool
	// stopReason is message_delta's stop reason, once it came.
	stopReason string
}

// streamBlock is what the streamer keeps of one content block.
type streamBlock struct {
	kind  uint8
	index int // the call's or the reasoning part's index
	// sent is set once a tool_use block's arguments have had a fragment
	// that was not empty or white space; blank holds the white space that
	// came before it.
	sent    bool
	blank   string
	stopped bool
	// text and signature gather a text or thinking block's pieces until
	// it stops (see delta).
	text, signature []byte
}

// event handles one event and reports whether to go on.
func (s *streamer) event(ev anthropic.MessageStreamEventUnion) bool {
	s.events++
	switch {
	case s.events == 1 && ev.Type != "message_start":
		return s.fail(protocolError("the first event is %q, not message_start", ev.Type))
	case s.events > 1 && ev.Type == "message_start":
		return s.fail(protocolError("a second message_start arrived after %d events", s.events-1))
	}
	if s.stopReason != "" && (ev.Type == "content_block_start" || ev.Type == "content_block_delta") {
		// message_delta's stop reason ended the content: a block or a
		// piece after it is not part of the answer.
		return s.fail(protocolError("a %s arrived after the stop reason %q", ev.Type, s.stopReason))
	}
	switch ev.Type {
	case "content_block_delta":
		return s.delta(int(ev.Index), ev)
	case "content_block_stop":
		// The block's text and thinking go into msg before the SDK
		// finishes the block's JSON.
		if i := int(ev.Index); i >= 0 && i < len(s.blocks) {
			if s.blocks[i].stopped {
				return s.fail(protocolError("content block %d was stopped twice", i))
			}
			s.flush(i)
		}
	case "message_stop":
		for i := range s.blocks {
			s.flush(i) // blocks never stopped
		}
	}
	if err := s.msg.Accumulate(ev); err != nil {
		return s.fail(protocolError("%v", err))
	}
	// Blocks come with content_block_start, each in its own event; this
	// adapter keeps a record per block beside msg's content, in step with
	// it, so that the indexes the SDK checks against msg's content are
	// good for s.blocks too.
	if n := len(s.msg.Content); ev.Type == "message_start" && n > 0 {
		return s.fail(protocolError("message_start carried %d content block(s); blocks come with content_block_start", n))
	}
	if ev.Type == "message_start" {
		s.droppedThinking = droppedThinking(ev.Message.RawJSON())
	}
	if ev.Type == "message_delta" && ev.Delta.StopReason != "" {
		s.stopReason = string(ev.Delta.StopReason)
	}
	switch ev.Type {
	case "message_start", "message_delta":
		// Both carry the usage so far (message_delta's counts are
		// cumulative), which the SDK has merged into msg.
		return s.reportUsage()
	case "content_block_start":
		return s.start(int(ev.Index))
	case "content_block_stop":
		return s.stop(int(ev.Index))
	case "message_stop":
		return s.finish()
	}
	return true // an event type this adapter does not know: the SDK kept what it could
}

// start opens content block i, which the SDK has just added to msg.
func (s *streamer) start(i int) bool {
	cb := &s.msg.Content[i]
	b := streamBlock{}
	var d llm.Delta
	switch cb.Type {
	case blockText:
		b.kind = kindText
		d = llm.Delta{Kind: llm.DeltaText, Text: cb.Text}
	case blockThinking:
		// The part opens now, so that parts are numbered in block order
		// even when one of them never gets a thinking_delta.
		b.kind, b.index = kindThinking, s.parts
		s.parts++
		d = llm.Delta{Kind: llm.DeltaReasoning, Index: b.index, Text: cb.Thinking}
	case blockRedactedThinking:
		b.kind, b.index = kindRedacted, s.parts
		s.parts++
		d = llm.Delta{Kind: llm.DeltaReasoning, Index: b.index, Hidden: true}
	case blockToolUse:
		b.kind, b.index = kindToolUse, s.calls
		s.calls++
		d = llm.Delta{Kind: llm.DeltaToolCallStart, Index: b.index, Call: &llm.ToolCall{ID: cb.ID, Name: cb.Name}}
	}
	s.blocks = append(s.blocks, b)
	if b.kind == kindOther || (b.kind == kindText && d.Text == "") {
		return true
	}
	if !s.yield(d, nil) {
		return false
	}
	// The start's input is "{}", which the first fragment replaces (as the
	// SDK does); any other input is where the fragments begin.
	if b.kind == kindToolUse && len(cb.Input) > 0 && string(cb.Input) != "{}" {
		s.blocks[i].sent = true
		return s.yield(llm.Delta{Kind: llm.DeltaToolCallArguments, Index: b.index, Text: string(cb.Input)}, nil)
	}
	return true
}

// delta passes on a content block's delta when it adds to what Generate
// shows: text, thinking, a call's arguments. Signatures are kept for the
// finish's State; citations and server-tool input are dropped.
//
// Text, thinking and signature pieces are gathered here and put into msg
// when the block stops (flush), not given to the SDK's Accumulate, which
// appends each to the string so far: a copy of the whole text per delta,
// which a long reply, or a server that sends a byte at a time, turns into
// hours of copying. The other deltas (a call's input, citations) go to
// Accumulate.
func (s *streamer) delta(i int, ev anthropic.MessageStreamEventUnion) bool {
	if i < 0 || i >= len(s.blocks) {
		return s.fail(protocolError("a %s arrived for content block index %d, and %d blocks have started", ev.Delta.Type, i, len(s.blocks)))
	}
	b := &s.blocks[i]
	d := ev.Delta
	if b.stopped {
		return s.fail(protocolError("a %s arrived for content block %d after it stopped", d.Type, i))
	}
	switch d.Type {
	case "text_delta":
		if b.kind != kindText || d.Text == "" {
			return true // Generate shows no text of other blocks
		}
		b.text = append(b.text, d.Text...)
		return s.yield(llm.Delta{Kind: llm.DeltaText, Text: d.Text}, nil)
	case "thinking_delta":
		if b.kind != kindThinking || d.Thinking == "" {
			return true
		}
		b.text = append(b.text, d.Thinking...)
		return s.yield(llm.Delta{Kind: llm.DeltaReasoning, Index: b.index, Text: d.Thinking}, nil)
	case "signature_delta":
		if b.kind == kindThinking {
			b.signature = append(b.signature, d.Signature...)
		}
		return true
	}
	if err := s.msg.Accumulate(ev); err != nil {
		return s.fail(protocolError("%v", err))
	}
	if d.Type == "input_json_delta" && b.kind == kindToolUse && d.PartialJSON != "" {
		piece := d.PartialJSON
		if !b.sent {
			// Arguments that are only white space come out as "{}" in
			// the SDK's message, as in Generate's: hold white space back
			// until something else comes (stop sends "{}" otherwise).
			b.blank += piece
			if strings.TrimSpace(b.blank) == "" {
				return true
			}
			piece, b.blank = b.blank, ""
		}
		b.sent = true
		return s.yield(llm.Delta{Kind: llm.DeltaToolCallArguments, Index: b.index, Text: piece}, nil)
	}
	return true
}

// flush puts the text or thinking and the signature gathered for block i
// into msg, after what its start held, as Accumulate would have.
func (s *streamer) flush(i int) {
	b, cb := &s.blocks[i], &s.msg.Content[i]
	switch b.kind {
	case kindText:
		cb.Text += string(b.text)
	case kindThinking:
		cb.Thinking += string(b.text)
		cb.Signature += string(b.signature)
	}
	b.text, b.signature = nil, nil
}

// stop closes content block i. A thinking block that showed no thinking is
// hidden (display "omitted"), as Generate has it; a call whose input came
// only as empty fragments gets the input Generate reports, "{}".
func (s *streamer) stop(i int) bool {
	b := &s.blocks[i]
	b.stopped = true
	cb := &s.msg.Content[i]
	switch b.kind {
	case kindThinking:
		if cb.Thinking == "" {
			return s.yield(llm.Delta{Kind: llm.DeltaReasoning, Index: b.index, Hidden: true}, nil)
		}
	case kindToolUse:
		if !b.sent {
			args := string(cb.Input)
			if args == "" {
				args = string(emptyObject)
			}
			if !s.yield(llm.Delta{Kind: llm.DeltaToolCallArguments, Index: b.index, Text: args}, nil) {
				return false
			}
		}
		return s.yield(llm.Delta{Kind: llm.DeltaToolCallEnd, Index: b.index}, nil)
	}
	return true
}

// reportUsage yields the usage so far if it changed.
func (s *streamer) reportUsage() bool {
	u := usage(s.msg.Usage)
	if u == s.usage && s.reported {
		return true
	}
	s.usage, s.reported = u, true
	return s.yield(llm.Delta{Kind: llm.DeltaUsage, Usage: &u}, nil)
}

// finish ends the turn at message_stop with what Generate would have made
// of the accumulated message.
func (s *streamer) finish() bool {
	for i := range s.blocks {
		if !s.blocks[i].stopped && !s.stop(i) {
			return false
		}
	}
	resp, err := response(&s.msg, s.prefix)
	if err != nil { // a refusal
		return s.fail(err)
	}
	// The usage is msg's, reported as each message_start and
	// message_delta arrived: resp.Usage is the last of those.
	s.finished = true
	return s.yield(llm.Delta{Kind: llm.DeltaFinish, Finish: &llm.Finish{
		Provider:     provider,
		ID:           resp.ID,
		Model:        resp.Model,
		FinishReason: resp.FinishReason,
		Truncated:    resp.Truncated,
		DroppedState: s.dropped,
		State:        resp.Message.State,
		// message_start carries input_transformations, final there
		// (a server-side fallback's message_delta may replace it; this
		// adapter sends no fallbacks).
		DroppedReasoning: s.droppedThinking,
	}}, nil)
}

// fail yields the turn's failure; nothing follows it.
func (s *streamer) fail(err error) bool {
	s.finished = true
	s.yield(llm.Delta{}, err)
	return false
}

// failure classifies the error that ended the stream before message_stop.
func (s *streamer) failure(ctx context.Context, err error, now time.Time) error {
	if ctx.Err() != nil {
		return err // the caller's cancellation or deadline
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode < http.StatusMultipleChoices {
		// The SDK's error for an error event: the reply itself began well.
		return eventFailure(apiErr, err, now)
	}
	if s.events == 0 {
		// Nothing came: the request failed, as it would for Generate.
		return classify(ctx, err, now)
	}
	var le *llm.Error
	if errors.As(err, &le) {
		return le // the response guard's verdict (MaxStreamBytes)
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &llm.Error{Kind: llm.KindUnavailable, Retryable: true,
			Err: fmt.Errorf("anthropic: %w after %d events: %w", llm.ErrStreamEnded, s.events, err)}
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) {
		return &llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf("anthropic: the stream sent an event whose data is not valid JSON, after %d events: %w", s.events, err)}
	}
	// A line past the SDK's limit, or another failure to decode.
	return &llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf("anthropic: the stream could not be read after %d events: %w", s.events, err)}
}

// eventFailure classifies an error event, which ended a stream whose
// reply had begun with 200 OK: by the status its type has outside a
// stream (overloaded_error 529, api_error 500, ...), so that it is
// retryable when the same failure would be. There is no HTTP status of
// its own to report.
func eventFailure(apiErr *anthropic.Error, err error, now time.Time) *llm.Error {
	e := apiError(apiErr, typeStatus(apiErr.Type()), err, now)
	e.StatusCode = 0
	msg := apiErr.Message
	if msg == "" {
		msg = apiErr.RawJSON()
	}
	typ := string(apiErr.Type())
	if typ == "" {
		typ = "an error of no known type"
	}
	s := "anthropic: the stream ended with an error event, " + typ + ": " + msg
	if apiErr.RequestID != "" {
		s += " (request " + apiErr.RequestID + ")"
	}
	e.Err = &eventError{msg: s, err: err}
	return e
}

// typeStatus is the HTTP status the API answers with for an error type
// outside a stream. A type it does not know is taken for a server error.
func typeStatus(t anthropic.ErrorType) int {
	switch t {
	case anthropic.ErrorTypeInvalidRequestError:
		return http.StatusBadRequest
	case anthropic.ErrorTypeAuthenticationError:
		return http.StatusUnauthorized
	case anthropic.ErrorTypeBillingError:
		return http.StatusPaymentRequired
	case anthropic.ErrorTypePermissionError:
		return http.StatusForbidden
	case anthropic.ErrorTypeNotFoundError:
		return http.StatusNotFound
	case anthropic.ErrorTypeConflictError:
		return http.StatusConflict
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case anthropic.ErrorTypeRateLimitError:
		return http.StatusTooManyRequests
	case anthropic.ErrorTypeTimeoutError:
		return http.StatusGatewayTimeout
	case anthropic.ErrorTypeOverloadedError:
		return 529
	}
	return http.StatusInternalServerError
}

// eventError says what an error event said, keeping the SDK's error (with
// its request and raw body) as the cause.
type eventError struct {
	msg string
	err error
}

func (e *eventError) Error() string { return e.msg }
func (e *eventError) Unwrap() error { return e.err }

// protocolError is a stream whose events contradict each other.
func protocolError(format string, args ...any) *llm.Error {
	return &llm.Error{Kind: llm.KindProtocolError, Err: fmt.Errorf("anthropic: inconsistent stream: "+format, args...)}
}

var _ llm.StreamingModel = (*Model)(nil)
