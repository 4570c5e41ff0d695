package tool_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/tool"
)

// fp decodes s as JSON the way Validate does and fingerprints the value.
func fp(t *testing.T, s string) uint64 {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad test JSON %q: %v", s, err)
	}
	return tool.Fingerprint(v)
}

func TestFingerprintEqualEncodings(t *testing.T) {
	groups := [][]string{
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, "{\n\t\"a\" : 1 ,\r\n \"b\":2 }"},
		{`{"o":{"x":[1,2],"y":null},"z":true}`, `{"z":true,"o":{"y":null,"x":[ 1 , 2 ]}}`},
		{`1`, `1.0`, `1e0`, `10e-1`},
		{`"é"`, `"\u00e9"`},
		{`[]`, `[ ]`},
		{`{}`, ` { } `},
	}
	for _, g := range groups {
		want := fp(t, g[0])
		for _, s := range g[1:] {
			if got := fp(t, s); got != want {
				t.Errorf("Fingerprint(%s) = %x, Fingerprint(%s) = %x; want equal", g[0], want, s, got)
			}
		}
	}
}

// Every value in this list is different, so every fingerprint must be.
func TestFingerprintDistinguishesValues(t *testing.T) {
	values := []string{
		`null`, `true`, `false`, `0`, `1`, `-1`, `1.5`, `"1"`, `"true"`, `"null"`, `""`,
		`"a"`, `"b"`, `"ab"`, `"ba"`,
		`[]`, `{}`, `[null]`, `[[]]`, `[{}]`, `{"":null}`,
		`["ab"]`, `["a","b"]`, `["a","b",""]`, `["","a","b"]`,
		`[1,2]`, `[2,1]`, `[[1],[2]]`, `[[1,2]]`, `[[1],2]`, `[1,[2]]`,
		`{"a":1}`, `{"a":2}`, `{"b":1}`, `{"a":"1"}`, `{"a":[1]}`, `{"a":null}`,
		`{"ab":"c"}`, `{"a":"bc"}`, `{"a":"b","c":""}`,
		`{"a":{"b":1}}`, `{"a":{"b":2}}`, `{"a":{"c":1}}`, `{"a":{"b":{"c":1}}}`, `{"a":{},"b":1}`,
		`{"a":1,"b":{}}`, `{"a":[{"b":1}]}`, `[{"a":1},{"b":1}]`, `[{"a":1,"b":1}]`,
		`{"order_id":"A100"}`, `{"order_id":"A101"}`, `{"order_id":"A100","limit":1}`,
	}
	seen := map[uint64]string{}
	for _, v := range values {
		h := fp(t, v)
		if prev, dup := seen[h]; dup {
			t.Errorf("Fingerprint(%s) == Fingerprint(%s)", v, prev)
		}
		seen[h] = v
	}
}

func TestFingerprintArraysAreLengthSafe(t *testing.T) {
	if fp(t, `["ab"]`) == fp(t, `["a","b"]`) {
		t.Error(`["ab"] and ["a","b"] share a fingerprint`)
	}
	if fp(t, `{"ab":""}`) == fp(t, `{"a":"b"}`) {
		t.Error(`{"ab":""} and {"a":"b"} share a fingerprint`)
	}
}

// Go randomises map iteration; the fingerprint must not depend on it.
func TestFingerprintStableAcrossMapIteration(t *testing.T) {
	m := map[string]any{}
	for i := 0; i < 40; i++ {
		m[fmt.Sprintf("k%02d", i)] = map[string]any{"v": float64(i), "w": []any{"x", float64(i)}}
	}
	want := tool.Fingerprint(m)
	for i := 0; i < 100; i++ {
		if got := tool.Fingerprint(m); got != want {
			t.Fatalf("Fingerprint changed between calls: %x then %x", want, got)
		}
	}
}

// A random object, written with its keys in two different orders and with
// different white space, always fingerprints alike.
func TestFingerprintRandomReorderings(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		v := randomValue(r, 3)
		a := encode(r, v, false)
		b := encode(r, v, true)
		if fp(t, a) != fp(t, b) {
			t.Fatalf("fingerprints differ for\n%s\n%s", a, b)
		}
	}
}

