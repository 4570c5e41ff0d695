package tool

// The fast path of Validate. Most input schemas are those New infers from
// Go structs: types, properties, required, additionalProperties, items,
// and a few bounds. For them, fastValidate reads the argument bytes once,
// checks them against the schema and fingerprints them in the same pass,
// without building a tree of values for the library. It only ever answers
// "valid, with this fingerprint" or "cannot say": arguments that break the
// schema, that are not JSON, that repeat a key, or that reach a keyword
// outside the subset it decides exactly, go the slow way (validateArgs'
// decode, Fingerprint and the library's Validate), so every refusal and
// its message stay the library's. FuzzFastValidate checks that whatever
// the fast path accepts, the slow path accepts with the same fingerprint.

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
)

// fastSchema is one schema of the subset, compiled from the library's
// compiled *sjs.Schema, so that $schema, the draft's reading of each
// keyword and the meta-schema check are the library's. A nil *fastSchema
// accepts any JSON value (the schema true, or one without assertions).
type fastSchema struct {
	// unsure marks a schema with a keyword outside the subset: a value
	// that reaches it makes fastValidate give up.
	unsure bool
	// never marks the schema false: no value conforms.
	never bool
	types fastTypes // the types allowed; 0 when any is
	// enums are the schema's enum and const, each a set of scalars the
	// value must be among.
	enums []fastEnum

	// strings: -1 when absent. Lengths count code points, as the library does.
	minLen, maxLen int
	// numbers
	minimum, maximum, exclusiveMin, exclusiveMax fastBound

	// objects. names are the properties, then the required names that are
	// not properties; props holds the schemas of the properties, so a
	// member whose index in names is len(props) or more is an additional
	// one. index finds a name's index when there are many.
	names              []string
	props              []*fastSchema
	index              map[string]int
	required           uint64 // a bit for each required name's index
	additional         *fastSchema
	noAdditional       bool // additionalProperties false
	minProps, maxProps int  // -1 when absent

	// arrays
	items              *fastSchema
	minItems, maxItems int // -1 when absent
}

// fastTypes is a set of JSON Schema types.
type fastTypes uint8

const (
	typeNull fastTypes = 1 << iota
	typeBoolean
	typeNumber
	typeInteger
	typeString
	typeArray
	typeObject
)

var fastTypeNames = map[string]fastTypes{
	"null": typeNull, "boolean": typeBoolean, "number": typeNumber, "integer": typeInteger,
	"string": typeString, "array": typeArray, "object": typeObject,
}

// fastEnum is an enum or const: the scalars among its values. A value of
// an enum that is an array or an object is never equal to a scalar, and
// an array or object meeting an enum makes fastValidate give up.
type fastEnum struct {
	strs                       []string
	nums                       []float64 // only those a float64 can equal (exactNumber)
	hasNull, hasTrue, hasFalse bool
}

// hasString reports whether s is among e's strings.
func (e *fastEnum) hasString(s []byte) bool {
	for _, v := range e.strs {
		if v == string(s) {
			return true
		}
	}
	return false
}

// fastBound is a numeric bound of a schema: the float64 nearest to it,
// and whether a float64 equal to that is equal to the bound as the
// library compares (exactNumber).
type fastBound struct {
	set   bool
	f     float64
	exact bool
}

// maxFastNames is how many property and required names an object schema
// of the subset may have: the walk marks those seen in a uint64.
const maxFastNames = 64

// compileFastRoot compiles an input schema for fastValidate, or returns
// nil when the fast path could never vouch for any arguments.
func compileFastRoot(s *sjs.Schema) *fastSchema {
	f := compileFast(s)
	switch {
	case f == nil: // any value; validateArgs takes nil for no fast path
		return newFastSchema()
	case f.unsure || f.never:
		return nil
	}
	return f
}

// newFastSchema returns a schema of the subset that asserts nothing yet.
func newFastSchema() *fastSchema {
	return &fastSchema{minLen: -1, maxLen: -1, minProps: -1, maxProps: -1, minItems: -1, maxItems: -1}
}

