package openai

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolloop/toolloop/llm"
)

var _ llm.StreamingModel = (*Responses)(nil)

// Stream sends the same request as Generate with "stream": true and
// yields the typed events' text, reasoning summaries and function calls as
// they come. The turn's Response, assembled by llm.Collect, is what
// Generate returns for the same reply.
//
// The events show progress; the record is the response that the terminal
// event (response.completed, response.incomplete or response.failed)
// carries whole. The finish and its State are built from it with
// Generate's own mapping, so a streamed turn sends the next request the
// same reasoning items, item IDs and encrypted content as one that was
// not. Whatever the events left out (reasoning text outside a summary, a
// server that sends no deltas) is sent then; events that contradict the
// response are a protocol error.
func (r *Responses) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	params, dropped, err := r.params(req)
	if err != nil {
		return func(yield func(llm.Delta, error) bool) { yield(llm.Delta{}, err) }
	}
	p := &responsesStream{req: req, model: string(params.Model), dropped: dropped}
	open := func(ctx context.Context, resp **http.Response) *ssestream.Stream[responses.ResponseStreamEventUnion] {
		return r.service.NewStreaming(ctx, params, requestOptions(r.opts.RequestOptions, r.opts.MaxResponseBytes, r.opts.MaxStreamBytes, resp)...)
	}
	return streamTurn(ctx, r.now, open, p)
}

// responsesStream reads one streamed response.
type responsesStream struct {
	req     *llm.Request
	model   string
	dropped int

	items map[int64]*streamItem // by output_index
	// text is the answer text sent so far.
	text      strings.Builder
	reasoning []*streamReasoning
	calls     []*streamFnCall // in the order they started
	// fnItems counts the function call items seen, each numbered in turn
	// (streamItem.fnPos): a call starts only when every call before it
	// has, so the calls started are the response's first ones, in its
	// order.
	fnItems int
}

// streamItem is an output item by its output_index.
type streamItem struct {
	typ       string
	hasText   bool // a message item whose text has begun
	reasoning *streamReasoning
	call      *streamFnCall
	// fnPos is a function call item's place among the calls, -1 before
	// it is seen.
	fnPos int
}

type streamReasoning struct {
	index   int
	text    strings.Builder
	summary int64 // the summary part the text is in, -1 before any
	hidden  bool
}

type streamFnCall struct {
	index    int
	id, name string
	args     argStream
	ended    bool
}

func (s *responsesStream) item(i int64, typ string) *streamItem {
	it := s.items[i]
	if it == nil {
		if s.items == nil {
			s.items = make(map[int64]*streamItem)
		}
		it = &streamItem{typ: typ, fnPos: -1}
		s.items[i] = it
	}
	return it
}

func (s *responsesStream) event(ev responses.ResponseStreamEventUnion, out []llm.Delta) ([]llm.Delta, bool, error) {
	switch ev.Type {
	case "response.output_item.added":
		it := s.item(ev.OutputIndex, ev.Item.Type)
		switch ev.Item.Type {
		case "reasoning":
			if it.reasoning == nil {
				// Open the part: the model is thinking.
				it.reasoning = &streamReasoning{index: len(s.reasoning), summary: -1}
				s.reasoning = append(s.reasoning, it.reasoning)
				out = append(out, llm.Delta{Kind: llm.DeltaReasoning, Index: it.reasoning.index})
			}
		case "function_call":
			// A call without a call_id gets a generated ID from its
			// complete arguments: it starts when it is done. A call
			// after one that has not started waits for the response's
			// end, when the rest start in order.
			s.numberCall(it)
			if it.call == nil && ev.Item.CallID != "" && it.fnPos == len(s.calls) {
				it.call = &streamFnCall{index: len(s.calls), id: ev.Item.CallID, name: ev.Item.Name}
				s.calls = append(s.calls, it.call)
				out = append(out, llm.Delta{Kind: llm.DeltaToolCallStart, Index: it.call.index,
					Call: &llm.ToolCall{ID: it.call.id, Name: it.call.name}})
			}
		}
	case "response.output_text.delta":
		if ev.Delta == "" {
			break
		}
		it := s.item(ev.OutputIndex, "message")
		if !it.hasText {
			// Generate joins the texts of message items with a
			// paragraph break.
			it.hasText = true
			if s.text.Len() > 0 {
				s.text.WriteString(paragraph)
				out = append(out, llm.Delta{Kind: llm.DeltaText, Text: paragraph})
			}
		}
		s.text.WriteString(ev.Delta)
		out = append(out, llm.Delta{Kind: llm.DeltaText, Text: ev.Delta})
	case "response.reasoning_summary_text.delta":
		it := s.items[ev.OutputIndex]
		if ev.Delta == "" || it == nil || it.reasoning == nil {
			break // a summary of an item never added: sent at the end
		}
		r := it.reasoning
		if ev.SummaryIndex != r.summary {
			r.summary = ev.SummaryIndex
			if r.text.Len() > 0 {
				r.text.WriteString(paragraph)
				out = append(out, llm.Delta{Kind: llm.DeltaReasoning, Index: r.index, Text: paragraph})
			}
		}
		r.text.WriteString(ev.Delta)
		out = append(out, llm.Delta{Kind: llm.DeltaReasoning, Index: r.index, Text: ev.Delta})
	case "response.function_call_arguments.delta":
		it := s.items[ev.OutputIndex]
		if it == nil || it.call == nil {
			break // a call that has not started: its arguments come whole
		}
		if it.call.ended {
			return out, false, protocolError("arguments for call %s after its item was done", it.call.id)
		}
		if a := it.call.args.add(ev.Delta); a != "" {
			out = append(out, llm.Delta{Kind: llm.DeltaToolCallArguments, Index: it.call.index, Text: a})
		}
	case "response.output_item.done":
		return s.itemDone(&ev, out)
	case "response.completed", "response.incomplete", "response.failed":
		out, err := s.complete(&ev.Response, out)
		return out, true, err
	case "error":
		return out, false, streamError(ev.Code, "", ev.Message)
	}
	return out, false, nil
}

