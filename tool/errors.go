package tool

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolloop/toolloop/llm"
)

// Error is a classified tool failure. Handlers return one (through the
// constructors below) to tell the executor what kind of failure it is;
// any other error counts as internal.
type Error struct {
	Kind llm.ErrorKind
	// Msg is what the model is told.
	Msg string
	// RetryAfter is a rate limiter's requested wait, if known.
	RetryAfter time.Duration
	// Err is the underlying cause, for logs; it is not shown to the model.
	Err error
}

// Error returns the kind and the message, or the cause if there is no
// message.
func (e *Error) Error() string {
	if e.Msg != "" {
		return string(e.Kind) + ": " + e.Msg
	}
	if e.Err != nil {
		return string(e.Kind) + ": " + e.Err.Error()
	}
	return string(e.Kind)
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// NotFound reports that nothing matched; the model may try something else.
func NotFound(msg string) error { return &Error{Kind: llm.KindNotFound, Msg: msg} }

// NeedsInput reports that information only the user can supply is missing.
func NeedsInput(msg string) error { return &Error{Kind: llm.KindNeedsInput, Msg: msg} }

// RateLimited reports a downstream rate limit; the executor retries it a
// bounded number of times, waiting at least retryAfter.
func RateLimited(retryAfter time.Duration, err error) error {
	return &Error{Kind: llm.KindRateLimited, Msg: "rate limited", RetryAfter: retryAfter, Err: err}
}

// Unavailable reports a brief downstream outage; the executor retries it a
// bounded number of times.
func Unavailable(err error) error {
	return &Error{Kind: llm.KindUnavailable, Msg: "temporarily unavailable", Err: err}
}

// OutcomeUnknown reports that the call may or may not have taken effect:
// the request went out and its answer was lost (the connection broke after
// it was sent, the server died while running it). Telling this apart from
// a failure before sending matters for a write: the executor never
// repeats it and never hands it back to the model as a plain failure the
// model might simply repeat. The write's status look-up decides, and
// without one the run stops with tool_outcome_unknown. For a read it is an
// ordinary error result.
func OutcomeUnknown(err error) error {
	return &Error{Kind: llm.KindOutcomeUnknown, Msg: "the request was sent but its answer was lost: it may or may not have taken effect", Err: err}
}

// KindOf classifies any error a handler returned.
func KindOf(err error) llm.ErrorKind {
	var te *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &te) && te.Kind != "":
		return te.Kind
	case errors.Is(err, context.DeadlineExceeded):
		return llm.KindTimeout
	case errors.Is(err, context.Canceled):
		return llm.KindCanceled
	}
	return llm.KindInternal
}

// Retryable reports whether another attempt of the same call may succeed.
func Retryable(kind llm.ErrorKind) bool {
	return kind == llm.KindRateLimited || kind == llm.KindUnavailable
}

// Deterministic reports whether the same call with the same arguments will
// fail the same way again. A model that retries such a call is spinning.
func Deterministic(kind llm.ErrorKind) bool {
	switch kind {
	case llm.KindNotFound, llm.KindInvalidArguments, llm.KindNeedsInput, llm.KindInternal:
		return true
	}
	return false
}

// A validation message goes back to the model, into the run's log and
// into every later request of the run, so it quotes at most a prefix of
// what the model sent: a megabyte of bad argument is not worth repeating.
const (
	// maxQuoted is the most bytes of one value a message quotes.
	maxQuoted = 200
	// maxMessage is the most bytes kept of a message from another
	// library (the JSON Schema library, encoding/json), which may quote values
	// whole and whose pieces this package cannot tell apart.
	maxMessage = 1000
)

// clip returns s, or its first maxQuoted bytes (cut at a rune boundary)
// followed by "…(N bytes)", N being the length of s.
func clip(s string) string { return clipAt(s, maxQuoted) }

// clipMessage is clip for a whole message from another library.
func clipMessage(s string) string { return clipAt(s, maxMessage) }

func clipAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// quoteClipped quotes s as strconv.Quote does, with only a prefix of a
// long s inside the quotes and its length after them.
func quoteClipped(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	c := clip(s)
	i := strings.LastIndex(c, "…(")
	return strconv.Quote(c[:i]) + c[i:]
}