// compileFast compiles s, which the library compiled from an input
// schema, into the subset. It never fails: what the subset does not
// cover is marked unsure.
func compileFast(s *sjs.Schema) *fastSchema {
	if s.Bool != nil {
		if *s.Bool {
			return nil
		}
		return &fastSchema{never: true}
	}
	f := newFastSchema()
	if outsideFastSubset(s) {
		f.unsure = true
		return f
	}
	if s.Types != nil {
		for _, name := range s.Types.ToStrings() {
			f.types |= fastTypeNames[name]
		}
	}
	if s.Enum != nil {
		f.enums = append(f.enums, fastEnumOf(s.Enum.Values))
	}
	if s.Const != nil {
		f.enums = append(f.enums, fastEnumOf([]any{*s.Const}))
	}
	f.minLen, f.maxLen = intOr(s.MinLength), intOr(s.MaxLength)
	f.minimum, f.maximum = boundOf(s.Minimum), boundOf(s.Maximum)
	f.exclusiveMin, f.exclusiveMax = boundOf(s.ExclusiveMinimum), boundOf(s.ExclusiveMaximum)

	// Properties in a fixed order (the library's is a map), then the
	// required names that are not properties.
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		f.names = append(f.names, name)
		f.props = append(f.props, compileFast(s.Properties[name]))
	}
	for _, name := range s.Required {
		i := slices.Index(f.names, name)
		if i < 0 {
			i = len(f.names)
			f.names = append(f.names, name)
		}
		if i < maxFastNames {
			f.required |= 1 << i
		}
	}
	if len(f.names) > maxFastNames {
		return &fastSchema{unsure: true}
	}
	if len(f.names) > 8 {
		f.index = make(map[string]int, len(f.names))
		for i, name := range f.names {
			f.index[name] = i
		}
	}
	switch a := s.AdditionalProperties.(type) {
	case bool:
		f.noAdditional = !a
	case *sjs.Schema:
		f.additional = compileFast(a)
	}
	f.minProps, f.maxProps = intOr(s.MinProperties), intOr(s.MaxProperties)

	switch {
	case s.Items2020 != nil:
		f.items = compileFast(s.Items2020)
	case s.Items != nil: // before draft 2020: one schema for every item, or a list
		items, ok := s.Items.(*sjs.Schema)
		if !ok {
			return &fastSchema{unsure: true}
		}
		f.items = compileFast(items)
	}
	f.minItems, f.maxItems = intOr(s.MinItems), intOr(s.MaxItems)
	if f.isAny() {
		return nil
	}
	return f
}

// isAny reports whether f asserts nothing.
func (f *fastSchema) isAny() bool {
	return !f.unsure && !f.never && f.types == 0 && len(f.enums) == 0 &&
		f.minLen < 0 && f.maxLen < 0 &&
		!f.minimum.set && !f.maximum.set && !f.exclusiveMin.set && !f.exclusiveMax.set &&
		len(f.names) == 0 && f.additional == nil && !f.noAdditional && f.minProps < 0 && f.maxProps < 0 &&
		f.items == nil && f.minItems < 0 && f.maxItems < 0
}

// fastFields are the fields of sjs.Schema that compileFast reads, or that
// the library's Validate never consults (annotations, and names a
// reference would resolve to, when no reference is followed). A schema
// with any other field set is outside the subset: checking the fields by
// name, rather than listing those left out, keeps a field added by a
// later version of the library out of the subset until it is looked at.
var fastFields = map[string]bool{
	"DraftVersion": true, "Location": true, "Bool": true,
	"ID": true, "Anchor": true, "DynamicAnchor": true, "RecursiveAnchor": true,
	"Types": true, "Enum": true, "Const": true,
	"MaxProperties": true, "MinProperties": true, "Required": true, "Properties": true, "AdditionalProperties": true,
	"MinItems": true, "MaxItems": true, "Items": true, "Items2020": true,
	"MinLength": true, "MaxLength": true,
	"Maximum": true, "Minimum": true, "ExclusiveMaximum": true, "ExclusiveMinimum": true,
	"Title": true, "Description": true, "Default": true, "Comment": true,
	"ReadOnly": true, "WriteOnly": true, "Examples": true, "Deprecated": true,
}

