package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolloop/toolloop/llm"
)

// Tests of Validate on fixed schemas and arguments: verdicts, messages
// and fingerprints. The identifiers in this file start with vt, to keep
// clear of other test files in the package. suite_test.go runs the
// official JSON Schema Test Suite.

type vtItem struct {
	SKU   string  `json:"sku"`
	Qty   int     `json:"qty" jsonschema:"how many"`
	Note  *string `json:"note,omitempty"`
	Price float64 `json:"price,omitempty"`
}

type vtOrder struct {
	OrderID string            `json:"order_id"`
	Limit   int               `json:"limit,omitempty"`
	Small   uint8             `json:"small,omitempty"`
	Express bool              `json:"express,omitempty"`
	Items   []vtItem          `json:"items,omitempty"`
	Tags    map[string]int    `json:"tags,omitempty"`
	Ptr     *vtItem           `json:"ptr,omitempty"`
	When    time.Time         `json:"when,omitzero"`
	Fixed   [2]int            `json:"fixed,omitzero"`
	Any     any               `json:"any,omitempty"`
	Nested  map[string]vtItem `json:"nested,omitempty"`
}

type vtSmall struct {
	Key string `json:"key"`
}

type vtLine struct {
	SKU   string  `json:"sku"`
	Qty   int     `json:"qty"`
	Price float64 `json:"price"`
}

type vtMedium struct {
	OrderID  string   `json:"order_id"`
	Customer string   `json:"customer"`
	Priority int      `json:"priority"`
	Express  bool     `json:"express"`
	Lines    []vtLine `json:"lines"`
}

func vtTyped[In any](tb testing.TB) *Tool {
	tb.Helper()
	t, err := New(Spec[In]{Name: "typed"}, func(context.Context, In) (bool, error) { return true, nil })
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func vtRaw(tb testing.TB, schema string) *Tool {
	tb.Helper()
	t, err := NewRaw(Definition{Name: "raw", InputSchema: json.RawMessage(schema)},
		func(_ context.Context, args json.RawMessage) (json.RawMessage, error) { return args, nil }, nil)
	if err != nil {
		tb.Fatalf("NewRaw(%s): %v", schema, err)
	}
	return t
}

// vtHasDuplicateKeys reports whether valid JSON repeats a key in an
// object, comparing keys as decoded.
func vtHasDuplicateKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type level struct {
		keys   map[string]bool
		object bool
		inKey  bool // the next token in an object is a key
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return false
		}
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.inKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].inKey = true
				}
				continue
			}
			k := tok.(string)
			if top.keys[k] {
				return true
			}
			top.keys[k] = true
			top.inKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{keys: map[string]bool{}, object: true, inKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &level{})
			continue
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].inKey = true
		}
	}
}

// vtOutcome classifies a Validate result.
type vtOutcome int

const (
	vtValid vtOutcome = iota
	vtInvalid
	vtBadJSON
	vtDuplicate
)

func (o vtOutcome) String() string {
	return [...]string{"valid", "invalid", "not JSON", "duplicate key"}[o]
}

func vtClassify(tb testing.TB, err error) vtOutcome {
	tb.Helper()
	if err == nil {
		return vtValid
	}
	var te *Error
	if !errors.As(err, &te) || te.Kind != llm.KindInvalidArguments {
		tb.Fatalf("error %v (%T) is not an invalid-arguments *Error", err, err)
	}
	switch {
	case strings.HasPrefix(te.Msg, "arguments are not valid JSON"):
		return vtBadJSON
	case strings.HasPrefix(te.Msg, "duplicate argument "):
		return vtDuplicate
	case strings.HasPrefix(te.Msg, "arguments do not match the schema: "):
		return vtInvalid
	}
	tb.Fatalf("unexpected message %q", te.Msg)
	return 0
}

// vtCheck validates args and checks what holds whatever the schema: a
// verdict of "not JSON" exactly for bytes encoding/json refuses,
// "duplicate key" exactly for JSON that repeats a key in an object, both
// with the fingerprint of the bytes; otherwise Fingerprint of the decoded
// value, valid or not.
func vtCheck(tb testing.TB, t *Tool, args []byte) (vtOutcome, error) {
	tb.Helper()
	fp, err := t.Validate(args)
	got := vtClassify(tb, err)
	norm := args
	if len(norm) == 0 {
		norm = []byte("{}")
	}
	var v any
	want, wantFP := vtValid, uint64(0)
	switch {
	case json.Unmarshal(norm, &v) != nil:
		want, wantFP = vtBadJSON, fingerprintBytes(norm)
	case vtHasDuplicateKeys(norm):
		want, wantFP = vtDuplicate, fingerprintBytes(norm)
	default:
		wantFP = Fingerprint(v)
	}
	if want == vtValid && got == vtInvalid {
		want = vtInvalid
	}
	if got != want {
		tb.Fatalf("Validate(%q) = %v (%v), want %v", args, got, err, want)
	}
	if fp != wantFP {
		tb.Fatalf("Validate(%q) fingerprint %x, want %x", args, fp, wantFP)
	}
	return got, err
}

type vtCase struct {
	args string
	want vtOutcome
}

