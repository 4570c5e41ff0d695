package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"unicode"
)

// StreamingModel is a Model that can also hand over a turn while the
// provider generates it.
//
// Stream sends the request and yields the reply as deltas, in the order
// the provider sent them. A turn that went well ends with exactly one
// DeltaFinish, after every other delta. A failure is yielded once, as a
// zero Delta with a non-nil error, and nothing follows it: before the
// first delta it is the request's failure (an *Error, classified as for
// Generate); after it, the stream broke, and what was received is all
// there is. A consumer that stops early (breaks out of its range loop)
// cancels the request: the adapter must then close the connection before
// Stream's iterator returns.
//
// The deltas are for showing progress; what the loop records is the
// Response an Accumulator assembles from them, which must equal what
// Generate would have returned for the same reply. Stream follows the
// same rules as Generate about req: it must not modify it.
//
// Nothing comes after the finish: the Accumulator refuses any delta after
// DeltaFinish as KindProtocolError, and adapters hold the provider's own end
// of the answer (a finish or stop reason that arrives before the stream's
// last chunk) to the same rule: text or a call after it is an
// KindProtocolError failure, never part of the answer. Usage after it is
// expected (OpenAI's last chunk). A server that answers a streamed
// request with the whole reply (not an event stream) is not a failure:
// adapters yield that reply's Deltas, marked Response.NotStreamed.
type StreamingModel interface {
	Model
	Stream(ctx context.Context, req *Request) iter.Seq2[Delta, error]
}

// DeltaKind says what a Delta carries.
type DeltaKind uint8

// Delta kinds. Tool calls are numbered by Index, in the order the
// provider started them (0, 1, ...), and their deltas may interleave:
// a call is started once, its arguments arrive in pieces, and it is
// ended once, before the finish or by it.
const (
	// DeltaText is a piece of the answer text (Text).
	DeltaText DeltaKind = iota + 1
	// DeltaReasoning is a piece of the model's visible thinking (Text)
	// for the reasoning part Index (0, 1, ... in order; a new Index opens
	// a new llm.Reasoning). Hidden marks a part the provider keeps to
	// itself (its Text is empty).
	DeltaReasoning
	// DeltaToolCallStart opens call Index: Call holds its ID and Name,
	// and its State if the provider sent that first.
	DeltaToolCallStart
	// DeltaToolCallArguments is a piece of call Index's arguments (Text),
	// exactly as the provider sent it.
	DeltaToolCallArguments
	// DeltaToolCallEnd closes call Index: its arguments are complete.
	// Call, when set, holds state the provider attached at the end
	// (Call.State); its ID and Name, if set, must match the start's.
	DeltaToolCallEnd
	// DeltaUsage reports the turn's usage so far (Usage): each one
	// replaces the one before, so adapters report running totals.
	DeltaUsage
	// DeltaFinish ends the turn (Finish). Calls still open are ended by
	// it.
	DeltaFinish
)

var deltaKindNames = [...]string{"", "text", "reasoning", "tool_call_start", "tool_call_arguments",
	"tool_call_end", "usage", "finish"}

// String names the kind as the trace and error messages do.
func (k DeltaKind) String() string {
	if int(k) < len(deltaKindNames) && k != 0 {
		return deltaKindNames[k]
	}
	return fmt.Sprintf("delta_kind(%d)", k)
}

// Delta is one piece of a streamed turn. Which fields are set depends on
// Kind (see the DeltaKind constants).
type Delta struct {
	Kind   DeltaKind
	Text   string
	Index  int
	Hidden bool
	Call   *ToolCall
	Usage  *Usage
	Finish *Finish
}

// Finish is how a streamed turn ended: the parts of a Response that are
// not the message's text, reasoning and calls, plus the message's
// provider state, which adapters know only once the turn is complete.
type Finish struct {
	// Provider names the adapter (as in ProviderState.Provider); it is
	// each assembled Reasoning's Provider.
	Provider     string
	ID           string
	Model        string
	FinishReason string
	Truncated    bool
	DroppedState int
	// DroppedReasoning is Response.DroppedReasoning.
	DroppedReasoning int
	// State is the assembled message's Message.State.
	State *ProviderState
	// NotStreamed is Response.NotStreamed: the server answered the
	// streamed request with the whole reply at once.
	NotStreamed bool
}

// Accumulator assembles a streamed turn's deltas into the Response that
// the loop records. It is strict where a lenient merge has gone wrong in
// other tool loops: calls are kept apart by Index and ID, never merged by
// position; arguments go to the call their Index names and only while it
// is open; and nothing is accepted after the finish. Every inconsistency
// is an *Error of kind KindProtocolError naming the delta.
//
// The zero value is ready to use.
type Accumulator struct {
	text      strings.Builder
	reasoning []Reasoning
	// The parts' text is kept in byte slices, which (unlike a
	// strings.Builder) may be copied when the lists grow while earlier
	// parts are still being written.
	reasonTxt [][]byte
	calls     []streamCall
	ids       map[string]int
	usage     Usage
	finish    *Finish
	// shown is set by the first delta with something to show: text,
	// reasoning text, a tool call.
	shown bool
}

