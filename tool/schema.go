package tool

// Input schemas are compiled and checked by
// github.com/santhosh-tekuri/jsonschema/v6, which passes the official
// JSON Schema Test Suite (tool/testdata/json-schema-test-suite holds the
// draft 2020-12 cases this package runs; suite_test.go runs them) and
// reports each violation with the path of the offending value, which is
// what a model needs to correct a call. docs/BENCHMARKS.md has the
// figures that chose it over github.com/google/jsonschema-go, which still
// infers typed tools' schemas (jsonschema.For) but no longer validates.
// Most valid arguments never reach the library: fastvalidate.go vouches
// for them in one pass over their bytes, and leaves the rest to it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/toolloop/toolloop/llm"
)

// schemaURL is where an input schema is said to live while it compiles:
// relative references and $id resolve against it. The host is reserved
// (RFC 2606) and nothing is ever loaded from it (see noLoader).
const schemaURL = "https://toolloop.invalid/input-schema.json"

// noLoader refuses to load any document. A schema may refer to itself
// ("#/$defs/x", an $id or $anchor inside it) and to the JSON Schema
// meta-schemas, which the library carries; anything else would mean
// reading a file or the network at the request of a schema that may come
// from an MCP server.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %s: an input schema may refer only to itself and to the JSON Schema meta-schemas", url)
}

// compileSchema compiles a raw JSON Schema. Without $schema it is read as
// draft 2020-12. The schema is checked against its meta-schema first, so
// a misspelt type or a pattern Go cannot compile is an error here, not
// at the first call.
func compileSchema(raw []byte) (*sjs.Schema, error) {
	doc, err := sjs.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	return compileSchemaDoc(doc)
}

