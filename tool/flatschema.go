package tool

// A shortcut through the validator for the commonest arguments: one
// object whose values are all strings, numbers, booleans or null, with
// keys and strings free of escapes. It scans, validates and fingerprints
// such an object in one pass, without recursion and without the state
// the general validator keeps for nesting, reordering and reporting. It
// succeeds only when the arguments conform. For anything else (a nested
// value, an escape, a violation, a duplicate, a syntax error) it gives up,
// and the general validator starts again from the first byte, so that
// every verdict, message and fingerprint is still the general validator's.

import (
	"bytes"
	"math"
	"unicode/utf8"
)

// flatValidate validates and fingerprints b if it is a flat object that
// conforms to n, reporting false if it is not or does not.
func flatValidate(n *fsNode, b []byte) (uint64, bool) {
	if n != nil && !n.flatObject || len(b) > math.MaxInt32 { // offsets are int32
		return 0, false
	}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	if n == nil || !n.scalarMembers {
		// Unless the schema rules them out, look for nested values first:
		// found half way, they would waste the work done until then. A
		// bracket in a string only sends flat arguments the long way.
		if bytes.IndexByte(b[i+1:], '{') >= 0 || bytes.IndexByte(b[i+1:], '[') >= 0 {
			return 0, false
		}
	}
	start := i
	h := fnv64(offset64)
	h = (h ^ '{') * prime64
	var seen uint64 // the properties of n present
	sorted := true  // the keys so far increase, and h covers their members
	var last []byte // the last key, while sorted
	members := 0
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return 0, false
			}
			// flatRehash sorts at most flatMembers; give up on a bigger
			// object out of order as soon as that is known.
			if members++; !sorted && members > flatMembers {
				return 0, false
			}
			k1 := plainScan(b, i+1)
			if k1 >= len(b) || b[k1] != '"' {
				if k1 = plainEndUTF8(b, i, k1); k1 < 0 {
					return 0, false
				}
			}
			key := b[i+1 : k1]
			i = skipSpace(b, k1+1)
			if i >= len(b) || b[i] != ':' {
				return 0, false
			}
			i = skipSpace(b, i+1)
			if sorted {
				if last != nil {
					switch bytes.Compare(last, key) {
					case 0:
						return 0, false // a duplicate
					case 1:
						sorted = false
					}
				}
				last = key
				if sorted && len(key) < 1<<8 {
					h = fnvShortString(h, key)
				} else if sorted {
					h = fnvString(h, key)
				}
			}
			var sub *fsNode
			if n != nil {
				var ok bool
				if sub, ok = n.flatMember(key, &seen); !ok {
					return 0, false
				}
			}
			if i >= len(b) {
				return 0, false
			}
			if b[i] == '"' {
				end := plainScan(b, i+1)
				if end >= len(b) || b[end] != '"' {
					if end = plainEndUTF8(b, i, end); end < 0 {
						return 0, false
					}
				}
				if sub != nil && (!sub.typeOnly || sub.types&kindString == 0) && !sub.flatString(b, i, end) {
					return 0, false
				}
				if s := b[i+1 : end]; sorted && len(s) < 1<<8 {
					h = fnvShortString(h, s)
				} else if sorted {
					h = fnvString(h, s)
				}
				i = end + 1
			} else {
				var hv fnv64
				if hv, i = flatScalar(sub, b, i, h); i < 0 {
					return 0, false
				}
				if sorted {
					h = hv
				}
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, false
			}
			if b[i] == ',' {
				i = skipSpace(b, i+1)
				continue
			}
			if b[i] != '}' {
				return 0, false
			}
			i++
			break
		}
	}
	if skipSpace(b, i) < len(b) {
		return 0, false
	}
	if n != nil && seen&n.reqMask[0] != n.reqMask[0] {
		return 0, false // missing a required property
	}
	if !sorted {
		var ok bool
		if h, ok = flatRehash(b, start); !ok {
			return 0, false
		}
	}
	return uint64((h ^ '}') * prime64), true
}

// flatMember looks up the property named key as (*validator).member
// does, marks it seen, and returns the schema for its value. It reports
// false for a repeated property or one not allowed.
func (n *fsNode) flatMember(key []byte, seen *uint64) (*fsNode, bool) {
	k := -1
	if n.propIdx == nil {
		for x := range n.props {
			if n.props[x].name == string(key) {
				k = x
				break
			}
		}
	} else {
		k = n.lookup(key, true)
	}
	if k >= 0 {
		bit := uint64(1) << k
		if *seen&bit != 0 {
			return nil, false
		}
		*seen |= bit
		if p := &n.props[k]; p.declared {
			return p.node, !(p.node != nil && p.node.never)
		}
	}
	if n.addlNo {
		return nil, false
	}
	return n.addl, !(n.addl != nil && n.addl.never)
}

// flatString reports whether n accepts the string at i, which ends at
// end, has no escapes and is valid UTF-8.
func (n *fsNode) flatString(b []byte, i, end int) bool {
	w := validator{b: b, i: end + 1}
	w.checkString(n, i, b[i+1:end], true)
	return w.errKind == errNone
}

