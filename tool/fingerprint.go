package tool

import (
	"encoding/json"
	"math"
	"slices"
)

// Fingerprint hashes a decoded JSON value canonically: object keys are
// visited in sorted order and white space never enters, so two encodings of
// the same value hash alike. This is the definition of the argument
// fingerprint that (*Tool).Validate returns and CallKey keys, and tests
// pin the results. v must be what encoding/json decodes into an
// any (nil, bool, float64, string, []any, map[string]any); json.Number is
// accepted too.
func Fingerprint(v any) uint64 {
	h := fnv64(offset64)
	h.value(v)
	return uint64(h)
}

// fingerprintBytes hashes arguments that are not valid JSON, as they are.
func fingerprintBytes(b []byte) uint64 {
	h := fnv64(offset64)
	h.byte('!')
	h.string(string(b))
	return uint64(h)
}

// FNV-1a, inlined so hashing allocates nothing.
const (
	offset64 = 14695981039346656037
	prime64  = 1099511628211
	// prime64x8 is prime64 to the 8th power, modulo 2^64.
	prime64x8 = prime64 * prime64 * prime64 * prime64 * prime64 * prime64 * prime64 * prime64 % (1 << 64)
)

type fnv64 uint64

func (h *fnv64) byte(b byte) { *h = (*h ^ fnv64(b)) * prime64 }

func (h *fnv64) string(s string) {
	for i := 0; i < len(s); i++ {
		h.byte(s[i])
	}
}

// bytes hashes b as string hashes a string, without converting it.
func (h *fnv64) bytes(b []byte) {
	for _, c := range b {
		h.byte(c)
	}
}

// uint hashes the 8 bytes of u, low byte first. For u below 256 (a
// length, mostly) the seven zero bytes fold into one multiplication by
// prime64x8: XOR with a zero byte changes nothing.
func (h *fnv64) uint(u uint64) {
	x := *h
	if u < 1<<8 {
		*h = (x ^ fnv64(u)) * prime64x8
		return
	}
	for i := range 8 {
		x = (x ^ fnv64(byte(u>>(8*i)))) * prime64
	}
	*h = x
}

func (h *fnv64) value(v any) {
	switch x := v.(type) {
	case nil:
		h.byte('n')
	case bool:
		if x {
			h.byte('t')
		} else {
			h.byte('f')
		}
	case float64:
		h.byte('#')
		h.uint(math.Float64bits(x))
	case json.Number:
		if f, err := x.Float64(); err == nil {
			h.value(f)
			return
		}
		h.byte('N')
		h.string(string(x))
	case string:
		h.str(x)
	case []any:
		h.byte('[')
		for _, e := range x {
			h.value(e)
		}
		h.byte(']')
	case map[string]any:
		// The keys of a small object are sorted on the stack: Validate
		// fingerprints every call's arguments.
		var small [16]string
		keys := small[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		h.byte('{')
		for _, k := range keys {
			h.str(k)
			h.value(x[k])
		}
		h.byte('}')
	default:
		// Not a decoded JSON value; hash its encoding so the result is
		// still stable.
		b, err := json.Marshal(x)
		if err != nil {
			h.byte('?')
			return
		}
		h.byte('~')
		h.string(string(b))
	}
}

// str hashes a string value: '"', its length, its bytes. Length-prefixed,
// so ["ab"] and ["a","b"] differ.
func (h *fnv64) str(s string) {
	h.byte('"')
	h.uint(uint64(len(s)))
	h.string(s)
}

// strBytes is str of a string held as bytes.
func (h *fnv64) strBytes(b []byte) {
	h.byte('"')
	h.uint(uint64(len(b)))
	h.bytes(b)
}

// CallKey combines a tool name and an argument fingerprint into the key by
// which the loop recognises a repeated call. The key is persisted (run
// logs keep it, and the idempotency ledger keeps it in hexadecimal as a
// write's arguments hash), so it never changes: FNV-1a, as Fingerprint
// hashes, of the name as a string value ('"', its length as 8 bytes, its
// bytes) and then of the fingerprint as 8 bytes, low byte first.
func CallKey(name string, argsFingerprint uint64) uint64 {
	h := fnv64(offset64)
	h.value(name)
	h.uint(argsFingerprint)
	return uint64(h)
}
