package tool

// A compiled validator for the subset of JSON Schema that inferred schemas
// (jsonschema.For of Go types) and typical MCP tool schemas use. It checks
// the raw argument bytes in one pass, without decoding them into an any
// (it allocates only for objects of more than 16 members, and to describe
// a violation), and computes the same fingerprint as Fingerprint of the
// decoded value along the way. Its verdicts are jsonschema-go's: tests and
// fuzz targets compare the two on fixed and on generated schemas, and
// arguments (fastschema_test.go, genschema_test.go).
//
// The fingerprint hashes object members in sorted key order, and FNV
// cannot combine hashes computed apart, so members must be visited in that
// order. The validator validates and hashes an object's members as they
// come while their keys increase (one key, or keys written sorted). At the
// first key out of order it skims the rest of the object for where the
// members are, sorts them, hashes again the members before that key, and
// validates and hashes the others in sorted order. Only those first
// members are read twice, and the skim is cheap. A budget bounds the
// re-reading, which objects out of order nested many levels deep could
// make quadratic; past it, objects are validated in document order and
// the fingerprint is computed by decoding the arguments instead.
//
// Duplicate keys are rejected: a bit set of the properties seen catches
// repeated properties; other repeated keys are found by sorting.
//
// A schema that uses any keyword outside the subset does not compile, and
// (*Tool).Validate uses jsonschema-go for it, which remains the validator
// of record. The subset is: type, enum and const (of null, booleans,
// numbers and strings), minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, minLength, maxLength, items (a single schema),
// minItems, maxItems, properties, required, additionalProperties, the
// false schema ({"not": {}}), and annotations that do not affect
// validation: $schema, $comment, title, description, default, examples,
// deprecated, readOnly, writeOnly, property order, and keywords unknown to
// jsonschema-go (which it ignores too).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// JSON value kinds, as bits of a type set.
const (
	kindNull    uint8 = 1 << iota
	kindBool          // true or false
	kindInteger       // a number with no fractional part
	kindNumber        // a number with a fractional part
	kindString
	kindArray
	kindObject

	kindAny = kindNull | kindBool | kindInteger | kindNumber | kindString | kindArray | kindObject
)

// maxNestingDepth is encoding/json's limit on nested arrays and objects;
// deeper input is not valid JSON to it, so not to us either.
const maxNestingDepth = 10000

// fastSchema is a compiled input schema. A nil *fastSchema means the
// schema is outside the subset; its validate then checks only syntax and
// duplicate keys, and computes the fingerprint.
type fastSchema struct {
	root *fsNode
}

// fsNode is one compiled schema. A nil *fsNode accepts any value.
type fsNode struct {
	never bool  // the false schema: no value is valid
	types uint8 // allowed kinds; kindAny when there is no type keyword

	hasEnum bool // enum is present, possibly empty
	enum    []fsConst
	hasCons bool
	cons    fsConst

	hasMin, hasMax, hasXMin, hasXMax bool
	min, max, xmin, xmax             float64

	hasMinLen, hasMaxLen bool
	minLen, maxLen       int

	items                   *fsNode
	hasMinItems, hasMaxItem bool
	minItems, maxItems      int

	props    []fsProp
	propIdx  map[string]int // for lookups when there are many properties
	maxName  int            // the longest property name, in bytes
	required []int          // the required properties, as indexes in props
	reqMask  [fsMaxProps / 64]uint64
	addl     *fsNode // additionalProperties; nil accepts anything
	addlNo   bool    // additionalProperties is false

	// Precomputed message parts.
	typeText string
	enumText string
}

// fsProp is a property named in properties or required.
type fsProp struct {
	name     string
	node     *fsNode
	declared bool // in properties; otherwise additionalProperties applies
}

// fsConst is a scalar from enum or const.
type fsConst struct {
	kind uint8 // kindNull, kindBool, kindNumber or kindString
	b    bool
	f    float64
	s    string
}

// fsFalse reports whether s is the false schema as jsonschema-go spells
// it: {"not": {}}.
func fsFalse(s *jsonschema.Schema) bool {
	return s.Not != nil && reflect.ValueOf(*s.Not).IsZero()
}

// fsKeywords are the Schema fields the compiler understands; any other
// field that is set makes the schema unsupported.
var fsKeywords = map[string]bool{
	"Schema": true, "Comment": true, "Title": true, "Description": true,
	"Default": true, "Deprecated": true, "ReadOnly": true, "WriteOnly": true,
	"Examples": true, "PropertyOrder": true, "Extra": true,
	"Type": true, "Types": true, "Enum": true, "Const": true,
	"Minimum": true, "Maximum": true, "ExclusiveMinimum": true, "ExclusiveMaximum": true,
	"MinLength": true, "MaxLength": true,
	"Items": true, "MinItems": true, "MaxItems": true,
	"Properties": true, "Required": true, "AdditionalProperties": true,
	"Not": true, // only as the false schema
}

// compileFast compiles a schema that jsonschema-go resolved, or returns nil
// if it uses keywords outside the subset.
func compileFast(s *jsonschema.Schema) *fastSchema {
	root, ok := compileNode(s, 0)
	if !ok {
		return nil
	}
	return &fastSchema{root: root}
}