// flatScalar validates against n, which may be nil, and hashes after h
// the literal or number at i. It returns the hash and where the value
// ends, or -1 if it is not a scalar, or n does not accept it.
func flatScalar(n *fsNode, b []byte, i int, h fnv64) (fnv64, int) {
	w := validator{b: b}
	switch c := b[i]; c {
	case 't', 'f', 'n':
		lit := "null"
		kind, con := kindNull, fsConst{kind: kindNull}
		if c != 'n' {
			lit = "false"
			if c == 't' {
				lit = "true"
			}
			kind, con = kindBool, fsConst{kind: kindBool, b: c == 't'}
		}
		if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
			return 0, -1
		}
		if n != nil {
			w.i = i + len(lit)
			if w.checkScalar(n, i, kind, con); w.errKind != errNone {
				return 0, -1
			}
		}
		return (h ^ fnv64(c)) * prime64, i + len(lit)
	case '{', '[':
		return 0, -1
	}
	x, ok := w.number(i)
	if !ok {
		return 0, -1
	}
	if n != nil {
		if w.checkNumber(n, i, x); w.errKind != errNone {
			return 0, -1
		}
	}
	return fnvUint((h^'#')*prime64, math.Float64bits(x)), w.i
}

// flatMembers bounds the members of an object out of order that the
// shortcut sorts: insertion sort on the stack suits small objects; the
// general validator sorts bigger ones better.
const flatMembers = 16

// flatMember locates one member of a flat object, to hash it in key order.
type flatMember struct {
	k0, k1 int32 // the key, without quotes
	v0, v1 int32 // the value; a string's without quotes
	kind   byte  // the value's first byte
}

// flatRehash fingerprints, but for the closing brace, the flat object at
// start, which flatValidate has read and found valid but for keys out of
// order and repeated keys that are not properties. It reports false for
// repeated keys, or too many members to sort on the stack.
func flatRehash(b []byte, start int) (fnv64, bool) {
	var buf [flatMembers]flatMember
	ms := buf[:0]
	i := skipSpace(b, start+1)
	for b[i] != '}' {
		if len(ms) == len(buf) {
			return 0, false
		}
		k1 := plainEnd(b, i)
		m := flatMember{k0: int32(i + 1), k1: int32(k1)}
		i = skipSpace(b, skipSpace(b, k1+1)+1) // past ':'
		m.kind = b[i]
		switch m.kind {
		case '"':
			end := plainEnd(b, i)
			m.v0, m.v1 = int32(i+1), int32(end)
			i = end + 1
		case 't', 'n':
			m.v0, m.v1 = int32(i), int32(i+4)
			i += 4
		case 'f':
			m.v0, m.v1 = int32(i), int32(i+5)
			i += 5
		default:
			w := validator{b: b}
			w.number(i) // cannot fail: it was read before
			m.v0, m.v1 = int32(i), int32(w.i)
			i = w.i
		}
		// Insert in key order.
		key := b[m.k0:m.k1]
		j := len(ms)
		ms = ms[:j+1]
		for ; j > 0; j-- {
			y := ms[j-1]
			c := bytes.Compare(b[y.k0:y.k1], key)
			if c == 0 {
				return 0, false // a duplicate
			}
			if c < 0 {
				break
			}
			ms[j] = y
		}
		ms[j] = m
		i = skipSpace(b, i)
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	h := fnv64(offset64)
	h = (h ^ '{') * prime64
	for _, m := range ms {
		h = fnvString(h, b[m.k0:m.k1])
		switch m.kind {
		case '"':
			h = fnvString(h, b[m.v0:m.v1])
		case 't', 'f', 'n':
			h = (h ^ fnv64(m.kind)) * prime64
		default:
			w := validator{b: b}
			x, _ := w.number(int(m.v0))
			h = fnvUint((h^'#')*prime64, math.Float64bits(x))
		}
	}
	return h, true
}

// skipSpace skips white space from i.
func skipSpace(b []byte, i int) int {
	// Most bytes are above the space: one comparison rules them out.
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// fnvString hashes a decoded string as Fingerprint does: '"', its length
// as 8 bytes, its bytes.
func fnvString(h fnv64, s []byte) fnv64 {
	if len(s) < 1<<8 {
		return fnvShortString(h, s)
	}
	h = fnvUint((h^'"')*prime64, uint64(len(s)))
	for _, c := range s {
		h = (h ^ fnv64(c)) * prime64
	}
	return h
}

// fnvShortString is fnvString for a string shorter than 256 bytes. Unlike
// fnvString it is small enough to inline, which spares a caller in a loop
// its spills around a call.
func fnvShortString(h fnv64, s []byte) fnv64 {
	h = ((h^'"')*prime64 ^ fnv64(len(s))) * prime64x8 // as fnvUint has it
	for _, c := range s {
		h = (h ^ fnv64(c)) * prime64
	}
	return h
}

// plainEnd returns the offset of the closing quote of the string whose
// opening quote is at i, if its raw content is its decoded form (no
// escapes, no control characters, valid UTF-8); otherwise -1.
func plainEnd(b []byte, i int) int {
	j := plainScan(b, i+1)
	if j < len(b) && b[j] == '"' {
		return j
	}
	return plainEndUTF8(b, i, j)
}

// plainScan skips printable ASCII but quotes and backslashes from j.
func plainScan(b []byte, j int) int {
	for j < len(b) && strPlain[b[j]] {
		j++
	}
	return j
}

// plainEndUTF8 is plainEnd past the first byte at j that is not printable
// ASCII.
func plainEndUTF8(b []byte, i, j int) int {
	for {
		if j >= len(b) {
			return -1
		}
		c := b[j]
		if c == '"' {
			break
		}
		if c < utf8.RuneSelf {
			return -1 // a backslash or a control character
		}
		j++
		for j < len(b) && strPlain[b[j]] {
			j++
		}
	}
	if !utf8.Valid(b[i+1 : j]) {
		return -1
	}
	return j
}
