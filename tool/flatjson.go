package tool

// A decoder and an encoder for the commonest tool inputs and outputs: a
// struct whose fields are strings, booleans and integers. encoding/json
// spends most of a quick tool's time on such values (about 3,500
// instructions to decode {"key":"k1"} and 1,700 to encode {"ok":true}, for
// its reflection, field cache and scanner); these do the same work in a
// tenth of that.
//
// They are shortcuts, never a second JSON dialect: a type qualifies only if
// encoding/json would treat it plainly (no JSON or text methods, no
// embedded fields, no options but omitempty, names it uses as they are),
// and a value only if it is plain too (no escapes, no null, a key that
// names a field exactly, integers within range). Anything else goes to
// encoding/json, which then answers (or fails) exactly as it always has.

import (
	"encoding"
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unsafe"
)

// flatField is one field of a flat struct.
type flatField struct {
	name      string // the JSON key
	offset    uintptr
	kind      reflect.Kind
	bits      int // an integer field's size in bits, as strconv wants it
	omitEmpty bool
}

// flatCodec decodes or encodes one flat struct type; nil when the type
// does not qualify.
type flatCodec struct {
	fields []flatField
}

var (
	jsonMarshaler     = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler   = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler     = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler   = reflect.TypeFor[encoding.TextUnmarshaler]()
	flatMethodClasses = []reflect.Type{jsonMarshaler, jsonUnmarshaler, textMarshaler, textUnmarshaler}
)

// hasJSONMethods reports whether t or *t has a method that encoding/json
// would call instead of treating the value plainly.
func hasJSONMethods(t reflect.Type) bool {
	for _, m := range flatMethodClasses {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return true
		}
	}
	return false
}

// flatKey reports whether a tag name is one encoding/json uses as it is
// and that needs no escaping: letters, digits and '_' only.
func flatKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// newFlatCodec compiles the codec of t, or returns nil.
func newFlatCodec(t reflect.Type) *flatCodec {
	if t == nil || t.Kind() != reflect.Struct || hasJSONMethods(t) {
		return nil
	}
	c := &flatCodec{}
	seen := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Anonymous {
			return nil // embedded fields follow rules of their own
		}
		if !sf.IsExported() {
			continue // encoding/json ignores it
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		switch opts {
		case "", "omitempty":
		default:
			return nil // string, omitzero, or unknown
		}
		if name == "" {
			name = sf.Name
		}
		if !flatKey(name) {
			return nil // escaped, or (an invalid tag) replaced by the Go name
		}
		// Keys match fields case-insensitively in encoding/json when no
		// field matches exactly; refuse types where two names fold alike,
		// so that an exact match is the only match.
		folded := strings.ToLower(name)
		if seen[folded] {
			return nil
		}
		seen[folded] = true
		ft := sf.Type
		if hasJSONMethods(ft) {
			return nil
		}
		switch ft.Kind() {
		case reflect.String, reflect.Bool,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		default:
			return nil
		}
		if sf.Offset > math.MaxUint32 { // offsets are uint32 in flatString
			return nil
		}
		c.fields = append(c.fields, flatField{name: name, offset: sf.Offset, kind: ft.Kind(), bits: int(ft.Size()) * 8, omitEmpty: opts == "omitempty"})
	}
	return c
}

// field returns the field named exactly key, or nil.
func (c *flatCodec) field(key []byte) *flatField {
	for i := range c.fields {
		if name := c.fields[i].name; len(name) == len(key) && sameName(name, key) {
			return &c.fields[i]
		}
	}
	return nil
}

// flatInteger returns the integer literal at b[i] and the index after it,
// if it is one in JSON's grammar (no fraction, no exponent).
func flatInteger(b []byte, i int) ([]byte, int, bool) {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b) || b[i] < '0' || b[i] > '9':
		return nil, 0, false
	case b[i] == '0':
		i++
	default:
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E' || '0' <= b[i] && b[i] <= '9') {
		return nil, 0, false
	}
	return b[start:i], i, true
}