func compileNode(s *jsonschema.Schema, depth int) (*fsNode, bool) {
	if s == nil {
		return nil, true
	}
	if depth > 64 {
		return nil, false
	}
	rv := reflect.ValueOf(s).Elem()
	rt := rv.Type()
	for i := range rt.NumField() {
		f := rt.Field(i)
		if !rv.Field(i).IsZero() && !fsKeywords[f.Name] {
			return nil, false
		}
	}
	switch s.Schema {
	case "", "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-07/schema#",
		"https://json-schema.org/draft/2020-12/schema":
	default:
		return nil, false // jsonschema-go rejects every instance; let it say why
	}
	if s.Not != nil {
		if !fsFalse(s) {
			return nil, false
		}
		return &fsNode{never: true, types: kindAny}, true
	}

	n := &fsNode{types: kindAny}
	trivial := true
	var typeNames []string
	switch {
	case s.Type != "":
		typeNames = []string{s.Type}
	case s.Types != nil:
		typeNames = s.Types
	}
	if s.Type != "" || s.Types != nil {
		trivial = false
		n.types = 0
		for _, t := range typeNames {
			switch t {
			case "null":
				n.types |= kindNull
			case "boolean":
				n.types |= kindBool
			case "integer":
				n.types |= kindInteger
			case "number":
				n.types |= kindInteger | kindNumber
			case "string":
				n.types |= kindString
			case "array":
				n.types |= kindArray
			case "object":
				n.types |= kindObject
			default:
				return nil, false
			}
		}
		n.typeText = fsOr(typeNames)
	}
	if s.Enum != nil {
		trivial = false
		n.hasEnum = true
		texts := make([]string, 0, len(s.Enum))
		for _, e := range s.Enum {
			c, ok := fsConstOf(e)
			if !ok {
				return nil, false
			}
			n.enum = append(n.enum, c)
			texts = append(texts, c.String())
		}
		n.enumText = fsOr(texts)
	}
	if s.Const != nil {
		trivial = false
		c, ok := fsConstOf(*s.Const)
		if !ok {
			return nil, false
		}
		n.hasCons, n.cons = true, c
	}
	for _, b := range []struct {
		p   *float64
		has *bool
		v   *float64
	}{
		{s.Minimum, &n.hasMin, &n.min},
		{s.Maximum, &n.hasMax, &n.max},
		{s.ExclusiveMinimum, &n.hasXMin, &n.xmin},
		{s.ExclusiveMaximum, &n.hasXMax, &n.xmax},
	} {
		if b.p != nil {
			if math.IsNaN(*b.p) || math.IsInf(*b.p, 0) {
				return nil, false
			}
			trivial = false
			*b.has, *b.v = true, *b.p
		}
	}
	if s.MinLength != nil {
		trivial = false
		n.hasMinLen, n.minLen = true, *s.MinLength
	}
	if s.MaxLength != nil {
		trivial = false
		n.hasMaxLen, n.maxLen = true, *s.MaxLength
	}
	if s.MinItems != nil {
		trivial = false
		n.hasMinItems, n.minItems = true, *s.MinItems
	}
	if s.MaxItems != nil {
		trivial = false
		n.hasMaxItem, n.maxItems = true, *s.MaxItems
	}
	if s.Items != nil {
		items, ok := compileNode(s.Items, depth+1)
		if !ok {
			return nil, false
		}
		if items != nil {
			trivial = false
			n.items = items
		}
	}
	if s.AdditionalProperties != nil {
		addl, ok := compileNode(s.AdditionalProperties, depth+1)
		if !ok {
			return nil, false
		}
		if addl != nil {
			trivial = false
			if addl.never {
				n.addlNo = true
			} else {
				n.addl = addl
			}
		}
	}
	// Properties in a fixed order (the map's is random), so that error
	// messages are stable.
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		sub, ok := compileNode(s.Properties[name], depth+1)
		if !ok {
			return nil, false
		}
		if sub != nil {
			trivial = false
		}
		n.props = append(n.props, fsProp{name: name, node: sub, declared: true})
	}
	for _, name := range s.Required {
		i := slices.IndexFunc(n.props, func(p fsProp) bool { return p.name == name })
		if i < 0 {
			n.props = append(n.props, fsProp{name: name})
			i = len(n.props) - 1
		}
		if i < fsMaxProps && n.reqMask[i>>6]&(1<<(i&63)) == 0 { // else listed twice
			n.reqMask[i>>6] |= 1 << (i & 63)
			n.required = append(n.required, i)
		}
		trivial = false
	}
	if len(n.props) > fsMaxProps {
		return nil, false
	}
	for i, p := range n.props {
		n.maxName = max(n.maxName, len(p.name))
		if len(n.props) > 8 {
			if n.propIdx == nil {
				n.propIdx = make(map[string]int, len(n.props))
			}
			n.propIdx[p.name] = i
		}
	}
	if trivial {
		return nil, true
	}
	return n, true
}

