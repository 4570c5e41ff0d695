package tool

import (
	"math/rand/v2"
	"testing"
)

// CallKey keys are logged, so the hash must not change: it is FNV-1a over
// '"', the name's length, the name and the fingerprint, byte by byte.
func TestCallKeyStable(t *testing.T) {
	ref := func(name string, fp uint64) uint64 {
		h := fnv64(offset64)
		h.byte('"')
		h.uint(uint64(len(name)))
		h.string(name)
		h.uint(fp)
		return uint64(h)
	}
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"", "x", "read_a", "get_order", "a_rather_long_tool_name_with_many_bytes_in_it"}
	for _, name := range names {
		for _, fp := range []uint64{0, 1, 0xff, 0x100, 1 << 63, r.Uint64(), r.Uint64() &^ 0xff00ff, r.Uint64() >> 24} {
			if got, want := CallKey(name, fp), ref(name, fp); got != want {
				t.Errorf("CallKey(%q, %#x) = %#x, want %#x", name, fp, got, want)
			}
		}
	}
}

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