var vtOrderCases = []vtCase{
	{`{"order_id":"A1"}`, vtValid},
	{` { "order_id" : "A1" } `, vtValid},
	{"\t\r\n{\"order_id\"\n:\"A1\"}\n", vtValid},
	{`{"order_id":"A1","limit":3}`, vtValid},
	{`{"order_id":"A1","limit":3.0}`, vtValid},
	{`{"order_id":"A1","limit":3e0}`, vtValid},
	{`{"order_id":"A1","limit":-0}`, vtValid},
	{`{"order_id":"A1","limit":1e300}`, vtValid},
	{`{"order_id":"A1","limit":1.5}`, vtInvalid},
	{`{"order_id":"A1","limit":"3"}`, vtInvalid},
	{`{"order_id":"A1","limit":null}`, vtInvalid},
	{`{"order_id":"A1","small":255}`, vtValid},
	{`{"order_id":"A1","small":256}`, vtInvalid},
	{`{"order_id":"A1","small":-1}`, vtInvalid},
	{`{"order_id":"A1","express":true}`, vtValid},
	{`{"order_id":"A1","express":0}`, vtInvalid},
	{`{"order_id":5}`, vtInvalid},
	{`{"order_id":null}`, vtInvalid},
	{`{"limit":1}`, vtInvalid},
	{`{}`, vtInvalid},
	{``, vtInvalid},
	{`{"order_id":"A1","orderId":"A1"}`, vtInvalid},
	{`{"order_id":"A1","items":null}`, vtValid},
	{`{"order_id":"A1","items":[]}`, vtValid},
	{`{"order_id":"A1","items":[{"sku":"x","qty":1},{"qty":2,"sku":"y","note":null},{"sku":"z","qty":3,"note":"n","price":1.5}]}`, vtValid},
	{`{"order_id":"A1","items":[{"sku":"x","qty":1},{"sku":"y"}]}`, vtInvalid},
	{`{"order_id":"A1","items":[{"sku":"x","qty":1.5}]}`, vtInvalid},
	{`{"order_id":"A1","items":[{"sku":"x","qty":1,"extra":1}]}`, vtInvalid},
	{`{"order_id":"A1","items":[{"sku":"x","qty":1,"note":5}]}`, vtInvalid},
	{`{"order_id":"A1","items":{"sku":"x","qty":1}}`, vtInvalid},
	{`{"order_id":"A1","tags":{"a":1,"b":2}}`, vtValid},
	{`{"order_id":"A1","tags":{"a":1,"b":"2"}}`, vtInvalid},
	{`{"order_id":"A1","tags":null}`, vtInvalid},
	{`{"order_id":"A1","ptr":null}`, vtValid},
	{`{"order_id":"A1","ptr":{"sku":"s","qty":0}}`, vtValid},
	{`{"order_id":"A1","ptr":{"sku":"s"}}`, vtInvalid},
	{`{"order_id":"A1","when":"2024-01-01T00:00:00Z"}`, vtValid},
	{`{"order_id":"A1","when":1}`, vtInvalid},
	{`{"order_id":"A1","fixed":[1,2]}`, vtValid},
	{`{"order_id":"A1","fixed":[1]}`, vtInvalid},
	{`{"order_id":"A1","fixed":[1,2,3]}`, vtInvalid},
	{`{"order_id":"A1","any":{"x":[1,{"y":null}]}}`, vtValid},
	{`{"order_id":"A1","nested":{"k":{"sku":"s","qty":1}}}`, vtValid},
	{`{"order_id":"A1","nested":{"k":{"sku":"s"}}}`, vtInvalid},
	// Escapes decode before validation.
	{`{"order_\u0069d":"A1"}`, vtValid},
	{`{"order_id":"\u0041\n\t\"\\\/\b\f\r"}`, vtValid},
	{`{"order_id":"\ud83d\ude00 \ud83d \ude00 \udc00\ud800"}`, vtValid},
	{"{\"order_id\":\"\xff\xfe invalid UTF-8\"}", vtValid},
	{`{"order_id":"A1","items":[{"\u0073ku":"x","q\u0074y":1}]}`, vtValid},
	{`{"order_id":"A1","items":[{"sku":"x","q\u0074y":1,"\u0065xtra":1}]}`, vtInvalid},
	// Not JSON.
	{`{"order_id":`, vtBadJSON},
	{`order_id=A1`, vtBadJSON},
	{`{"order_id":"A1"} x`, vtBadJSON},
	{`{"order_id":"A1"}{}`, vtBadJSON},
	{`{"order_id":"A1",}`, vtBadJSON},
	{`{"order_id" "A1"}`, vtBadJSON},
	{`{"order_id":"A1" "limit":1}`, vtBadJSON},
	{`{'order_id':"A1"}`, vtBadJSON},
	{`{"order_id":"A1","limit":01}`, vtBadJSON},
	{`{"order_id":"A1","limit":1.}`, vtBadJSON},
	{`{"order_id":"A1","limit":.5}`, vtBadJSON},
	{`{"order_id":"A1","limit":+1}`, vtBadJSON},
	{`{"order_id":"A1","limit":1e}`, vtBadJSON},
	{`{"order_id":"A1","limit":-}`, vtBadJSON},
	{`{"order_id":"A1","limit":1e400}`, vtBadJSON},
	{`{"order_id":"A1","limit":NaN}`, vtBadJSON},
	{`{"order_id":"A1","express":tru}`, vtBadJSON},
	{`{"order_id":"A1","express":True}`, vtBadJSON},
	{`{"order_id":"A1\x"}`, vtBadJSON},
	{`{"order_id":"A1\u00"}`, vtBadJSON},
	{`{"order_id":"A1\u00g0"}`, vtBadJSON},
	{"{\"order_id\":\"A\x01\"}", vtBadJSON},
	{`{"order_id":"A1`, vtBadJSON},
	{`{"order_id":"A1"`, vtBadJSON},
	{`{"order_id":"A1","items":[}`, vtBadJSON},
	{`{"order_id":"A1","items":[1,]}`, vtBadJSON},
	{`{"order_id":"A1","items":[1 2]}`, vtBadJSON},
	{` `, vtBadJSON},
	{"\ufeff{}", vtBadJSON},
	// Invalid JSON wins over a schema violation before it.
	{`{"order_id":5,"limit":}`, vtBadJSON},
	// Duplicate keys, however spelled.
	{`{"order_id":"A1","order_id":"A2"}`, vtDuplicate},
	{`{"order_id":"A1","order_\u0069d":"A1"}`, vtDuplicate},
	{`{"order_id":"A1","limit":1,"express":true,"limit":2}`, vtDuplicate},
	{`{"order_id":"A1","tags":{"b":1,"a":2,"b":3}}`, vtDuplicate},
	{`{"order_id":"A1","any":{"x":1,"x":1}}`, vtDuplicate},
	{"{\"order_id\":\"A1\",\"tags\":{\"\xff\":1,\"\xfe\":2}}", vtDuplicate},
	{`{"order_id":"A1","any":{"x":1,"x":1},"limit":}`, vtBadJSON},
	// Not objects.
	{`["A1"]`, vtInvalid},
	{`null`, vtInvalid},
	{`"A1"`, vtInvalid},
	{`1`, vtInvalid},
}