// fsMaxProps bounds the properties (declared or required) of one object,
// so that the validator tracks those it has seen in a fixed-size bit set.
const fsMaxProps = 256

// fsConstOf converts an enum or const value the way jsonschema-go compares
// it: numbers by value, strings by content, whatever their Go types.
func fsConstOf(x any) (fsConst, bool) {
	if x == nil {
		return fsConst{kind: kindNull}, true
	}
	v := reflect.ValueOf(x)
	const exact = 1 << 53 // integers up to this convert to float64 exactly
	switch {
	case v.Kind() == reflect.Bool:
		return fsConst{kind: kindBool, b: v.Bool()}, true
	case v.Kind() == reflect.String:
		if _, ok := x.(json.Number); ok {
			return fsConst{}, false
		}
		return fsConst{kind: kindString, s: v.String()}, true
	case v.CanInt():
		if i := v.Int(); i >= -exact && i <= exact {
			return fsConst{kind: kindNumber, f: float64(i)}, true
		}
	case v.CanUint():
		if u := v.Uint(); u <= exact {
			return fsConst{kind: kindNumber, f: float64(u)}, true
		}
	case v.CanFloat():
		if f := v.Float(); !math.IsNaN(f) && !math.IsInf(f, 0) {
			return fsConst{kind: kindNumber, f: f}, true
		}
	}
	return fsConst{}, false
}

func (c fsConst) String() string {
	switch c.kind {
	case kindNull:
		return "null"
	case kindBool:
		return strconv.FormatBool(c.b)
	case kindNumber:
		return strconv.FormatFloat(c.f, 'g', -1, 64)
	}
	b, _ := json.Marshal(c.s)
	return string(b)
}

// fsOr joins alternatives: "a", "a or b", "a, b or c".
func fsOr(s []string) string {
	switch len(s) {
	case 0:
		return "nothing"
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// emptyArgs is what missing arguments mean, for validation only.
var emptyArgs = []byte("{}")

// validate checks args against the schema and fingerprints them. With a
// nil receiver it checks only that args are JSON without duplicate keys.
// Empty args mean {}.
func (fs *fastSchema) validate(args []byte) (uint64, error) {
	var root *fsNode
	if fs != nil {
		root = fs.root
	}
	if len(args) == 0 {
		args = emptyArgs
	}
	if len(args) > math.MaxInt32 { // offsets are int32
		return fingerprintBytes(args), &Error{Kind: KindInvalidArguments, Msg: "arguments are too large"}
	}
	v := validator{b: args, h: offset64, budget: 8*len(args) + 4096, dupAt: -1}
	if !v.document(root) {
		return fingerprintBytes(args), &Error{Kind: KindInvalidArguments, Msg: "arguments are not valid JSON: " + v.fatal}
	}
	if v.dupAt >= 0 {
		return fingerprintBytes(args), &Error{Kind: KindInvalidArguments, Msg: "duplicate argument " + quoteClipped(locate(args, v.dupAt))}
	}
	fp := uint64(v.h)
	if v.overBudget {
		var x any
		if err := json.Unmarshal(args, &x); err != nil {
			return fingerprintBytes(args), &Error{Kind: KindInvalidArguments, Msg: "arguments are not valid JSON: " + err.Error()}
		}
		fp = Fingerprint(x)
	}
	if v.errKind != errNone {
		return fp, &Error{Kind: KindInvalidArguments, Msg: "arguments do not match the schema: " + v.message()}
	}
	return fp, nil
}

// validator is the state of one validation. It lives on the stack, so it
// must hold no pointer to itself or to other locals.
type validator struct {
	b []byte
	i int   // read position
	h fnv64 // the fingerprint so far
	// budget is how many bytes objects out of order may skim or read again
	// before the fingerprint is left to the decoder.
	budget     int
	overBudget bool
	fatal      string // why b is not JSON; validation stopped
	dupAt      int    // offset of the value of the first duplicate key, or -1

	// The first schema violation. Only the offset of the offending value is
	// kept; the path to it is worked out if it is reported.
	errKind  uint8
	errAt    int
	errWhat  string   // for errValue
	errNames []string // for errMissing
}

// Kinds of schema violation.
const (
	errNone       uint8 = iota
	errValue            // the value at errAt: errWhat
	errUnexpected       // the value at errAt is of a key not allowed
	errMissing          // the object at errAt lacks errNames
)

// span locates an object member for sorting.
type span struct {
	k0, k1  int32 // the raw key, without quotes
	v0, v1  int32 // the value
	simple  bool  // the raw key is its decoded form
	pending bool  // the value is yet to be validated
}

func (v *validator) document(root *fsNode) bool {
	v.i = v.ws(0)
	if !v.value(root, 0) {
		return false
	}
	if i := v.ws(v.i); i < len(v.b) {
		return v.syntax(i, "after top-level value")
	}
	return true
}

// ws skips white space from i.
func (v *validator) ws(i int) int {
	for i < len(v.b) {
		switch v.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func (v *validator) syntax(i int, where string) bool {
	switch {
	case i >= len(v.b):
		v.fatal = "unexpected end of input"
	case where == "":
		v.fatal = fmt.Sprintf("invalid character %q at offset %d", v.b[i], i)
	default:
		v.fatal = fmt.Sprintf("invalid character %q at offset %d %s", v.b[i], i, where)
	}
	return false
}

// value validates the value at v.i, whose nesting depth is depth, against
// n, and hashes it. It returns false if the input is not JSON.
func (v *validator) value(n *fsNode, depth int) bool {
	b := v.b
	i := v.i
	if i >= len(b) {
		return v.syntax(i, "")
	}
	if n != nil && (v.errKind != errNone || n.never) {
		// After the first violation, only syntax and the hash matter.
		if n.never {
			v.fail(i, "not allowed")
		}
		n = nil
	}
	switch c := b[i]; c {
	case '{':
		return v.object(n, depth)
	case '[':
		return v.array(n, depth)
	case '"':
		end, simple, ok := v.str(i)
		if !ok {
			return false
		}
		v.i = end
		raw := b[i+1 : end-1]
		v.hashString(raw, simple)
		if n != nil {
			v.checkString(n, i, raw, simple)
		}
		return true
	case 't', 'f', 'n':
		lit := "null"
		switch c {
		case 't':
			lit = "true"
		case 'f':
			lit = "false"
		}
		if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
			return v.syntax(i, "in literal "+lit)
		}
		v.i = i + len(lit)
		v.h.byte(c)
		if n != nil {
			kind, con := kindNull, fsConst{kind: kindNull}
			if c != 'n' {
				kind, con = kindBool, fsConst{kind: kindBool, b: c == 't'}
			}
			v.checkScalar(n, i, kind, con)
		}
		return true
	}
	x, ok := v.number(i)
	if !ok {
		return false
	}
	v.h.byte('#')
	v.h.uint(math.Float64bits(x))
	if n != nil {
		v.checkNumber(n, i, x)
	}
	return true
}

// number scans the number at i, leaving v.i after it.
func (v *validator) number(i int) (float64, bool) {
	b := v.b
	j := i
	neg := j < len(b) && b[j] == '-'
	if neg {
		j++
	}
	if j >= len(b) {
		return 0, v.syntax(j, "")
	}
	var u uint64
	digits := 0
	switch c := b[j]; {
	case c == '0':
		j++
	case '1' <= c && c <= '9':
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			u = u*10 + uint64(b[j]-'0')
			digits++
			j++
		}
	default:
		if neg {
			return 0, v.syntax(j, "in numeric literal")
		}
		return 0, v.syntax(j, "looking for beginning of value")
	}
	plain := true
	if j < len(b) && b[j] == '.' {
		plain = false
		j++
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return 0, v.syntax(j, "after decimal point in numeric literal")
		}
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		plain = false
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return 0, v.syntax(j, "in exponent of numeric literal")
		}
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
	}
	v.i = j
	if plain && digits <= 15 {
		x := float64(u) // exact
		if neg {
			x = -x // -0 stays negative zero, as strconv.ParseFloat has it
		}
		return x, true
	}
	x, err := strconv.ParseFloat(string(b[i:j]), 64)
	if err != nil {
		v.fatal = fmt.Sprintf("number %s at offset %d is out of range", clip(string(b[i:j])), i)
		return 0, false
	}
	return x, true
}