// outsideFastSubset reports whether s sets an exported field that
// fastFields does not name.
func outsideFastSubset(s *sjs.Schema) bool {
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && !fastFields[f.Name] && !v.Field(i).IsZero() {
			return true
		}
	}
	return false
}

func intOr(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// fastEnumOf collects the scalars of an enum's values, as the schema's
// decoder gave them (numbers as json.Number).
func fastEnumOf(values []any) fastEnum {
	var e fastEnum
	for _, v := range values {
		switch x := v.(type) {
		case nil:
			e.hasNull = true
		case bool:
			if x {
				e.hasTrue = true
			} else {
				e.hasFalse = true
			}
		case string:
			e.strs = append(e.strs, x)
		case []any, map[string]any:
			// equal to no scalar
		default: // a number, json.Number from the schema's decoder
			r, ok := new(big.Rat).SetString(fmt.Sprint(x))
			if !ok {
				continue // equal to nothing the library compares it with
			}
			if f, exact := exactNumber(r); exact {
				e.nums = append(e.nums, f)
			}
		}
	}
	return e
}

// exactNumber returns the float64 nearest to r, and whether the library
// finds a value equal to that float64 equal to r. The library compares a
// decoded number as the decimal fmt prints for it, the shortest that reads
// back as the same float64; so r is "exact" when it is that decimal.
//
// For any other float64 g, the comparison of g with r is the comparison
// of g with f: the decimals that read as g lie strictly on g's side of
// every decimal that reads as f, r included.
func exactNumber(r *big.Rat) (f float64, exact bool) {
	f, _ = r.Float64()
	if math.IsInf(f, 0) {
		return f, false
	}
	printed, ok := new(big.Rat).SetString(fmt.Sprint(f))
	return f, ok && printed.Cmp(r) == 0
}

func boundOf(r *big.Rat) fastBound {
	if r == nil {
		return fastBound{}
	}
	f, exact := exactNumber(r)
	return fastBound{set: true, f: f, exact: exact}
}

// cmp compares x with the bound as the library does: -1, 0 or +1, and
// ok false when the float64 cannot tell (x is the float64 nearest a bound
// that is not exact).
func (b fastBound) cmp(x float64) (c int, ok bool) {
	switch {
	case x < b.f:
		return -1, true
	case x > b.f:
		return 1, true
	}
	return 0, b.exact
}

// fastValidate checks args against f and fingerprints them, in one pass.
// ok is true only when the arguments are JSON without a repeated key and
// the library would accept them; fp is then Fingerprint of their decoded
// value. ok false says nothing: the caller takes the slow way.
func fastValidate(f *fastSchema, args []byte) (fp uint64, ok bool) {
	w := fastWalk{jsonCursor: jsonCursor{b: args}, h: offset64, hashing: true}
	if !w.value(f, 0) {
		return 0, false
	}
	w.space()
	if w.i != len(w.b) {
		return 0, false
	}
	return uint64(w.h), true
}

// fastWalk reads one argument document. h is the fingerprint so far.
type fastWalk struct {
	jsonCursor
	h fnv64
	// hashing is false while the walk reads the rest of an object whose
	// keys turned out to be out of order: it is hashed again, in key
	// order, once read.
	hashing bool
}

// fastMember is a member of an object being read: where its key (without
// quotes) and its value lie in the document. An object whose keys are
// out of order is hashed again in key order from its members.
type fastMember struct {
	keyStart, keyEnd, valueStart int
}

// value reads a value that must conform to f (nil: any value) and hashes
// it. It reports false when it cannot vouch for the value.
func (w *fastWalk) value(f *fastSchema, depth int) bool {
	if f != nil && (f.unsure || f.never) {
		return false
	}
	w.space()
	if w.i >= len(w.b) {
		return false
	}
	switch c := w.b[w.i]; {
	case c == '{':
		return w.object(f, depth+1)
	case c == '[':
		return w.array(f, depth+1)
	case c == '"':
		return w.stringValue(f)
	case c == '-' || c >= '0' && c <= '9':
		return w.number(f)
	case c == 't':
		return w.literal(f, "true", typeBoolean, 't')
	case c == 'f':
		return w.literal(f, "false", typeBoolean, 'f')
	case c == 'n':
		return w.literal(f, "null", typeNull, 'n')
	}
	return false
}

// allows reports whether f's type keyword admits type t.
func (f *fastSchema) allows(t fastTypes) bool { return f.types == 0 || f.types&t != 0 }

func (w *fastWalk) literal(f *fastSchema, text string, t fastTypes, mark byte) bool {
	if len(w.b)-w.i < len(text) || string(w.b[w.i:w.i+len(text)]) != text {
		return false
	}
	w.i += len(text)
	if f != nil {
		if !f.allows(t) {
			return false
		}
		for _, e := range f.enums {
			if !(mark == 'n' && e.hasNull || mark == 't' && e.hasTrue || mark == 'f' && e.hasFalse) {
				return false
			}
		}
	}
	if w.hashing {
		w.h.byte(mark)
	}
	return true
}

func (w *fastWalk) object(f *fastSchema, depth int) bool {
	if depth > maxFastDepth {
		return false
	}
	if f != nil && (!f.allows(typeObject) || len(f.enums) > 0) {
		return false
	}
	w.i++ // '{'
	start, hashing := w.h, w.hashing
	if hashing {
		w.h.byte('{')
	}
	var local [16]fastMember // on the stack, for the usual object
	members := local[:0]
	inOrder := true // keys so far in strictly increasing order
	var seen uint64
	n := 0
	w.space()
	if w.i < len(w.b) && w.b[w.i] == '}' {
		w.i++
	} else {
		for {
			w.space()
			ks, ke, ok := w.key()
			if !ok {
				return false
			}
			key := w.b[ks:ke]
			if n > 0 && inOrder {
				last := members[n-1]
				if bytes.Compare(w.b[last.keyStart:last.keyEnd], key) >= 0 {
					// Hashed again in key order at the end: hash
					// nothing more until then.
					inOrder, w.hashing = false, false
				}
			}
			w.space()
			if w.i >= len(w.b) || w.b[w.i] != ':' {
				return false
			}
			w.i++
			var sub *fastSchema
			if f != nil {
				if k := f.lookup(key); k >= 0 {
					seen |= 1 << k
					if k < len(f.props) {
						sub = f.props[k]
					} else if f.noAdditional {
						return false
					} else {
						sub = f.additional
					}
				} else if f.noAdditional {
					return false
				} else {
					sub = f.additional
				}
			}
			if w.hashing {
				w.h.strBytes(key)
			}
			w.space()
			vs := w.i
			if !w.value(sub, depth) {
				return false
			}
			members = append(members, fastMember{keyStart: ks, keyEnd: ke, valueStart: vs})
			n++
			if end, ok := w.after('}'); !ok {
				return false
			} else if end {
				break
			}
		}
	}
	if f != nil {
		if seen&f.required != f.required ||
			f.minProps >= 0 && n < f.minProps || f.maxProps >= 0 && n > f.maxProps {
			return false
		}
	}
	if !inOrder {
		if !sortMembers(w.b, members) {
			return false // the slow way names the repeated key
		}
		w.hashing = hashing
		if hashing {
			w.rehashObject(start, members, depth)
		}
	}
	if hashing {
		w.h.byte('}')
	}
	return true
}

// sortMembers sorts the members of an object by key and reports
// whether no key repeats.
func sortMembers(b []byte, ms []fastMember) bool {
	key := func(m fastMember) []byte { return b[m.keyStart:m.keyEnd] }
	if len(ms) <= 16 {
		for i := 1; i < len(ms); i++ {
			for j := i; j > 0 && bytes.Compare(key(ms[j-1]), key(ms[j])) > 0; j-- {
				ms[j-1], ms[j] = ms[j], ms[j-1]
			}
		}
	} else {
		slices.SortFunc(ms, func(x, y fastMember) int { return bytes.Compare(key(x), key(y)) })
	}
	for i := 1; i < len(ms); i++ {
		if bytes.Equal(key(ms[i-1]), key(ms[i])) {
			return false
		}
	}
	return true
}

// rehashObject hashes, from start, the members of the object just read,
// sorted by key, as Fingerprint does: the key, then the value read again.
func (w *fastWalk) rehashObject(start fnv64, ms []fastMember, depth int) {
	end := w.i
	w.h = start
	w.h.byte('{')
	for _, m := range ms {
		w.h.strBytes(w.b[m.keyStart:m.keyEnd])
		w.i = m.valueStart
		w.value(nil, depth) // read once already: it reads the same
	}
	w.i = end
}

// key reads an object's key: the bytes between its quotes, which must
// read as they are (no escape, valid UTF-8), so that they are the key the
// decoder would give and keys compare and sort as bytes.
func (w *fastWalk) key() (start, end int, ok bool) {
	if w.i >= len(w.b) || w.b[w.i] != '"' {
		return 0, 0, false
	}
	w.i++
	start = w.i
	ascii := true
	for w.i < len(w.b) {
		c := w.b[w.i]
		switch {
		case c == '"':
			end = w.i
			w.i++
			if !ascii && !utf8.Valid(w.b[start:end]) {
				return 0, 0, false
			}
			return start, end, true
		case c == '\\' || c < 0x20:
			return 0, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		w.i++
	}
	return 0, 0, false
}

// lookup returns the index of name among f's names, or -1.
func (f *fastSchema) lookup(name []byte) int {
	if f.index != nil {
		if k, ok := f.index[string(name)]; ok {
			return k
		}
		return -1
	}
	for k, n := range f.names {
		if n == string(name) {
			return k
		}
	}
	return -1
}

func (w *fastWalk) array(f *fastSchema, depth int) bool {
	if depth > maxFastDepth {
		return false
	}
	var items *fastSchema
	if f != nil {
		if !f.allows(typeArray) || len(f.enums) > 0 {
			return false
		}
		items = f.items
	}
	w.i++ // '['
	if w.hashing {
		w.h.byte('[')
	}
	n := 0
	w.space()
	if w.i < len(w.b) && w.b[w.i] == ']' {
		w.i++
	} else {
		for {
			if !w.value(items, depth) {
				return false
			}
			n++
			if end, ok := w.after(']'); !ok {
				return false
			} else if end {
				break
			}
		}
	}
	if f != nil && (f.minItems >= 0 && n < f.minItems || f.maxItems >= 0 && n > f.maxItems) {
		return false
	}
	if w.hashing {
		w.h.byte(']')
	}
	return true
}

// stringValue reads a string value, decoded as encoding/json decodes it
// (escapes, surrogate pairs, U+FFFD for a lone surrogate or a byte of
// invalid UTF-8), checks it and hashes it.
func (w *fastWalk) stringValue(f *fastSchema) bool {
	w.i++ // '"'
	start := w.i
	plain, ascii := true, true
	for {
		if w.i >= len(w.b) {
			return false
		}
		c := w.b[w.i]
		if c == '"' {
			break
		}
		switch {
		case c < 0x20:
			return false
		case c == '\\':
			plain = false
			w.i++ // the escaped character is not the closing quote
		case c >= utf8.RuneSelf:
			ascii = false
		}
		w.i++
	}
	s := w.b[start:w.i]
	w.i++ // '"'
	if !plain || !ascii && !utf8.Valid(s) {
		var ok bool
		var buf [64]byte // on the stack, for the usual string
		if s, ok = unquote(s, buf[:0]); !ok {
			return false
		}
	}
	if f != nil {
		if !f.allows(typeString) {
			return false
		}
		if f.minLen >= 0 || f.maxLen >= 0 {
			n := len(s)
			if !ascii || !plain {
				n = utf8.RuneCount(s)
			}
			if f.minLen >= 0 && n < f.minLen || f.maxLen >= 0 && n > f.maxLen {
				return false
			}
		}
		for _, e := range f.enums {
			if !e.hasString(s) {
				return false
			}
		}
	}
	if w.hashing {
		w.h.strBytes(s)
	}
	return true
}

// unquote decodes the content of a JSON string as encoding/json does,
// appending it to out. ok is false for an escape JSON does not have.
func unquote(s, out []byte) (decoded []byte, ok bool) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return nil, false
			}
			switch s[i+1] {
			case '"', '\\', '/':
				out = append(out, s[i+1])
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(s[i+2:])
				if r < 0 {
					return nil, false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// A pair makes one code point; a surrogate
					// without its partner becomes U+FFFD.
					if r2 := u4(s[i:]); r2 >= 0 {
						if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
							out = utf8.AppendRune(out, pair)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return nil, false
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(s[i:])
			out = utf8.AppendRune(out, r) // U+FFFD for each byte of invalid UTF-8
			i += n
		}
	}
	return out, true
}

// hex4 reads four hexadecimal digits, or returns -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// u4 reads an escape \uXXXX, or returns -1.
func u4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	return hex4(s[2:])
}

