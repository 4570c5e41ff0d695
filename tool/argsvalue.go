package tool

import (
	"strconv"
	"unicode/utf8"
)

// argsValue decodes args, JSON arguments as a model writes them, to the
// value encoding/json's Unmarshal into an any would give (map[string]any,
// []any, string, float64, bool, nil), in one pass and without Unmarshal's
// separate validity scan and decoder state. It handles the common case
// only: ok is false, and the caller must use encoding/json, for anything
// else (a string with an escape, a control character or invalid UTF-8, a
// key repeated in an object, nesting deeper than maxFastDepth, a number
// out of float64's range, any syntax error), so that every error message
// and every odd case stays encoding/json's.
func argsValue(args []byte) (v any, ok bool) {
	p := argsParser{jsonCursor{b: args}}
	v, ok = p.value(0)
	if !ok {
		return nil, false
	}
	p.space()
	return v, p.i == len(p.b)
}

// maxFastDepth is how deeply argsValue follows nested objects and arrays
// before it leaves the arguments to encoding/json.
const maxFastDepth = 64

type argsParser struct{ jsonCursor }

func (p *argsParser) value(depth int) (any, bool) {
	p.space()
	if p.i >= len(p.b) {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, ok := p.string()
		return s, ok
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	for _, lit := range literals {
		if len(p.b)-p.i >= len(lit.text) && string(p.b[p.i:p.i+len(lit.text)]) == lit.text {
			p.i += len(lit.text)
			return lit.v, true
		}
	}
	return nil, false
}

// literals are JSON's three words and what they decode to.
var literals = [...]struct {
	text string
	v    any
}{{"true", true}, {"false", false}, {"null", nil}}

func (p *argsParser) object(depth int) (any, bool) {
	if depth > maxFastDepth {
		return nil, false
	}
	p.i++ // '{'
	m := map[string]any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, true
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, false
		}
		k, ok := p.string()
		if !ok {
			return nil, false
		}
		if _, dup := m[k]; dup {
			return nil, false // encoding/json's path names the repeated key
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, false
		}
		p.i++
		v, ok := p.value(depth)
		if !ok {
			return nil, false
		}
		m[k] = v
		if end, ok := p.after('}'); !ok {
			return nil, false
		} else if end {
			return m, true
		}
	}
}

func (p *argsParser) array(depth int) (any, bool) {
	if depth > maxFastDepth {
		return nil, false
	}
	p.i++ // '['
	a := []any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, true
	}
	for {
		v, ok := p.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		if end, ok := p.after(']'); !ok {
			return nil, false
		} else if end {
			return a, true
		}
	}
}

// string reads a string without escapes or control characters, in valid
// UTF-8, which reads the same as its bytes.
func (p *argsParser) string() (string, bool) {
	p.i++ // '"'
	start, ascii := p.i, true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				return "", false // encoding/json puts U+FFFD for each bad byte
			}
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	return "", false
}

// number reads a number in JSON's grammar as a float64.
func (p *argsParser) number() (any, bool) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case p.i < len(p.b) && p.b[p.i] >= '1' && p.b[p.i] <= '9':
		p.digits()
	default:
		return nil, false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if !p.digits() {
			return nil, false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return nil, false
		}
	}
	f, err := strconv.ParseFloat(string(p.b[start:p.i]), 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

// digits reads one or more decimal digits and reports whether there was one.
func (p *argsParser) digits() bool {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}
