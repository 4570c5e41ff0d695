package tool

import (
	"encoding/json"
	"fmt"

	"github.com/toolloop/toolloop/llm"
)

// Limits bound a call's arguments before anything parses them. A model can
// send anything: a megabyte of JSON, or ten thousand nested objects, costs
// time to validate, room in every log event that records the call and in
// every later request that carries the history, and the deepest of it is
// more than encoding/json will decode. A zero field sets no limit.
type Limits struct {
	// MaxBytes is the most bytes a call's arguments may have.
	MaxBytes int `json:"max_bytes,omitempty"`
	// MaxDepth is the deepest the arguments' arrays and objects may nest;
	// the arguments object itself is level 1.
	MaxDepth int `json:"max_depth,omitempty"`
}

// Check returns an *Error of kind invalid_arguments naming the limit args
// pass, or nil when they are within both. It reads args once and does not
// require them to be valid JSON (Validate says what else is wrong).
func (l Limits) Check(args []byte) error {
	if l.MaxBytes > 0 && len(args) > l.MaxBytes {
		return &Error{Kind: llm.KindInvalidArguments, Msg: fmt.Sprintf(
			"arguments are %d bytes, more than the limit of %d bytes", len(args), l.MaxBytes)}
	}
	if l.MaxDepth > 0 {
		if d := nesting(args, l.MaxDepth); d > l.MaxDepth {
			return &Error{Kind: llm.KindInvalidArguments, Msg: fmt.Sprintf(
				"arguments nest more than %d levels deep, the limit", l.MaxDepth)}
		}
	}
	return nil
}

// ValidateWithin is Validate after l.Check: arguments past a limit are
// refused unparsed, with a fingerprint of their bytes (as for arguments
// that are not JSON).
func (t *Tool) ValidateWithin(args json.RawMessage, l Limits) (uint64, error) {
	if err := l.Check(args); err != nil {
		return fingerprintBytes(args), err
	}
	return t.Validate(args)
}

// nesting returns how deep the arrays and objects of b nest, counting
// brackets outside strings, or stop+1 as soon as that is passed.
func nesting(b []byte, stop int) int {
	depth, deepest := 0, 0
	var str jsonStrings
	for _, c := range b {
		if !str.outside(c) {
			continue
		}
		switch c {
		case '{', '[':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > stop {
					return deepest
				}
			}
		case '}', ']':
			depth--
		}
	}
	return deepest
}
