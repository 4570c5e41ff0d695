package cli

import (
	"context"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
)

// streamPrinter shows a run as it goes (loop.Config.Watch): the text of
// each model turn on out as it streams, a turn that goes on to call tools
// ending its line there, and one line per tool call on errw once its fate
// is known (run and finished, refused at validation, or not allowed by the
// policy), and one per compensation once it is done. Standard output thus carries what the model says and the stop
// line, standard error what the tools did.
type streamPrinter struct {
	out, errw io.Writer
	// open is set while a turn's text is printed without its newline.
	open bool
	// printed is the last step whose text was printed as it streamed.
	printed int
}

// watch is the loop.Config.Watch of a toolloop run.
func (p *streamPrinter) watch(_ context.Context, u loop.Update) {
	switch u.Kind {
	case loop.UpdateDelta:
		if u.Delta.Kind == llm.DeltaText && u.Delta.Text != "" {
			io.WriteString(p.out, u.Delta.Text)
			p.open, p.printed = true, u.Step
		}
	case loop.UpdateModelResponded, loop.UpdateStopped:
		p.endLine()
	case loop.UpdateCallValidated:
		switch {
		case !u.Check.Known:
			p.tool(u, "not registered")
		case u.Check.Problem != "":
			p.tool(u, "invalid arguments: "+u.Check.Problem)
		}
	case loop.UpdateCallAuthorized:
		if d := u.Decision; d.Verdict != policy.Allow {
			p.tool(u, fmt.Sprintf("policy: %s (%s)", d.Verdict, d.Reason))
		}
	case loop.UpdateCallFinished:
		o := u.Outcome
		status := string(o.Result.Status)
		if o.Result.ErrorKind != "" {
			status += " (" + string(o.Result.ErrorKind) + ")"
		}
		if o.Replayed {
			status += ", replayed from the ledger"
		}
		p.tool(u, fmt.Sprintf("%s in %v", status, roundDuration(o.Duration)))
	case loop.UpdateCompensated:
		p.compensated(u.Compensations)
	}
}

// endLine ends a turn's streamed text with a newline.
func (p *streamPrinter) endLine() {
	if p.open {
		io.WriteString(p.out, "\n")
		p.open = false
	}
}

// tool prints a call's line on standard error.
func (p *streamPrinter) tool(u loop.Update, what string) {
	fmt.Fprintf(p.errw, "toolloop: tool %s (%s): %s\n", u.Call.Name, u.Call.ID, what)
}

// answered reports whether res's final answer was printed as it streamed.
func (p *streamPrinter) answered(res *loop.Result) bool {
	return p != nil && res.Status == loop.FinalAnswer && p.printed == res.Steps
}

// roundDuration rounds d for a person: to the millisecond, or to the
// microsecond below one.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

// piecewise streams a model that answers whole turns, in the pieces
// llmtest.Deltas cuts them into: the sandbox's rule-based model streams
// its replies like a provider, with no network.
type piecewise struct{ llm.Model }

// Stream implements llm.StreamingModel.
func (p piecewise) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		resp, err := p.Generate(ctx, req)
		if err == nil && resp == nil {
			err = fmt.Errorf("the model returned neither a response nor an error")
		}
		if err != nil {
			yield(llm.Delta{}, err)
			return
		}
		for _, d := range llmtest.Deltas(resp) {
			if !yield(d, nil) {
				return
			}
		}
	}
}