// strPlain marks the bytes that need no attention inside a string.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str scans the string at i. It returns the offset after its closing
// quote and whether its raw content is its decoded form: no escapes, and
// valid UTF-8 (encoding/json replaces each invalid byte with U+FFFD).
func (v *validator) str(i int) (end int, simple, ok bool) {
	b := v.b
	j := i + 1
	esc, high := false, false
	for {
		for j < len(b) && strPlain[b[j]] {
			j++
		}
		if j >= len(b) {
			return 0, false, v.syntax(j, "")
		}
		switch c := b[j]; {
		case c == '"':
			simple = !esc && (!high || utf8.Valid(b[i+1:j]))
			return j + 1, simple, true
		case c == '\\':
			esc = true
			if j+1 >= len(b) {
				return 0, false, v.syntax(j+1, "")
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				for k := j + 2; k < j+6; k++ {
					if k >= len(b) {
						return 0, false, v.syntax(k, "")
					}
					if !isHex(b[k]) {
						return 0, false, v.syntax(k, "in \\u hexadecimal character escape")
					}
				}
				j += 6
			default:
				return 0, false, v.syntax(j+1, "in string escape code")
			}
		case c < 0x20:
			return 0, false, v.syntax(j, "in string literal")
		default:
			high = true
			j++
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// hashString hashes a string as Fingerprint does: '"', its decoded length
// as 8 bytes, its decoded bytes.
func (v *validator) hashString(raw []byte, simple bool) {
	h := v.h
	h.byte('"')
	n := len(raw)
	if !simple {
		n = decodedLen(raw)
	}
	h.uint(uint64(n))
	if simple {
		for _, c := range raw {
			h.byte(c)
		}
	} else {
		d := decoder{s: raw}
		var buf pieceBuf
		for {
			p, _, ok := d.next(&buf)
			if !ok {
				break
			}
			for _, c := range p {
				h.byte(c)
			}
		}
	}
	v.h = h
}

// array validates the array at v.i.
func (v *validator) array(n *fsNode, depth int) bool {
	if depth >= maxNestingDepth {
		v.fatal = "exceeded max depth"
		return false
	}
	b := v.b
	start := v.i
	if n != nil && (n.types&kindArray == 0 || n.hasEnum || n.hasCons) {
		v.mismatch(n, start, kindArray)
		n = nil
	}
	v.h.byte('[')
	var items *fsNode
	if n != nil {
		items = n.items
	}
	count := 0
	i := v.ws(start + 1)
	if i < len(b) && b[i] == ']' {
		i++
	} else {
		for {
			v.i = i
			if !v.value(items, depth+1) {
				return false
			}
			count++
			i = v.ws(v.i)
			if i >= len(b) {
				return v.syntax(i, "")
			}
			if b[i] == ',' {
				i = v.ws(i + 1)
				continue
			}
			if b[i] == ']' {
				i++
				break
			}
			return v.syntax(i, "after array element")
		}
	}
	v.i = i
	v.h.byte(']')
	if n != nil && v.errKind == errNone {
		if n.hasMinItems && count < n.minItems {
			v.fail(start, fmt.Sprintf("want at least %d %s, got %d", n.minItems, plural(n.minItems, "item"), count))
		} else if n.hasMaxItem && count > n.maxItems {
			v.fail(start, fmt.Sprintf("want at most %d %s, got %d", n.maxItems, plural(n.maxItems, "item"), count))
		}
	}
	return true
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// object validates the object at v.i.
//
// While its keys come in increasing order, it validates and hashes each
// member in turn. At the first key out of order, it skims the rest of the
// object to find the members, sorts them all, hashes again the members
// before that key, and validates and hashes the rest in sorted order. So
// each value is validated once, and only the members before the first key
// out of order are read twice.
func (v *validator) object(n *fsNode, depth int) bool {
	if depth >= maxNestingDepth {
		v.fatal = "exceeded max depth"
		return false
	}
	b := v.b
	start := v.i
	if n != nil && (n.types&kindObject == 0 || n.hasEnum || n.hasCons) {
		v.mismatch(n, start, kindObject)
		n = nil
	}
	saved := v.h
	v.h.byte('{')
	// Members, for sorting: in buf, or for a large object on the heap.
	var buf [16]span
	spans := buf[:0]
	var seen [fsMaxProps / 64]uint64 // the properties of n present
	other := n == nil                // a key that is not a property of n
	sorted := true
	reorder := false // members are validated in sorted order, after a skim
	i := v.ws(start + 1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return v.syntax(i, "looking for beginning of object key string")
			}
			end, simple, ok := v.str(i)
			if !ok {
				return false
			}
			key := b[i+1 : end-1]
			i = v.ws(end)
			if i >= len(b) || b[i] != ':' {
				return v.syntax(i, "after object key")
			}
			i = v.ws(i + 1)
			if sorted && len(spans) > 0 {
				last := spans[len(spans)-1]
				switch cmpKeys(b[last.k0:last.k1], last.simple, key, simple) {
				case 0:
					v.duplicate(i)
				case 1:
					sorted = false
					// Past the budget, validate in document order and leave
					// the fingerprint to the decoder.
					reorder = !v.overBudget
				}
			}
			sp := span{k0: int32(end - 1 - len(key)), k1: int32(end - 1), v0: int32(i), simple: simple}
			if reorder {
				e, ok := v.skip(i)
				if !ok {
					return false
				}
				sp.pending = true
				v.spend(e - i)
				v.i = e
			} else {
				sub := v.member(n, key, simple, i, &seen, &other)
				if sorted {
					v.hashString(key, simple)
				}
				v.i = i
				if !v.value(sub, depth+1) {
					return false
				}
			}
			sp.v1 = int32(v.i)
			spans = append(spans, sp)
			i = v.ws(v.i)
			if i >= len(b) {
				return v.syntax(i, "")
			}
			if b[i] == ',' {
				i = v.ws(i + 1)
				continue
			}
			if b[i] == '}' {
				i++
				break
			}
			return v.syntax(i, "after object key:value pair")
		}
	}
	if sorted {
		v.h.byte('}')
	} else if reorder || other {
		sortSpans(b, spans)
	}
	if reorder {
		v.h = saved
		v.h.byte('{')
		for _, s := range spans {
			key := b[s.k0:s.k1]
			v.hashString(key, s.simple)
			v.i = int(s.v0)
			if !s.pending {
				v.spend(int(s.v1 - s.v0))
				v.value(nil, depth+1) // cannot fail: it was read before
				continue
			}
			sub := v.member(n, key, s.simple, v.i, &seen, &other)
			if !v.value(sub, depth+1) {
				return false
			}
			if v.i != int(s.v1) {
				return v.syntax(v.i, "after object key:value pair")
			}
		}
		v.h.byte('}')
	}
	if !sorted && other {
		// The bit set catches repeated properties of n, but not other keys.
		for k := 1; k < len(spans); k++ {
			x, y := spans[k-1], spans[k]
			if cmpKeys(b[x.k0:x.k1], x.simple, b[y.k0:y.k1], y.simple) == 0 {
				v.duplicate(int(max(x.v0, y.v0)))
			}
		}
	}
	v.i = i
	if n != nil && len(n.required) > 0 && v.errKind == errNone {
		for w, want := range n.reqMask {
			if seen[w]&want != want {
				v.missing(n, start, seen[:])
				break
			}
		}
	}
	return true
}

// sortSpans sorts members by key.
func sortSpans(b []byte, spans []span) {
	if len(spans) > 12 {
		slices.SortFunc(spans, func(x, y span) int {
			return cmpKeys(b[x.k0:x.k1], x.simple, b[y.k0:y.k1], y.simple)
		})
		return
	}
	for i := 1; i < len(spans); i++ {
		x := spans[i]
		j := i
		for ; j > 0; j-- {
			y := spans[j-1]
			if cmpKeys(b[y.k0:y.k1], y.simple, b[x.k0:x.k1], x.simple) <= 0 {
				break
			}
			spans[j] = y
		}
		spans[j] = x
	}
}

// member looks up key, whose value is at at, in n, marks it seen, and
// returns the schema for the value.
func (v *validator) member(n *fsNode, key []byte, simple bool, at int, seen *[fsMaxProps / 64]uint64, other *bool) *fsNode {
	if n == nil {
		return nil
	}
	k := n.lookup(key, simple)
	if k < 0 {
		*other = true
	} else {
		bit := uint64(1) << (k & 63)
		if seen[k>>6]&bit != 0 {
			v.duplicate(at)
		}
		seen[k>>6] |= bit
		if p := &n.props[k]; p.declared {
			return p.node
		}
	}
	if n.addlNo {
		if v.errKind == errNone {
			v.errKind, v.errAt = errUnexpected, at
		}
		return nil
	}
	return n.addl
}

// spend charges reading n bytes again to the budget.
func (v *validator) spend(n int) {
	v.budget -= n
	if v.budget < 0 {
		v.overBudget = true
	}
}

// skip finds the end of the value at i without validating it, but for
// strings; the value is validated later, and must end there.
func (v *validator) skip(i int) (int, bool) {
	b := v.b
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			end, _, ok := v.str(i)
			if !ok {
				return 0, false
			}
			i = end
			if depth == 0 {
				return i, true
			}
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i, true
			}
			depth--
			i++
			if depth == 0 {
				return i, true
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i, true
			}
			i++
		default:
			i++
		}
	}
	if depth > 0 {
		return 0, v.syntax(i, "")
	}
	return i, true
}