type streamCall struct {
	id, name string
	args     []byte
	state    *ProviderState
	ended    bool
}

// Add takes the next delta. After an error the Accumulator keeps what it
// had and refuses nothing more gracefully than that: the caller must stop.
func (a *Accumulator) Add(d Delta) error {
	if a.finish != nil {
		return a.protocol("a %s delta came after the turn finished", d.Kind)
	}
	switch d.Kind {
	case DeltaText:
		a.shown = a.shown || d.Text != ""
		a.text.WriteString(d.Text)
	case DeltaReasoning:
		switch {
		case d.Index < 0 || d.Index > len(a.reasoning):
			return a.protocol("reasoning part %d arrived after %d part(s); parts are numbered in order from 0", d.Index, len(a.reasoning))
		case d.Index == len(a.reasoning):
			a.reasoning = append(a.reasoning, Reasoning{})
			a.reasonTxt = append(a.reasonTxt, nil)
		}
		a.shown = a.shown || d.Text != ""
		a.reasonTxt[d.Index] = append(a.reasonTxt[d.Index], d.Text...)
		if d.Hidden {
			a.reasoning[d.Index].Hidden = true
		}
	case DeltaToolCallStart:
		return a.start(d)
	case DeltaToolCallArguments:
		c, err := a.open(d)
		if err != nil {
			return err
		}
		c.args = append(c.args, d.Text...)
	case DeltaToolCallEnd:
		c, err := a.open(d)
		if err != nil {
			return err
		}
		if d.Call != nil {
			if (d.Call.ID != "" && d.Call.ID != c.id) || (d.Call.Name != "" && d.Call.Name != c.name) {
				return a.protocol("call %d was started as %q (%s) and ended as %q (%s)", d.Index, c.name, c.id, d.Call.Name, d.Call.ID)
			}
			if d.Call.State != nil {
				c.state = d.Call.State
			}
		}
		c.ended = true
	case DeltaUsage:
		if d.Usage == nil {
			return a.protocol("a usage delta without usage")
		}
		a.usage = *d.Usage
	case DeltaFinish:
		if d.Finish == nil {
			return a.protocol("a finish delta without its Finish")
		}
		f := *d.Finish
		a.finish = &f
		for i := range a.calls {
			a.calls[i].ended = true
		}
	default:
		return a.protocol("a delta of unknown kind %s", d.Kind)
	}
	return nil
}

func (a *Accumulator) start(d Delta) error {
	switch {
	case d.Call == nil || d.Call.ID == "" || d.Call.Name == "":
		return a.protocol("call %d was started without an ID and a name", d.Index)
	case callIDProblem(d.Call.ID) != "":
		return a.protocol("call %d: %s", d.Index, callIDProblem(d.Call.ID))
	case d.Index < 0:
		return a.protocol("call %d was started; calls are numbered in order from 0", d.Index)
	case d.Index < len(a.calls):
		c := &a.calls[d.Index]
		return a.protocol("call %d was started twice: as %q (%s), then as %q (%s)", d.Index, c.name, c.id, d.Call.Name, d.Call.ID)
	case d.Index != len(a.calls):
		return a.protocol("call %d was started after %d call(s); calls are numbered in order from 0", d.Index, len(a.calls))
	}
	if prev, dup := a.ids[d.Call.ID]; dup {
		return a.protocol("calls %d and %d both have the ID %s", prev, d.Index, d.Call.ID)
	}
	if a.ids == nil {
		a.ids = make(map[string]int)
	}
	a.ids[d.Call.ID] = d.Index
	a.calls = append(a.calls, streamCall{id: d.Call.ID, name: d.Call.Name, state: d.Call.State})
	a.shown = true
	return nil
}

// open returns the open call d names.
func (a *Accumulator) open(d Delta) (*streamCall, error) {
	if d.Index < 0 || d.Index >= len(a.calls) {
		return nil, a.protocol("a %s delta for call %d, which was never started", d.Kind, d.Index)
	}
	c := &a.calls[d.Index]
	if c.ended {
		return nil, a.protocol("a %s delta for call %d (%s) after it ended", d.Kind, d.Index, c.id)
	}
	return c, nil
}

func (a *Accumulator) protocol(format string, args ...any) error {
	return &Error{Kind: KindProtocolError, Err: fmt.Errorf("inconsistent stream: "+format, args...)}
}

// Started reports whether the stream has shown something: text,
// reasoning text or a tool call. A stream that fails before that failed
// like a request, and may be retried like one, even after deltas with
// nothing to show (usage, an empty piece: a provider may send those at
// once, before an overload error); one that fails after has shown
// something that a retry would show again, differently.
func (a *Accumulator) Started() bool { return a.shown }

// Finished reports whether the turn's finish has been added.
func (a *Accumulator) Finished() bool { return a.finish != nil }

