package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

type flatIn struct {
	Key    string `json:"key"`
	N      int    `json:"n,omitempty"`
	Small  int8   `json:"small"`
	Mid    int16
	Big    int64  `json:"big,omitempty"`
	U      uint   `json:"u"`
	U8     uint8  `json:"u8,omitempty"`
	U16    uint16 `json:"u16"`
	U32    uint32 `json:"u32"`
	U64    uint64 `json:"u64"`
	I32    int32  `json:"i32"`
	OK     bool   `json:"ok,omitempty"`
	Named  flatID `json:"named"`
	Skip   string `json:"-"`
	hidden string
	Dur    time.Duration `json:"dur"`
	Long   string        `json:"a_longer_name,omitempty"`
	Longer int           `json:"a_longer_nbme,omitempty"`
}

type flatID string

type flatOut struct {
	OK bool `json:"ok"`
}

func TestFlatCodecQualifies(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[flatIn](), reflect.TypeFor[flatOut](), reflect.TypeFor[struct{}](),
	} {
		if newFlatCodec(typ) == nil {
			t.Errorf("%v: no flat codec", typ)
		}
	}
	type embedded struct{ flatOut }
	type quoted struct {
		N int `json:"n,string"`
	}
	type omitzero struct {
		N int `json:"n,omitzero"`
	}
	type float struct{ F float64 }
	type pointer struct{ P *string }
	type slice struct{ S []string }
	// Two fields with one key (built by reflection, which vet allows).
	dup := reflect.StructOf([]reflect.StructField{
		{Name: "A", Type: reflect.TypeFor[string](), Tag: `json:"x"`},
		{Name: "B", Type: reflect.TypeFor[string](), Tag: `json:"x"`},
	})
	type folded struct {
		A string `json:"name"`
		B string `json:"Name"`
	}
	type dashed struct {
		A string `json:"order-id"`
	}
	type unicode struct{ Größe int }
	type timed struct{ T time.Time }
	type raw struct{ R json.RawMessage }
	for _, typ := range []reflect.Type{
		reflect.TypeFor[embedded](), reflect.TypeFor[quoted](), reflect.TypeFor[omitzero](),
		reflect.TypeFor[float](), reflect.TypeFor[pointer](), reflect.TypeFor[slice](),
		dup, reflect.TypeFor[folded](), reflect.TypeFor[dashed](),
		reflect.TypeFor[unicode](), reflect.TypeFor[timed](), reflect.TypeFor[raw](),
		reflect.TypeFor[time.Time](), reflect.TypeFor[string](), reflect.TypeFor[map[string]any](),
		reflect.TypeFor[*flatOut](), reflect.TypeFor[any](), reflect.TypeFor[textKey](),
		reflect.TypeFor[struct{ K textKey }](),
	} {
		if newFlatCodec(typ) != nil {
			t.Errorf("%v: flat codec, want none", typ)
		}
	}
}

type textKey string

func (k *textKey) UnmarshalText(b []byte) error { *k = textKey(strings.ToUpper(string(b))); return nil }

var flatInputs = []string{
	`{"key":"k1"}`,
	`{}`,
	` { } `,
	"{\n\t\"key\" : \"a\" ,\r\n \"n\": -12 }\n",
	`{"key":"a","n":0,"small":-128,"Mid":32767,"big":-9223372036854775808,"u":18446744073709551615}`,
	`{"u8":255,"u16":65535,"u32":4294967295,"u64":18446744073709551615,"i32":-2147483648}`,
	`{"small":128}`, `{"small":-129}`, `{"u8":256}`, `{"u":-1}`, `{"u":-0}`, `{"n":-0}`,
	`{"n":01}`, `{"n":1.0}`, `{"n":1e3}`, `{"n":-}`, `{"n":"1"}`, `{"n":null}`, `{"n":true}`,
	`{"n":99999999999999999999}`,
	`{"ok":true}`, `{"ok":false}`, `{"ok":tru}`, `{"ok":truex}`, `{"ok":null}`, `{"ok":1}`,
	`{"key":"caf\u00e9"}`, `{"key":"café"}`, `{"key":"a\"b"}`, `{"key":"a\\b"}`, "{\"key\":\"\xff\"}",
	"{\"key\":\"a\tb\"}", `{"key":"\ud800"}`, `{"key":null}`, `{"key":1}`, `{"key":{}}`, `{"key":[]}`,
	`{"KEY":"upper"}`, `{"Key":"title"}`, `{"mid":5}`, `{"unknown":1}`, `{"Skip":"x"}`, `{"-":"x"}`,
	`{"hidden":"x"}`, `{"key":"a","key":"b"}`, `{"named":"id-1"}`, `{"dur":1500}`,
	`{"key":"a",}`, `{"key":"a"`, `{"key" "a"}`, `{,}`, `{"key":"a"}}`, `{"key":"a"} x`, `{"key":"a"}{}`,
	``, ` `, `null`, `[]`, `"x"`, `1`, `{"key":"\u212a"}`, "{\"\u212aey\":\"kelvin\"}",
	`{"key":"a","n":5,"ok":true,"named":"n","dur":-3,"U64":7}`,
	// More strings than the decoder holds before storing them: the last
	// value of a key still wins.
	`{"key":"1","named":"2","key":"3","named":"4","key":"5","named":"6","key":"7","named":"8","key":"9","named":"10","key":"11"}`,
	`{"key":"1","key":"2","key":"3","key":"4","key":"5","key":"6","key":"7","key":"8","key":"","named":"n"}`,
	`{"key":"1","key":"2","key":"3","key":"4","key":"5","key":"6","key":"7","key":"8","named":"n","key":""}`,
	`{"key":"","named":""}`, `{"key":"","named":"x"}`, `{"key":"x","key":""}`,
	`{"a_longer_name":"l","a_longer_nbme":2}`, `{"a_longer_namf":"l"}`, `{"a_longer_nbme":"l"}`, `{"A_longer_name":"l"}`,
}