// lookup returns the index of the property named key, or -1.
func (n *fsNode) lookup(key []byte, simple bool) int {
	if len(n.props) == 0 {
		return -1
	}
	if !simple {
		return n.lookupDecoded(key)
	}
	if n.propIdx != nil {
		if k, ok := n.propIdx[string(key)]; ok {
			return k
		}
		return -1
	}
	for k := range n.props {
		if n.props[k].name == string(key) {
			return k
		}
	}
	return -1
}

func (n *fsNode) lookupDecoded(key []byte) int {
	l := decodedLen(key)
	if l > n.maxName {
		return -1
	}
	var buf [64]byte
	d := buf[:0]
	if l > len(buf) {
		d = make([]byte, 0, l)
	}
	return n.lookup(decode(d, key), true)
}

// checkString applies n to the string at at.
func (v *validator) checkString(n *fsNode, at int, raw []byte, simple bool) {
	if n.types&kindString == 0 {
		v.mismatch(n, at, kindString)
		return
	}
	if n.hasEnum || n.hasCons {
		match := func(c fsConst) bool {
			if c.kind != kindString {
				return false
			}
			if simple {
				return string(raw) == c.s
			}
			return decodesTo(raw, c.s)
		}
		if n.hasCons && !match(n.cons) {
			v.failValue(at, n.cons.String())
			return
		}
		if n.hasEnum && !slices.ContainsFunc(n.enum, match) {
			v.failValue(at, n.enumText)
			return
		}
	}
	if n.hasMinLen || n.hasMaxLen {
		var runes int
		if simple {
			runes = utf8.RuneCount(raw)
		} else {
			d := decoder{s: raw}
			var buf pieceBuf
			for {
				_, r, ok := d.next(&buf)
				if !ok {
					break
				}
				runes += r
			}
		}
		if n.hasMinLen && runes < n.minLen {
			v.fail(at, fmt.Sprintf("want at least %d %s, got %d", n.minLen, plural(n.minLen, "character"), runes))
		} else if n.hasMaxLen && runes > n.maxLen {
			v.fail(at, fmt.Sprintf("want at most %d %s, got %d", n.maxLen, plural(n.maxLen, "character"), runes))
		}
	}
}

