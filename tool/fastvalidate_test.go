package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Tests of Validate's fast path (fastvalidate.go). The identifiers in this
// file start with fv.

// fvSlow is Validate without the fast path: what every verdict,
// fingerprint and message must equal.
func fvSlow(t *Tool, args []byte) (uint64, error) { return validateArgs(t.schema, nil, args) }

// fvSame checks that Validate gives what the slow way gives, and reports
// whether the fast path vouched for the arguments.
func fvSame(tb testing.TB, t *Tool, args []byte) (fast bool) {
	tb.Helper()
	fp, err := t.Validate(args)
	wantFP, wantErr := fvSlow(t, args)
	if fp != wantFP || fmt.Sprint(err) != fmt.Sprint(wantErr) {
		tb.Fatalf("schema %s\nValidate(%q) = %x, %v\nslow way: %x, %v", t.def.InputSchema, args, fp, err, wantFP, wantErr)
	}
	if t.fastSchema == nil {
		return false
	}
	norm := args
	if len(norm) == 0 {
		norm = []byte("{}")
	}
	fastFP, ok := fastValidate(t.fastSchema, norm)
	if ok && (wantErr != nil || fastFP != wantFP) {
		tb.Fatalf("schema %s\nfast path vouched for %q with %x; the slow way: %x, %v", t.def.InputSchema, args, fastFP, wantFP, wantErr)
	}
	return ok
}

