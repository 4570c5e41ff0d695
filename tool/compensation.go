package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Compensation declares how a write is undone: by a call of another tool
// of the same registry (the compensating tool, itself a write), whose
// arguments are made from the original call's arguments and result. The
// loop performs it when the write belongs to an all-or-nothing group that
// failed and the run's policy says to compensate (docs/DESIGN.md §7.1).
//
// The arguments come from Build when it is set (the Go API), and else
// from Args, a declarative mapping that a configuration file can hold:
// each key is an argument of the compensating call, each value says where
// its value comes from:
//
//	"args.order_id"      the field order_id of the original call's arguments
//	"result.refund_id"   the field refund_id of the original call's result
//	"args" / "result"    the whole arguments or result
//	"=JSON"              a literal, e.g. "=\"compensation\"" or "=1"
//
// A path names object fields separated by dots (args.customer.id). A
// value the path does not reach is an error, and the compensation fails
// rather than run with an argument missing.
type Compensation struct {
	// Tool names the compensating tool.
	Tool string `json:"tool"`
	// Args maps each argument of the compensating call to its source.
	Args map[string]string `json:"args,omitempty"`
	// Build, when set, makes the compensating call's arguments (a JSON
	// object) from the original call's arguments and result; Args is then
	// not read.
	Build func(args, result json.RawMessage) (json.RawMessage, error) `json:"-"`
}

// CompensateWith returns a Compensation by the named tool whose arguments
// fn makes from the original call's decoded arguments and result: the
// typed form of Compensation.Build.
func CompensateWith[In, Out, Undo any](toolName string, fn func(in In, out Out) (Undo, error)) *Compensation {
	return &Compensation{Tool: toolName, Build: func(args, result json.RawMessage) (json.RawMessage, error) {
		var in In
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, fmt.Errorf("decoding the original arguments: %w", err)
		}
		var out Out
		if err := json.Unmarshal(result, &out); err != nil {
			return nil, fmt.Errorf("decoding the original result: %w", err)
		}
		u, err := fn(in, out)
		if err != nil {
			return nil, err
		}
		return json.Marshal(u)
	}}
}

// check says what is wrong with a declaration, for the tool named owner.
func (c *Compensation) check(owner string) error {
	if c == nil {
		return nil
	}
	if !validName.MatchString(c.Tool) {
		return fmt.Errorf("tool %q: compensation: tool name %q: want 1 to 64 letters, digits, '_' or '-'", owner, c.Tool)
	}
	if c.Build != nil {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(c.Args)) {
		if err := checkSource(c.Args[k]); err != nil {
			return fmt.Errorf("tool %q: compensation argument %q: %w", owner, k, err)
		}
	}
	return nil
}

func checkSource(src string) error {
	if lit, ok := strings.CutPrefix(src, "="); ok {
		if !json.Valid([]byte(lit)) {
			return fmt.Errorf("literal %q is not JSON", lit)
		}
		return nil
	}
	root, path, _ := strings.Cut(src, ".")
	if root != "args" && root != "result" {
		return fmt.Errorf("source %q: want args.FIELD, result.FIELD, args, result or =JSON", src)
	}
	if strings.Contains(src, ".") && (path == "" || slices.Contains(strings.Split(path, "."), "")) {
		return fmt.Errorf("source %q: empty field name", src)
	}
	return nil
}

// Arguments makes the compensating call's arguments from the original
// call's arguments and result.
func (c *Compensation) Arguments(args, result json.RawMessage) (json.RawMessage, error) {
	if len(args) == 0 {
		args = emptyObject()
	}
	if c.Build != nil {
		out, err := c.Build(args, result)
		if err != nil {
			return nil, err
		}
		if !json.Valid(out) || !bytes.HasPrefix(bytes.TrimSpace(out), []byte("{")) {
			return nil, fmt.Errorf("the arguments built for %s are not a JSON object: %.80s", c.Tool, out)
		}
		return out, nil
	}
	var docs [2]any
	for i, raw := range []json.RawMessage{args, result} {
		if len(raw) == 0 {
			continue
		}
		if err := json.Unmarshal(raw, &docs[i]); err != nil {
			return nil, fmt.Errorf("reading the original %s: %w", [2]string{"arguments", "result"}[i], err)
		}
	}
	out := make(map[string]json.RawMessage, len(c.Args))
	for _, k := range slices.Sorted(maps.Keys(c.Args)) {
		src := c.Args[k]
		if lit, ok := strings.CutPrefix(src, "="); ok {
			out[k] = json.RawMessage(lit)
			continue
		}
		root, path, _ := strings.Cut(src, ".")
		v := docs[0]
		if root == "result" {
			v = docs[1]
		}
		if path != "" {
			for _, f := range strings.Split(path, ".") {
				obj, ok := v.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("argument %q: %s: the original %s has no field %q", k, src, root, f)
				}
				if v, ok = obj[f]; !ok {
					return nil, fmt.Errorf("argument %q: %s: the original %s has no field %q", k, src, root, f)
				}
			}
		} else if v == nil {
			return nil, fmt.Errorf("argument %q: the original call has no %s", k, root)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("argument %q: %w", k, err)
		}
		out[k] = b
	}
	return json.Marshal(out)
}

// Compensation returns the tool's compensation, or nil when its writes
// cannot be undone.
func (t *Tool) Compensation() *Compensation { return t.def.Compensation }

// AtomicGroup returns the all-or-nothing group the tool's calls belong
// to, or "".
func (t *Tool) AtomicGroup() string { return t.def.AtomicGroup }
