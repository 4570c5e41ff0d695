package loop

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// The reasons an answer to a paused call is refused. CheckAnswer returns
// them inside an *AnswerError, which says which run and call; callers
// tell them apart with errors.Is, e.g. to choose an HTTP status:
// ErrNoAnswerer and ErrNoteTooLong are bad input, ErrUnknownCall names
// nothing the run waits on, ErrNotPaused and ErrAlreadyAnswered conflict
// with the run's state.
var (
	// ErrNoAnswerer: the answer does not say who gave it
	// (Confirmation.By is empty or only white space), or the name holds a
	// control character (a newline would forge an output line).
	ErrNoAnswerer = errors.New("the answer does not say who decided")
	// ErrNoteTooLong: the answer's note is longer than MaxNoteBytes.
	ErrNoteTooLong = errors.New("the answer's note is too long")
	// ErrNotPaused: the run does not wait for answers: it is running, it
	// stopped for another reason, or every call it paused for is
	// answered and it waits to be resumed.
	ErrNotPaused = errors.New("the run is not waiting for confirmation")
	// ErrUnknownCall: the run waits for answers, but not for this call.
	ErrUnknownCall = errors.New("the call is not pending")
	// ErrAlreadyAnswered: the call has an answer already; answers are
	// final.
	ErrAlreadyAnswered = errors.New("the call was already answered")
)

// MaxNoteBytes bounds an answer's note. The note is kept in the run's log
// and, for a denial, is read by the model; a reason fits in far less.
const MaxNoteBytes = 16 << 10

// AnswerError is an answer that cannot be recorded. Err is the reason,
// one of the Err values above, which errors.Is finds; the other fields
// say what the caller needs to word a fix.
type AnswerError struct {
	// Err is why: ErrNoAnswerer, ErrNoteTooLong, ErrNotPaused,
	// ErrUnknownCall or ErrAlreadyAnswered.
	Err    error
	RunID  string
	CallID string
	// Status is the run's status as a runs list shows it (a Status,
	// RunningStatus or AnsweredStatus), for ErrNotPaused.
	Status string
	// Waiting are the calls the run waits on that have no answer yet
	// (their IDs and tools), for ErrUnknownCall.
	Waiting []Pending
	// Answer is the answer given first, for ErrAlreadyAnswered.
	Answer *Confirmation
	// Detail, if not "", says more than the reason does: how long a
	// note was, or why a run stopped waiting.
	Detail string
}