// compileSchemaDoc is compileSchema of a schema decoded with
// sjs.UnmarshalJSON (numbers as json.Number, so bounds keep every digit).
func compileSchemaDoc(doc any) (*sjs.Schema, error) {
	c := sjs.NewCompiler()
	c.DefaultDraft(sjs.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

// validateArgs decodes args, fingerprints them and checks them against s.
// Empty args mean {}. Arguments that are not JSON, or that repeat a key
// in an object (encoding/json would keep the last value and drop the
// others unseen), are refused with a fingerprint of their bytes; others
// get Fingerprint of the decoded value, valid or not.
//
// fast, when not nil, is s compiled for fastValidate, which vouches for
// most valid arguments in one pass; the rest take the way described.
func validateArgs(s *sjs.Schema, fast *fastSchema, args []byte) (uint64, error) {
	if len(args) == 0 {
		args = emptyObject()
	}
	if fast != nil {
		if fp, ok := fastValidate(fast, args); ok {
			return fp, nil
		}
	}
	// Most arguments decode in one pass (argsValue, which also refuses
	// repeated keys); the rest, and every error, go through encoding/json.
	v, ok := argsValue(args)
	if !ok {
		var decoded any // its own variable: v stays off the heap on the fast path
		if err := json.Unmarshal(args, &decoded); err != nil {
			msg := err.Error()
			var syntax *json.SyntaxError
			if errors.As(err, &syntax) && syntax.Offset > 0 && !strings.HasPrefix(msg, "unexpected end") {
				msg += fmt.Sprintf(" at offset %d", syntax.Offset-1) // of the character
			}
			return fingerprintBytes(args), &Error{Kind: llm.KindInvalidArguments, Msg: "arguments are not valid JSON: " + clipMessage(msg)}
		}
		if memberCount(args) != decodedMembers(decoded) {
			return fingerprintBytes(args), &Error{Kind: llm.KindInvalidArguments, Msg: "duplicate argument " + quoteClipped(duplicatePath(args))}
		}
		v = decoded
	}
	fp := Fingerprint(v)
	if err := s.Validate(v); err != nil {
		return fp, &Error{Kind: llm.KindInvalidArguments, Msg: "arguments do not match the schema: " + describeViolation(err)}
	}
	return fp, nil
}

// memberCount counts the members of all objects in b, which is valid
// JSON: outside strings, a colon appears only between a key and its value.
func memberCount(b []byte) int {
	n := 0
	var str jsonStrings
	for _, c := range b {
		if str.outside(c) && c == ':' {
			n++
		}
	}
	return n
}

// jsonStrings follows valid JSON a byte at a time to tell the bytes
// inside its strings from those outside, where the structure is:
// memberCount counts colons and nesting brackets there.
type jsonStrings struct{ in, escaped bool }

// outside takes the next byte c and reports whether it is outside every
// string; a string's quotes count as inside it.
func (s *jsonStrings) outside(c byte) bool {
	switch {
	case s.escaped:
		s.escaped = false
	case s.in && c == '\\':
		s.escaped = true
	case c == '"':
		s.in = !s.in
	case !s.in:
		return true
	}
	return false
}

// decodedMembers counts the members of all objects in v, decoded by
// encoding/json. It is memberCount of the bytes unless a key repeated.
func decodedMembers(v any) int {
	switch x := v.(type) {
	case map[string]any:
		n := len(x)
		for _, e := range x {
			n += decodedMembers(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range x {
			n += decodedMembers(e)
		}
		return n
	}
	return 0
}

// duplicatePath returns the path, as a JSON pointer without its leading
// slash, of the first key that repeats in an object of b, which is valid
// JSON: "tags/a". It is slow, and runs only once memberCount has found
// that some key repeats.
func duplicatePath(b []byte) string {
	type level struct {
		keys   map[string]bool // nil for an array
		index  int             // the next element's index, in an array
		key    string          // the member being read, in an object
		wanted bool            // an object's next token is a key
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var stack []*level
	path := func(last string) string {
		var steps []string
		for _, l := range stack[:len(stack)-1] {
			if l.keys != nil {
				steps = append(steps, escapeKey(l.key))
			} else {
				steps = append(steps, strconv.Itoa(l.index-1))
			}
		}
		return strings.Join(append(steps, escapeKey(last)), "/")
	}
	// valueRead marks the end of a value in the enclosing container.
	valueRead := func() {
		if len(stack) == 0 {
			return
		}
		if top := stack[len(stack)-1]; top.keys != nil {
			top.wanted = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "" // not reached for valid JSON with a repeated key
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil && stack[n-1].wanted {
			top := stack[n-1]
			if tok == json.Delim('}') {
				stack = stack[:n-1]
				valueRead()
				continue
			}
			k := tok.(string)
			if top.keys[k] {
				return path(k)
			}
			top.keys[k], top.key, top.wanted = true, k, false
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].keys == nil && tok != json.Delim(']') {
			stack[n-1].index++
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{keys: map[string]bool{}, wanted: true})
		case json.Delim('['):
			stack = append(stack, &level{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueRead()
		default:
			valueRead()
		}
	}
}

// englishMessages words the library's descriptions of violations.
var englishMessages = message.NewPrinter(language.English)

// maxViolations is how many violations a message describes; the model
// fixes those and learns of the others on its next attempt.
const maxViolations = 4

// describeViolation turns the library's error into what the model reads:
// each violation with the path of the value at fault (a JSON pointer
// without its leading slash, "items/2/qty"), at most maxViolations of
// them and about maxMessage bytes, in a stable order.
func describeViolation(err error) string { return describeViolationOf(err, argumentNouns) }

// nouns are the words a violation message uses for a value inside the
// document and for the document itself.
type nouns struct{ part, whole string }

var argumentNouns = nouns{"argument", "arguments"}

// describeViolationOf is describeViolation with the given nouns.
func describeViolationOf(err error, words nouns) string {
	var ve *sjs.ValidationError
	if !errors.As(err, &ve) {
		return clipMessage(err.Error())
	}
	var lines []string
	var walk func(e *sjs.ValidationError)
	walk = func(e *sjs.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		for _, line := range violationLines(e, words) {
			if !slices.Contains(lines, line) {
				lines = append(lines, line)
			}
		}
	}
	walk(ve)
	// The library visits properties in map order; the message must not
	// change from one attempt to the next.
	slices.Sort(lines)
	if len(lines) == 0 { // a violation without a leaf: say what the library says
		return clipMessage(ve.ErrorKind.LocalizedString(englishMessages))
	}
	// At most maxViolations lines, and no more than maxMessage bytes
	// unless the first line alone is longer.
	n, size := 1, len(lines[0])
	for n < len(lines) && n < maxViolations && size+2+len(lines[n]) <= maxMessage {
		size += 2 + len(lines[n])
		n++
	}
	msg := strings.Join(lines[:n], "; ")
	if n < len(lines) {
		msg += fmt.Sprintf("; and %d more", len(lines)-n)
	}
	return msg
}

// violationLines describes one violation: a missing or unexpected
// property as the path of that property, any other as the path of the
// value and the library's description of what is wrong with it.
func violationLines(e *sjs.ValidationError, n nouns) []string {
	at := make([]string, len(e.InstanceLocation))
	for i, step := range e.InstanceLocation {
		at[i] = escapeKey(step)
	}
	under := func(name string) string { return quoteClipped(strings.Join(append(at, escapeKey(name)), "/")) }
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		var names []string
		for _, name := range k.Missing {
			names = append(names, under(name))
		}
		if len(names) == 1 {
			return []string{"missing required " + n.part + " " + names[0]}
		}
		return []string{"missing required " + n.part + "s " + strings.Join(names, ", ")}
	case *kind.AdditionalProperties:
		var lines []string
		for _, name := range k.Properties {
			lines = append(lines, "unexpected "+n.part+" "+under(name))
		}
		return lines
	case *kind.FalseSchema:
		return []string{where(at, n) + "not allowed"}
	}
	return []string{where(at, n) + clipMessage(e.ErrorKind.LocalizedString(englishMessages))}
}

// where names the value at path at for a message: `argument "a/b": `,
// or `arguments: ` for the arguments object itself.
func where(at []string, n nouns) string {
	if len(at) == 0 {
		return n.whole + ": "
	}
	return n.part + " " + quoteClipped(strings.Join(at, "/")) + ": "
}

// escapeKey escapes a key for a JSON pointer.
func escapeKey(k string) string { return keyEscaper.Replace(k) }

var keyEscaper = strings.NewReplacer("~", "~0", "/", "~1")
