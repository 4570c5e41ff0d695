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

	"github.com/google/jsonschema-go/jsonschema"
)

// The identifiers in this file start with fs, to keep clear of other test
// files in the package.

type fsItem struct {
	SKU   string  `json:"sku"`
	Qty   int     `json:"qty" jsonschema:"how many"`
	Note  *string `json:"note,omitempty"`
	Price float64 `json:"price,omitempty"`
}

type fsOrder struct {
	OrderID string            `json:"order_id"`
	Limit   int               `json:"limit,omitempty"`
	Small   uint8             `json:"small,omitempty"`
	Express bool              `json:"express,omitempty"`
	Items   []fsItem          `json:"items,omitempty"`
	Tags    map[string]int    `json:"tags,omitempty"`
	Ptr     *fsItem           `json:"ptr,omitempty"`
	When    time.Time         `json:"when,omitzero"`
	Fixed   [2]int            `json:"fixed,omitzero"`
	Any     any               `json:"any,omitempty"`
	Nested  map[string]fsItem `json:"nested,omitempty"`
}

type fsSmall struct {
	Key string `json:"key"`
}

type fsLine struct {
	SKU   string  `json:"sku"`
	Qty   int     `json:"qty"`
	Price float64 `json:"price"`
}

type fsMedium struct {
	OrderID  string   `json:"order_id"`
	Customer string   `json:"customer"`
	Priority int      `json:"priority"`
	Express  bool     `json:"express"`
	Lines    []fsLine `json:"lines"`
}