// Error says what was refused and why, naming the run and the call.
func (e *AnswerError) Error() string {
	var msg string
	switch e.Err {
	case ErrNoAnswerer:
		msg = fmt.Sprintf("the answer to call %s of run %s must say who decided (By)", e.CallID, e.RunID)
	case ErrNoteTooLong:
		msg = fmt.Sprintf("the note of the answer to call %s of run %s is too long", e.CallID, e.RunID)
	case ErrNotPaused:
		msg = fmt.Sprintf("run %s is not waiting for confirmation (status %s)", e.RunID, e.Status)
	case ErrUnknownCall:
		msg = fmt.Sprintf("call %s is not pending in run %s; pending: %s", e.CallID, e.RunID, WaitingList(e.Waiting))
	case ErrAlreadyAnswered:
		was := "answered"
		if a := e.Answer; a != nil {
			was = a.Verb() + " by " + a.By
		}
		msg = fmt.Sprintf("call %s of run %s was already %s; an answer is final", e.CallID, e.RunID, was)
	default:
		msg = fmt.Sprintf("the answer to call %s of run %s was refused: %v", e.CallID, e.RunID, e.Err)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the reason, so that errors.Is(err, ErrNotPaused) and the
// like hold.
func (e *AnswerError) Unwrap() error { return e.Err }

// Verb is "approved" or "denied".
func (c *Confirmation) Verb() string {
	if c.Approved {
		return "approved"
	}
	return "denied"
}

// WaitingList renders the calls among pending that have no answer as
// "CALL_ID (TOOL), ...", or "-" when there are none.
func WaitingList(pending []Pending) string {
	var parts []string
	for _, p := range pending {
		if p.Confirmation == nil {
			parts = append(parts, fmt.Sprintf("%s (%s)", p.CallID, p.Tool))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// CheckAnswerInput makes the checks of CheckAnswer that need no run: the
// answer says who decided, and its note is not too long. A command line
// or a form can make them before it reaches the run's store; CheckAnswer
// makes them again.
func CheckAnswerInput(runID string, answer Confirmation) error {
	if strings.TrimSpace(answer.By) == "" {
		return &AnswerError{Err: ErrNoAnswerer, RunID: runID, CallID: answer.CallID}
	}
	if i := strings.IndexFunc(answer.By, unicode.IsControl); i >= 0 {
		// The name is printed as it is in runs lists, trace lines and
		// pages: a newline in it would let it forge a line of its own.
		return &AnswerError{Err: ErrNoAnswerer, RunID: runID, CallID: answer.CallID,
			Detail: fmt.Sprintf("the name %q holds a control character", answer.By)}
	}
	if n := len(answer.Note); n > MaxNoteBytes {
		return &AnswerError{Err: ErrNoteTooLong, RunID: runID, CallID: answer.CallID,
			Detail: fmt.Sprintf("%d bytes, at most %d", n, MaxNoteBytes)}
	}
	return nil
}

// CheckAnswer is the one check of an answer to a paused call: it verifies
// that answer can be recorded for the run whose state is s. It says who
// decided, its note is at most MaxNoteBytes, and it names a call the run
// is waiting on that has no answer yet. A refusal is an *AnswerError whose
// reason errors.Is tells apart (ErrNoAnswerer, ErrNoteTooLong,
// ErrAlreadyAnswered, ErrNotPaused, ErrUnknownCall, checked in that
// order). Decide and Runner.Continue check with it, as does the Temporal
// workflow; so should any other driver that records answers.
func CheckAnswer(s *State, answer Confirmation) error {
	if err := CheckAnswerInput(s.RunID, answer); err != nil {
		return err
	}
	// Both lists are read in turn, never appended together: s.Answered
	// may share its array with another state's (ForBatch), whose calls
	// past this one's end such an append would overwrite.
	for _, list := range [][]Pending{s.Answered, s.Pending} {
		for _, p := range list {
			if p.CallID == answer.CallID && p.Confirmation != nil {
				first := *p.Confirmation
				return &AnswerError{Err: ErrAlreadyAnswered, RunID: s.RunID, CallID: answer.CallID, Answer: &first}
			}
		}
	}
	if s.Status != ConfirmationRequired || s.Batch == nil {
		st := string(s.Status)
		if !s.Done {
			st = RunningStatus
		}
		return &AnswerError{Err: ErrNotPaused, RunID: s.RunID, CallID: answer.CallID, Status: st}
	}
	var waiting []Pending
	for _, p := range s.Pending {
		if p.CallID == answer.CallID {
			return nil
		}
		waiting = append(waiting, Pending{CallID: p.CallID, Tool: p.Tool})
	}
	return &AnswerError{Err: ErrUnknownCall, RunID: s.RunID, CallID: answer.CallID, Waiting: waiting}
}

// checkLoggedAnswer is CheckAnswer for the run whose state s is after
// log: a run that does not wait is named by its list status, so that a
// run answered and not yet resumed says so (AnsweredStatus).
func checkLoggedAnswer(s *State, log []Event, answer Confirmation) error {
	err := CheckAnswer(s, answer)
	var ae *AnswerError
	if errors.As(err, &ae) && ae.Err == ErrNotPaused {
		ae.Status = ListStatus(s, log)
	}
	return err
}

// AnsweredStatus is the status a runs list gives a run that paused for
// confirmation and has an answer to every call it paused for, but has not
// been resumed yet: nothing goes on until something resumes it (toolloop
// resume, Runner.Resume). Like RunningStatus it is not a Status: the run
// has not stopped, and resumed it gets a Status of its own.
const AnsweredStatus = "answered"

// ListStatuses are the statuses a runs list can filter by: RunningStatus,
// AnsweredStatus, then every Status.
func ListStatuses() []string {
	out := []string{RunningStatus, AnsweredStatus}
	for _, s := range Statuses() {
		out = append(out, string(s))
	}
	return out
}

// ListStatus is how a runs list shows the run whose state s is after log:
// its Status once it has stopped, AnsweredStatus when its last event is
// the answer that completed a pause (nobody has resumed it since), else
// RunningStatus.
func ListStatus(s *State, log []Event) string {
	switch {
	case s.Done:
		return string(s.Status)
	case len(log) > 0 && log[len(log)-1].Kind == ConfirmationDecided:
		return AnsweredStatus
	}
	return RunningStatus
}

// Listed returns the calls a runs list shows for the run whose state is s
// after log: while it waits for answers, the calls it paused for (with
// the answers given so far); once answered and waiting to be resumed, the
// same calls with their answers; otherwise none.
func Listed(s *State, log []Event) []Pending {
	if ListStatus(s, log) != AnsweredStatus {
		return s.Pending
	}
	// The answers of the last pause are those after its stopped event.
	var out []Pending
	for i := len(log) - 1; i >= 0 && log[i].Kind != Stopped; i-- {
		c := log[i].Confirmation
		if log[i].Kind != ConfirmationDecided || c == nil {
			continue
		}
		for _, p := range s.Answered {
			if p.CallID == c.CallID {
				out = append(out, p)
				break
			}
		}
	}
	slices.Reverse(out)
	return out
}

// PendingAfter returns the calls that still had no answer once the answer
// to callID was recorded in events, among the calls its pause waited for:
// none when that answer completed the pause, or when events hold no answer
// to callID. What happened after (a resumed run may pause again, on other
// calls) does not count.
func PendingAfter(events []Event, callID string) []Pending {
	at := -1
	for i := len(events) - 1; i >= 0; i-- {
		if ev := &events[i]; ev.Kind == ConfirmationDecided && ev.Confirmation != nil && ev.Confirmation.CallID == callID {
			at = i
			break
		}
	}
	if at < 0 {
		return nil
	}
	var still []Pending
	for _, p := range Replay(events[:at+1]).Pending {
		if p.Confirmation == nil {
			still = append(still, p)
		}
	}
	return still
}
