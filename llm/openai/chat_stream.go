package openai

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/toolloop/toolloop/llm"
)

var _ llm.StreamingModel = (*Chat)(nil)

// Stream sends the same request as Generate with "stream": true (and
// stream_options.include_usage, so that the last chunk carries the
// usage) and yields the chunks' text and tool calls as they come. The
// turn's Response, assembled by llm.Collect, is what Generate returns for
// the same reply.
//
// A tool call starts with the chunk that carries its ID and name;
// arguments follow by the call's index. A chunk that gives a known index
// another ID or name is passed on as a second start, which the
// llm.Accumulator refuses as a protocol error rather than merge the two.
// A call without an ID (some compatible servers) gets its generated ID
// once its arguments are complete, so it is yielded whole at the finish,
// and so are the calls after it: calls start in the order they came.
// Calls end when the finish reason arrives; the finish itself follows the
// usage, at the end of the stream. A stream that ends with "data: [DONE]"
// but never gave a finish reason (OpenRouter, Novita) gets the one
// Generate infers, tool_calls or stop; one that ends without [DONE] and
// without a finish reason was cut short (llm.ErrStreamEnded). Text or a
// new call after the finish reason, and a negative call index, are
// protocol errors, never part of the answer; a chunk that is not JSON is
// a bad_response. A server that answers with one JSON completion instead
// of an event stream gives the turn Generate gives, marked
// llm.Response.NotStreamed.
func (c *Chat) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	params, err := c.params(req)
	if err != nil {
		return func(yield func(llm.Delta, error) bool) { yield(llm.Delta{}, err) }
	}
	params.StreamOptions.IncludeUsage = param.NewOpt(true)
	p := &chatStream{req: req, model: string(params.Model)}
	open := func(ctx context.Context, resp **http.Response) *ssestream.Stream[sdk.ChatCompletionChunk] {
		return c.completions.NewStreaming(ctx, params, requestOptions(c.opts.RequestOptions, c.opts.MaxResponseBytes, c.opts.MaxStreamBytes, resp)...)
	}
	return streamTurn(ctx, c.now, open, p)
}

// chatStream reads one streamed chat completion.
type chatStream struct {
	req   *llm.Request
	model string

	id, respModel string
	// text says whether any text but white space came (a content
	// filter's finish with none is a refusal, as in Generate).
	text    bool
	refusal strings.Builder
	calls   []*chatCall
	byIndex map[int64]*chatCall
	started int // calls started, the next call's Index
	reason  string
}

// chatCall is one tool call by its index in the chunks.
type chatCall struct {
	index    int // Index in the deltas, -1 until started
	id, name string
	// early holds the arguments that came before the call could start
	// (before its ID and name were both known).
	early strings.Builder
	args  argStream
	ended bool
}

func (s *chatStream) event(ch sdk.ChatCompletionChunk, out []llm.Delta) ([]llm.Delta, bool, error) {
	if ch.ID != "" {
		s.id = ch.ID
	}
	if ch.Model != "" {
		s.respModel = ch.Model
	}
	for i := range ch.Choices {
		choice := &ch.Choices[i]
		if choice.Index != 0 {
			continue // Generate reads the first choice only.
		}
		d := &choice.Delta
		if s.reason != "" && d.Content != "" {
			// The finish reason ended the answer: text after it is not
			// part of it, and which of the two the server meant cannot be
			// told.
			return out, false, protocolError("text came after the finish reason %q: %q", s.reason, clip(d.Content))
		}
		if d.Content != "" {
			s.text = s.text || strings.TrimSpace(d.Content) != ""
			out = append(out, llm.Delta{Kind: llm.DeltaText, Text: d.Content})
		}
		s.refusal.WriteString(d.Refusal)
		for k := range d.ToolCalls {
			var err error
			if out, err = s.toolCall(&d.ToolCalls[k], out); err != nil {
				return out, false, err
			}
		}
		if choice.FinishReason != "" {
			s.reason = choice.FinishReason
			out = s.endCalls(out)
		}
	}
	if ch.JSON.Usage.Valid() {
		u := chatUsage(ch.Usage)
		out = append(out, llm.Delta{Kind: llm.DeltaUsage, Usage: &u})
		if s.reason != "" && len(ch.Choices) == 0 {
			// The usage chunk that include_usage asks for is the last
			// before [DONE]: the turn is complete here. Finishing now,
			// not at [DONE], keeps a turn whose connection then stays
			// silent (a proxy that holds it open) from being taken for a
			// quiet model and thrown away.
			out, err := s.end(out, true)
			return out, true, err
		}
	}
	return out, false, nil
}