const vtRichSchema = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"title": "rich", "description": "d", "$comment": "c", "x-vendor": {"a": 1},
	"propertyOrder": ["color"],
	"properties": {
		"color": {"type": "string", "enum": ["red", "green", "é", "A\n", "😀"], "default": "red", "examples": ["red"]},
		"n": {"type": "integer", "minimum": 1, "maximum": 10, "deprecated": true},
		"x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "readOnly": true},
		"name": {"type": "string", "minLength": 2, "maxLength": 4, "writeOnly": true},
		"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
		"k": {"const": "fixed"},
		"kn": {"const": null},
		"e": {"enum": [1, "1", true, null]},
		"nul": {"type": ["null", "integer"]},
		"no": false,
		"yes": true,
		"empty": {"enum": []},
		"typeless": {"minimum": 5, "maxLength": 1}
	},
	"required": ["color"],
	"additionalProperties": false
}`

var vtRichCases = []vtCase{
	{`{"color":"red"}`, vtValid},
	{`{"color":"\u0072ed"}`, vtValid},
	{`{"color":"\u00e9"}`, vtValid},
	{`{"color":"é"}`, vtValid},
	{`{"color":"e\u0301"}`, vtInvalid},
	{`{"color":"A\n"}`, vtValid},
	{`{"color":"\u0041\u000a"}`, vtValid},
	{`{"color":"\ud83d\ude00"}`, vtValid},
	{`{"color":"purple"}`, vtInvalid},
	{`{"color":"Red"}`, vtInvalid},
	{`{"color":1}`, vtInvalid},
	{`{"color":"red","n":1}`, vtValid},
	{`{"color":"red","n":10.0}`, vtValid},
	{`{"color":"red","n":0}`, vtInvalid},
	{`{"color":"red","n":11}`, vtInvalid},
	{`{"color":"red","n":5.5}`, vtInvalid},
	{`{"color":"red","x":0.5}`, vtValid},
	{`{"color":"red","x":0}`, vtInvalid},
	{`{"color":"red","x":1}`, vtInvalid},
	{`{"color":"red","x":1e-300}`, vtValid},
	{`{"color":"red","x":1e-400}`, vtInvalid},
	{`{"color":"red","name":"ab"}`, vtValid},
	{`{"color":"red","name":"a"}`, vtInvalid},
	{`{"color":"red","name":"abcd"}`, vtValid},
	{`{"color":"red","name":"abcde"}`, vtInvalid},
	{`{"color":"red","name":"éééé"}`, vtValid},
	{`{"color":"red","name":"😀😀😀😀"}`, vtValid},
	{`{"color":"red","name":"\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00"}`, vtValid},
	{`{"color":"red","name":"\ud83d\ud83d\ud83d\ud83d"}`, vtValid},
	{`{"color":"red","name":"\ud83d\ud83d\ud83d\ud83d\ud83d"}`, vtInvalid},
	{"{\"color\":\"red\",\"name\":\"\xff\xff\xff\xff\"}", vtValid},
	{"{\"color\":\"red\",\"name\":\"\xff\xff\xff\xff\xff\"}", vtInvalid},
	{`{"color":"red","name":"\u00e9"}`, vtInvalid},
	{`{"color":"red","tags":["a"]}`, vtValid},
	{`{"color":"red","tags":[]}`, vtInvalid},
	{`{"color":"red","tags":["a","b","c","d"]}`, vtInvalid},
	{`{"color":"red","tags":["a",1]}`, vtInvalid},
	{`{"color":"red","k":"fixed"}`, vtValid},
	{`{"color":"red","k":"f\u0069xed"}`, vtValid},
	{`{"color":"red","k":"other"}`, vtInvalid},
	{`{"color":"red","k":["fixed"]}`, vtInvalid},
	{`{"color":"red","kn":null}`, vtValid},
	{`{"color":"red","kn":false}`, vtInvalid},
	{`{"color":"red","e":1}`, vtValid},
	{`{"color":"red","e":1.0}`, vtValid},
	{`{"color":"red","e":"1"}`, vtValid},
	{`{"color":"red","e":true}`, vtValid},
	{`{"color":"red","e":null}`, vtValid},
	{`{"color":"red","e":false}`, vtInvalid},
	{`{"color":"red","e":2}`, vtInvalid},
	{`{"color":"red","e":{}}`, vtInvalid},
	{`{"color":"red","e":[1]}`, vtInvalid},
	{`{"color":"red","nul":null}`, vtValid},
	{`{"color":"red","nul":3}`, vtValid},
	{`{"color":"red","nul":3.5}`, vtInvalid},
	{`{"color":"red","nul":"3"}`, vtInvalid},
	{`{"color":"red","no":1}`, vtInvalid},
	{`{"color":"red","no":null}`, vtInvalid},
	{`{"color":"red","yes":{"anything":[1,2]}}`, vtValid},
	{`{"color":"red","empty":"x"}`, vtInvalid},
	{`{"color":"red","typeless":"a"}`, vtValid},
	{`{"color":"red","typeless":"ab"}`, vtInvalid},
	{`{"color":"red","typeless":5}`, vtValid},
	{`{"color":"red","typeless":4}`, vtInvalid},
	{`{"color":"red","typeless":[]}`, vtValid},
	{`{"color":"red","other":1}`, vtInvalid},
	{`{"n":1}`, vtInvalid},
}

// vtFlatSchema has a property for each check a flat object can meet.
const vtFlatSchema = `{"type":"object","properties":{
	"s":{"type":"string","minLength":1,"maxLength":5},
	"e":{"enum":["x","y",1,true,null]},
	"i":{"type":"integer","minimum":0,"maximum":10},
	"n":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":100},
	"b":{"type":"boolean"},
	"z":{"type":"null"},
	"c":{"const":"k"},
	"o":{"type":["string","null"]},
	"no":{"not":{}},
	"any":{},
	"a_longer_name":{"type":"string"},
	"a_longer_nbme":{"type":"integer"},
	"b_longer_name":{"type":"boolean"}
	},"required":["s","r"],"additionalProperties":{"type":"string"}}`

// vtFlatArgs are flat objects, most of which vtFlatSchema accepts.
var vtFlatArgs = []string{
	`{"r":"x","s":"abc"}`,
	`{"s":"abc","r":"x"}`,
	` { "s" : "abc" , "r" : "x" } `,
	"{\n\t\"s\":\"é\",\r\n\"r\":\"😀\"}",
	`{"b":true,"c":"k","e":"x","i":3,"n":0.5,"o":null,"r":"","s":"a","z":null}`,
	`{"z":null,"s":"a","r":"","o":"o","n":99.5,"i":10,"e":1,"c":"k","b":false}`,
	`{"s":"a","r":"x","e":true}`, `{"s":"a","r":"x","e":null}`, `{"s":"a","r":"x","e":"z"}`,
	`{"s":"a","r":"x","i":1.0}`, `{"s":"a","r":"x","i":1e0}`, `{"s":"a","r":"x","i":-0}`, `{"s":"a","r":"x","i":11}`,
	`{"s":"a","r":"x","i":1.5}`, `{"s":"a","r":"x","n":0}`, `{"s":"a","r":"x","n":1e2}`, `{"s":"a","r":"x","n":123456789012345678}`,
	`{"s":"","r":"x"}`, `{"s":"abcdef","r":"x"}`, `{"s":"ééééé","r":"x"}`, `{"s":"éééééé","r":"x"}`,
	`{"s":"a","r":"x","c":"j"}`, `{"s":"a","r":"x","b":"true"}`, `{"s":"a","r":"x","z":0}`,
	`{"s":"a","r":"x","no":1}`, `{"s":"a","r":"x","any":1}`, `{"s":"a","r":"x","any":[1]}`, `{"s":"a","r":"x","extra":"e"}`,
	`{"s":"a","r":"x","a_longer_name":"n","a_longer_nbme":1,"b_longer_name":true}`,
	`{"s":"a","r":"x","a_longer_name":1}`, `{"s":"a","r":"x","a_longer_nbme":"n"}`, `{"s":"a","r":"x","b_longer_name":1}`,
	`{"s":"a","r":"x","a_longer_namf":1}`, `{"s":"a","r":"x","a_longer_nam":"n"}`,
	`{"s":"a","r":"x","extra":1}`, `{"s":"a"}`, `{"r":"x"}`, `{}`, ``, ` `,
	`{"s":"a","r":"x","s":"a"}`, `{"s":"a","r":"x","r":"y"}`, `{"s":"a","r":"x","q":"1","q":"2"}`,
	`{"s":"a","q":"1","r":"x","q":"2"}`, `{"s":"a","q":"1","r":"x","q":"1"}`,
	`{"s":"a\"","r":"x"}`, `{"s":"\u0061","r":"x"}`, `{"\u0073":"a","r":"x"}`, "{\"s\":\"a\xff\",\"r\":\"x\"}",
	"{\"s\":\"a\tb\",\"r\":\"x\"}", `{"s":"a","r":"x",}`, `{"s":"a","r":"x"`, `{"s":"a" "r":"x"}`, `{"s":"a","r":"x"} x`,
	`{"s":"a","r":"x","i":01}`, `{"s":"a","r":"x","i":-}`, `{"s":"a","r":"x","i":1e999}`, `{"s":"a","r":"x","b":tru}`,
	`{"s":"a","r":"x","b":truex}`, `{"s":"a","r":"x","b":nul}`, `[]`, `"s"`, `null`, `{"s":"a","r":"x"}{}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17}`,
	`{"q":1,"p":2,"o":3,"n":4,"m":5,"l":6,"k":7,"j":8,"i":9,"h":10,"g":11,"f":12,"e":13,"d":14,"c":15,"b":16}`,
	`{"q":1,"p":2,"o":3,"n":4,"m":5,"l":6,"k":7,"j":8,"i":9,"h":10,"g":11,"f":12,"e":13,"d":14,"c":15,"b":16,"a":17}`,
	`{"s":"a","r":"` + strings.Repeat("x", 300) + `"}`,
	`{"` + strings.Repeat("k", 300) + `":"v","s":"a","r":"x"}`,
}

// vtSchemas are the schemas of the case and fuzz tests.
var vtSchemas = []struct {
	name   string
	schema string // for NewRaw, or
	typed  func(testing.TB) *Tool
	cases  []vtCase
}{
	{name: "order", typed: vtTyped[vtOrder], cases: vtOrderCases},
	{name: "rich", schema: vtRichSchema, cases: vtRichCases},
	{name: "small", typed: vtTyped[vtSmall], cases: []vtCase{
		{`{"key":"k1"}`, vtValid}, {`{"key":"k1","key":"k1"}`, vtDuplicate}, {`{"key":1}`, vtInvalid},
	}},
	{name: "medium", typed: vtTyped[vtMedium], cases: []vtCase{
		{vtMediumArgs, vtValid},
		{strings.Replace(vtMediumArgs, `"qty":3`, `"qty":"3"`, 1), vtInvalid},
	}},
	{name: "map", typed: vtTyped[map[string]any], cases: []vtCase{
		{`{}`, vtValid}, {`{"a":[1,{"b":null}],"c":"d"}`, vtValid}, {`[]`, vtInvalid},
	}},
	{name: "additional schema", schema: `{"type":"object","properties":{"a":{"type":"string"},"c":{}},"additionalProperties":{"type":"integer"},"required":["a","b"]}`, cases: []vtCase{
		{`{"a":"x","b":1}`, vtValid},
		{`{"a":"x","b":1,"z":2,"c":"any"}`, vtValid},
		{`{"a":"x","b":"1"}`, vtInvalid},
		{`{"a":"x"}`, vtInvalid},
		{`{"b":1}`, vtInvalid},
		{`{}`, vtInvalid},
		{`{"a":"x","b":1,"z":"2"}`, vtInvalid},
	}},
	{name: "required undeclared, no additional", schema: `{"type":"object","properties":{"a":{"type":"string"}},"required":["b"],"additionalProperties":false}`, cases: []vtCase{
		{`{}`, vtInvalid}, {`{"b":1}`, vtInvalid}, {`{"a":"x"}`, vtInvalid},
	}},
	{name: "nested", schema: `{"type":"object","properties":{"o":{"type":"object","properties":{"p":{"type":["object","null"],"properties":{"q":{"type":"boolean"}},"required":["q"]}},"required":["p"]}}}`, cases: []vtCase{
		{`{}`, vtValid},
		{`{"o":{"p":null}}`, vtValid},
		{`{"o":{"p":{"q":true}}}`, vtValid},
		{`{"o":{"p":{"q":1}}}`, vtInvalid},
		{`{"o":{"p":{}}}`, vtInvalid},
		{`{"o":{}}`, vtInvalid},
		{`{"o":[]}`, vtInvalid},
		{`{"o":{"p":{"q":true,"r":{"z":1,"a":[{"y":2,"b":3}]}},"x":1}}`, vtValid},
	}},
	{name: "many properties", schema: vtManySchema(24), cases: []vtCase{
		{vtManyArgs(24, false), vtValid},
		{vtManyArgs(24, true), vtValid},
		{vtManyArgs(20, true), vtInvalid},
		{strings.Replace(vtManyArgs(24, true), `"p07":7`, `"p07":"7"`, 1), vtInvalid},
		{strings.Replace(vtManyArgs(24, true), `"p07":7`, `"p07":7,"p03":3`, 1), vtDuplicate},
		{strings.Replace(vtManyArgs(24, true), `"p07":7`, `"p\u0030\u0037":7`, 1), vtValid},
	}},
	{name: "additional not {}", schema: `{"type":"object","properties":{"a":{}},"additionalProperties":{"not":{}}}`, cases: []vtCase{
		{`{"a":[1]}`, vtValid}, {`{"b":1}`, vtInvalid},
	}},
	{name: "flat", schema: vtFlatSchema},
	{name: "draft-04", schema: `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`},
	{name: "draft-07", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}}}`, cases: []vtCase{
		{`{"a":[1,2]}`, vtValid}, {`{"a":[1,"2"]}`, vtInvalid},
	}},
	{name: "false items", schema: `{"type":"object","properties":{"a":{"type":"array","items":false}}}`, cases: []vtCase{
		{`{"a":[]}`, vtValid}, {`{"a":[1]}`, vtInvalid},
	}},
	// Keywords the inferred schemas do not use.
	{name: "pattern", schema: `{"type":"object","properties":{"s":{"type":"string","pattern":"^a"}}}`, cases: []vtCase{
		{`{"s":"abc"}`, vtValid}, {`{"s":"b"}`, vtInvalid}, {`{"s":"a","s":"a"}`, vtDuplicate}, {`{"s":`, vtBadJSON},
	}},
	{name: "anyOf", schema: `{"type":"object","properties":{"s":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`, cases: []vtCase{
		{`{"s":"x"}`, vtValid}, {`{"s":1}`, vtValid}, {`{"s":1.5}`, vtInvalid}, {`{"b":1,"a":2}`, vtValid},
	}},
	{name: "ref", schema: `{"type":"object","$defs":{"s":{"type":"string"}},"properties":{"s":{"$ref":"#/$defs/s"}}}`, cases: []vtCase{
		{`{"s":"x"}`, vtValid}, {`{"s":1}`, vtInvalid},
	}},
	{name: "format", schema: `{"type":"object","properties":{"d":{"type":"string","format":"date-time"}}}`},
	{name: "multipleOf", schema: `{"type":"object","properties":{"n":{"type":"number","multipleOf":2}}}`, cases: []vtCase{
		{`{"n":4}`, vtValid}, {`{"n":3}`, vtInvalid},
	}},
	{name: "minProperties", schema: `{"type":"object","minProperties":1}`},
	{name: "uniqueItems", schema: `{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`},
	{name: "prefixItems", schema: `{"type":"object","properties":{"a":{"prefixItems":[{"type":"string"}]}}}`},
	{name: "items array, draft-07", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"items":[{"type":"string"}]}}}`, cases: []vtCase{
		{`{"a":["x",1]}`, vtValid}, {`{"a":[1]}`, vtInvalid},
	}},
	{name: "not", schema: `{"type":"object","properties":{"a":{"not":{"type":"string"}}}}`},
	{name: "patternProperties", schema: `{"type":"object","patternProperties":{"^a":{"type":"string"}}}`},
	{name: "deep", schema: `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string","pattern":"x"}}}}}`},
}