// The fast path takes the usual arguments of the usual schemas, and
// leaves the odd ones, and all that do not conform, to the slow way.
func TestFastValidateTakes(t *testing.T) {
	order := vtTyped[vtOrder](t)
	rich := vtRaw(t, vtRichSchema)
	flat := vtRaw(t, vtFlatSchema)
	mixed := vtRaw(t, `{"type":"object","properties":{"p":{"type":"string","pattern":"^a"},"s":{"type":"string"}}}`)
	for _, c := range []struct {
		t    *Tool
		args string
		fast bool
	}{
		{order, `{"order_id":"A1"}`, true},
		{order, ``, false}, // {}: order_id is missing
		{order, "\t{ \"order_id\" :\n\"A1\" }\r\n", true},
		{order, `{"order_id":"A1","limit":3}`, true},
		{order, `{"order_id":"A1","limit":3.0}`, true},    // integral: an integer
		{order, `{"order_id":"A1","limit":3e0}`, true},    // so is this
		{order, `{"order_id":"A1","limit":1e2}`, true},    // and this
		{order, `{"order_id":"A1","limit":-0}`, true},     // -0 is 0, hashed as -0
		{order, `{"order_id":"A1","limit":1e300}`, true},  // far past int64, still integral
		{order, `{"order_id":"A1","limit":1.5}`, false},   // not an integer
		{order, `{"order_id":"A1","limit":1e400}`, false}, // out of float64's range
		{order, `{"order_id":"A1","limit":01}`, false},    // not JSON
		{order, `{"order_id":"A1","small":255}`, true},
		{order, `{"order_id":"A1","small":255.0}`, true},
		{order, `{"order_id":"A1","small":256}`, false},
		{order, `{"order_id":"A1","small":-0.0}`, true}, // minimum 0
		{order, `{"order_id":"A1","small":-1e-300}`, false},
		{order, `{"order_id":"A1","limit":123456789012345678901234567890}`, true},
		{order, `{"express":true,"order_id":"A1","limit":2}`, true}, // keys out of order
		{order, `{"order_id":"A1","items":[{"qty":2,"sku":"y","note":null},{"sku":"z","qty":3,"note":"n","price":1.5}]}`, true},
		{order, `{"order_id":"A1","items":[{"sku":"x","qty":1,"extra":1}]}`, false},
		{order, `{"order_id":"A1","tags":{"b":1,"a":2}}`, true},
		{order, `{"order_id":"A1","tags":{"b":1,"a":2,"b":3}}`, false}, // a repeated key
		{order, `{"order_id":"A1","order_id":"A1"}`, false},
		{order, `{"order_id":"A1","any":{"x":[1,{"y":null,"b":{"d":1,"c":2}}],"a":"\u00e9"}}`, true},
		{order, `{"order_id":"A1","any":{"x":1,"x":1}}`, false}, // repeated where anything goes
		{order, `{"order_id":"A1","any":{"x":1,"y":{"z":1,"z":2}}}`, false},
		{order, `{"order_id":"A1\n\"\u00e9\ud83d\ude00 \ud83d \udc00"}`, true}, // escapes decode
		{order, "{\"order_id\":\"\xff\xfe invalid UTF-8\"}", true},             // U+FFFD for each byte
		{order, `{"order_\u0069d":"A1"}`, false},                               // an escaped key
		{order, `{"order_id":"A1\x"}`, false},
		{order, `{"order_id":"A1\u00g0"}`, false},
		{order, "{\"order_id\":\"A\x01\"}", false},
		{order, `{"order_id":"A1"} x`, false},
		{order, `{"order_id":"A1",}`, false},
		{order, `[]`, false},
		{order, `{"order_id":"A1","fixed":[1,2]}`, true},
		{order, `{"order_id":"A1","fixed":[1]}`, false},
		{order, `{"order_id":"A1","any":` + strings.Repeat(`[`, 60) + strings.Repeat(`]`, 60) + `}`, true},
		{order, `{"order_id":"A1","any":` + strings.Repeat(`[`, 70) + strings.Repeat(`]`, 70) + `}`, false}, // deeper than the fast path goes
		{rich, `{"color":"red"}`, true},
		{rich, `{"color":"\u00e9"}`, true},
		{rich, `{"color":"e\u0301"}`, false},
		{rich, `{"color":"red","e":1.0}`, true}, // enum [1, "1", true, null]
		{rich, `{"color":"red","e":"1"}`, true},
		{rich, `{"color":"red","e":null}`, true},
		{rich, `{"color":"red","e":false}`, false},
		{rich, `{"color":"red","k":"f\u0069xed"}`, true}, // const
		{rich, `{"color":"red","name":"éééé"}`, true},    // maxLength counts code points
		{rich, `{"color":"red","name":"ééééé"}`, false},
		{rich, `{"color":"red","x":0.5}`, true},
		{rich, `{"color":"red","x":1e-400}`, false}, // 0, and exclusiveMinimum 0
		{rich, `{"color":"red","nul":null}`, true},
		{rich, `{"color":"red","nul":3.0}`, true},
		{rich, `{"color":"red","no":1}`, false}, // the schema false
		{rich, `{"color":"red","yes":{"anything":[1,2]}}`, true},
		{rich, `{"color":"red","typeless":"a"}`, true},
		{rich, `{"color":"red","tags":["a"]}`, true},
		{rich, `{"color":"red","tags":[]}`, false},
		{flat, `{"s":"abc","r":"x","extra":"e"}`, true}, // additionalProperties a schema
		{flat, `{"s":"abc","r":"x","extra":1}`, false},
		{flat, `{"s":"abc","r":"x","n":1e1}`, true},
		{flat, `{"s":"abc","r":"x","n":1e2}`, false}, // exclusiveMaximum 100
		{flat, `{"s":"abc","r":"x","any":[1]}`, true},
		{flat, `{"s":"abc","r":"x","no":1}`, false}, // not: outside the subset
		{mixed, `{"s":"x"}`, true},
		{mixed, `{"p":"abc"}`, false}, // pattern: outside the subset
	} {
		if got := fvSame(t, c.t, []byte(c.args)); got != c.fast {
			t.Errorf("fast path took %s: %v, want %v", c.args, got, c.fast)
		}
	}
}

