package tool

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// Differential tests of the compiled validator against jsonschema-go on
// generated schemas: random schemas of the subset it compiles (objects
// with properties of every type, required lists, enums and consts,
// numeric bounds, string lengths, item counts, additionalProperties,
// nested objects and arrays), and random arguments shaped after them, so
// that most reach the checks rather than fail at the first property. For
// each, Validate must give jsonschema-go's verdict and Fingerprint of the
// decoded value (fsCheck).

// gsGen draws choices from a byte string, as a fuzzer drives it; past its
// end every choice is 0, which ends every list.
type gsGen struct {
	p []byte
	i int
}

func (g *gsGen) next() int {
	if g.i >= len(g.p) {
		return 0
	}
	g.i++
	return int(g.p[g.i-1])
}

// pick returns one of xs.
func pick[T any](g *gsGen, xs ...T) T { return xs[g.next()%len(xs)] }

var (
	gsNames   = []string{"a", "b", "c", "d", "é", "a/b", "items", "n"}
	gsBounds  = []any{-2, -1, -0.5, 0, 0.5, 1, 2, 3, 10, 1e300}
	gsNumbers = []string{"-3", "-2", "-1.5", "-1", "-0.5", "0", "-0", "0.5", "1", "1.0", "1e0", "1.5", "2", "2.5",
		"3", "10", "10.0", "11", "1e300", "9007199254740993", "1e-400", "-0.0", "100"}
	gsStrings = []string{``, `a`, `ab`, `abc`, `abcd`, `abcde`, `é`, `éé`, `😀😀`, `\u00e9`, "\xff", `\ud83d`, `red`,
		`green`, `r\u0065d`, `a\nb`, `\"`}
	gsEnumValues = []any{"red", "green", "é", "a\nb", "", 1, 2.5, -1, 0, true, false, nil}
	gsTypes      = []string{"string", "integer", "number", "boolean", "null", "array", "object"}
)

// schema returns a random schema as a Go value, to be encoded as JSON:
// a map, or true or false.
func (g *gsGen) schema(depth int) any {
	c := g.next()
	if depth >= 3 && (c%16 >= 12 || depth >= 12) {
		c = 0 // no deeper than this (the compiled validator takes 64 levels)
	}
	switch c % 16 {
	case 0, 1, 2:
		return g.typed(pick(g, "string", "string", "integer", "number", "boolean", "null"), depth)
	case 3:
		return map[string]any{} // anything
	case 4:
		return pick[any](g, true, false)
	case 5:
		return map[string]any{"const": pick(g, gsEnumValues...)}
	case 6:
		var enum []any
		for range g.next() % 5 {
			enum = append(enum, pick(g, gsEnumValues...))
		}
		if enum == nil {
			enum = []any{} // an empty enum accepts nothing
		}
		s := map[string]any{"enum": enum}
		if g.next()%2 == 0 {
			s["type"] = pick(g, gsTypes...)
		}
		return s
	case 7:
		// Several types, or constraints without a type: they apply to
		// values of the kind they concern.
		s := map[string]any{}
		if g.next()%2 == 0 {
			s["type"] = []string{pick(g, gsTypes...), pick(g, gsTypes...)}
		}
		g.numberBounds(s)
		g.stringBounds(s)
		return s
	case 8, 9, 10, 11:
		return g.typed(pick(g, gsTypes...), depth)
	default:
		return g.typed(pick(g, "array", "object"), depth)
	}
}

// typed returns a schema of type t with some of the constraints that
// concern t.
func (g *gsGen) typed(t string, depth int) map[string]any {
	s := map[string]any{"type": t}
	switch t {
	case "string":
		g.stringBounds(s)
		if g.next()%4 == 0 {
			s["enum"] = []any{pick(g, gsEnumValues...), pick(g, "red", "é", "ab")}
		}
	case "integer", "number":
		g.numberBounds(s)
		if g.next()%5 == 0 {
			s["enum"] = []any{pick(g, gsEnumValues...), pick[any](g, 1, 2, 10, 0.5)}
		}
	case "array":
		if g.next()%4 != 0 {
			s["items"] = g.schema(depth + 1)
		}
		if c := g.next(); c%3 == 0 {
			s["minItems"] = c / 3 % 3
		}
		if c := g.next(); c%3 == 0 {
			s["maxItems"] = c / 3 % 4
		}
	case "object":
		props := map[string]any{}
		for range g.next() % 5 {
			props[pick(g, gsNames...)] = g.schema(depth + 1)
		}
		if len(props) > 0 || g.next()%2 == 0 {
			s["properties"] = props
		}
		var req []string
		for range g.next() % 4 {
			req = append(req, pick(g, gsNames...))
		}
		if req != nil {
			s["required"] = req
		}
		switch g.next() % 4 {
		case 0:
			s["additionalProperties"] = false
		case 1:
			s["additionalProperties"] = g.schema(depth + 1)
		}
	}
	return s
}

func (g *gsGen) numberBounds(s map[string]any) {
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if g.next()%4 == 0 {
			s[k] = pick(g, gsBounds...)
		}
	}
}

func (g *gsGen) stringBounds(s map[string]any) {
	if c := g.next(); c%3 == 0 {
		s["minLength"] = c / 3 % 4
	}
	if c := g.next(); c%3 == 0 {
		s["maxLength"] = c / 3 % 5
	}
}

