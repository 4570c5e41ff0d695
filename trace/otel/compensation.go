package otel

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/trace"
)

// Attribute keys of compensations and of the run's writes (toolloop's own:
// the GenAI conventions have nothing for undoing a tool's effect).
const (
	keyCompWhy       attribute.Key = "toolloop.compensation.reason"
	keyCompStopping  attribute.Key = "toolloop.compensation.stopping_with"
	keyCompWrites    attribute.Key = "toolloop.compensation.writes"
	keyCompUndone    attribute.Key = "toolloop.compensation.undone"
	keyCompFailed    attribute.Key = "toolloop.compensation.failed"
	keyCompLeft      attribute.Key = "toolloop.compensation.left"
	keyCompOrigCall  attribute.Key = "toolloop.compensation.original.call_id"
	keyCompOrigTool  attribute.Key = "toolloop.compensation.original.tool"
	keyCompOrigKey   attribute.Key = "toolloop.compensation.original.key"
	keyCompTool      attribute.Key = "toolloop.compensation.tool"
	keyCompState     attribute.Key = "toolloop.compensation.state"
	keyCompUnknown   attribute.Key = "toolloop.compensation.original.outcome_unknown"
	keyWritesOutcome attribute.Key = "toolloop.writes.outcome"
	keyWritesSummary attribute.Key = "toolloop.writes.summary"
	keyWritesDone    attribute.Key = "toolloop.writes.done"
	keyWritesUndone  attribute.Key = "toolloop.writes.undone"
	keyWritesNotDone attribute.Key = "toolloop.writes.not_done"
	keyWritesLeft    attribute.Key = "toolloop.writes.left"
)

// compensateAttrs are the attributes of a compensate span: why, the
// status the run was stopping with, and how many writes were undone,
// failed or left.
func (o *Observer) compensateAttrs(attrs []attribute.KeyValue, s *trace.Span) []attribute.KeyValue {
	c := s.Compensation
	if c == nil {
		return attrs
	}
	attrs = append(attrs, keyOperation.String("compensate"), keyCompWhy.String(o.red.Diagnostic(c.Why)),
		keyCompWrites.Int(len(c.Outcomes)))
	if c.Stopping {
		attrs = append(attrs, keyCompStopping.String(string(c.Status)))
	}
	n := map[loop.CompensationState]int{}
	for _, out := range c.Outcomes {
		n[out.State]++
	}
	return append(attrs, keyCompUndone.Int(n[loop.UndoSucceeded]), keyCompFailed.Int(n[loop.UndoFailed]),
		keyCompLeft.Int(n[loop.UndoLeft]))
}

// undoAttrs are the attributes of a compensate_call span: the original
// write's call ID, tool and key, the compensating tool, its call's ledger
// key, and the state; a call that ran is also an execute_tool in the GenAI
// conventions' terms. The second value is the span's status message.
func (o *Observer) undoAttrs(attrs []attribute.KeyValue, s *trace.Span) ([]attribute.KeyValue, string) {
	u := s.Undo
	if u == nil {
		return attrs, ""
	}
	attrs = append(attrs, keyCompOrigCall.String(u.Call.CallID), keyCompOrigTool.String(u.Call.Tool),
		keyCompState.String(string(u.Outcome.State)))
	attrs = appendStr(attrs, keyCompOrigKey, u.Call.Key)
	attrs = appendStr(attrs, keyCompTool, u.Call.Undo)
	attrs = appendStr(attrs, keyIdempotency, u.Key())
	if u.Call.Unknown {
		attrs = append(attrs, keyCompUnknown.Bool(true))
	}
	if call := u.Outcome.Call; call != nil {
		attrs = append(attrs, keyOperation.String("execute_tool"), keyToolType.String("function"),
			keyToolName.String(call.Name), keyToolCallID.String(call.ID),
			keyToolArgs.String(o.red.Summary(call.Name, call.Arguments)))
	}
	if out := u.Outcome.Outcome; out != nil {
		attrs = append(attrs, keyToolStatus.String(string(out.Result.Status)), keyToolAttempts.Int(out.Attempts))
		if out.Result.ErrorKind != "" {
			attrs = append(attrs, keyToolErrorKind.String(string(out.Result.ErrorKind)))
		}
		if out.Replayed {
			attrs = append(attrs, keyToolReplayed.Bool(true))
		}
	}
	return attrs, o.red.Diagnostic(u.Outcome.Reason)
}

// writesAttrs are the run span's attributes for its writes report: the
// outcome, its one-line summary, and the call IDs in each state.
func (o *Observer) writesAttrs(attrs []attribute.KeyValue, w *loop.WritesReport) []attribute.KeyValue {
	if w == nil {
		return attrs
	}
	attrs = append(attrs, keyWritesOutcome.String(string(w.Outcome)), keyWritesSummary.String(o.red.Diagnostic(w.Summary())))
	var done, undone, notDone, left []string
	for _, r := range w.Writes {
		switch r.State {
		case loop.WriteDone:
			done = append(done, r.CallID)
		case loop.WriteUndone:
			undone = append(undone, r.CallID)
		case loop.WriteLeft, loop.WriteUnknown:
			left = append(left, r.CallID)
		default:
			notDone = append(notDone, r.CallID)
		}
	}
	for _, a := range []struct {
		k   attribute.Key
		ids []string
	}{{keyWritesDone, done}, {keyWritesUndone, undone}, {keyWritesNotDone, notDone}, {keyWritesLeft, left}} {
		if len(a.ids) > 0 {
			attrs = append(attrs, a.k.StringSlice(a.ids))
		}
	}
	return attrs
}