// toolCall takes one tool call fragment.
func (s *chatStream) toolCall(tc *sdk.ChatCompletionChunkChoiceDeltaToolCall, out []llm.Delta) ([]llm.Delta, error) {
	frag := tc.Function.Arguments
	if raw := strings.TrimSpace(tc.Function.JSON.Arguments.Raw()); raw != "" && (raw[0] == '{' || raw[0] == '[') {
		frag = raw // arguments sent as an object, as Generate keeps them
	}
	if tc.Index < 0 {
		return out, protocolError("tool call index %d is negative; calls are numbered from 0", tc.Index)
	}
	c := s.byIndex[tc.Index]
	if c == nil && s.reason != "" {
		return out, protocolError("tool call index %d began after the finish reason %q", tc.Index, s.reason)
	}
	if c == nil {
		c = &chatCall{index: -1, id: tc.ID, name: tc.Function.Name}
		if s.byIndex == nil {
			s.byIndex = make(map[int64]*chatCall)
		}
		s.byIndex[tc.Index] = c
		s.calls = append(s.calls, c)
	} else if (tc.ID != "" && c.id != "" && tc.ID != c.id) || (tc.Function.Name != "" && c.name != "" && tc.Function.Name != c.name) {
		if c.index >= 0 {
			// A second start for the same Index: the accumulator refuses
			// it, naming both.
			return append(out, llm.Delta{Kind: llm.DeltaToolCallStart, Index: c.index,
				Call: &llm.ToolCall{ID: orElse(tc.ID, c.id), Name: orElse(tc.Function.Name, c.name)}}), nil
		}
		// Not started yet, so not yet seen by anyone: refused here as
		// the accumulator would refuse it.
		return out, protocolError("tool call index %d came as %q (%s), then as %q (%s)",
			tc.Index, c.name, c.id, tc.Function.Name, tc.ID)
	} else {
		c.id, c.name = orElse(c.id, tc.ID), orElse(c.name, tc.Function.Name)
	}
	if c.index < 0 {
		c.early.WriteString(frag)
		return s.startReady(out), nil
	}
	if c.ended {
		// Arguments after the finish: passed on for the accumulator to
		// refuse.
		return append(out, llm.Delta{Kind: llm.DeltaToolCallArguments, Index: c.index, Text: frag}), nil
	}
	if a := c.args.add(frag); a != "" {
		out = append(out, llm.Delta{Kind: llm.DeltaToolCallArguments, Index: c.index, Text: a})
	}
	return out, nil
}

// startReady starts the calls whose ID and name are known, in the order
// they appeared, up to the first that is still missing one: a call never
// starts before one that appeared earlier, so that the turn's calls come
// in Generate's order and a generated ID is made from the same position.
// A call held back this way (behind one with no ID, from a server that
// mixes them) starts at the finish. The arguments a call gathered before
// it started go with its start.
func (s *chatStream) startReady(out []llm.Delta) []llm.Delta {
	for _, c := range s.calls[s.started:] {
		if c.id == "" || c.name == "" {
			break
		}
		c.index = s.started
		s.started++
		out = append(out, llm.Delta{Kind: llm.DeltaToolCallStart, Index: c.index, Call: &llm.ToolCall{ID: c.id, Name: c.name}})
		if a := c.args.add(c.early.String()); a != "" {
			out = append(out, llm.Delta{Kind: llm.DeltaToolCallArguments, Index: c.index, Text: a})
		}
		c.early.Reset()
	}
	return out
}

// endCalls ends every call at the finish reason, starting those that had
// no ID with a generated one.
func (s *chatStream) endCalls(out []llm.Delta) []llm.Delta {
	for _, c := range s.calls {
		if c.ended {
			continue
		}
		c.ended = true
		if c.index < 0 {
			args := c.early.String()
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			c.index = s.started
			s.started++
			if c.id == "" {
				c.id = generatedID(s.req, c.index, c.name, []byte(args))
			}
			out = append(out,
				llm.Delta{Kind: llm.DeltaToolCallStart, Index: c.index, Call: &llm.ToolCall{ID: c.id, Name: c.name}},
				llm.Delta{Kind: llm.DeltaToolCallArguments, Index: c.index, Text: args})
		} else if a := c.args.finish(); a != "" {
			out = append(out, llm.Delta{Kind: llm.DeltaToolCallArguments, Index: c.index, Text: a})
		}
		out = append(out, llm.Delta{Kind: llm.DeltaToolCallEnd, Index: c.index})
	}
	return out
}

func (s *chatStream) end(out []llm.Delta, sentinel bool) ([]llm.Delta, error) {
	if s.reason == "" {
		if !sentinel {
			return out, streamEnded()
		}
		// The server ended the stream with [DONE] but never said why the
		// turn finished (OpenRouter, Novita): read as Generate reads a
		// reply without a finish reason.
		s.reason = inferredReason(len(s.calls))
	}
	out = s.endCalls(out) // calls of a stream that gave no finish reason
	if s.refusal.Len() > 0 {
		return out, refusal(s.refusal.String())
	}
	if s.reason == "content_filter" && !s.text && len(s.calls) == 0 {
		return out, refusal("the reply was withheld by the content filter")
	}
	model := s.model
	if s.respModel != "" {
		model = s.respModel
	}
	return append(out, llm.Delta{Kind: llm.DeltaFinish, Finish: &llm.Finish{
		Provider:     providerChat,
		ID:           s.id,
		Model:        model,
		FinishReason: s.reason,
		Truncated:    s.reason == "length",
		// Chat Completions has no place for any provider's state.
		DroppedState: llm.ForeignState(s.req.Messages, providerChat),
	}}), nil
}

// whole maps a chat completion sent whole, as Generate does, to the
// deltas of a stream that carried it.
func (s *chatStream) whole(resp *http.Response, body []byte, out []llm.Delta) ([]llm.Delta, error) {
	var cc sdk.ChatCompletion
	if err := json.Unmarshal(body, &cc); err != nil {
		return out, notStreamed(resp, "a chat completion", err)
	}
	if len(cc.Choices) == 0 {
		return out, notStreamed(resp, "a chat completion", errors.New("it has no choices"))
	}
	r, err := chatResponse(s.req, &cc, s.model)
	if err != nil {
		return out, err
	}
	r.DroppedState = llm.ForeignState(s.req.Messages, providerChat)
	r.NotStreamed = true
	return append(out, llm.Deltas(r, providerChat)...), nil
}

// clip shortens a piece of text quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