func randomValue(r *rand.Rand, depth int) any {
	k := r.IntN(7)
	if depth == 0 {
		k = r.IntN(4)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return float64(r.IntN(1000)) / 8
	case 3:
		return strings.Repeat("ab", r.IntN(3))
	case 4:
		a := make([]any, r.IntN(4))
		for i := range a {
			a[i] = randomValue(r, depth-1)
		}
		return a
	default:
		m := map[string]any{}
		for i := r.IntN(5); i > 0; i-- {
			m[fmt.Sprintf("k%d", r.IntN(10))] = randomValue(r, depth-1)
		}
		return m
	}
}

// encode writes v as JSON with object keys in a random order, and with
// extra white space when spaced is set.
func encode(r *rand.Rand, v any, spaced bool) string {
	sp := ""
	if spaced {
		sp = " \n"
	}
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = encode(r, e, spaced)
		}
		return "[" + sp + strings.Join(parts, ","+sp) + sp + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%q%s:%s%s", k, sp, sp, encode(r, x[k], spaced))
		}
		return "{" + sp + strings.Join(parts, ","+sp) + sp + "}"
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

func TestFingerprintJSONNumber(t *testing.T) {
	if tool.Fingerprint(json.Number("2")) != tool.Fingerprint(2.0) {
		t.Error("json.Number(2) and float64 2 differ")
	}
	if tool.Fingerprint(json.Number("2.50")) != tool.Fingerprint(json.Number("2.5")) {
		t.Error(`json.Number "2.50" and "2.5" differ`)
	}
	if tool.Fingerprint(json.Number("2")) == tool.Fingerprint(json.Number("3")) {
		t.Error("json.Number 2 and 3 share a fingerprint")
	}
	// A number too large for float64 still gets a stable, distinct hash.
	big1 := tool.Fingerprint(json.Number("1e400"))
	if big1 != tool.Fingerprint(json.Number("1e400")) || big1 == tool.Fingerprint(json.Number("1e401")) {
		t.Error("out-of-range json.Number hashes are not stable and distinct")
	}
	// Decoding with UseNumber gives the same fingerprint as plain decoding.
	const doc = `{"a":[1,2.5,{"b":-3}]}`
	d := json.NewDecoder(strings.NewReader(doc))
	d.UseNumber()
	var withNumbers any
	if err := d.Decode(&withNumbers); err != nil {
		t.Fatal(err)
	}
	if tool.Fingerprint(withNumbers) != fp(t, doc) {
		t.Error("UseNumber decoding changes the fingerprint")
	}
}

// Values that are not decoded JSON are hashed through their encoding:
// stable, and distinct for distinct values.
func TestFingerprintOtherGoValues(t *testing.T) {
	type s struct{ A int }
	if tool.Fingerprint(s{1}) != tool.Fingerprint(s{1}) {
		t.Error("struct fingerprint is not stable")
	}
	if tool.Fingerprint(s{1}) == tool.Fingerprint(s{2}) {
		t.Error("different structs share a fingerprint")
	}
	if tool.Fingerprint([]string{"a"}) == tool.Fingerprint([]string{"b"}) {
		t.Error("different string slices share a fingerprint")
	}
	// Unencodable values do not panic.
	_ = tool.Fingerprint(make(chan int))
}

func TestCallKey(t *testing.T) {
	a := fp(t, `{"order_id":"A1"}`)
	b := fp(t, `{"order_id":"A2"}`)
	if tool.CallKey("get_order", a) != tool.CallKey("get_order", a) {
		t.Error("CallKey is not deterministic")
	}
	if tool.CallKey("get_order", a) == tool.CallKey("cancel_order", a) {
		t.Error("CallKey ignores the tool name")
	}
	if tool.CallKey("get_order", a) == tool.CallKey("get_order", b) {
		t.Error("CallKey ignores the arguments")
	}
	if tool.CallKey("get_order", a) == a {
		t.Error("CallKey equals the bare argument fingerprint")
	}
	if tool.CallKey("", a) == tool.CallKey("x", a) {
		t.Error("CallKey equal for empty and non-empty name")
	}
}
