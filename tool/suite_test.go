package tool

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
)

// suiteDir holds the draft 2020-12 files of the official JSON Schema Test
// Suite; its README.md says which are left out and why.
const suiteDir = "testdata/json-schema-test-suite/draft2020-12"

// suiteRefused are the test groups whose schemas refer to documents of
// the suite's remotes/ folder (http://localhost:1234/...), which an input
// schema may not load (noLoader): each must fail to compile, saying so.
// All of refRemote.json is refused that way too.
var suiteRefused = map[string]bool{
	"dynamicRef.json: strict-tree schema, guards against misspelled properties":              true,
	"dynamicRef.json: tests for implementation dynamic anchor and reference link":            true,
	"dynamicRef.json: $ref and $dynamicAnchor are independent of order - $defs first":        true,
	"dynamicRef.json: $ref and $dynamicAnchor are independent of order - $ref first":         true,
	"dynamicRef.json: $ref to $dynamicRef finds detached $dynamicAnchor":                     true,
	"vocabulary.json: schema that uses custom metaschema with with no validation vocabulary": true,
	"vocabulary.json: ignore unrecognized optional vocabulary":                               true,
}

// TestSchemaSuite runs every case of the included files through the code
// that validates a tool's arguments: the schema compiled as build compiles
// it, the instance's bytes as the model would send them.
func TestSchemaSuite(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(suiteDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 40 {
		t.Fatalf("%d suite files in %s; the suite is missing", len(files), suiteDir)
	}
	cases, refused := 0, 0
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var groups []struct {
				Description string
				Schema      json.RawMessage
				Tests       []struct {
					Description string
					Data        json.RawMessage
					Valid       bool
				}
			}
			if err := json.Unmarshal(b, &groups); err != nil {
				t.Fatal(err)
			}
			for _, g := range groups {
				schema, err := compileSchema(g.Schema)
				if filepath.Base(file) == "refRemote.json" || suiteRefused[filepath.Base(file)+": "+g.Description] {
					refused++
					if err == nil || !strings.Contains(err.Error(), "an input schema may refer only to itself") {
						t.Errorf("%s: a schema that loads a remote document compiled, or failed otherwise: %v", g.Description, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: compiling %s: %v", g.Description, g.Schema, err)
					continue
				}
				for _, c := range g.Tests {
					cases++
					_, err := validateArgs(schema, compileFastRoot(schema), c.Data)
					var te *Error
					switch {
					case err == nil && !c.Valid:
						t.Errorf("%s / %s: %s accepted", g.Description, c.Description, c.Data)
					case err != nil && c.Valid:
						t.Errorf("%s / %s: %s refused: %v", g.Description, c.Description, c.Data, err)
					case err != nil && (!errors.As(err, &te) || te.Kind != llm.KindInvalidArguments ||
						!strings.HasPrefix(te.Msg, "arguments do not match the schema: ")):
						t.Errorf("%s / %s: %s: error %v is not a schema violation", g.Description, c.Description, c.Data, err)
					}
				}
			}
		})
	}
	t.Logf("%d cases passed; %d groups refused for loading remote documents", cases, refused)
	if want := len(suiteRefused) + 15; refused != want && !t.Failed() {
		t.Errorf("%d groups refused, want %d: update suiteRefused", refused, want)
	}
}
