package tool

import (
	"encoding/json"
	"reflect"
	"testing"
)

// decodeArgs reuses decoders; whatever came before, each call must decode
// and fail exactly as json.Unmarshal does.
func TestDecodeArgsLikeUnmarshal(t *testing.T) {
	type in struct {
		Key string `json:"key"`
		N   int    `json:"n"`
		Sub *struct {
			A []int `json:"a"`
		} `json:"sub"`
	}
	inputs := []string{
		`{"key":"a","n":1}`,
		`{"key":"b"}`,
		`  {"key":"c"}  `,
		`{"key":"d"}}`,
		`{"key":"e"} {"key":"f"}`,
		`{"key":"g"`,
		``,
		`   `,
		`{"n":"not a number"}`,
		`{"sub":{"a":[1,2,3]},"key":"h"}`,
		`null`,
		`{"key":"i"}x`,
		`[1]`,
		`{"key":"j","n":2}`,
		"{\"key\":\"k\"}\n",
		`{"key":"l"}`,
	}
	for round := range 2 {
		for _, s := range inputs {
			got, gotErr := decodeArgs[in](nil, json.RawMessage(s))
			var want in
			wantErr := json.Unmarshal([]byte(s), &want)
			if (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("round %d, %q: decodeArgs error %v, json.Unmarshal error %v", round, s, gotErr, wantErr)
			}
			if wantErr == nil && !reflect.DeepEqual(got, want) {
				t.Errorf("round %d, %q: decoded %+v, want %+v", round, s, got, want)
			}
		}
	}
}
