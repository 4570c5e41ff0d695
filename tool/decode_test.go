package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

type typedIn struct {
	Key    string `json:"key"`
	N      int    `json:"n,omitempty"`
	Small  int8   `json:"small"`
	Mid    int16
	Big    int64   `json:"big,omitempty"`
	U      uint    `json:"u"`
	U8     uint8   `json:"u8,omitempty"`
	U16    uint16  `json:"u16"`
	U32    uint32  `json:"u32"`
	U64    uint64  `json:"u64"`
	I32    int32   `json:"i32"`
	OK     bool    `json:"ok,omitempty"`
	Named  typedID `json:"named"`
	Skip   string  `json:"-"`
	hidden string
	Dur    time.Duration `json:"dur"`
	Long   string        `json:"a_longer_name,omitempty"`
	Longer int           `json:"a_longer_nbme,omitempty"`
	Sub    *struct {
		A []int `json:"a"`
	} `json:"sub"`
}

type typedID string

type typedOut struct {
	OK bool `json:"ok"`
}

var typedInputs = []string{
	`{"key":"k1"}`,
	`{}`,
	` { } `,
	"{\n\t\"key\" : \"a\" ,\r\n \"n\": -12 }\n",
	`{"key":"a","n":0,"small":-128,"Mid":32767,"big":-9223372036854775808,"u":18446744073709551615}`,
	`{"u8":255,"u16":65535,"u32":4294967295,"u64":18446744073709551615,"i32":-2147483648}`,
	`{"small":128}`, `{"small":-129}`, `{"u8":256}`, `{"u":-1}`, `{"u":-0}`, `{"n":-0}`,
	`{"n":01}`, `{"n":1.0}`, `{"n":1e3}`, `{"n":-}`, `{"n":"1"}`, `{"n":null}`, `{"n":true}`,
	`{"n":99999999999999999999}`, `{"n":"not a number"}`,
	`{"ok":true}`, `{"ok":false}`, `{"ok":tru}`, `{"ok":truex}`, `{"ok":null}`, `{"ok":1}`,
	`{"key":"caf\u00e9"}`, `{"key":"café"}`, `{"key":"a\"b"}`, `{"key":"a\\b"}`, "{\"key\":\"\xff\"}",
	"{\"key\":\"a\tb\"}", `{"key":"\ud800"}`, `{"key":null}`, `{"key":1}`, `{"key":{}}`, `{"key":[]}`,
	`{"KEY":"upper"}`, `{"Key":"title"}`, `{"mid":5}`, `{"unknown":1}`, `{"Skip":"x"}`, `{"-":"x"}`,
	`{"hidden":"x"}`, `{"key":"a","key":"b"}`, `{"named":"id-1"}`, `{"dur":1500}`,
	`{"key":"a",}`, `{"key":"a"`, `{"key" "a"}`, `{,}`, `{"key":"a"}}`, `{"key":"a"} x`, `{"key":"a"}{}`,
	`{"key":"e"} {"key":"f"}`, `{"key":"i"}x`, "{\"key\":\"k\"}\n",
	``, ` `, `null`, `[]`, `[1]`, `"x"`, `1`, `{"key":"\u212a"}`, "{\"\u212aey\":\"kelvin\"}",
	`{"key":"a","n":5,"ok":true,"named":"n","dur":-3,"U64":7}`,
	`{"sub":{"a":[1,2,3]},"key":"h"}`, `{"sub":{"a":"x"}}`,
	`{"key":"1","named":"2","key":"3","named":"4","key":"5","named":"6","key":"7","named":"8","key":"9","named":"10","key":"11"}`,
	`{"key":"","named":""}`, `{"key":"","named":"x"}`, `{"key":"x","key":""}`,
	`{"a_longer_name":"l","a_longer_nbme":2}`, `{"a_longer_namf":"l"}`, `{"a_longer_nbme":"l"}`, `{"A_longer_name":"l"}`,
}

// decodeArgs must decode and fail exactly as json.Unmarshal does.
func TestDecodeArgsLikeUnmarshal(t *testing.T) {
	for _, s := range typedInputs {
		got, gotErr := decodeArgs[typedIn](json.RawMessage(s))
		var want typedIn
		wantErr := json.Unmarshal([]byte(s), &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: decodeArgs error %v, json.Unmarshal error %v", s, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%q: decoded %+v, want %+v", s, got, want)
		}
	}
}

// A typed tool's results are what json.Marshal writes, and say so.
func TestTypedToolResults(t *testing.T) {
	type out struct {
		Msg string `json:"msg"`
		N   int    `json:"n,omitempty"`
	}
	tl := MustNew(Spec[typedIn]{Name: "typed"}, func(_ context.Context, in typedIn) (out, error) {
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
		var in typedIn
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

// A typed tool's decoded strings and its encoded result are independent:
// neither sees the other change.
func TestTypedToolResultIndependent(t *testing.T) {
	var kept []string
	tl := MustNew(Spec[typedIn]{Name: "keep"}, func(_ context.Context, in typedIn) (typedOut, error) {
		kept = append(kept, in.Key, string(in.Named))
		return typedOut{OK: true}, nil
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
}