const vtMediumArgs = `{"order_id":"A100","customer":"c-42","priority":2,"express":true,"lines":[{"sku":"X1","qty":1,"price":9.5},{"sku":"X2","qty":3,"price":1.25},{"sku":"X3","qty":2,"price":100}]}`

func vtManySchema(n int) string {
	var props, req []string
	for i := range n {
		props = append(props, fmt.Sprintf(`"p%02d":{"type":"integer"}`, i))
		req = append(req, fmt.Sprintf(`"p%02d"`, i))
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(req, ",") + `],"additionalProperties":false}`
}

func vtManyArgs(n int, reverse bool) string {
	var m []string
	for i := range n {
		m = append(m, fmt.Sprintf(`"p%02d":%d`, i, i))
	}
	if reverse {
		for i, j := 0, len(m)-1; i < j; i, j = i+1, j-1 {
			m[i], m[j] = m[j], m[i]
		}
	}
	return "{" + strings.Join(m, ",") + "}"
}

func vtTool(tb testing.TB, i int) *Tool {
	s := vtSchemas[i]
	if s.typed != nil {
		return s.typed(tb)
	}
	return vtRaw(tb, s.schema)
}

// TestValidateCases checks each schema's cases, and what must hold of
// every verdict on the other schemas' cases.
func TestValidateCases(t *testing.T) {
	for i, s := range vtSchemas {
		t.Run(s.name, func(t *testing.T) {
			tl := vtTool(t, i)
			for _, c := range s.cases {
				if got, err := vtCheck(t, tl, []byte(c.args)); got != c.want {
					t.Errorf("Validate(%s) = %v (%v), want %v", c.args, got, err, c.want)
				}
			}
			// The other schemas' cases too: different schemas, same verdicts.
			for _, other := range vtSchemas {
				for _, c := range other.cases {
					vtCheck(t, tl, []byte(c.args))
				}
			}
			for _, args := range vtFlatArgs {
				vtCheck(t, tl, []byte(args))
			}
		})
	}
}

// Without Limits, arguments may nest as deep as encoding/json decodes
// (10,000 levels); deeper is not JSON to it. Validate and Fingerprint
// recurse that deep without trouble.
func TestValidateDepth(t *testing.T) {
	tl := vtTyped[vtOrder](t)
	for _, n := range []int{9998, 9999, 10000, 10001} {
		args := `{"order_id":"A1","any":` + strings.Repeat(`[`, n) + strings.Repeat(`]`, n) + `}`
		got, _ := vtCheck(t, tl, []byte(args))
		if want := n < 10000; (got == vtValid) != want {
			t.Errorf("depth %d: %v", n+1, got)
		}
		args = `{"order_id":"A1","any":` + strings.Repeat(`{"b":1,"a":`, n) + `1` + strings.Repeat(`}`, n) + `}`
		vtCheck(t, tl, []byte(args))
	}
}

// The messages name each violation by the path of the value at fault, so
// that the model can correct its call.
func TestValidateMessages(t *testing.T) {
	order := vtTyped[vtOrder](t)
	rich := vtRaw(t, vtRichSchema)
	many := vtRaw(t, vtManySchema(3))
	ref := vtRaw(t, `{"type":"object","$defs":{"qty":{"type":"integer","minimum":1}},"properties":{"lines":{"type":"array","items":{"type":"object","properties":{"qty":{"$ref":"#/$defs/qty"}}}}}}`)
	either := vtRaw(t, `{"type":"object","properties":{"s":{"anyOf":[{"type":"string"},{"type":"integer"}]},"p":{"type":"string","pattern":"^[A-Z][0-9]+$"}}}`)
	const p = "arguments do not match the schema: "
	for _, c := range []struct {
		t    *Tool
		args string
		want string
	}{
		{order, `{"order_id":5}`, p + `argument "order_id": got number, want string`},
		{order, `{"limit":1}`, p + `missing required argument "order_id"`},
		{order, `{"order_id":"A1","foo":1}`, p + `unexpected argument "foo"`},
		{order, `{"order_id":"A1","items":[{"sku":"a","qty":1},{"sku":"b","qty":1},{"sku":"c","qty":1.5}]}`, p + `argument "items/2/qty": got number, want integer`},
		{order, `{"order_id":"A1","items":[{"sku":"a","qty":1},{"qty":1}]}`, p + `missing required argument "items/1/sku"`},
		{order, `{"order_id":"A1","items":[{"sku":"a","qty":1,"x/y~":1}]}`, p + `unexpected argument "items/0/x~1y~0"`},
		{order, `{"order_id":"A1","small":300}`, p + `argument "small": maximum: got 300, want 255`},
		{order, `{"order_id":"A1","small":-1}`, p + `argument "small": minimum: got -1, want 0`},
		{order, `{"order_id":"A1","fixed":[1]}`, p + `argument "fixed": minItems: got 1, want 2`},
		{order, `{"order_id":"A1","nested":{"k\u00e9":{"sku":1,"qty":1}}}`, p + `argument "nested/ké/sku": got number, want string`},
		{order, `[]`, p + `arguments: got array, want object`},
		{order, `{"foo":1,"bar":2}`, p + `missing required argument "order_id"; unexpected argument "bar"; unexpected argument "foo"`},
		{order, `{"order_id":"A1","tags":{"a":1,"a":2}}`, `duplicate argument "tags/a"`},
		{order, `{"order_id":"A1","tags":{"b":1,"a":2,"b":2}}`, `duplicate argument "tags/b"`},
		{order, `{"order_id":"A1","items":[{"sku":"a","qty":1},{"sku":"a","qty":1,"sku":"b"}]}`, `duplicate argument "items/1/sku"`},
		{order, `{"order_id":"A1","any":[[1],{"x":{"y":1,"y":2}}]}`, `duplicate argument "any/1/x/y"`},
		{order, `{"order_id":"A1"`, `arguments are not valid JSON: unexpected end of JSON input`},
		{order, `{"order_id":"A1"} x`, `arguments are not valid JSON: invalid character 'x' after top-level value at offset 18`},
		{rich, `{"color":"purple"}`, p + `argument "color": value must be one of 'red', 'green', 'é', 'A\n', '😀'`},
		{rich, `{"color":"red","n":0}`, p + `argument "n": minimum: got 0, want 1`},
		{rich, `{"color":"red","x":1}`, p + `argument "x": exclusiveMaximum: got 1, want 1`},
		{rich, `{"color":"red","name":"ééééé"}`, p + `argument "name": maxLength: got 5, want 4`},
		{rich, `{"color":"red","k":"other"}`, p + `argument "k": value must be 'fixed'`},
		{rich, `{"color":"red","nul":"3"}`, p + `argument "nul": got string, want null or integer`},
		{rich, `{"color":"red","no":1}`, p + `argument "no": not allowed`},
		{rich, `{"color":1,"n":0,"x":2,"name":"a","tags":[],"k":1}`, p + `argument "color": got number, want string; argument "k": value must be 'fixed'; argument "n": minimum: got 0, want 1; argument "name": minLength: got 1, want 2; and 2 more`},
		{many, `{"p01":1}`, p + `missing required arguments "p00", "p02"`},
		{ref, `{"lines":[{"qty":1},{"qty":0}]}`, p + `argument "lines/1/qty": minimum: got 0, want 1`},
		{either, `{"s":1.5}`, p + `argument "s": got number, want integer; argument "s": got number, want string`},
		{either, `{"p":"a1"}`, p + `argument "p": 'a1' does not match pattern '^[A-Z][0-9]+$'`},
	} {
		_, err := c.t.Validate(json.RawMessage(c.args))
		var te *Error
		if !errors.As(err, &te) || te.Msg != c.want {
			t.Errorf("Validate(%s) = %v\nwant message %s", c.args, err, c.want)
		}
	}
}

func TestValidateFingerprints(t *testing.T) {
	tl := vtTyped[map[string]any](t)
	groups := [][]string{
		{`{"a":1,"b":"A","c":[1,{"y":true,"x":null}]}`,
			` { "c" : [ 1.0 , { "x" : null , "y" : true } ] , "b" : "\u0041" , "a" : 1e0 } `,
			`{"b":"A","c":[10e-1,{"\u0079":true,"x":null}],"a":0.1e1}`},
		{`{"s":"é\n😀"}`, `{"s":"\u00e9\u000a\ud83d\ude00"}`, `{"s":"\u00E9\n\uD83D\uDE00"}`},
		{"{\"s\":\"\xff\"}", `{"s":"\ufffd"}`, `{"s":"\udc00"}`, `{"s":"�"}`},
	}
	var firsts []uint64
	for _, g := range groups {
		var want uint64
		for i, args := range g {
			vtCheck(t, tl, []byte(args))
			got, err := tl.Validate(json.RawMessage(args))
			if err != nil {
				t.Fatalf("Validate(%s): %v", args, err)
			}
			if i == 0 {
				want = got
				firsts = append(firsts, got)
			} else if got != want {
				t.Errorf("Validate(%s) fingerprint %x, want %x as for %s", args, got, want, g[0])
			}
		}
	}
	for i := range firsts {
		for j := range i {
			if firsts[i] == firsts[j] {
				t.Errorf("groups %d and %d have the same fingerprint", i, j)
			}
		}
	}
}

// FuzzValidate checks vtCheck's properties of Validate on the test schemas,
// with arguments from the fuzzer or made JSON by vtGenerate.
func FuzzValidate(f *testing.F) {
	for i, s := range vtSchemas {
		for _, c := range s.cases {
			f.Add(uint8(i), []byte(c.args))
		}
	}
	for i, s := range vtSchemas {
		if s.name == "flat" {
			for _, args := range vtFlatArgs {
				f.Add(uint8(i), []byte(args))
			}
		}
	}
	f.Add(uint8(0), []byte(`{"order_id":"A1","any":{"b":{"d":1,"c":[{"f":1,"e":2}]},"a":"\u00e9"}}`))
	var tools []*Tool
	for i := range vtSchemas {
		tools = append(tools, vtTool(f, i))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 32 {
		seed := make([]byte, 64+r.IntN(192))
		for k := range seed {
			seed[k] = byte(r.Uint32())
		}
		f.Add(uint8(128+i), seed)
	}
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		if which >= 128 {
			// Make JSON of the bytes, to reach the schemas' checks
			// more often than random bytes do.
			args = vtGenerate(args)
		}
		vtCheck(t, tools[int(which)%len(tools)], args)
	})
}