// decode decodes args into the zero struct at p, as json.Unmarshal would,
// and reports whether it could; when it could not, the struct may be
// partly written and must be reset before anything else decodes into it.
//
// The strings it decodes share one allocation, made when the object has
// been read, with room for reserve bytes more after them: spare is that
// room, empty, for the caller to append to; nil if no string needed
// memory. Sharing is safe: the strings and whatever is appended to spare
// lie in disjoint parts of the allocation, and neither can reach the
// other's part.
func (c *flatCodec) decode(args []byte, p unsafe.Pointer, reserve int) (spare []byte, ok bool) {
	if len(args) > math.MaxInt32 { // offsets are int32
		return nil, false
	}
	var pend flatPending
	i := skipSpace(args, 0)
	if i >= len(args) || args[i] != '{' {
		return nil, false
	}
	i = skipSpace(args, i+1)
	if i < len(args) && args[i] == '}' {
		return nil, skipSpace(args, i+1) == len(args)
	}
	for {
		// A key with anything but printable ASCII names no field.
		if i >= len(args) || args[i] != '"' {
			return nil, false
		}
		j := plainScan(args, i+1)
		if j >= len(args) || args[j] != '"' {
			return nil, false
		}
		f := c.field(args[i+1 : j])
		if f == nil {
			return nil, false // unknown, or matched only case-insensitively
		}
		i = skipSpace(args, j+1)
		if i >= len(args) || args[i] != ':' {
			return nil, false
		}
		i = skipSpace(args, i+1)
		if f.kind == reflect.String {
			if i >= len(args) || args[i] != '"' {
				return nil, false
			}
			end := plainScan(args, i+1) // plainEnd, its commonest case inline
			if end >= len(args) || args[end] != '"' {
				if end = plainEndUTF8(args, i, end); end < 0 {
					return nil, false
				}
			}
			if pend.n == len(pend.s) {
				// More strings than there is room for (a key repeated):
				// store the first ones, as a later value must win.
				pend.flush(args, p, 0)
			}
			pend.s[pend.n] = flatString{uint32(f.offset), int32(i + 1), int32(end)}
			pend.n++
			pend.bytes += end - i - 1
			i = end + 1
		} else if i, ok = f.decode(args, i, unsafe.Add(p, f.offset)); !ok {
			return nil, false
		}
		i = skipSpace(args, i)
		if i >= len(args) {
			return nil, false
		}
		switch args[i] {
		case ',':
			i = skipSpace(args, i+1)
		case '}':
			if skipSpace(args, i+1) != len(args) {
				return nil, false
			}
			return pend.flush(args, p, reserve), true
		default:
			return nil, false
		}
	}
}

// flatPending holds the strings of a flat struct that are read but not
// yet stored, to store them all in one allocation.
type flatPending struct {
	n, bytes int // strings, and their total length
	s        [8]flatString
}

// flatString is a string field's value, read but not stored.
type flatString struct {
	offset uint32 // of the field in the struct
	s0, s1 int32  // the string in the arguments
}

// flush stores the pending strings into the struct at p in one allocation
// with reserve bytes to spare, which it returns; nil if it made none.
func (pd *flatPending) flush(args []byte, p unsafe.Pointer, reserve int) []byte {
	if pd.bytes == 0 {
		for x := range pd.s[:pd.n] {
			*(*string)(unsafe.Add(p, uintptr(pd.s[x].offset))) = ""
		}
		pd.n = 0
		return nil
	}
	buf := make([]byte, pd.bytes+reserve)
	if pd.n == 1 { // the commonest case, without the loop's bookkeeping
		s := &pd.s[0]
		copy(buf, args[s.s0:s.s1])
		*(*string)(unsafe.Add(p, uintptr(s.offset))) = unsafe.String(&buf[0], pd.bytes)
		k := pd.bytes
		pd.n, pd.bytes = 0, 0
		return buf[k:k:len(buf)]
	}
	k := 0
	for x := range pd.s[:pd.n] {
		s := &pd.s[x]
		str := ""
		if n := copy(buf[k:], args[s.s0:s.s1]); n > 0 {
			str = unsafe.String(&buf[k], n)
			k += n
		}
		*(*string)(unsafe.Add(p, uintptr(s.offset))) = str
	}
	pd.n, pd.bytes = 0, 0
	return buf[k:k:len(buf)]
}

// decode decodes the value at b[i] into the field at p, which is not a
// string.
func (f *flatField) decode(b []byte, i int, p unsafe.Pointer) (int, bool) {
	switch f.kind {
	case reflect.Bool:
		switch {
		case len(b)-i >= 4 && string(b[i:i+4]) == "true":
			*(*bool)(p) = true
			return i + 4, true
		case len(b)-i >= 5 && string(b[i:i+5]) == "false":
			*(*bool)(p) = false
			return i + 5, true
		}
		return 0, false
	}
	lit, j, ok := flatInteger(b, i)
	if !ok {
		return 0, false
	}
	switch f.kind {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(string(lit), 10, f.bits)
		if err != nil {
			return 0, false
		}
		switch f.kind {
		case reflect.Int:
			*(*int)(p) = int(n)
		case reflect.Int8:
			*(*int8)(p) = int8(n)
		case reflect.Int16:
			*(*int16)(p) = int16(n)
		case reflect.Int32:
			*(*int32)(p) = int32(n)
		default:
			*(*int64)(p) = n
		}
		return j, true
	}
	n, err := strconv.ParseUint(string(lit), 10, f.bits)
	if err != nil {
		return 0, false
	}
	switch f.kind {
	case reflect.Uint:
		*(*uint)(p) = uint(n)
	case reflect.Uint8:
		*(*uint8)(p) = uint8(n)
	case reflect.Uint16:
		*(*uint16)(p) = uint16(n)
	case reflect.Uint32:
		*(*uint32)(p) = uint32(n)
	default:
		*(*uint64)(p) = n
	}
	return j, true
}

