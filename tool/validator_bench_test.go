package tool

import (
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// BenchmarkValidate measures Validate on a small and on a typical
// (medium) tool call, beside the other library considered for it,
// github.com/google/jsonschema-go, doing the same work: decode, check,
// fingerprint. docs/BENCHMARKS.md has the figures and the choice.
func BenchmarkValidate(b *testing.B) {
	for _, c := range []struct {
		name string
		tl   *Tool
		args string
	}{
		{"small", vtTyped[vtSmall](b), `{"key":"k1"}`},
		{"medium", vtTyped[vtMedium](b), vtMediumArgs},
	} {
		args := json.RawMessage(c.args)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				if _, err := c.tl.Validate(args); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, start)
		})
		var schema jsonschema.Schema
		if err := json.Unmarshal(c.tl.def.InputSchema, &schema); err != nil {
			b.Fatal(err)
		}
		resolved, err := schema.Resolve(nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/jsonschema-go", func(b *testing.B) {
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(args, &v); err != nil {
					b.Fatal(err)
				}
				_ = Fingerprint(v)
				if err := resolved.Validate(v); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, start)
		})
	}
}