// The flat decoder must decode (or give up on) every input exactly as
// json.Unmarshal decodes it (or fails).
func TestFlatDecodeLikeUnmarshal(t *testing.T) {
	codec := newFlatCodec(reflect.TypeFor[flatIn]())
	for _, s := range flatInputs {
		checkFlatDecode(t, codec, s)
	}
	// The plain inputs take the shortcut.
	for _, s := range []string{`{"key":"k1"}`, `{}`, flatInputs[3], flatInputs[4], flatInputs[5], `{"ok":true}`, `{"key":"café"}`} {
		var in flatIn
		if _, ok := codec.decode([]byte(s), unsafe.Pointer(&in), 0); !ok {
			t.Errorf("%q: the flat decoder gave up", s)
		}
	}
}

func checkFlatDecode(t *testing.T, codec *flatCodec, s string) {
	t.Helper()
	var want flatIn
	wantErr := json.Unmarshal([]byte(s), &want)
	for _, reserve := range []int{0, 16} {
		args := []byte(s)
		got, spare, gotErr := decodeArgsSpare[flatIn](codec, args, reserve)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: decodeArgs error %v, json.Unmarshal error %v", s, gotErr, wantErr)
		}
		if wantErr != nil {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decoded %+v, want %+v", s, got, want)
		}
		if spare != nil && (len(spare) != 0 || cap(spare) != reserve) {
			t.Fatalf("%q: spare room of length %d and capacity %d, want 0 and %d", s, len(spare), cap(spare), reserve)
		}
		// The decoded strings are the decoder's own: writing to the
		// arguments or to the spare room leaves them alone.
		for i := range args {
			args[i] = 'X'
		}
		for i := range cap(spare) {
			spare = append(spare, byte('0'+i%10))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decoded %+v, then %+v after writing to the arguments and the spare room", s, want, got)
		}
	}
}

func FuzzFlatDecode(f *testing.F) {
	for _, s := range flatInputs {
		f.Add(s)
	}
	codec := newFlatCodec(reflect.TypeFor[flatIn]())
	f.Fuzz(func(t *testing.T, s string) { checkFlatDecode(t, codec, s) })
}

// The flat encoder must write exactly what json.Marshal writes, or give up.
func TestFlatEncodeLikeMarshal(t *testing.T) {
	codec := newFlatCodec(reflect.TypeFor[flatIn]())
	plain := []flatIn{
		{},
		{Key: "k1", OK: true},
		{Key: "a b-c_d.e/f", N: -1, Small: math.MinInt8, Mid: math.MaxInt16, Big: math.MinInt64, U: math.MaxUint,
			U8: 255, U16: 65535, U32: math.MaxUint32, U64: math.MaxUint64, I32: math.MinInt32, Named: "x", Skip: "s", hidden: "h", Dur: time.Second},
	}
	for _, v := range plain {
		got, ok := codec.encode(nil, unsafe.Pointer(&v))
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("%+v: encoded %s (ok %v), want %s", v, got, ok, want)
		}
	}
	for _, s := range []string{`a"b`, `a\b`, "a\nb", "<", ">", "&", "é", "\u2028", "\x7f", "\xff", "\x00"} {
		v := flatIn{Key: s}
		if got, ok := codec.encode(nil, unsafe.Pointer(&v)); ok {
			want, _ := json.Marshal(v)
			if !bytes.Equal(got, want) {
				t.Errorf("%q: encoded %s, want %s", s, got, want)
			}
		}
	}
}

func FuzzFlatEncode(f *testing.F) {
	f.Add("k1", int64(0), uint64(0), true)
	f.Add("<a&b>", int64(-1), uint64(1<<63), false)
	codec := newFlatCodec(reflect.TypeFor[flatIn]())
	f.Fuzz(func(t *testing.T, s string, n int64, u uint64, ok bool) {
		v := flatIn{Key: s, N: int(n), Small: int8(n), Big: n, U64: u, U8: uint8(u), OK: ok, Named: flatID(s)}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got, fast := codec.encode(nil, unsafe.Pointer(&v)); fast && !bytes.Equal(got, want) {
			t.Fatalf("%+v: encoded %s, want %s", v, got, want)
		}
	})
}

