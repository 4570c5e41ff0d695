package tool

import (
	"encoding/json"
	"reflect"
	"testing"
)

// argsValueSeeds are arguments of the kinds argsValue decodes itself and
// of the kinds it must leave to encoding/json.
var argsValueSeeds = []string{
	`{}`, `{"key":"k1"}`, ` { "a" : [1, -2.5e3, 0, true, false, null, "x"] , "b":{"c":{}} } `,
	`{"n":1e400}`, `{"n":01}`, `{"n":-}`, `{"n":1.}`, `{"n":.5}`, `{"n":1e}`, `{"n":-0.0E+2}`,
	`{"s":"caf\u00e9"}`, `{"s":"café"}`, "{\"s\":\"\xff\"}", "{\"s\":\"a\tb\"}", `{"s":"a\"b"}`,
	`{"a":1,"a":2}`, `{"a":{"b":1,"b":1}}`, `[1,2,]`, `{"a":1,}`, `{"a" 1}`, `{"a":1}x`, `{"a":tru}`,
	`"str"`, `12`, `null`, `[]`, `[[[[[]]]]]`, ``, ` `, `{`, `{"a":[`,
}

// argsValue decodes what it accepts exactly as encoding/json does, and
// accepts nothing encoding/json refuses or that repeats a key.
func checkArgsValue(t *testing.T, b []byte) {
	v, ok := argsValue(b)
	if !ok {
		return
	}
	var want any
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("argsValue(%q) = %#v, but encoding/json refuses it: %v", b, v, err)
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("argsValue(%q) = %#v, encoding/json %#v", b, v, want)
	}
	if memberCount(b) != decodedMembers(v) {
		t.Fatalf("argsValue(%q) accepted a repeated key", b)
	}
}

func TestArgsValueLikeEncodingJSON(t *testing.T) {
	for _, s := range argsValueSeeds {
		checkArgsValue(t, []byte(s))
	}
	// The common arguments take the one-pass path.
	for _, s := range []string{`{"key":"k1"}`, `{"a":[1,-2.5e3,true,null],"b":{"c":"café"}}`} {
		if _, ok := argsValue([]byte(s)); !ok {
			t.Errorf("argsValue(%s) left to encoding/json", s)
		}
	}
}

func FuzzArgsValue(f *testing.F) {
	for _, s := range argsValueSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkArgsValue)
}