// vtGenerate makes a JSON document of p, with the property names and
// values of the test schemas, keys in any order, repeated keys, escapes
// and white space.
func vtGenerate(p []byte) []byte {
	g := vtGen{p: p}
	var w bytes.Buffer
	g.value(&w, 0)
	return w.Bytes()
}

type vtGen struct {
	p []byte
	i int
}

var (
	vtGenKeys = []string{"order_id", "limit", "small", "express", "items", "tags", "ptr", "when", "fixed", "any",
		"nested", "sku", "qty", "note", "price", "color", "n", "x", "name", "k", "kn", "e", "nul", "no", "yes",
		"empty", "typeless", "a", "b", "c", "o", "p", "q", "s", "key", "customer", "priority", "lines", "p00",
		"p01", "p07", "z", "é", "a/b~"}
	vtGenStrings = []string{"A1", "red", "green", "é", `e\u0301`, `A\n`, "😀", "fixed", "ab", "abcd", "abcde", "x", "",
		"2024-01-01T00:00:00Z", "1", `\ud83d`, `\udc00\ud800`, `\u00e9\u00e9\u00e9`, `\"\\\/`}
	vtGenNumbers = []string{"0", "-0", "1", "1.0", "1.5", "1e0", "255", "256", "-1", "1e300", "10", "11", "0.5",
		"3", "2", "100", "1e-400", "5", "4", "0.1e1", "-0.0", "123456789012345678", "9007199254740993", "1E+2"}
)