// Response returns the assembled turn. Before the finish it is what was
// received so far (for the log of a stream that broke), with
// FinishReason "" and every call as far as its arguments came.
func (a *Accumulator) Response() *Response {
	resp := &Response{Usage: a.usage, Message: Message{Role: RoleAssistant, Text: a.text.String()}}
	for i := range a.reasoning {
		r := a.reasoning[i]
		r.Text = string(a.reasonTxt[i])
		if a.finish != nil {
			r.Provider = a.finish.Provider
		}
		resp.Message.Reasoning = append(resp.Message.Reasoning, r)
	}
	for i := range a.calls {
		c := &a.calls[i]
		resp.Message.ToolCalls = append(resp.Message.ToolCalls, ToolCall{
			ID: c.id, Name: c.name, Arguments: append(json.RawMessage{}, c.args...), State: c.state})
	}
	if f := a.finish; f != nil {
		resp.ID, resp.Model, resp.FinishReason = f.ID, f.Model, f.FinishReason
		resp.Truncated, resp.DroppedState, resp.Message.State = f.Truncated, f.DroppedState, f.State
		resp.NotStreamed, resp.DroppedReasoning = f.NotStreamed, f.DroppedReasoning
	}
	return resp
}

// Collect drains a stream into an Accumulator and returns the assembled
// turn. On failure it returns the error with what was received so far
// (nil if nothing was); a stream that ends without a finish is an
// KindProtocolError failure, since the turn may be cut short.
func Collect(stream iter.Seq2[Delta, error]) (*Response, error) {
	var acc Accumulator
	for d, err := range stream {
		if err == nil {
			err = acc.Add(d)
		}
		if err != nil {
			if !acc.Started() {
				return nil, err
			}
			return acc.Response(), err
		}
	}
	if !acc.Finished() {
		err := acc.protocol("the stream ended without a finish")
		if !acc.Started() {
			return nil, err
		}
		return acc.Response(), err
	}
	return acc.Response(), nil
}

// ErrStreamEnded is what an adapter yields when the connection closed in
// the middle of a turn, wrapped in an *Error of kind KindUnavailable.
var ErrStreamEnded = errors.New("the stream ended before the turn finished")

// Deltas returns the deltas of a stream that carried resp whole, in the
// order a stream sends them: the reasoning parts, the text, each call
// (started, its arguments, ended), the usage, the finish. An adapter
// yields them for a streamed request that the server answered with one
// JSON reply, so that the turn is used like any other (mark resp
// NotStreamed first, so the log says so). provider names the adapter, as
// in Finish.Provider. Collect assembles them into resp, the Provider of
// each Reasoning set to provider.
func Deltas(resp *Response, provider string) []Delta {
	msg := &resp.Message
	out := make([]Delta, 0, len(msg.Reasoning)+3*len(msg.ToolCalls)+3)
	for i, r := range msg.Reasoning {
		out = append(out, Delta{Kind: DeltaReasoning, Index: i, Text: r.Text, Hidden: r.Hidden})
	}
	if msg.Text != "" {
		out = append(out, Delta{Kind: DeltaText, Text: msg.Text})
	}
	for i, c := range msg.ToolCalls {
		out = append(out,
			Delta{Kind: DeltaToolCallStart, Index: i, Call: &ToolCall{ID: c.ID, Name: c.Name, State: c.State}},
			Delta{Kind: DeltaToolCallArguments, Index: i, Text: string(c.Arguments)},
			Delta{Kind: DeltaToolCallEnd, Index: i})
	}
	u := resp.Usage
	return append(out, Delta{Kind: DeltaUsage, Usage: &u}, Delta{Kind: DeltaFinish, Finish: &Finish{
		Provider:         provider,
		ID:               resp.ID,
		Model:            resp.Model,
		FinishReason:     resp.FinishReason,
		Truncated:        resp.Truncated,
		DroppedState:     resp.DroppedState,
		DroppedReasoning: resp.DroppedReasoning,
		State:            msg.State,
		NotStreamed:      resp.NotStreamed,
	}})
}

// CheckCallIDs fails with an *Error of kind KindProtocolError when a call's ID
// holds a control character: a C0 or C1 control (a newline, a carriage
// return, NUL, ...), DEL, or a Unicode line or paragraph separator
// (U+2028, U+2029). No provider makes such IDs, and one would let a
// model write its own lines into the run's output, its stop line and the
// listings that print call IDs. Adapters check the calls of every whole
// reply with it; the Accumulator checks every streamed call's start.
func CheckCallIDs(calls []ToolCall) error {
	for i := range calls {
		if p := callIDProblem(calls[i].ID); p != "" {
			return &Error{Kind: KindProtocolError, Err: fmt.Errorf("tool call %d: %s", i, p)}
		}
	}
	return nil
}

// callIDProblem says what is wrong with a call ID, or returns "".
func callIDProblem(id string) string {
	for i, r := range id {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			shown := strconv.QuoteToASCII(id)
			if len(id) > 64 {
				shown = strconv.QuoteToASCII(id[:64]) + "..."
			}
			return fmt.Sprintf("the ID %s holds the control character %U at byte %d", shown, r, i)
		}
	}
	return ""
}