// args writes a value for schema s: most often one of the kind s wants,
// near its bounds; sometimes anything at all.
func (g *gsGen) args(w *bytes.Buffer, s any, depth int) {
	m, _ := s.(map[string]any)
	c := g.next()
	if m == nil || c%8 == 7 || depth > 5 {
		g.any(w, depth)
		return
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 && c%2 == 0 {
		b, _ := json.Marshal(pick(g, e...))
		w.Write(b)
		return
	}
	if k, ok := m["const"]; ok && c%2 == 0 {
		b, _ := json.Marshal(k)
		w.Write(b)
		return
	}
	t := ""
	switch x := m["type"].(type) {
	case string:
		t = x
	case []string:
		t = pick(g, x...)
	}
	switch t {
	case "string":
		w.WriteString(`"` + pick(g, gsStrings...) + `"`)
	case "integer", "number":
		w.WriteString(pick(g, gsNumbers...))
	case "boolean":
		w.WriteString(pick(g, "true", "false"))
	case "null":
		w.WriteString("null")
	case "array":
		w.WriteByte('[')
		for i := range g.next() % 5 {
			if i > 0 {
				w.WriteByte(',')
			}
			g.args(w, m["items"], depth+1)
		}
		w.WriteByte(']')
	case "object":
		props, _ := m["properties"].(map[string]any)
		req, _ := m["required"].([]string)
		// The required names most often, then others; a repeated key
		// now and then.
		var names []string
		for _, name := range req {
			if g.next()%8 != 0 {
				names = append(names, name)
			}
		}
		for range g.next() % 4 {
			names = append(names, pick(g, gsNames...))
		}
		if g.next()%8 == 0 {
			names = append(names, pick(g, "z", `\u0061`, "b\\/c")) // other keys, escaped keys
		}
		seen := map[string]bool{}
		w.WriteByte('{')
		for _, name := range names {
			if seen[name] && g.next()%16 != 0 {
				continue
			}
			if len(seen) > 0 {
				w.WriteByte(',')
			}
			seen[name] = true
			w.WriteString(`"` + name + `":`)
			sub, ok := props[name]
			if !ok {
				sub = m["additionalProperties"]
			}
			g.args(w, sub, depth+1)
		}
		w.WriteByte('}')
	default:
		g.any(w, depth)
	}
}

// any writes a value of any kind.
func (g *gsGen) any(w *bytes.Buffer, depth int) {
	switch c := g.next(); c % 7 {
	case 0:
		w.WriteString(`"` + pick(g, gsStrings...) + `"`)
	case 1:
		w.WriteString(pick(g, gsNumbers...))
	case 2:
		w.WriteString(pick(g, "true", "false", "null"))
	case 3:
		if depth < 4 {
			w.WriteByte('[')
			g.any(w, depth+1)
			w.WriteByte(']')
			return
		}
		w.WriteString("[]")
	case 4:
		if depth < 4 {
			w.WriteString(`{"` + pick(g, gsNames...) + `":`)
			g.any(w, depth+1)
			w.WriteByte('}')
			return
		}
		w.WriteString("{}")
	default:
		w.WriteString(pick(g, gsNumbers...))
	}
}

// gsTool builds a tool whose schema is a random object schema drawn from
// p, and returns it with the schema. The schema is always in the subset
// the compiled validator handles.
func gsTool(tb testing.TB, p []byte) (*Tool, map[string]any) {
	tb.Helper()
	g := &gsGen{p: p}
	s := g.typed("object", 0)
	b, err := json.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	tl := fsRaw(tb, string(b))
	if tl.fast == nil {
		tb.Fatalf("generated schema %s does not compile", b)
	}
	return tl, s
}

// gsArgs returns arguments for schema s drawn from p.
func gsArgs(s map[string]any, p []byte) []byte {
	var w bytes.Buffer
	g := &gsGen{p: p}
	g.args(&w, s, 0)
	return w.Bytes()
}

func TestGeneratedSchemasAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 7))
	random := func() []byte {
		p := make([]byte, 32+r.IntN(96))
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		return p
	}
	schemas, verdicts := 600, map[fsOutcome]int{}
	if testing.Short() {
		schemas = 100
	}
	for range schemas {
		tl, s := gsTool(t, random())
		for range 20 {
			got, _ := fsCheck(t, tl, gsArgs(s, random()))
			verdicts[got]++
		}
	}
	// The arguments reach both verdicts often, or the test tests little.
	if verdicts[fsValid] < schemas || verdicts[fsInvalid] < schemas {
		t.Errorf("verdicts %v: too few of one kind", verdicts)
	}
}

// FuzzGeneratedSchemas draws a schema from s and arguments for it from a;
// the arguments are a itself when the first byte of a is 0xff, so that the
// fuzzer also tries bytes that are not JSON.
func FuzzGeneratedSchemas(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 16 {
		s, a := make([]byte, 64), make([]byte, 48)
		for i := range s {
			s[i] = byte(r.Uint32())
		}
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		f.Add(s, a)
	}
	f.Add([]byte{8, 8, 1, 2, 0, 3}, []byte("\xff{\"a\":1}"))
	f.Fuzz(func(t *testing.T, s, a []byte) {
		tl, schema := gsTool(t, s)
		args := gsArgs(schema, a)
		if len(a) > 0 && a[0] == 0xff {
			args = a[1:]
		}
		fsCheck(t, tl, args)
	})
}
