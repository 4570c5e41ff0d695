package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// A validation message, which the model reads, quotes at most a prefix of
// a bad value, however large the value is, and says how large it was.
func TestValidationMessagesQuoteAPrefix(t *testing.T) {
	const mb = 1 << 20
	big := strings.Repeat("x", mb)
	digits := strings.Repeat("1", mb)
	h := func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	schemas := map[string]string{
		"closed":  `{"type":"object","properties":{"id":{"type":"string","enum":["a","b"]},"n":{"type":"integer","minimum":0},"m":{"type":"number","minimum":0},"f":{"type":"integer"},"o":{"type":"object","required":["r"]}},"additionalProperties":false}`,
		"pattern": `{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z]{1,3}$"},"n":{"type":"integer","minimum":0},"e":{"enum":["a","b"]},"f":{"type":"integer"},"o":{"oneOf":[{"type":"string"},{"type":"integer"}]}},"additionalProperties":false}`,
	}
	cases := []string{
		`{"` + big + `":1}`,                  // unexpected argument
		`{"id":"` + big + `"}`,               // not in the enum / no pattern match
		`{"m":-1.` + digits + `}`,            // below the minimum
		`{"f":1.` + digits + `}`,             // a fraction for an integer
		`{"n":1` + digits + `e999}`,          // out of range
		`{"e":"` + big + `"}`,                // enum
		`{"` + big + `":1,"` + big + `":2}`,  // duplicate argument
		`{"o":{"` + big + `":{"a":1}}}`,      // missing required, deep under a long key
		`{"id":"a","` + big + `":[` + digits, // not JSON
	}
	for name, schema := range schemas {
		tl, err := tool.NewRaw(tool.Definition{Name: "t", InputSchema: json.RawMessage(schema)}, h, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, args := range cases {
			_, err := tl.Validate(json.RawMessage(args))
			var te *tool.Error
			if !errors.As(err, &te) || te.Kind != llm.KindInvalidArguments {
				t.Errorf("%s, case %d: %v", name, i, err)
				continue
			}
			if len(te.Msg) > 1200 {
				t.Errorf("%s, case %d: a message of %d bytes: %.300s", name, i, len(te.Msg), te.Msg)
			}
		}
	}
	// The message names the argument, and the size of what it cut.
	tl, err := tool.NewRaw(tool.Definition{Name: "t", InputSchema: json.RawMessage(schemas["pattern"])}, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		`{"` + big + `":1}`:                 `unexpected argument "xxxxx`,
		`{"id":"` + big + `"}`:              `argument "id": 'xxxxx`,
		`{"` + big + `":1,"` + big + `":2}`: `duplicate argument "xxxxx`,
	} {
		_, err := tl.Validate(json.RawMessage(args))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "bytes)") {
			t.Errorf("%.20s…: %.300v", args, err)
		}
	}
}

// A typed tool's decoding error (arguments that reach Bind unvalidated)
// is bounded too.
func TestDecodeMessagesQuoteAPrefix(t *testing.T) {
	type in struct {
		N int `json:"n"`
	}
	tl := tool.MustNew(tool.Spec[in]{Name: "t"}, func(context.Context, in) (string, error) { return "", nil })
	_, err := tl.Bind(json.RawMessage(`{"n":1` + strings.Repeat("1", 1<<20) + `}`)) // overflows an int
	if err == nil || len(err.Error()) > 1200 {
		t.Fatalf("a message of %d bytes: %.300v", len(err.Error()), err)
	}
}

// Several violations, each quoting a long value, still make a bounded
// message, which says how many it left out.
func TestValidationMessageOfManyViolations(t *testing.T) {
	big := strings.Repeat("x", 900)
	tl, err := tool.NewRaw(tool.Definition{Name: "t", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"a":{"pattern":"^y"},"b":{"pattern":"^y"},"c":{"pattern":"^y"}}}`)},
		func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tl.Validate(json.RawMessage(`{"a":"` + big + `","b":"` + big + `","c":"` + big + `"}`))
	var te *tool.Error
	if !errors.As(err, &te) || len(te.Msg) > 1200 || !strings.Contains(te.Msg, `argument "a"`) || !strings.HasSuffix(te.Msg, "; and 2 more") {
		t.Errorf("a message of %d bytes: %.300s … %s", len(te.Msg), te.Msg, te.Msg[max(0, len(te.Msg)-40):])
	}
}
