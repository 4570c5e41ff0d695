package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/tool"
)

func rawTool(schema string) (*tool.Tool, error) {
	return tool.NewRaw(tool.Definition{Name: "t", InputSchema: json.RawMessage(schema)},
		func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }, nil)
}

// An input schema may come from an MCP server: a $ref to anything but the
// schema itself (or a JSON Schema meta-schema) is refused when the tool is
// built, and nothing is read.
func TestSchemaRefersOnlyToItself(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(secret, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file://" + secret, "http://127.0.0.1:1/s.json", "other.json", "#/$defs/missing"} {
		_, err := rawTool(`{"type":"object","properties":{"a":{"$ref":"` + ref + `"}}}`)
		if err == nil {
			t.Errorf("$ref %s: NewRaw succeeded", ref)
			continue
		}
		if !strings.Contains(err.Error(), "resolving input schema") {
			t.Errorf("$ref %s: %v", ref, err)
		}
	}
	_, err := rawTool(`{"type":"object","properties":{"a":{"$ref":"file://` + secret + `"}}}`)
	if err == nil || !strings.Contains(err.Error(), "may refer only to itself") {
		t.Errorf("file $ref: %v", err)
	}
	// References inside the schema, and to the meta-schema, resolve.
	for _, schema := range []string{
		`{"type":"object","$defs":{"id":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/id"}}}`,
		`{"type":"object","properties":{"a":{"$anchor":"x","type":"string"},"b":{"$ref":"#x"}}}`,
		`{"$id":"urn:example:s","type":"object","properties":{"a":{"$ref":"urn:example:s#/$defs/id"}},"$defs":{"id":{"type":"string"}}}`,
		`{"type":"object","properties":{"s":{"$ref":"https://json-schema.org/draft/2020-12/schema"}}}`,
	} {
		tl, err := rawTool(schema)
		if err != nil {
			t.Errorf("%s: %v", schema, err)
			continue
		}
		if _, err := tl.Validate(json.RawMessage(`{"a":"x","b":"y","s":{"type":"string"}}`)); err != nil {
			t.Errorf("%s: %v", schema, err)
		}
		if _, err := tl.Validate(json.RawMessage(`{"a":1,"b":1,"s":{"type":1}}`)); err == nil {
			t.Errorf("%s: accepted numbers", schema)
		}
	}
}

// A schema its draft's meta-schema refuses is refused when the tool is
// built, naming what is wrong, rather than failing every call later.
func TestSchemaCheckedAgainstMetaSchema(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type":"object","properties":{"a":{"type":"strng"}}}`:              "/properties/a/type",
		`{"type":"object","properties":{"a":{"minLength":-1}}}`:              "/properties/a/minLength",
		`{"type":"object","properties":{"a":{"pattern":"(?<=a)b"}}}`:         "/properties/a/pattern",
		`{"type":"object","required":["a","a"]}`:                             "/required",
		`{"type":"object","properties":{"a":{"items":[{"type":"string"}]}}}`: "/properties/a/items",
	} {
		_, err := rawTool(schema)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error naming %s", schema, err, want)
		}
	}
	// Earlier drafts, named by $schema, have their own rules.
	if _, err := rawTool(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"items":[{"type":"string"}]}}}`); err != nil {
		t.Errorf("draft-07 tuple items: %v", err)
	}
}

// A tool is shared by every run: its compiled schema validates from many
// goroutines at once (run with -race).
func TestValidateConcurrently(t *testing.T) {
	tl, err := rawTool(`{"type":"object","$defs":{"n":{"type":"integer","minimum":1}},"properties":{"a":{"$ref":"#/$defs/n"},"s":{"pattern":"^x","maxLength":3},"u":{"unevaluatedProperties":false,"properties":{"k":true}}},"required":["a"]}`)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	for g := range 8 {
		go func() {
			var bad string
			for i := range 200 {
				args := `{"a":1,"s":"xy","u":{"k":1}}`
				if (i+g)%2 == 1 {
					args = `{"a":0,"s":"yyyy","u":{"z":1}}`
				}
				_, err := tl.Validate(json.RawMessage(args))
				if (err == nil) != ((i+g)%2 == 0) && bad == "" {
					bad = args + ": " + fmt.Sprint(err)
				}
			}
			done <- bad
		}()
	}
	for range 8 {
		if bad := <-done; bad != "" {
			t.Error(bad)
		}
	}
}
