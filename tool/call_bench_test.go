package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
)

type benchIn struct {
	Key string `json:"key"`
}

type benchOut struct {
	OK bool `json:"ok"`
}

// BenchmarkCall is the tool package's share of loop.BenchmarkRun: for each
// of 15 calls (3 tools, 5 argument values), what the loop and the executor
// ask of a typed tool: Validate, CallKey and Invoke.
func BenchmarkCall(b *testing.B) {
	var tools []*Tool
	for _, name := range []string{"read_a", "read_b", "read_c"} {
		tools = append(tools, MustNew(Spec[benchIn]{Name: name},
			func(context.Context, benchIn) (benchOut, error) { return benchOut{OK: true}, nil }))
	}
	var args []json.RawMessage
	for t := 1; t <= 5; t++ {
		args = append(args, json.RawMessage(fmt.Sprintf(`{"key":"k%d"}`, t)))
	}
	ctx := context.Background()
	b.ReportAllocs()
	start := processCPU()
	var keys uint64
	for b.Loop() {
		for _, a := range args {
			for _, tl := range tools {
				fp, err := tl.Validate(a)
				if err != nil {
					b.Fatal(err)
				}
				keys ^= CallKey(tl.Name(), fp)
				if _, err := tl.Invoke(ctx, a); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	reportCPU(b, start)
	_ = keys
}