// checkScalar applies n to the null, true or false at at.
func (v *validator) checkScalar(n *fsNode, at int, kind uint8, c fsConst) {
	if n.types&kind == 0 {
		v.mismatch(n, at, kind)
		return
	}
	match := func(e fsConst) bool { return e == c }
	if n.hasCons && !match(n.cons) {
		v.failValue(at, n.cons.String())
	} else if n.hasEnum && !slices.ContainsFunc(n.enum, match) {
		v.failValue(at, n.enumText)
	}
}

// checkNumber applies n to the number x at at.
func (v *validator) checkNumber(n *fsNode, at int, x float64) {
	kind := kindNumber
	if _, frac := math.Modf(x); frac == 0 {
		kind = kindInteger
	}
	if n.types&kind == 0 {
		v.mismatch(n, at, kind)
		return
	}
	match := func(e fsConst) bool { return e.kind == kindNumber && e.f == x }
	raw := func() string { return clip(string(v.b[at:v.i])) }
	switch {
	case n.hasCons && !match(n.cons):
		v.failValue(at, n.cons.String())
	case n.hasEnum && !slices.ContainsFunc(n.enum, match):
		v.failValue(at, n.enumText)
	case n.hasMin && x < n.min:
		v.fail(at, fmt.Sprintf("%s is below the minimum %s", raw(), fmtNum(n.min)))
	case n.hasMax && x > n.max:
		v.fail(at, fmt.Sprintf("%s is above the maximum %s", raw(), fmtNum(n.max)))
	case n.hasXMin && x <= n.xmin:
		v.fail(at, fmt.Sprintf("%s is not above %s", raw(), fmtNum(n.xmin)))
	case n.hasXMax && x >= n.xmax:
		v.fail(at, fmt.Sprintf("%s is not below %s", raw(), fmtNum(n.xmax)))
	}
}