// A typed tool's results are what json.Marshal writes, through the
// shortcut or not, and say so.
func TestTypedToolFlatResults(t *testing.T) {
	type out struct {
		Msg string `json:"msg"`
		N   int    `json:"n,omitempty"`
	}
	tl := MustNew(Spec[flatIn]{Name: "flat"}, func(_ context.Context, in flatIn) (out, error) {
		return out{Msg: in.Key, N: in.N}, nil
	})
	if !tl.JSONResults() {
		t.Error("typed tool: JSONResults false")
	}
	for _, args := range []string{`{"key":"plain","n":3}`, `{"key":"<b>"}`, `{"key":"caf\u00e9"}`, `{"KEY":"folded"}`} {
		got, err := tl.Invoke(context.Background(), json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		var in flatIn
		if err := json.Unmarshal([]byte(args), &in); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(out{Msg: in.Key, N: in.N})
		if !bytes.Equal(got, want) {
			t.Errorf("%s: result %s, want %s", args, got, want)
		}
	}
	raw, err := NewRaw(Definition{Name: "raw", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage("not json"), nil
		}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if raw.JSONResults() {
		t.Error("raw tool: JSONResults true")
	}
}

// A typed tool's decoded strings and its encoded result may share one
// allocation; neither may see the other change, and a plain call makes no
// other allocation.
func TestTypedToolSharedAllocation(t *testing.T) {
	var kept []string
	tl := MustNew(Spec[flatIn]{Name: "keep"}, func(_ context.Context, in flatIn) (flatOut, error) {
		kept = append(kept, in.Key, string(in.Named))
		return flatOut{OK: true}, nil
	})
	ctx := context.Background()
	for _, args := range []string{`{"key":"k1"}`, `{"key":"a","named":"bc"}`, `{"key":"","named":"x"}`} {
		kept = kept[:0]
		res, err := tl.Invoke(ctx, json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		if string(res) != `{"ok":true}` {
			t.Fatalf("%s: result %s", args, res)
		}
		want := slices.Clone(kept)
		for i := range res {
			res[i] = 'X'
		}
		res = append(res, strings.Repeat("Y", 64)...)
		if !slices.Equal(kept, want) {
			t.Fatalf("%s: decoded %q, then %q after writing to the result", args, want, kept)
		}
	}
	args := json.RawMessage(`{"key":"k1"}`)
	if n := testing.AllocsPerRun(100, func() {
		kept = kept[:0]
		if _, err := tl.Invoke(ctx, args); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("Invoke(%s): %v allocations, want 1", args, n)
	}
}

// encodedLen bounds the encoding of a struct without strings exactly: the
// widest values fill it.
func TestFlatEncodedLen(t *testing.T) {
	type wide struct {
		B   bool   `json:"b"`
		I   int    `json:"i"`
		I8  int8   `json:"i8"`
		I16 int16  `json:"i16"`
		I32 int32  `json:"i32"`
		I64 int64  `json:"i64"`
		U   uint   `json:"u"`
		U8  uint8  `json:"u8"`
		U16 uint16 `json:"u16"`
		U32 uint32 `json:"u32"`
		U64 uint64 `json:"u64"`
	}
	codec := newFlatCodec(reflect.TypeFor[wide]())
	widest := wide{false, math.MinInt, math.MinInt8, math.MinInt16, math.MinInt32, math.MinInt64,
		math.MaxUint, math.MaxUint8, math.MaxUint16, math.MaxUint32, math.MaxUint64}
	for _, v := range []wide{widest, {}} {
		b, ok := codec.encode(nil, unsafe.Pointer(&v))
		if !ok || len(b) > codec.encodedLen() {
			t.Errorf("%s: %d bytes, encodedLen %d", b, len(b), codec.encodedLen())
		}
	}
	if b, _ := codec.encode(nil, unsafe.Pointer(&widest)); len(b) != codec.encodedLen() {
		t.Errorf("%s: %d bytes, encodedLen %d", b, len(b), codec.encodedLen())
	}
	for _, v := range []flatOut{{true}, {false}} {
		if b, _ := newFlatCodec(reflect.TypeFor[flatOut]()).encode(nil, unsafe.Pointer(&v)); len(b) > len(`{"ok":false}`) {
			t.Errorf("%s: longer than it can be", b)
		}
	}
	if n := newFlatCodec(reflect.TypeFor[flatOut]()).encodedLen(); n != len(`{"ok":false}`) {
		t.Errorf("flatOut: encodedLen %d, want %d", n, len(`{"ok":false}`))
	}
}

func TestSameName(t *testing.T) {
	for n := range 20 {
		name := strings.Repeat("abcdefgh", 3)[:n]
		if !sameName(name, []byte(name)) {
			t.Errorf("sameName(%q, %q) = false", name, name)
		}
		for i := range n {
			key := []byte(name)
			key[i] ^= 0x20
			if sameName(name, key) {
				t.Errorf("sameName(%q, %q) = true", name, key)
			}
		}
	}
}