// number reads a number in JSON's grammar as encoding/json does, into a
// float64, checks it and hashes it.
func (w *fastWalk) number(f *fastSchema) bool {
	start := w.i
	neg := w.b[w.i] == '-'
	if neg {
		w.i++
	}
	intStart := w.i
	switch {
	case w.i < len(w.b) && w.b[w.i] == '0':
		w.i++
	case w.i < len(w.b) && w.b[w.i] >= '1' && w.b[w.i] <= '9':
		w.digits()
	default:
		return false
	}
	if w.i-intStart <= 15 && (w.i == len(w.b) || w.b[w.i] != '.' && w.b[w.i] != 'e' && w.b[w.i] != 'E') {
		// An integer of at most 15 digits: exact in a float64, as
		// ParseFloat would read it (-0 included).
		var n int64
		for _, c := range w.b[intStart:w.i] {
			n = n*10 + int64(c-'0')
		}
		x := float64(n)
		if neg {
			x = -x
		}
		return w.checkNumber(f, x)
	}
	if w.i < len(w.b) && w.b[w.i] == '.' {
		w.i++
		if !w.digits() {
			return false
		}
	}
	if w.i < len(w.b) && (w.b[w.i] == 'e' || w.b[w.i] == 'E') {
		w.i++
		if w.i < len(w.b) && (w.b[w.i] == '+' || w.b[w.i] == '-') {
			w.i++
		}
		if !w.digits() {
			return false
		}
	}
	x, err := strconv.ParseFloat(string(w.b[start:w.i]), 64)
	if err != nil {
		return false
	}
	return w.checkNumber(f, x)
}

