package tool

import (
	"encoding/json"
	"testing"
)

func BenchmarkFsTmp(b *testing.B) {
	tl := fsTyped[fsMedium](b)
	for _, a := range []string{fsMediumArgs,
		`{"customer":"c-42","express":true,"lines":[{"price":9.5,"qty":1,"sku":"X1"},{"price":1.25,"qty":3,"sku":"X2"},{"price":100,"qty":2,"sku":"X3"}],"order_id":"A100","priority":2}`} {
		args := json.RawMessage(a)
		b.Run("", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tl.Validate(args)
			}
		})
		b.Run("nil", func(b *testing.B) {
			for b.Loop() {
				(*fastSchema)(nil).validate(args)
			}
		})
	}
}