// Schemas outside the subset at their root never take the fast path, and
// those inside it do, with the schema's own draft.
func TestFastValidateSubset(t *testing.T) {
	for _, c := range []struct {
		schema string
		fast   bool
	}{
		{`{"type":"object"}`, true},
		{`{"type":"object","title":"t","description":"d","$comment":"c","default":{},"examples":[{}],"deprecated":true,"x-vendor":1}`, true},
		{`{"type":"object","minProperties":1,"maxProperties":3}`, true},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}}}`, true},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"number","minimum":0,"exclusiveMinimum":true}}}`, true},
		{`{"type":"object","$defs":{"s":{"type":"string"}},"properties":{"s":{"$ref":"#/$defs/s"}}}`, true}, // unsure at "s" only
		{`{"type":"object","$ref":"#/$defs/o","$defs":{"o":{}}}`, false},
		{`{"type":"object","anyOf":[{"required":["a"]},{"required":["b"]}]}`, false},
		{`{"type":"object","patternProperties":{"^a":{"type":"string"}}}`, false},
		{`{"type":"object","propertyNames":{"maxLength":3}}`, false},
		{`{"type":"object","dependentRequired":{"a":["b"]}}`, false},
		{`{"type":"object","unevaluatedProperties":false}`, false},
		{`{"type":"object","not":{"required":["a"]}}`, false},
		{`{"type":"object","if":{"required":["a"]},"then":{"required":["b"]}}`, false},
		{`{"type":"object","multipleOf":2}`, false},
	} {
		tl := vtRaw(t, c.schema)
		if got := tl.fastSchema != nil; got != c.fast {
			t.Errorf("%s: fast path %v, want %v", c.schema, got, c.fast)
		}
		fvSame(t, tl, []byte(`{}`))
		fvSame(t, tl, []byte(`{"a":1,"s":"x","n":0}`))
	}
	// draft-04's exclusiveMinimum true makes the minimum exclusive.
	d4 := vtRaw(t, `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"number","minimum":0,"exclusiveMinimum":true}}}`)
	if fvSame(t, d4, []byte(`{"n":0}`)) || !fvSame(t, d4, []byte(`{"n":0.5}`)) {
		t.Error("draft-04 exclusiveMinimum: want 0 refused and 0.5 taken")
	}
}

// A bound or enum value that no float64 reads as exactly is compared as
// the library compares: a number is never equal to it, and a number that
// reads as its nearest float64 is left to the slow way.
func TestFastValidateNumbers(t *testing.T) {
	tl := vtRaw(t, `{"type":"object","properties":{
		"a":{"type":"number","minimum":0.1},
		"b":{"type":"number","maximum":9007199254740993},
		"c":{"enum":[0.1,9007199254740993,0.30000000000000001,1e400,-0]},
		"d":{"type":"integer","exclusiveMaximum":1e400},
		"e":{"type":"number","exclusiveMinimum":1e-400}
	}}`)
	for _, c := range []struct {
		args string
		fast bool
	}{
		{`{"a":0.1}`, true}, {`{"a":0.10}`, true}, {`{"a":1e-1}`, true}, {`{"a":0.09999999999999999}`, false},
		{`{"b":9007199254740992}`, false}, // the float64 nearest the bound: the slow way
		{`{"b":9007199254740991}`, true},
		{`{"b":9007199254740993}`, false},
		{`{"c":0.1}`, true}, {`{"c":0}`, true}, {`{"c":-0.0}`, true},
		{`{"c":9007199254740992}`, false}, {`{"c":0.3}`, false}, {`{"c":0.30000000000000004}`, false},
		{`{"d":1e300}`, true},
		{`{"e":5e-324}`, true}, {`{"e":0}`, false},
	} {
		if got := fvSame(t, tl, []byte(c.args)); got != c.fast {
			t.Errorf("fast path took %s: %v, want %v", c.args, got, c.fast)
		}
	}
}