// checkNumber checks a number read as x and hashes it.
func (w *fastWalk) checkNumber(f *fastSchema, x float64) bool {
	if f != nil && !f.allowsNumber(x) {
		return false
	}
	if w.hashing {
		w.h.byte('#')
		w.h.uint(math.Float64bits(x))
	}
	return true
}

// allowsNumber reports whether x conforms to f's assertions on numbers.
func (f *fastSchema) allowsNumber(x float64) bool {
	if f.types != 0 && f.types&typeNumber == 0 && (f.types&typeInteger == 0 || x != math.Trunc(x)) {
		return false
	}
	if f.minimum.set {
		if c, sure := f.minimum.cmp(x); !sure || c < 0 {
			return false
		}
	}
	if f.maximum.set {
		if c, sure := f.maximum.cmp(x); !sure || c > 0 {
			return false
		}
	}
	if f.exclusiveMin.set {
		if c, sure := f.exclusiveMin.cmp(x); !sure || c <= 0 {
			return false
		}
	}
	if f.exclusiveMax.set {
		if c, sure := f.exclusiveMax.cmp(x); !sure || c >= 0 {
			return false
		}
	}
	for _, e := range f.enums {
		if !slices.Contains(e.nums, x) {
			return false
		}
	}
	return true
}

// digits reads one or more decimal digits and reports whether there was one.
func (w *fastWalk) digits() bool {
	start := w.i
	for w.i < len(w.b) && w.b[w.i] >= '0' && w.b[w.i] <= '9' {
		w.i++
	}
	return w.i > start
}
