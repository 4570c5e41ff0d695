package tool

import (
	"strings"
	"testing"
)

// fsFlatSchema has a property for each check the shortcut through flat
// objects applies.
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

// flatAgrees checks that where the shortcut through flat objects answers,
// the general validator gives the same answer, and reports whether it
// answered.
func flatAgrees(tb testing.TB, tl *Tool, args []byte) bool {
	tb.Helper()
	var root *fsNode
	if tl.fast != nil {
		root = tl.fast.root
	}
	if len(args) == 0 {
		args = emptyArgs
	}
	fp, ok := flatValidate(root, args)
	if !ok {
		return false
	}
	want, err := validateGeneral(root, args)
	if err != nil {
		tb.Fatalf("%q: the shortcut accepts, the general validator says %v", args, err)
	}
	if fp != want {
		tb.Fatalf("%q: the shortcut's fingerprint is %#x, the general validator's %#x", args, fp, want)
	}
	return true
}

func TestFlatValidateAgrees(t *testing.T) {
	flat := fsRaw(t, fsFlatSchema)
	tools := []*Tool{flat}
	for i := range fsSchemas {
		tools = append(tools, fsTool(t, i))
	}
	var inputs []string
	inputs = append(inputs, fsFlatArgs...)
	for _, s := range fsSchemas {
		for _, c := range s.cases {
			inputs = append(inputs, c.args)
		}
	}
	for _, tl := range tools {
		for _, s := range inputs {
			flatAgrees(t, tl, []byte(s))
			fsCheck(t, tl, []byte(s))
		}
	}
	// The shortcut answers for what it is for.
	for _, s := range fsFlatArgs[:8] {
		if !flatAgrees(t, flat, []byte(s)) {
			t.Errorf("%s: the shortcut did not answer", s)
		}
	}
	for _, c := range []struct {
		tl   *Tool
		args string
	}{
		{fsTyped[fsSmall](t), `{"key":"k1"}`},
		{fsTyped[map[string]any](t), ``},
		{fsTyped[map[string]any](t), fsFlatArgs[len(fsFlatArgs)-4]},
		{fsRaw(t, `{"type":"object","properties":{"a":{"type":"string"}}}`), `{"b":1,"a":"x"}`},
	} {
		if !flatAgrees(t, c.tl, []byte(c.args)) {
			t.Errorf("%s: the shortcut did not answer", c.args)
		}
	}
}

func FuzzFlatValidate(f *testing.F) {
	for _, s := range fsFlatArgs {
		f.Add(uint8(0), []byte(s))
	}
	for i, s := range fsSchemas {
		for _, c := range s.cases {
			f.Add(uint8(i+1), []byte(c.args))
		}
	}
	tools := []*Tool{fsRaw(f, fsFlatSchema)}
	for i := range fsSchemas {
		tools = append(tools, fsTool(f, i))
	}
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		tl := tools[int(which)%len(tools)]
		flatAgrees(t, tl, args)
		fsCheck(t, tl, args)
	})
}