// itemDone finishes a reasoning or function call item as its done event
// gives it whole.
func (s *responsesStream) itemDone(ev *responses.ResponseStreamEventUnion, out []llm.Delta) ([]llm.Delta, bool, error) {
	item := &ev.Item
	switch item.Type {
	case "reasoning":
		it := s.items[ev.OutputIndex]
		if it == nil || it.reasoning == nil {
			return out, false, nil // never added: sent at the end
		}
		var err error
		out, err = it.reasoning.complete(reasoningOf(item), out)
		return out, false, err
	case "function_call":
		it := s.item(ev.OutputIndex, item.Type)
		s.numberCall(it)
		fc := item.AsFunctionCall()
		args := string(rawArguments(fc.JSON.Arguments, fc.Arguments))
		if it.call == nil && it.fnPos != len(s.calls) {
			return out, false, nil // behind a call not started: sent at the end
		}
		if it.call == nil {
			c := &streamFnCall{index: len(s.calls), id: fc.CallID, name: fc.Name}
			if c.id == "" {
				c.id = generatedID(s.req, c.index, c.name, []byte(args))
			}
			it.call = c
			s.calls = append(s.calls, c)
			out = append(out, llm.Delta{Kind: llm.DeltaToolCallStart, Index: c.index, Call: &llm.ToolCall{ID: c.id, Name: c.name}})
		}
		var err error
		out, err = it.call.complete(args, out)
		if err != nil {
			return out, false, err
		}
		// The end names the call as the done item does: the accumulator
		// refuses an ID or name other than the start's.
		return append(out, llm.Delta{Kind: llm.DeltaToolCallEnd, Index: it.call.index,
			Call: &llm.ToolCall{ID: fc.CallID, Name: fc.Name}}), false, nil
	}
	return out, false, nil
}

// numberCall gives a function call item its place among the calls, the
// first time it is seen.
func (s *responsesStream) numberCall(it *streamItem) {
	if it.fnPos < 0 {
		it.fnPos = s.fnItems
		s.fnItems++
	}
}

// complete sends what the reasoning's events left out of r, or fails if
// they said something else.
func (sr *streamReasoning) complete(r llm.Reasoning, out []llm.Delta) ([]llm.Delta, error) {
	sent := sr.text.String()
	if !strings.HasPrefix(r.Text, sent) {
		return out, protocolError("reasoning part %d was streamed as %q but is %q", sr.index, sent, r.Text)
	}
	if rest := r.Text[len(sent):]; rest != "" {
		sr.text.WriteString(rest)
		out = append(out, llm.Delta{Kind: llm.DeltaReasoning, Index: sr.index, Text: rest})
	}
	if r.Hidden && !sr.hidden {
		sr.hidden = true
		out = append(out, llm.Delta{Kind: llm.DeltaReasoning, Index: sr.index, Hidden: true})
	}
	return out, nil
}

