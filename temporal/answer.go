package temporal

import (
	"errors"

	sdktemporal "go.temporal.io/sdk/temporal"

	"github.com/toolloop/toolloop/loop"
)

// AnswerErrorType is the type of the application error a refused
// ConfirmUpdate fails with: its details hold the workflow's
// *loop.AnswerError, which AnswerRefusal rebuilds on the client's side.
const AnswerErrorType = "toolloop.AnswerError"

// wireAnswer is a *loop.AnswerError as it crosses from the workflow to
// the client: the reason by name, the rest as it is.
type wireAnswer struct {
	Reason  string             `json:"reason"`
	RunID   string             `json:"run_id"`
	CallID  string             `json:"call_id"`
	Status  string             `json:"status,omitempty"`
	Waiting []loop.Pending     `json:"waiting,omitempty"`
	Answer  *loop.Confirmation `json:"answer,omitempty"`
	Detail  string             `json:"detail,omitempty"`
}

// answerReasons names the reasons of loop.CheckAnswer on the wire.
var answerReasons = map[string]error{
	"no_answerer":      loop.ErrNoAnswerer,
	"note_too_long":    loop.ErrNoteTooLong,
	"not_paused":       loop.ErrNotPaused,
	"unknown_call":     loop.ErrUnknownCall,
	"already_answered": loop.ErrAlreadyAnswered,
}

// RefuseAnswer makes a workflow's refusal of an answer (a
// *loop.AnswerError) an application error of type AnswerErrorType that
// keeps its reason across the wire, for AnswerRefusal on the client's
// side; nil and other errors are returned as they are. The workflow's
// ConfirmUpdate refuses with it. Refusals are not part of a workflow's
// history (a validator's never are; an update handler's outcome is
// recorded, not compared on replay), so their form may change without a
// version.
func RefuseAnswer(err error) error {
	var ae *loop.AnswerError
	if !errors.As(err, &ae) {
		return err
	}
	w := wireAnswer{RunID: ae.RunID, CallID: ae.CallID, Status: ae.Status, Waiting: ae.Waiting, Answer: ae.Answer, Detail: ae.Detail}
	for name, reason := range answerReasons {
		if ae.Err == reason {
			w.Reason = name
		}
	}
	return sdktemporal.NewApplicationErrorWithOptions(ae.Error(), AnswerErrorType,
		sdktemporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{w}})
}

// AnswerRefusal returns the *loop.AnswerError that a ConfirmUpdate was
// refused with, rebuilt from err as a client gets it, so that the
// client tells the reasons apart with errors.Is (loop.ErrNotPaused, ...)
// as it would in process. Any other error is returned as it is.
func AnswerRefusal(err error) error {
	var app *sdktemporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != AnswerErrorType {
		return err
	}
	var w wireAnswer
	if app.Details(&w) != nil {
		return err
	}
	reason, ok := answerReasons[w.Reason]
	if !ok {
		return err
	}
	return &loop.AnswerError{Err: reason, RunID: w.RunID, CallID: w.CallID, Status: w.Status, Waiting: w.Waiting, Answer: w.Answer, Detail: w.Detail}
}