func fsTyped[In any](tb testing.TB) *Tool {
	tb.Helper()
	t, err := New(Spec[In]{Name: "typed"}, func(context.Context, In) (bool, error) { return true, nil })
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func fsRaw(tb testing.TB, schema string) *Tool {
	tb.Helper()
	t, err := NewRaw(Definition{Name: "raw", InputSchema: json.RawMessage(schema)},
		func(_ context.Context, args json.RawMessage) (json.RawMessage, error) { return args, nil }, nil)
	if err != nil {
		tb.Fatalf("NewRaw(%s): %v", schema, err)
	}
	return t
}

// fsReference is Validate as it was: decode into an any, check with
// jsonschema-go, fingerprint the decoded value.
func fsReference(t *Tool, args []byte) (uint64, error) {
	if len(args) == 0 {
		args = []byte("{}")
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return fingerprintBytes(args), &Error{Kind: KindInvalidArguments, Msg: "arguments are not valid JSON: " + err.Error()}
	}
	fp := Fingerprint(v)
	if err := t.schema.Validate(v); err != nil {
		return fp, &Error{Kind: KindInvalidArguments, Msg: "arguments do not match the schema: " + err.Error()}
	}
	return fp, nil
}

// fsHasDuplicateKeys reports whether valid JSON repeats a key in an
// object, comparing keys as decoded.
func fsHasDuplicateKeys(b []byte) bool {
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

// fsOutcome classifies a Validate result.
type fsOutcome int

const (
	fsValid fsOutcome = iota
	fsInvalid
	fsBadJSON
	fsDuplicate
)

func (o fsOutcome) String() string {
	return [...]string{"valid", "invalid", "not JSON", "duplicate key"}[o]
}

func fsClassify(tb testing.TB, err error) fsOutcome {
	tb.Helper()
	if err == nil {
		return fsValid
	}
	var te *Error
	if !errors.As(err, &te) || te.Kind != KindInvalidArguments {
		tb.Fatalf("error %v (%T) is not an invalid-arguments *Error", err, err)
	}
	switch {
	case strings.HasPrefix(te.Msg, "arguments are not valid JSON"):
		return fsBadJSON
	case strings.HasPrefix(te.Msg, "duplicate argument "):
		return fsDuplicate
	case strings.HasPrefix(te.Msg, "arguments do not match the schema: "):
		return fsInvalid
	}
	tb.Fatalf("unexpected message %q", te.Msg)
	return 0
}

// fsCheck validates args and checks that the outcome agrees with the
// reference: the same verdict, and the same fingerprint; except that
// duplicate keys, which the reference accepts (the last one wins), are
// rejected, with the fingerprint of the bytes.
func fsCheck(tb testing.TB, t *Tool, args []byte) (fsOutcome, error) {
	tb.Helper()
	fp, err := t.Validate(args)
	got := fsClassify(tb, err)
	refFP, refErr := fsReference(t, args)
	want := fsClassify(tb, refErr)
	norm := args
	if len(norm) == 0 {
		norm = []byte("{}")
	}
	if want != fsBadJSON && fsHasDuplicateKeys(norm) {
		want, refFP = fsDuplicate, fingerprintBytes(norm)
	}
	if got != want {
		tb.Fatalf("Validate(%q) = %v (%v); reference says %v (%v)", args, got, err, want, refErr)
	}
	if fp != refFP {
		tb.Fatalf("Validate(%q) fingerprint %x, reference %x", args, fp, refFP)
	}
	return got, err
}

type fsCase struct {
	args string
	want fsOutcome
}

var fsOrderCases = []fsCase{
	{`{"order_id":"A1"}`, fsValid},
	{` { "order_id" : "A1" } `, fsValid},
	{"\t\r\n{\"order_id\"\n:\"A1\"}\n", fsValid},
	{`{"order_id":"A1","limit":3}`, fsValid},
	{`{"order_id":"A1","limit":3.0}`, fsValid},
	{`{"order_id":"A1","limit":3e0}`, fsValid},
	{`{"order_id":"A1","limit":-0}`, fsValid},
	{`{"order_id":"A1","limit":1e300}`, fsValid},
	{`{"order_id":"A1","limit":1.5}`, fsInvalid},
	{`{"order_id":"A1","limit":"3"}`, fsInvalid},
	{`{"order_id":"A1","limit":null}`, fsInvalid},
	{`{"order_id":"A1","small":255}`, fsValid},
	{`{"order_id":"A1","small":256}`, fsInvalid},
	{`{"order_id":"A1","small":-1}`, fsInvalid},
	{`{"order_id":"A1","express":true}`, fsValid},
	{`{"order_id":"A1","express":0}`, fsInvalid},
	{`{"order_id":5}`, fsInvalid},
	{`{"order_id":null}`, fsInvalid},
	{`{"limit":1}`, fsInvalid},
	{`{}`, fsInvalid},
	{``, fsInvalid},
	{`{"order_id":"A1","orderId":"A1"}`, fsInvalid},
	{`{"order_id":"A1","items":null}`, fsValid},
	{`{"order_id":"A1","items":[]}`, fsValid},
	{`{"order_id":"A1","items":[{"sku":"x","qty":1},{"qty":2,"sku":"y","note":null},{"sku":"z","qty":3,"note":"n","price":1.5}]}`, fsValid},
	{`{"order_id":"A1","items":[{"sku":"x","qty":1},{"sku":"y"}]}`, fsInvalid},
	{`{"order_id":"A1","items":[{"sku":"x","qty":1.5}]}`, fsInvalid},
	{`{"order_id":"A1","items":[{"sku":"x","qty":1,"extra":1}]}`, fsInvalid},
	{`{"order_id":"A1","items":[{"sku":"x","qty":1,"note":5}]}`, fsInvalid},
	{`{"order_id":"A1","items":{"sku":"x","qty":1}}`, fsInvalid},
	{`{"order_id":"A1","tags":{"a":1,"b":2}}`, fsValid},
	{`{"order_id":"A1","tags":{"a":1,"b":"2"}}`, fsInvalid},
	{`{"order_id":"A1","tags":null}`, fsInvalid},
	{`{"order_id":"A1","ptr":null}`, fsValid},
	{`{"order_id":"A1","ptr":{"sku":"s","qty":0}}`, fsValid},
	{`{"order_id":"A1","ptr":{"sku":"s"}}`, fsInvalid},
	{`{"order_id":"A1","when":"2024-01-01T00:00:00Z"}`, fsValid},
	{`{"order_id":"A1","when":1}`, fsInvalid},
	{`{"order_id":"A1","fixed":[1,2]}`, fsValid},
	{`{"order_id":"A1","fixed":[1]}`, fsInvalid},
	{`{"order_id":"A1","fixed":[1,2,3]}`, fsInvalid},
	{`{"order_id":"A1","any":{"x":[1,{"y":null}]}}`, fsValid},
	{`{"order_id":"A1","nested":{"k":{"sku":"s","qty":1}}}`, fsValid},
	{`{"order_id":"A1","nested":{"k":{"sku":"s"}}}`, fsInvalid},
	// Escapes decode before validation.
	{`{"order_\u0069d":"A1"}`, fsValid},
	{`{"order_id":"\u0041\n\t\"\\\/\b\f\r"}`, fsValid},
	{`{"order_id":"\ud83d\ude00 \ud83d \ude00 \udc00\ud800"}`, fsValid},
	{"{\"order_id\":\"\xff\xfe invalid UTF-8\"}", fsValid},
	{`{"order_id":"A1","items":[{"\u0073ku":"x","q\u0074y":1}]}`, fsValid},
	{`{"order_id":"A1","items":[{"sku":"x","q\u0074y":1,"\u0065xtra":1}]}`, fsInvalid},
	// Not JSON.
	{`{"order_id":`, fsBadJSON},
	{`order_id=A1`, fsBadJSON},
	{`{"order_id":"A1"} x`, fsBadJSON},
	{`{"order_id":"A1"}{}`, fsBadJSON},
	{`{"order_id":"A1",}`, fsBadJSON},
	{`{"order_id" "A1"}`, fsBadJSON},
	{`{"order_id":"A1" "limit":1}`, fsBadJSON},
	{`{'order_id':"A1"}`, fsBadJSON},
	{`{"order_id":"A1","limit":01}`, fsBadJSON},
	{`{"order_id":"A1","limit":1.}`, fsBadJSON},
	{`{"order_id":"A1","limit":.5}`, fsBadJSON},
	{`{"order_id":"A1","limit":+1}`, fsBadJSON},
	{`{"order_id":"A1","limit":1e}`, fsBadJSON},
	{`{"order_id":"A1","limit":-}`, fsBadJSON},
	{`{"order_id":"A1","limit":1e400}`, fsBadJSON},
	{`{"order_id":"A1","limit":NaN}`, fsBadJSON},
	{`{"order_id":"A1","express":tru}`, fsBadJSON},
	{`{"order_id":"A1","express":True}`, fsBadJSON},
	{`{"order_id":"A1\x"}`, fsBadJSON},
	{`{"order_id":"A1\u00"}`, fsBadJSON},
	{`{"order_id":"A1\u00g0"}`, fsBadJSON},
	{"{\"order_id\":\"A\x01\"}", fsBadJSON},
	{`{"order_id":"A1`, fsBadJSON},
	{`{"order_id":"A1"`, fsBadJSON},
	{`{"order_id":"A1","items":[}`, fsBadJSON},
	{`{"order_id":"A1","items":[1,]}`, fsBadJSON},
	{`{"order_id":"A1","items":[1 2]}`, fsBadJSON},
	{` `, fsBadJSON},
	{"\ufeff{}", fsBadJSON},
	// Invalid JSON wins over a schema violation before it.
	{`{"order_id":5,"limit":}`, fsBadJSON},
	// Duplicate keys, however spelled.
	{`{"order_id":"A1","order_id":"A2"}`, fsDuplicate},
	{`{"order_id":"A1","order_\u0069d":"A1"}`, fsDuplicate},
	{`{"order_id":"A1","limit":1,"express":true,"limit":2}`, fsDuplicate},
	{`{"order_id":"A1","tags":{"b":1,"a":2,"b":3}}`, fsDuplicate},
	{`{"order_id":"A1","any":{"x":1,"x":1}}`, fsDuplicate},
	{"{\"order_id\":\"A1\",\"tags\":{\"\xff\":1,\"\xfe\":2}}", fsDuplicate},
	{`{"order_id":"A1","any":{"x":1,"x":1},"limit":}`, fsBadJSON},
	// Not objects.
	{`["A1"]`, fsInvalid},
	{`null`, fsInvalid},
	{`"A1"`, fsInvalid},
	{`1`, fsInvalid},
}

const fsRichSchema = `{
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

var fsRichCases = []fsCase{
	{`{"color":"red"}`, fsValid},
	{`{"color":"\u0072ed"}`, fsValid},
	{`{"color":"\u00e9"}`, fsValid},
	{`{"color":"é"}`, fsValid},
	{`{"color":"e\u0301"}`, fsInvalid},
	{`{"color":"A\n"}`, fsValid},
	{`{"color":"\u0041\u000a"}`, fsValid},
	{`{"color":"\ud83d\ude00"}`, fsValid},
	{`{"color":"purple"}`, fsInvalid},
	{`{"color":"Red"}`, fsInvalid},
	{`{"color":1}`, fsInvalid},
	{`{"color":"red","n":1}`, fsValid},
	{`{"color":"red","n":10.0}`, fsValid},
	{`{"color":"red","n":0}`, fsInvalid},
	{`{"color":"red","n":11}`, fsInvalid},
	{`{"color":"red","n":5.5}`, fsInvalid},
	{`{"color":"red","x":0.5}`, fsValid},
	{`{"color":"red","x":0}`, fsInvalid},
	{`{"color":"red","x":1}`, fsInvalid},
	{`{"color":"red","x":1e-300}`, fsValid},
	{`{"color":"red","x":1e-400}`, fsInvalid},
	{`{"color":"red","name":"ab"}`, fsValid},
	{`{"color":"red","name":"a"}`, fsInvalid},
	{`{"color":"red","name":"abcd"}`, fsValid},
	{`{"color":"red","name":"abcde"}`, fsInvalid},
	{`{"color":"red","name":"éééé"}`, fsValid},
	{`{"color":"red","name":"😀😀😀😀"}`, fsValid},
	{`{"color":"red","name":"\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00"}`, fsValid},
	{`{"color":"red","name":"\ud83d\ud83d\ud83d\ud83d"}`, fsValid},
	{`{"color":"red","name":"\ud83d\ud83d\ud83d\ud83d\ud83d"}`, fsInvalid},
	{"{\"color\":\"red\",\"name\":\"\xff\xff\xff\xff\"}", fsValid},
	{"{\"color\":\"red\",\"name\":\"\xff\xff\xff\xff\xff\"}", fsInvalid},
	{`{"color":"red","name":"\u00e9"}`, fsInvalid},
	{`{"color":"red","tags":["a"]}`, fsValid},
	{`{"color":"red","tags":[]}`, fsInvalid},
	{`{"color":"red","tags":["a","b","c","d"]}`, fsInvalid},
	{`{"color":"red","tags":["a",1]}`, fsInvalid},
	{`{"color":"red","k":"fixed"}`, fsValid},
	{`{"color":"red","k":"f\u0069xed"}`, fsValid},
	{`{"color":"red","k":"other"}`, fsInvalid},
	{`{"color":"red","k":["fixed"]}`, fsInvalid},
	{`{"color":"red","kn":null}`, fsValid},
	{`{"color":"red","kn":false}`, fsInvalid},
	{`{"color":"red","e":1}`, fsValid},
	{`{"color":"red","e":1.0}`, fsValid},
	{`{"color":"red","e":"1"}`, fsValid},
	{`{"color":"red","e":true}`, fsValid},
	{`{"color":"red","e":null}`, fsValid},
	{`{"color":"red","e":false}`, fsInvalid},
	{`{"color":"red","e":2}`, fsInvalid},
	{`{"color":"red","e":{}}`, fsInvalid},
	{`{"color":"red","e":[1]}`, fsInvalid},
	{`{"color":"red","nul":null}`, fsValid},
	{`{"color":"red","nul":3}`, fsValid},
	{`{"color":"red","nul":3.5}`, fsInvalid},
	{`{"color":"red","nul":"3"}`, fsInvalid},
	{`{"color":"red","no":1}`, fsInvalid},
	{`{"color":"red","no":null}`, fsInvalid},
	{`{"color":"red","yes":{"anything":[1,2]}}`, fsValid},
	{`{"color":"red","empty":"x"}`, fsInvalid},
	{`{"color":"red","typeless":"a"}`, fsValid},
	{`{"color":"red","typeless":"ab"}`, fsInvalid},
	{`{"color":"red","typeless":5}`, fsValid},
	{`{"color":"red","typeless":4}`, fsInvalid},
	{`{"color":"red","typeless":[]}`, fsValid},
	{`{"color":"red","other":1}`, fsInvalid},
	{`{"n":1}`, fsInvalid},
}

// fsFlatSchema has a property for each check a flat object can meet.
const fsFlatSchema = `{"type":"object","properties":{
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

// fsFlatArgs are flat objects, most of which fsFlatSchema accepts.
var fsFlatArgs = []string{
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

// fsSchemas are the schemas of the differential and fuzz tests. fast says
// whether the compiled validator handles them.
var fsSchemas = []struct {
	name   string
	fast   bool
	schema string // for NewRaw, or
	typed  func(testing.TB) *Tool
	cases  []fsCase
}{
	{name: "order", fast: true, typed: fsTyped[fsOrder], cases: fsOrderCases},
	{name: "rich", fast: true, schema: fsRichSchema, cases: fsRichCases},
	{name: "small", fast: true, typed: fsTyped[fsSmall], cases: []fsCase{
		{`{"key":"k1"}`, fsValid}, {`{"key":"k1","key":"k1"}`, fsDuplicate}, {`{"key":1}`, fsInvalid},
	}},
	{name: "medium", fast: true, typed: fsTyped[fsMedium], cases: []fsCase{
		{fsMediumArgs, fsValid},
		{strings.Replace(fsMediumArgs, `"qty":3`, `"qty":"3"`, 1), fsInvalid},
	}},
	{name: "map", fast: true, typed: fsTyped[map[string]any], cases: []fsCase{
		{`{}`, fsValid}, {`{"a":[1,{"b":null}],"c":"d"}`, fsValid}, {`[]`, fsInvalid},
	}},
	{name: "additional schema", fast: true, schema: `{"type":"object","properties":{"a":{"type":"string"},"c":{}},"additionalProperties":{"type":"integer"},"required":["a","b","b"]}`, cases: []fsCase{
		{`{"a":"x","b":1}`, fsValid},
		{`{"a":"x","b":1,"z":2,"c":"any"}`, fsValid},
		{`{"a":"x","b":"1"}`, fsInvalid},
		{`{"a":"x"}`, fsInvalid},
		{`{"b":1}`, fsInvalid},
		{`{}`, fsInvalid},
		{`{"a":"x","b":1,"z":"2"}`, fsInvalid},
	}},
	{name: "required undeclared, no additional", fast: true, schema: `{"type":"object","properties":{"a":{"type":"string"}},"required":["b"],"additionalProperties":false}`, cases: []fsCase{
		{`{}`, fsInvalid}, {`{"b":1}`, fsInvalid}, {`{"a":"x"}`, fsInvalid},
	}},
	{name: "nested", fast: true, schema: `{"type":"object","properties":{"o":{"type":"object","properties":{"p":{"type":["object","null"],"properties":{"q":{"type":"boolean"}},"required":["q"]}},"required":["p"]}}}`, cases: []fsCase{
		{`{}`, fsValid},
		{`{"o":{"p":null}}`, fsValid},
		{`{"o":{"p":{"q":true}}}`, fsValid},
		{`{"o":{"p":{"q":1}}}`, fsInvalid},
		{`{"o":{"p":{}}}`, fsInvalid},
		{`{"o":{}}`, fsInvalid},
		{`{"o":[]}`, fsInvalid},
		{`{"o":{"p":{"q":true,"r":{"z":1,"a":[{"y":2,"b":3}]}},"x":1}}`, fsValid},
	}},
	{name: "many properties", fast: true, schema: fsManySchema(24), cases: []fsCase{
		{fsManyArgs(24, false), fsValid},
		{fsManyArgs(24, true), fsValid},
		{fsManyArgs(20, true), fsInvalid},
		{strings.Replace(fsManyArgs(24, true), `"p07":7`, `"p07":"7"`, 1), fsInvalid},
		{strings.Replace(fsManyArgs(24, true), `"p07":7`, `"p07":7,"p03":3`, 1), fsDuplicate},
		{strings.Replace(fsManyArgs(24, true), `"p07":7`, `"p\u0030\u0037":7`, 1), fsValid},
	}},
	{name: "additional not {}", fast: true, schema: `{"type":"object","properties":{"a":{}},"additionalProperties":{"not":{}}}`, cases: []fsCase{
		{`{"a":[1]}`, fsValid}, {`{"b":1}`, fsInvalid},
	}},
	{name: "flat", fast: true, schema: fsFlatSchema},
	{name: "draft-04", schema: `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`},
	{name: "draft-07", fast: true, schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}}}`, cases: []fsCase{
		{`{"a":[1,2]}`, fsValid}, {`{"a":[1,"2"]}`, fsInvalid},
	}},
	{name: "false items", fast: true, schema: `{"type":"object","properties":{"a":{"type":"array","items":false}}}`, cases: []fsCase{
		{`{"a":[]}`, fsValid}, {`{"a":[1]}`, fsInvalid},
	}},
	// Outside the subset: jsonschema-go validates, after the same syntax
	// and duplicate-key checks.
	{name: "pattern", schema: `{"type":"object","properties":{"s":{"type":"string","pattern":"^a"}}}`, cases: []fsCase{
		{`{"s":"abc"}`, fsValid}, {`{"s":"b"}`, fsInvalid}, {`{"s":"a","s":"a"}`, fsDuplicate}, {`{"s":`, fsBadJSON},
	}},
	{name: "anyOf", schema: `{"type":"object","properties":{"s":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`, cases: []fsCase{
		{`{"s":"x"}`, fsValid}, {`{"s":1}`, fsValid}, {`{"s":1.5}`, fsInvalid}, {`{"b":1,"a":2}`, fsValid},
	}},
	{name: "ref", schema: `{"type":"object","$defs":{"s":{"type":"string"}},"properties":{"s":{"$ref":"#/$defs/s"}}}`, cases: []fsCase{
		{`{"s":"x"}`, fsValid}, {`{"s":1}`, fsInvalid},
	}},
	{name: "format", schema: `{"type":"object","properties":{"d":{"type":"string","format":"date-time"}}}`},
	{name: "multipleOf", schema: `{"type":"object","properties":{"n":{"type":"number","multipleOf":2}}}`, cases: []fsCase{
		{`{"n":4}`, fsValid}, {`{"n":3}`, fsInvalid},
	}},
	{name: "minProperties", schema: `{"type":"object","minProperties":1}`},
	{name: "uniqueItems", schema: `{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`},
	{name: "prefixItems", schema: `{"type":"object","properties":{"a":{"prefixItems":[{"type":"string"}]}}}`},
	{name: "items array", schema: `{"type":"object","properties":{"a":{"items":[{"type":"string"}]}}}`},
	{name: "not", schema: `{"type":"object","properties":{"a":{"not":{"type":"string"}}}}`},
	{name: "patternProperties", schema: `{"type":"object","patternProperties":{"^a":{"type":"string"}}}`},
	{name: "deep", schema: `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string","pattern":"x"}}}}}`},
}

const fsMediumArgs = `{"order_id":"A100","customer":"c-42","priority":2,"express":true,"lines":[{"sku":"X1","qty":1,"price":9.5},{"sku":"X2","qty":3,"price":1.25},{"sku":"X3","qty":2,"price":100}]}`

func fsManySchema(n int) string {
	var props, req []string
	for i := range n {
		props = append(props, fmt.Sprintf(`"p%02d":{"type":"integer"}`, i))
		req = append(req, fmt.Sprintf(`"p%02d"`, i))
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(req, ",") + `],"additionalProperties":false}`
}

func fsManyArgs(n int, reverse bool) string {
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

func fsTool(tb testing.TB, i int) *Tool {
	s := fsSchemas[i]
	if s.typed != nil {
		return s.typed(tb)
	}
	return fsRaw(tb, s.schema)
}

func TestFastSchemaCompiles(t *testing.T) {
	for i, s := range fsSchemas {
		if got := fsTool(t, i).fast != nil; got != s.fast {
			t.Errorf("%s: compiled = %v, want %v", s.name, got, s.fast)
		}
	}
}

// TestFastSchemaAgrees checks every case against the reference validator.
func TestFastSchemaAgrees(t *testing.T) {
	for i, s := range fsSchemas {
		t.Run(s.name, func(t *testing.T) {
			tl := fsTool(t, i)
			for _, c := range s.cases {
				if got, err := fsCheck(t, tl, []byte(c.args)); got != c.want {
					t.Errorf("Validate(%s) = %v (%v), want %v", c.args, got, err, c.want)
				}
			}
			// The other schemas' cases too: different schemas, same verdicts.
			for _, other := range fsSchemas {
				for _, c := range other.cases {
					fsCheck(t, tl, []byte(c.args))
				}
			}
			for _, args := range fsFlatArgs {
				fsCheck(t, tl, []byte(args))
			}
		})
	}
}

type fsColor string

// Schemas built in Go may hold enum and const values of any Go type;
// jsonschema-go compares numbers by value and strings by content.
func TestFastSchemaGoValues(t *testing.T) {
	for _, c := range []struct {
		enum  []any
		fast  bool
		valid []string
	}{
		{[]any{1, int8(2), uint16(3), float32(4.5), 6.0}, true, []string{"1", "2.0", "3", "4.5", "6"}},
		{[]any{fsColor("red"), "green", true, nil}, true, []string{`"red"`, `"green"`, "true", "null"}},
		{[]any{int64(1) << 60}, false, nil},
		{[]any{json.Number("1")}, false, nil},
		{[]any{[]any{1}}, false, nil},
		{[]any{map[string]any{}}, false, nil},
		{[]any{new(int)}, false, nil},
	} {
		schema := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
			"v": {Enum: c.enum},
			"w": {Const: &c.enum[0]},
		}}
		tl, err := build(Definition{Name: "go"}, schema, nil)
		if err != nil {
			t.Fatal(err)
		}
		if (tl.fast != nil) != c.fast {
			t.Errorf("enum %v: compiled = %v, want %v", c.enum, tl.fast != nil, c.fast)
		}
		for _, v := range append(c.valid, "7", `"blue"`, "false", "[]", "{}", "1.5") {
			fsCheck(t, tl, []byte(`{"v":`+v+`}`))
			fsCheck(t, tl, []byte(`{"w":`+v+`}`))
		}
		for _, v := range c.valid {
			if got, err := fsCheck(t, tl, []byte(`{"v":`+v+`}`)); got != fsValid {
				t.Errorf("enum %v: %s: %v", c.enum, v, err)
			}
		}
	}
}

func TestFastSchemaDepth(t *testing.T) {
	tl := fsTyped[fsOrder](t)
	for _, n := range []int{9998, 9999, 10000, 10001} {
		args := `{"order_id":"A1","any":` + strings.Repeat(`[`, n) + strings.Repeat(`]`, n) + `}`
		got, _ := fsCheck(t, tl, []byte(args))
		if want := n < 10000; (got == fsValid) != want {
			t.Errorf("depth %d: %v", n+1, got)
		}
		args = `{"order_id":"A1","any":` + strings.Repeat(`{"b":1,"a":`, n) + `1` + strings.Repeat(`}`, n) + `}`
		fsCheck(t, tl, []byte(args))
	}
}

func TestFastSchemaMessages(t *testing.T) {
	order := fsTyped[fsOrder](t)
	rich := fsRaw(t, fsRichSchema)
	many := fsRaw(t, fsManySchema(3))
	const p = "arguments do not match the schema: "
	for _, c := range []struct {
		t    *Tool
		args string
		want string
	}{
		{order, `{"order_id":5}`, p + `argument "order_id": want string, got number`},
		{order, `{"limit":1}`, p + `missing required argument "order_id"`},
		{order, `{"order_id":"A1","foo":1}`, p + `unexpected argument "foo"`},
		{order, `{"order_id":"A1","items":[{"sku":"a","qty":1},{"sku":"b","qty":1},{"sku":"c","qty":1.5}]}`, p + `argument "items/2/qty": want integer, got 1.5`},
		{order, `{"order_id":"A1","items":[{"sku":"a","qty":1},{"qty":1}]}`, p + `missing required argument "items/1/sku"`},
		{order, `{"order_id":"A1","items":[{"sku":"a","qty":1,"x/y~":1}]}`, p + `unexpected argument "items/0/x~1y~0"`},
		{order, `{"order_id":"A1","small":300}`, p + `argument "small": 300 is above the maximum 255`},
		{order, `{"order_id":"A1","small":-1}`, p + `argument "small": -1 is below the minimum 0`},
		{order, `{"order_id":"A1","fixed":[1]}`, p + `argument "fixed": want at least 2 items, got 1`},
		{order, `{"order_id":"A1","nested":{"k\u00e9":{"sku":1,"qty":1}}}`, p + `argument "nested/ké/sku": want string, got number`},
		{order, `[]`, p + `arguments: want object, got array`},
		{order, `{"order_id":"A1","tags":{"a":1,"a":2}}`, `duplicate argument "tags/a"`},
		{order, `{"order_id":"A1","tags":{"b":1,"a":2,"b":2}}`, `duplicate argument "tags/b"`},
		{order, `{"order_id":"A1"`, `arguments are not valid JSON: unexpected end of input`},
		{order, `{"order_id":"A1"} x`, `arguments are not valid JSON: invalid character 'x' at offset 18 after top-level value`},
		{rich, `{"color":"purple"}`, p + `argument "color": must be "red", "green", "é", "A\n" or "😀", got "purple"`},
		{rich, `{"color":"red","n":0}`, p + `argument "n": 0 is below the minimum 1`},
		{rich, `{"color":"red","x":1}`, p + `argument "x": 1 is not below 1`},
		{rich, `{"color":"red","name":"ééééé"}`, p + `argument "name": want at most 4 characters, got 5`},
		{rich, `{"color":"red","k":"other"}`, p + `argument "k": must be "fixed", got "other"`},
		{rich, `{"color":"red","nul":"3"}`, p + `argument "nul": want null or integer, got string`},
		{rich, `{"color":"red","no":1}`, p + `argument "no": not allowed`},
		{many, `{"p01":1}`, p + `missing required arguments "p00", "p02"`},
	} {
		_, err := c.t.Validate(json.RawMessage(c.args))
		var te *Error
		if !errors.As(err, &te) || te.Msg != c.want {
			t.Errorf("Validate(%s) = %v\nwant message %s", c.args, err, c.want)
		}
	}
}

func TestFastSchemaFingerprints(t *testing.T) {
	tl := fsTyped[map[string]any](t)
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
			fsCheck(t, tl, []byte(args))
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

func FuzzValidate(f *testing.F) {
	for i, s := range fsSchemas {
		for _, c := range s.cases {
			f.Add(uint8(i), []byte(c.args))
		}
	}
	for i, s := range fsSchemas {
		if s.name == "flat" {
			for _, args := range fsFlatArgs {
				f.Add(uint8(i), []byte(args))
			}
		}
	}
	f.Add(uint8(0), []byte(`{"order_id":"A1","any":{"b":{"d":1,"c":[{"f":1,"e":2}]},"a":"\u00e9"}}`))
	var tools []*Tool
	for i := range fsSchemas {
		tools = append(tools, fsTool(f, i))
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
			args = fsGenerate(args)
		}
		fsCheck(t, tools[int(which)%len(tools)], args)
	})
}

// fsGenerate makes a JSON document of p, with the property names and
// values of the test schemas, keys in any order, repeated keys, escapes
// and white space.
func fsGenerate(p []byte) []byte {
	g := fsGen{p: p}
	var w bytes.Buffer
	g.value(&w, 0)
	return w.Bytes()
}

type fsGen struct {
	p []byte
	i int
}

var (
	fsGenKeys = []string{"order_id", "limit", "small", "express", "items", "tags", "ptr", "when", "fixed", "any",
		"nested", "sku", "qty", "note", "price", "color", "n", "x", "name", "k", "kn", "e", "nul", "no", "yes",
		"empty", "typeless", "a", "b", "c", "o", "p", "q", "s", "key", "customer", "priority", "lines", "p00",
		"p01", "p07", "z", "é", "a/b~"}
	fsGenStrings = []string{"A1", "red", "green", "é", `e\u0301`, `A\n`, "😀", "fixed", "ab", "abcd", "abcde", "x", "",
		"2024-01-01T00:00:00Z", "1", `\ud83d`, `\udc00\ud800`, `\u00e9\u00e9\u00e9`, `\"\\\/`}
	fsGenNumbers = []string{"0", "-0", "1", "1.0", "1.5", "1e0", "255", "256", "-1", "1e300", "10", "11", "0.5",
		"3", "2", "100", "1e-400", "5", "4", "0.1e1", "-0.0", "123456789012345678", "9007199254740993", "1E+2"}
)

func (g *fsGen) next() int {
	if g.i >= len(g.p) {
		return 0
	}
	g.i++
	return int(g.p[g.i-1])
}

func (g *fsGen) space(w *bytes.Buffer) {
	if c := g.next(); c%5 == 0 {
		w.WriteString([]string{" ", "\n", "\t ", "\r\n  "}[c/5%4])
	}
}

// str writes s, which is JSON string content, quoted, with some of its
// ASCII letters escaped.
func (g *fsGen) str(w *bytes.Buffer, s string) {
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

func (g *fsGen) value(w *bytes.Buffer, depth int) {
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
			g.str(w, fsGenKeys[g.next()%len(fsGenKeys)])
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
		g.str(w, fsGenStrings[g.next()%len(fsGenStrings)])
	case 4, 5:
		w.WriteString(fsGenNumbers[g.next()%len(fsGenNumbers)])
	case 6:
		w.WriteString([]string{"true", "false"}[g.next()%2])
	default:
		w.WriteString("null")
	}
	g.space(w)
}

func BenchmarkValidate(b *testing.B) {
	for _, c := range []struct {
		name string
		tl   *Tool
		args string
	}{
		{"small", fsTyped[fsSmall](b), `{"key":"k1"}`},
		{"medium", fsTyped[fsMedium](b), fsMediumArgs},
	} {
		args := json.RawMessage(c.args)
		b.Run(c.name+"/fast", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.tl.Validate(args); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/jsonschema-go", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fsReference(c.tl, args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