func (g *vtGen) next() int {
	if g.i >= len(g.p) {
		return 0
	}
	g.i++
	return int(g.p[g.i-1])
}

func (g *vtGen) space(w *bytes.Buffer) {
	if c := g.next(); c%5 == 0 {
		w.WriteString([]string{" ", "\n", "\t ", "\r\n  "}[c/5%4])
	}
}

// str writes s, which is JSON string content, quoted, with some of its
// ASCII letters escaped.
func (g *vtGen) str(w *bytes.Buffer, s string) {
	mode := g.next()
	w.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' { // already an escape: copy it
			n := 2
			if s[i+1] == 'u' {
				n = 6
			}
			w.WriteString(s[i : i+n])
			i += n - 1
			continue
		}
		if mode%3 == 0 && c < 0x80 && c != '"' {
			fmt.Fprintf(w, "\\u%04x", c)
			continue
		}
		if mode%3 == 1 && c >= 0x80 {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r > 0xffff {
				r -= 0x10000
				fmt.Fprintf(w, "\\u%04x\\u%04x", 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			} else {
				fmt.Fprintf(w, "\\u%04x", r)
			}
			i += n - 1
			continue
		}
		w.WriteByte(c)
	}
	w.WriteByte('"')
}

func (g *vtGen) value(w *bytes.Buffer, depth int) {
	c := g.next()
	kind := c % 8
	if depth == 0 && c < 200 {
		kind = 0
	}
	if depth > 4 && kind < 2 {
		kind += 2
	}
	g.space(w)
	switch kind {
	case 0:
		w.WriteByte('{')
		for i := range g.next() % 6 {
			if i > 0 {
				w.WriteByte(',')
			}
			g.space(w)
			g.str(w, vtGenKeys[g.next()%len(vtGenKeys)])
			g.space(w)
			w.WriteByte(':')
			g.value(w, depth+1)
		}
		w.WriteByte('}')
	case 1:
		w.WriteByte('[')
		for i := range g.next() % 5 {
			if i > 0 {
				w.WriteByte(',')
			}
			g.value(w, depth+1)
		}
		w.WriteByte(']')
	case 2, 3:
		g.str(w, vtGenStrings[g.next()%len(vtGenStrings)])
	case 4, 5:
		w.WriteString(vtGenNumbers[g.next()%len(vtGenNumbers)])
	case 6:
		w.WriteString([]string{"true", "false"}[g.next()%2])
	default:
		w.WriteString("null")
	}
	g.space(w)
}