func fmtNum(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// mismatch reports the value at at, of the given kind, that n does not
// allow, or an array or object where n wants one of some scalars.
func (v *validator) mismatch(n *fsNode, at int, kind uint8) {
	if v.errKind != errNone {
		return
	}
	got := kindName(kind)
	switch {
	case n.types&kind == 0:
		if kind == kindNumber && n.types&kindInteger != 0 {
			got = clip(string(v.b[at:v.i])) // a fraction where an integer was wanted
		}
		v.fail(at, "want "+n.typeText+", got "+got)
	case n.hasCons:
		v.fail(at, "must be "+n.cons.String()+", got "+got)
	default:
		v.fail(at, "must be "+n.enumText+", got "+got)
	}
}

func kindName(k uint8) string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "boolean"
	case kindInteger, kindNumber:
		return "number"
	case kindString:
		return "string"
	case kindArray:
		return "array"
	}
	return "object"
}

// failValue reports a scalar at at that is not among those allowed.
func (v *validator) failValue(at int, want string) {
	if v.errKind != errNone {
		return
	}
	got := string(v.b[at:v.i])
	if len(got) > 40 {
		got = got[:37] + "..."
	}
	v.fail(at, "must be "+want+", got "+got)
}

// fail records a schema violation by the value at at, unless one was
// recorded before.
func (v *validator) fail(at int, problem string) {
	if v.errKind == errNone {
		v.errKind, v.errAt, v.errWhat = errValue, at, problem
	}
}

// missing records the required properties that the object at at lacks.
func (v *validator) missing(n *fsNode, at int, seen []uint64) {
	var names []string
	for _, k := range n.required {
		if seen[k>>6]&(1<<(k&63)) == 0 {
			names = append(names, n.props[k].name)
		}
	}
	v.errKind, v.errAt, v.errNames = errMissing, at, names
}

// duplicate records a repeated key, whose value is at at.
func (v *validator) duplicate(at int) {
	if v.dupAt < 0 {
		v.dupAt = at
	}
}

// message describes the schema violation.
func (v *validator) message() string {
	path := locate(v.b, v.errAt)
	switch v.errKind {
	case errUnexpected:
		return "unexpected argument " + quoteClipped(path)
	case errMissing:
		q := make([]string, len(v.errNames))
		for k, name := range v.errNames {
			q[k] = quoteClipped(joinPath(path, escapeKey(name)))
		}
		if len(q) == 1 {
			return "missing required argument " + q[0]
		}
		return "missing required arguments " + strings.Join(q, ", ")
	}
	if path == "" {
		return "arguments: " + v.errWhat
	}
	return "argument " + quoteClipped(path) + ": " + v.errWhat
}

func joinPath(a, b string) string {
	if a == "" {
		return b
	}
	return a + "/" + b
}

var keyEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escapeKey escapes a key for a JSON pointer.
func escapeKey(k string) string { return keyEscaper.Replace(k) }

// locate returns the path to the value at offset at in b, which is valid
// JSON, as a JSON pointer without its leading slash: "items/2/qty".
func locate(b []byte, at int) string {
	w := validator{b: b}
	var path []string
	w.locate(w.ws(0), at, &path)
	return strings.Join(path, "/")
}

