package tool

import (
	"math/rand/v2"
	"testing"
)

// fnvUint must hash exactly as (*fnv64).uint does, byte by byte.
func TestFnvUint(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	values := []uint64{0, 1, 0xff, 0x100, 0xffff, 1 << 63, ^uint64(0), 0x3ff0000000000000, 0x00ff00ff00ff00ff}
	for range 1000 {
		u := r.Uint64()
		values = append(values, u, u>>r.IntN(64), u&r.Uint64())
	}
	for _, u := range values {
		h := fnv64(r.Uint64())
		want := h
		want.uint(u)
		if got := fnvUint(h, u); got != want {
			t.Fatalf("fnvUint(%#x, %#x) = %#x, want %#x", h, u, got, want)
		}
	}
}
