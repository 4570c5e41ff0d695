package tool

import (
	"context"
	"encoding/json"
	"fmt"
)

// writeHooks are a write tool's idempotency key and status look-up, over
// raw arguments.
type writeHooks struct {
	key    func(args json.RawMessage) string
	lookup func(ctx context.Context, args json.RawMessage) (json.RawMessage, bool, error)
}

func typedWriteHooks[In any](spec Spec[In]) writeHooks {
	var h writeHooks
	if spec.IdempotencyKey != nil {
		h.key = func(args json.RawMessage) string {
			in, err := decodeArgs[In](args)
			if err != nil {
				return ""
			}
			return spec.IdempotencyKey(in)
		}
	}
	if spec.Lookup != nil {
		h.lookup = func(ctx context.Context, args json.RawMessage) (json.RawMessage, bool, error) {
			in, err := decodeArgs[In](args)
			if err != nil {
				return nil, false, err
			}
			res, applied, err := spec.Lookup(ctx, in)
			if err != nil || !applied {
				return nil, applied, err
			}
			b, err := json.Marshal(res)
			if err != nil {
				return nil, false, fmt.Errorf("encoding the look-up result: %w", err)
			}
			return b, true, nil
		}
	}
	return h
}

// WithWriteHooks returns a copy of t with a business idempotency key and
// a status look-up over raw arguments, for tools built with NewRaw. Either
// may be nil.
func (t *Tool) WithWriteHooks(key func(args json.RawMessage) string,
	lookup func(ctx context.Context, args json.RawMessage) (result json.RawMessage, applied bool, err error)) *Tool {
	c := *t
	c.writeHooks = writeHooks{key: key, lookup: lookup}
	return &c
}

// IdempotencyKey returns the business idempotency key of a call with these
// arguments, or "" when the tool derives none.
func (t *Tool) IdempotencyKey(args json.RawMessage) string {
	if t.key == nil {
		return ""
	}
	return t.key(args)
}

// CanReconcile reports whether the tool has a status look-up.
func (t *Tool) CanReconcile() bool { return t.lookup != nil }

// Reconcile asks the tool's status look-up whether a write with these
// arguments has already happened, and for its result if so.
func (t *Tool) Reconcile(ctx context.Context, args json.RawMessage) (json.RawMessage, bool, error) {
	if t.lookup == nil {
		return nil, false, fmt.Errorf("tool %q has no status look-up", t.def.Name)
	}
	if len(args) == 0 {
		args = emptyObject()
	}
	return t.lookup(ctx, args)
}