// complete sends what the argument events left out of args, or fails if
// they said something else.
func (c *streamFnCall) complete(args string, out []llm.Delta) ([]llm.Delta, error) {
	rest, ok := c.args.rest(args)
	if !ok {
		return out, protocolError("the arguments of call %s were streamed as %q but are %q", c.id, c.args.sent.String(), args)
	}
	if rest != "" {
		out = append(out, llm.Delta{Kind: llm.DeltaToolCallArguments, Index: c.index, Text: rest})
	}
	c.ended = true
	return out, nil
}

// complete maps the terminal event's response as Generate does, checks
// the deltas sent against it, sends what they left out, and finishes.
func (s *responsesStream) complete(resp *responses.Response, out []llm.Delta) ([]llm.Delta, error) {
	final, err := responsesResponse(s.req, resp, s.model)
	if err != nil {
		return out, err
	}
	msg := &final.Message

	sent := s.text.String()
	if !strings.HasPrefix(msg.Text, sent) {
		return out, protocolError("the text was streamed as %q but the response has %q", sent, msg.Text)
	}
	if rest := msg.Text[len(sent):]; rest != "" {
		out = append(out, llm.Delta{Kind: llm.DeltaText, Text: rest})
	}

	if len(s.reasoning) > len(msg.Reasoning) {
		return out, protocolError("%d reasoning items were streamed but the response has %d", len(s.reasoning), len(msg.Reasoning))
	}
	for i, r := range msg.Reasoning {
		if i == len(s.reasoning) {
			sr := &streamReasoning{index: i, summary: -1}
			s.reasoning = append(s.reasoning, sr)
			out = append(out, llm.Delta{Kind: llm.DeltaReasoning, Index: i})
		}
		if out, err = s.reasoning[i].complete(r, out); err != nil {
			return out, err
		}
	}

	if len(s.calls) > len(msg.ToolCalls) {
		return out, protocolError("%d function calls were streamed but the response has %d", len(s.calls), len(msg.ToolCalls))
	}
	for i, tc := range msg.ToolCalls {
		if i == len(s.calls) {
			s.calls = append(s.calls, &streamFnCall{index: i, id: tc.ID, name: tc.Name})
			out = append(out, llm.Delta{Kind: llm.DeltaToolCallStart, Index: i, Call: &llm.ToolCall{ID: tc.ID, Name: tc.Name}})
		}
		c := s.calls[i]
		if c.id != tc.ID || c.name != tc.Name {
			return out, protocolError("call %d was streamed as %q (%s) but the response has %q (%s)", i, c.name, c.id, tc.Name, tc.ID)
		}
		if c.ended {
			if c.args.sent.String() != string(tc.Arguments) {
				return out, protocolError("the arguments of call %s were streamed as %q but the response has %q", c.id, c.args.sent.String(), tc.Arguments)
			}
			continue
		}
		if out, err = c.complete(string(tc.Arguments), out); err != nil {
			return out, err
		}
		out = append(out, llm.Delta{Kind: llm.DeltaToolCallEnd, Index: i})
	}

	return append(out,
		llm.Delta{Kind: llm.DeltaUsage, Usage: &final.Usage},
		llm.Delta{Kind: llm.DeltaFinish, Finish: &llm.Finish{
			Provider:     ProviderResponses,
			ID:           final.ID,
			Model:        final.Model,
			FinishReason: final.FinishReason,
			Truncated:    final.Truncated,
			DroppedState: s.dropped,
			State:        msg.State,
		}}), nil
}

// whole maps a response sent whole, as Generate does, to the deltas of a
// stream that carried it.
func (s *responsesStream) whole(resp *http.Response, body []byte, out []llm.Delta) ([]llm.Delta, error) {
	var r responses.Response
	if err := json.Unmarshal(body, &r); err != nil {
		return out, notStreamed(resp, "a response", err)
	}
	if r.Object != "response" && len(r.Output) == 0 {
		return out, notStreamed(resp, "a response", errors.New(`it has neither "object": "response" nor output items`))
	}
	final, err := responsesResponse(s.req, &r, s.model)
	if err != nil {
		return out, err
	}
	final.DroppedState = s.dropped
	final.NotStreamed = true
	return append(out, llm.Deltas(final, ProviderResponses)...), nil
}

func (s *responsesStream) end(out []llm.Delta, _ bool) ([]llm.Delta, error) {
	// The terminal event ends the turn; a stream without one was cut.
	return out, streamEnded()
}