// flatSafe marks the bytes encoding/json writes into a string as they
// are: printable ASCII but the quote, the backslash and the HTML
// characters it escapes.
var flatSafe = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	t['"'], t['\\'], t['<'], t['>'], t['&'] = false, false, false, false, false
	return t
}()

// encode appends the JSON encoding of the struct at p to dst, as
// json.Marshal would write it, and reports whether it could: a string
// that would need escaping makes it give up.
func (c *flatCodec) encode(dst []byte, p unsafe.Pointer) ([]byte, bool) {
	dst = append(dst, '{')
	first := true
	for i := range c.fields {
		f := &c.fields[i]
		q := unsafe.Add(p, f.offset)
		if f.omitEmpty && f.empty(q) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, f.name...)
		dst = append(dst, '"', ':')
		switch f.kind {
		case reflect.String:
			s := *(*string)(q)
			for k := 0; k < len(s); k++ {
				if !flatSafe[s[k]] {
					return dst, false
				}
			}
			dst = append(dst, '"')
			dst = append(dst, s...)
			dst = append(dst, '"')
		case reflect.Bool:
			dst = strconv.AppendBool(dst, *(*bool)(q))
		case reflect.Int:
			dst = strconv.AppendInt(dst, int64(*(*int)(q)), 10)
		case reflect.Int8:
			dst = strconv.AppendInt(dst, int64(*(*int8)(q)), 10)
		case reflect.Int16:
			dst = strconv.AppendInt(dst, int64(*(*int16)(q)), 10)
		case reflect.Int32:
			dst = strconv.AppendInt(dst, int64(*(*int32)(q)), 10)
		case reflect.Int64:
			dst = strconv.AppendInt(dst, *(*int64)(q), 10)
		case reflect.Uint:
			dst = strconv.AppendUint(dst, uint64(*(*uint)(q)), 10)
		case reflect.Uint8:
			dst = strconv.AppendUint(dst, uint64(*(*uint8)(q)), 10)
		case reflect.Uint16:
			dst = strconv.AppendUint(dst, uint64(*(*uint16)(q)), 10)
		case reflect.Uint32:
			dst = strconv.AppendUint(dst, uint64(*(*uint32)(q)), 10)
		case reflect.Uint64:
			dst = strconv.AppendUint(dst, *(*uint64)(q), 10)
		}
	}
	return append(dst, '}'), true
}

// empty reports whether the field at p holds its zero value.
func (f *flatField) empty(p unsafe.Pointer) bool {
	switch f.kind {
	case reflect.String:
		return *(*string)(p) == ""
	case reflect.Bool:
		return !*(*bool)(p)
	case reflect.Int8, reflect.Uint8:
		return *(*uint8)(p) == 0
	case reflect.Int16, reflect.Uint16:
		return *(*uint16)(p) == 0
	case reflect.Int32, reflect.Uint32:
		return *(*uint32)(p) == 0
	case reflect.Int, reflect.Uint:
		return *(*uint)(p) == 0
	}
	return *(*uint64)(p) == 0
}

// encodedLen bounds the size of an encoding, to allocate it once: exactly
// for booleans and integers, and with a guess of 8 bytes for a string.
// Tight matters: the buffer is shared with the decoded strings, and a few
// bytes decide its size class.
func (c *flatCodec) encodedLen() int {
	n := 2 // {}
	for i := range c.fields {
		f := &c.fields[i]
		n += len(f.name) + 4 // "name": and a comma, or the brace for the first
		switch f.kind {
		case reflect.String:
			n += 2 + 8
		case reflect.Bool:
			n += len("false")
		case reflect.Int8:
			n += len("-128")
		case reflect.Int16:
			n += len("-32768")
		case reflect.Int32:
			n += len("-2147483648")
		case reflect.Uint8:
			n += len("255")
		case reflect.Uint16:
			n += len("65535")
		case reflect.Uint32:
			n += len("4294967295")
		default: // int, int64, uint, uint64
			n += len("-9223372036854775808")
		}
	}
	if len(c.fields) > 0 {
		n-- // no comma before the first field
	}
	return n
}

// sameName reports whether key spells name, which is as long. Names are
// short: comparing them here, 8 bytes at a time, costs less than a call
// to the runtime's memequal, and spares the caller the spills around it.
func sameName(name string, key []byte) bool {
	n := unsafe.Slice(unsafe.StringData(name), len(name))
	for len(key) >= 8 && len(n) >= 8 {
		if binary.LittleEndian.Uint64(n) != binary.LittleEndian.Uint64(key) {
			return false
		}
		n, key = n[8:], key[8:]
	}
	n = n[:len(key)]
	for i := range key {
		if n[i] != key[i] {
			return false
		}
	}
	return true
}