// locate walks the value at i, appending to path the steps to the value
// at offset at. It returns where the value ends and whether it found at.
func (v *validator) locate(i, at int, path *[]string) (int, bool) {
	if i == at {
		return i, true
	}
	b := v.b
	switch b[i] {
	case '{', '[':
		obj := b[i] == '{'
		i = v.ws(i + 1)
		for k := 0; b[i] != '}' && b[i] != ']'; k++ {
			step := strconv.Itoa(k)
			if obj {
				end, simple, _ := v.str(i)
				key := b[i+1 : end-1]
				step = string(key)
				if !simple {
					step = string(decode(nil, key))
				}
				step = escapeKey(step)
				i = v.ws(v.ws(end) + 1) // past ':'
			}
			*path = append(*path, step)
			end, found := v.locate(i, at, path)
			if found {
				return end, true
			}
			*path = (*path)[:len(*path)-1]
			i = v.ws(end)
			if b[i] == ',' {
				i = v.ws(i + 1)
			}
		}
		return i + 1, false
	case '"':
		end, _, _ := v.str(i)
		return end, false
	case 't', 'n':
		return i + 4, false
	case 'f':
		return i + 5, false
	}
	v.number(i)
	return v.i, false
}

// cmpKeys compares two raw strings by their decoded forms, byte-wise, as
// slices.Sort orders Go strings.
func cmpKeys(a []byte, aSimple bool, b []byte, bSimple bool) int {
	if aSimple && bSimple {
		return bytes.Compare(a, b)
	}
	da, db := decoder{s: a, simple: aSimple}, decoder{s: b, simple: bSimple}
	var ba, bb pieceBuf
	var pa, pb []byte
	for {
		if len(pa) == 0 {
			pa, _, _ = da.next(&ba)
		}
		if len(pb) == 0 {
			pb, _, _ = db.next(&bb)
		}
		switch {
		case len(pa) == 0 && len(pb) == 0:
			return 0
		case len(pa) == 0:
			return -1
		case len(pb) == 0:
			return 1
		}
		m := min(len(pa), len(pb))
		if c := bytes.Compare(pa[:m], pb[:m]); c != 0 {
			return c
		}
		pa, pb = pa[m:], pb[m:]
	}
}

// decodesTo reports whether the raw string decodes to s.
func decodesTo(raw []byte, s string) bool {
	d := decoder{s: raw}
	var buf pieceBuf
	for {
		p, _, ok := d.next(&buf)
		if !ok {
			return s == ""
		}
		if len(p) > len(s) || string(p) != s[:len(p)] {
			return false
		}
		s = s[len(p):]
	}
}

// decodedLen is the length in bytes of a raw string once decoded.
func decodedLen(raw []byte) int {
	n := 0
	d := decoder{s: raw}
	var buf pieceBuf
	for {
		p, _, ok := d.next(&buf)
		if !ok {
			return n
		}
		n += len(p)
	}
}

// decode appends the decoded form of raw to dst.
func decode(dst, raw []byte) []byte {
	d := decoder{s: raw}
	var buf pieceBuf
	for {
		p, _, ok := d.next(&buf)
		if !ok {
			return dst
		}
		dst = append(dst, p...)
	}
}

// decoder yields the decoded form of a raw JSON string, which must be
// syntactically valid, in pieces, exactly as encoding/json decodes it:
// escapes resolved, and invalid UTF-8 and unpaired surrogates replaced
// with U+FFFD.
type decoder struct {
	s      []byte
	i      int
	simple bool // s is its own decoded form
}

// pieceBuf holds a decoded escape. It is the caller's, not the decoder's,
// so that a decoder holds no pointer to itself and can stay on the stack.
type pieceBuf [utf8.UTFMax]byte

var replacement = []byte(string(utf8.RuneError))

// next returns the next piece of the decoded string and the number of code
// points in it, or ok false at the end. The piece may be in buf.
func (d *decoder) next(buf *pieceBuf) (piece []byte, runes int, ok bool) {
	s := d.s
	i := d.i
	if i >= len(s) {
		return nil, 0, false
	}
	if d.simple {
		d.i = len(s)
		return s[i:], utf8.RuneCount(s[i:]), true
	}
	c := s[i]
	if c == '\\' {
		var r rune
		switch s[i+1] {
		case 'u':
			r = hex4(s[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					r2 = hex4(s[i+2 : i+6])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
		case 'b':
			r, i = '\b', i+2
		case 'f':
			r, i = '\f', i+2
		case 'n':
			r, i = '\n', i+2
		case 'r':
			r, i = '\r', i+2
		case 't':
			r, i = '\t', i+2
		default: // '"', '\\', '/'
			r, i = rune(s[i+1]), i+2
		}
		d.i = i
		return buf[:utf8.EncodeRune(buf[:], r)], 1, true
	}
	if c >= utf8.RuneSelf {
		if r, size := utf8.DecodeRune(s[i:]); r == utf8.RuneError && size == 1 {
			d.i = i + 1
			return replacement, 1, true
		}
	}
	// A run of valid UTF-8 up to the next escape or invalid byte.
	j := i
	for j < len(s) {
		c := s[j]
		if c == '\\' {
			break
		}
		if c < utf8.RuneSelf {
			j++
			runes++
			continue
		}
		r, size := utf8.DecodeRune(s[j:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		j += size
		runes++
	}
	d.i = j
	return s[i:j], runes, true
}

func hex4(s []byte) rune {
	var r rune
	for _, c := range s {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