// The fast path's fingerprints are those TestFingerprintPinned pins: the
// fingerprint of the decoded value, however the arguments are written.
func TestFastValidateFingerprints(t *testing.T) {
	tl := vtTyped[map[string]any](t)
	for _, args := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"b":1,"a":2}`, `{"a":-0}`, `{"a":0}`, `{"a":1e2,"b":100,"c":1E+2,"d":100.0}`,
		`{"s":"\u00e9\u000a\ud83d\ude00"}`, "{\"s\":\"\xff\"}", `{"s":"\udc00\ud800"}`, `{"s":"` + strings.Repeat(`\"`, 100) + `"}`,
		`{"z":[{"y":1,"x":[{"w":null,"v":true}]}],"a":false}`,
		`{"q":1,"p":2,"o":3,"n":4,"m":5,"l":6,"k":7,"j":8,"i":9,"h":10,"g":11,"f":12,"e":13,"d":14,"c":15,"b":16,"a":17,"r":18}`,
		`{"é":1,"e":2,"f":3}`,
	} {
		if !fvSame(t, tl, []byte(args)) {
			t.Errorf("fast path did not take %s", args)
		}
		var v any
		if err := json.Unmarshal([]byte(args), &v); err != nil {
			t.Fatal(err)
		}
		if fp, _ := tl.Validate(json.RawMessage(args)); fp != Fingerprint(v) {
			t.Errorf("Validate(%s) fingerprint %x, Fingerprint %x", args, fp, Fingerprint(v))
		}
	}
}

// The fast path allocates nothing for the usual arguments.
func TestFastValidateAllocs(t *testing.T) {
	tl := vtTyped[vtMedium](t)
	args := json.RawMessage(vtMediumArgs)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := tl.Validate(args); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Validate allocates %v times, want 0", n)
	}
}

// FuzzFastValidate checks, on schemas and arguments generated from the
// fuzzer's bytes (fvGenerate), that Validate gives what the slow way
// gives, verdict, message and fingerprint, and that whatever the fast path
// vouches for, the slow way accepts with the same fingerprint.
func FuzzFastValidate(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 64 {
		seed := make([]byte, 32+r.IntN(224))
		for k := range seed {
			seed[k] = byte(r.Uint32())
		}
		f.Add(seed, []byte(nil))
	}
	for _, s := range vtSchemas {
		for _, c := range s.cases {
			f.Add([]byte{0}, []byte(c.args))
		}
	}
	f.Fuzz(func(t *testing.T, p, raw []byte) {
		schema, args := fvGenerate(p)
		if len(raw) > 0 {
			args = raw
		}
		tl, err := NewRaw(Definition{Name: "fuzz", InputSchema: schema},
			func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return a, nil }, nil)
		if err != nil {
			return // a schema the library refuses (a bound minLength cannot have, say)
		}
		fvSame(t, tl, args)
	})
}

// fvGenerate makes an object schema of the subset (now and then with a
// keyword outside it) and arguments for it, mostly conforming, from p.
func fvGenerate(p []byte) (schema, args []byte) {
	g := fvGen{p: p}
	s := g.schema(0)
	s["type"] = "object"
	schema, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	var w strings.Builder
	g.instance(&w, s, 0)
	return schema, []byte(w.String())
}

type fvGen struct {
	p []byte
	i int
}

func (g *fvGen) next() int {
	if g.i >= len(g.p) {
		return 0
	}
	g.i++
	return int(g.p[g.i-1])
}

func (g *fvGen) pick(n int) int { return g.next() % n }

var (
	fvNames   = []string{"a", "b", "c", "key", "n", "é", "a/b~", "order_id", "Z"}
	fvStrings = []string{"", "a", "ab", "abc", "é", "éé", "😀", "e\u0301", "A\n", "red", "1", "\u00ff\u0100", "\x7f"}
	fvNumbers = []string{"0", "-0", "1", "-1", "0.1", "0.5", "1.5", "2", "3", "10", "100", "255", "256", "1e2", "1E+2", "1e300", "-1e300",
		"1e-300", "5e-324", "9007199254740992", "9007199254740993", "0.30000000000000001", "0.3", "123456789012345678901234567890",
		"1.7976931348623157e308", "4.9e-324", "2.5", "-2.5"}
	fvTypes = []string{"null", "boolean", "integer", "number", "string", "array", "object"}
)

// schema makes a schema of the subset, or now and then with a keyword outside it.
func (g *fvGen) schema(depth int) map[string]any {
	s := map[string]any{}
	c := g.next()
	switch {
	case c%3 == 0 && depth < 3:
		s["type"] = "object"
	case c%3 == 1 && depth < 3:
		s["type"] = "array"
	case c%11 == 2:
		s["type"] = []any{fvTypes[g.pick(len(fvTypes))], fvTypes[g.pick(len(fvTypes))]}
	case c%11 == 5:
		// no type
	default:
		s["type"] = fvTypes[g.pick(len(fvTypes))]
	}
	types := fmt.Sprint(s["type"])
	has := func(t string) bool { return s["type"] == nil || strings.Contains(types, t) }
	if has("object") && depth < 3 {
		props := map[string]any{}
		for range g.pick(4) {
			switch name := fvNames[g.pick(len(fvNames))]; g.pick(8) {
			case 0:
				props[name] = true
			case 1:
				props[name] = false
			default:
				props[name] = g.schema(depth + 1)
			}
		}
		if len(props) > 0 || g.pick(2) == 0 {
			s["properties"] = props
		}
		var req []any
		for range g.pick(3) {
			req = append(req, fvNames[g.pick(len(fvNames))])
		}
		if len(req) > 0 && !slices.ContainsFunc(req[1:], func(x any) bool { return x == req[0] }) {
			s["required"] = req
		}
		switch g.pick(4) {
		case 0:
			s["additionalProperties"] = false
		case 1:
			s["additionalProperties"] = g.schema(depth + 1)
		case 2:
			s["additionalProperties"] = true
		}
		if g.pick(6) == 0 {
			s["minProperties"] = g.pick(3)
		}
		if g.pick(6) == 0 {
			s["maxProperties"] = g.pick(4)
		}
	}
	if has("array") && depth < 3 {
		if g.pick(4) != 0 {
			s["items"] = g.schema(depth + 1)
		}
		if g.pick(4) == 0 {
			s["minItems"] = g.pick(3)
		}
		if g.pick(4) == 0 {
			s["maxItems"] = g.pick(4)
		}
	}
	if has("string") {
		if g.pick(4) == 0 {
			s["minLength"] = g.pick(3)
		}
		if g.pick(4) == 0 {
			s["maxLength"] = g.pick(4)
		}
	}
	if has("number") || has("integer") {
		for _, kw := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if g.pick(5) == 0 {
				s[kw] = json.Number(fvNumbers[g.pick(len(fvNumbers))])
			}
		}
	}
	if g.pick(6) == 0 {
		var e []any
		for range 1 + g.pick(4) {
			e = append(e, g.scalar())
		}
		s["enum"] = e
	}
	if g.pick(12) == 0 {
		s["const"] = g.scalar()
	}
	if g.pick(10) == 0 {
		s["description"] = "d"
	}
	// Now and then a keyword outside the subset.
	switch g.pick(16) {
	case 0:
		s["pattern"] = "^a"
	case 1:
		s["multipleOf"] = json.Number("0.5")
	case 2:
		s["uniqueItems"] = true
	case 3:
		s["anyOf"] = []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}
	case 4:
		s["not"] = map[string]any{"const": "a"}
	}
	return s
}

// scalar makes an enum's value: JSON text for numbers, to keep their
// spelling.
func (g *fvGen) scalar() any {
	switch g.pick(5) {
	case 0:
		return nil
	case 1:
		return g.pick(2) == 0
	case 2:
		return json.Number(fvNumbers[g.pick(len(fvNumbers))])
	case 3:
		return []any{1}
	default:
		return fvStrings[g.pick(len(fvStrings))]
	}
}

// instance writes a value for schema s (a map, or true or false), mostly
// one that conforms, in any spelling JSON allows.
func (g *fvGen) instance(w *strings.Builder, s any, depth int) {
	g.space(w)
	defer g.space(w)
	m, _ := s.(map[string]any)
	if g.pick(10) == 0 || m == nil || depth > 5 { // something else
		g.other(w, depth)
		return
	}
	if e, ok := m["enum"].([]any); ok && g.pick(3) != 0 {
		g.literal(w, e[g.pick(len(e))])
		return
	}
	if c, ok := m["const"]; ok && g.pick(3) != 0 {
		g.literal(w, c)
		return
	}
	t, _ := m["type"].(string)
	if ts, ok := m["type"].([]any); ok {
		t = ts[g.pick(len(ts))].(string)
	}
	if t == "" {
		t = fvTypes[g.pick(len(fvTypes))]
	}
	switch t {
	case "object":
		props, _ := m["properties"].(map[string]any)
		names := slices.Sorted(maps.Keys(props))
		if req, ok := m["required"].([]any); ok {
			for _, r := range req {
				if !slices.Contains(names, r.(string)) {
					names = append(names, r.(string))
				}
			}
		}
		if g.pick(3) == 0 {
			names = append(names, fvNames[g.pick(len(fvNames))]) // maybe extra, maybe repeated
		}
		for i := range names { // any order
			j := i + g.pick(len(names)-i)
			names[i], names[j] = names[j], names[i]
		}
		w.WriteByte('{')
		n := 0
		for _, name := range names {
			if g.pick(5) == 0 {
				continue
			}
			if n > 0 {
				w.WriteByte(',')
			}
			n++
			g.space(w)
			g.str(w, name, g.pick(12) == 0)
			g.space(w)
			w.WriteByte(':')
			sub, ok := props[name]
			if !ok {
				sub = m["additionalProperties"]
			}
			if sub == nil {
				sub = true
			}
			g.instance(w, sub, depth+1)
		}
		w.WriteByte('}')
	case "array":
		w.WriteByte('[')
		for i := range g.pick(4) {
			if i > 0 {
				w.WriteByte(',')
			}
			items := m["items"]
			if items == nil {
				items = true
			}
			g.instance(w, items, depth+1)
		}
		w.WriteByte(']')
	case "string":
		g.str(w, fvStrings[g.pick(len(fvStrings))], g.pick(3) == 0)
	case "integer", "number":
		g.number(w, fvNumbers[g.pick(len(fvNumbers))])
	case "boolean":
		w.WriteString([]string{"true", "false"}[g.pick(2)])
	default:
		w.WriteString("null")
	}
}

// other writes any value at all.
func (g *fvGen) other(w *strings.Builder, depth int) {
	switch g.pick(8) {
	case 0:
		if depth < 5 {
			g.instance(w, map[string]any{"type": "object", "additionalProperties": true}, depth+1)
			return
		}
		w.WriteString("{}")
	case 1:
		if depth < 5 {
			g.instance(w, map[string]any{"type": "array"}, depth+1)
			return
		}
		w.WriteString("[]")
	case 2, 3:
		g.str(w, fvStrings[g.pick(len(fvStrings))], g.pick(3) == 0)
	case 4, 5:
		g.number(w, fvNumbers[g.pick(len(fvNumbers))])
	case 6:
		w.WriteString([]string{"true", "false"}[g.pick(2)])
	default:
		w.WriteString("null")
	}
}

// literal writes an enum's value.
func (g *fvGen) literal(w *strings.Builder, v any) {
	switch x := v.(type) {
	case string:
		g.str(w, x, g.pick(3) == 0)
	case json.Number:
		g.number(w, string(x))
	default:
		b, _ := json.Marshal(x)
		w.Write(b)
	}
}

// number writes a number in one of its spellings.
func (g *fvGen) number(w *strings.Builder, n string) {
	plain := !strings.ContainsAny(n, ".eE")
	switch g.pick(6) {
	case 0:
		if plain {
			n += ".0"
		}
	case 1:
		n += "e0"
	case 2:
		if plain {
			n += "0e-1"
		}
	}
	w.WriteString(n)
}

// str writes s quoted, escaping all of it when escape is set.
func (g *fvGen) str(w *strings.Builder, s string, escape bool) {
	if !escape {
		b, _ := json.Marshal(s)
		w.Write(b)
		return
	}
	w.WriteByte('"')
	for _, r := range s {
		if r > 0xffff {
			r -= 0x10000
			fmt.Fprintf(w, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			continue
		}
		fmt.Fprintf(w, `\u%04X`, r)
	}
	w.WriteByte('"')
}

func (g *fvGen) space(w *strings.Builder) {
	if c := g.next(); c%7 == 0 {
		w.WriteString([]string{" ", "\n", "\t ", "\r\n  "}[c/7%4])
	}
}
