package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/tool"
)

// The call key is a persisted format: run logs keep it as CallCheck.Key,
// and the idempotency ledger keeps it, as 16 hexadecimal digits, as a
// write's arguments hash. It is CallKey of the tool's name and the
// fingerprint Validate returns for the arguments (Fingerprint of the
// decoded arguments; for arguments that are not JSON or repeat a key, a
// hash of their bytes). The values below were produced by the code that
// wrote existing logs and ledgers; a change to any of them breaks those.

type pinIn struct {
	OrderID string   `json:"order_id"`
	Qty     int      `json:"qty,omitempty"`
	Price   float64  `json:"price,omitempty"`
	Express bool     `json:"express,omitempty"`
	Tags    []string `json:"tags,omitempty"`
}

func pinTools(t *testing.T) map[string]*tool.Tool {
	t.Helper()
	handler := func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	raw := func(name, schema string) *tool.Tool {
		tl, err := tool.NewRaw(tool.Definition{Name: name, InputSchema: json.RawMessage(schema)}, handler, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	return map[string]*tool.Tool{
		"get_order": tool.MustNew(tool.Spec[pinIn]{Name: "get_order"},
			func(context.Context, pinIn) (bool, error) { return true, nil }),
		"refund": tool.MustNew(tool.Spec[map[string]any]{Name: "refund", Effect: tool.Write},
			func(context.Context, map[string]any) (bool, error) { return true, nil }),
		// A raw schema with a pattern.
		"search": raw("search", `{"type":"object","properties":{"q":{"type":"string","pattern":"^[a-z]"}},"required":["q"]}`),
		"x":      raw("x", `{"type":"object"}`),
	}
}

var pinnedKeys = []struct {
	tool, args, key string
}{
	{"get_order", `{"order_id":"A100"}`, "5012e778745ed58e"},
	{"get_order", ` { "order_id" : "A100" } `, "5012e778745ed58e"},
	{"get_order", `{"order_\u0069d":"\u0041100"}`, "5012e778745ed58e"},
	{"get_order", `{"order_id":"A100","qty":2}`, "2cd1965089b595ca"},
	{"get_order", `{"qty":2,"order_id":"A100"}`, "2cd1965089b595ca"},
	{"get_order", `{"qty":2.0,"order_id":"A100"}`, "2cd1965089b595ca"},
	{"get_order", `{"order_id":"A100","qty":2,"price":9.95,"express":true,"tags":["gift","rush"]}`, "d081f1111242280a"},
	{"get_order", `{"tags":["rush","gift"],"express":false,"price":1e300,"qty":-0,"order_id":"é😀"}`, "daa51467e9591d09"},
	{"get_order", `{"order_id":"A100","price":123456789012345678}`, "e1782ea4a0d9f5cf"},
	{"get_order", "{\"order_id\":\"\xff\"}", "6dda6d0765bcd705"},
	{"get_order", `{"order_id":"\ud83d"}`, "6dda6d0765bcd705"},
	{"get_order", `{"order_id":5}`, "0e88fcba0189fad6"},
	{"get_order", `{"order_id":"A100","qty":1.5}`, "2d1c6bd16af7d032"},
	{"get_order", `{"order_id":"A100","extra":null}`, "97705389a0c3280c"},
	{"get_order", `{}`, "396e31aec4fd4759"},
	{"get_order", ``, "396e31aec4fd4759"},
	{"get_order", `{"order_id":"A100"`, "10b64a692e49ed52"},
	{"get_order", `order_id=A100`, "8ab738233e88211c"},
	{"get_order", `{"order_id":"A100","order_id":"A101"}`, "405184fc4d148ebd"},
	{"get_order", `[]`, "70994c00c38a386e"},
	{"refund", `{"order_id":"A100","amount":12.5}`, "682308a9ad165c5e"},
	{"refund", `{"amount":12.5,"order_id":"A100"}`, "682308a9ad165c5e"},
	{"refund", `{"a":{"z":[1,{"y":null,"x":true}],"b":"c"},"n":null}`, "951f38680d28e56f"},
	{"refund", `{"b":1,"a":{"d":2,"c":3},"a2":[[],{}]}`, "ef3b7e34f709bbc3"},
	{"refund", `{"k":"` + strings.Repeat("v", 300) + `"}`, "1305015bb86cf9cf"},
	{"refund", `{"` + strings.Repeat("k", 300) + `":1}`, "822757b7ff305da3"},
	{"refund", ``, "c0e26e0c76669b67"},
	{"search", `{"q":"shoes"}`, "3cfb104b9f7c53aa"},
	{"search", `{"q":"Shoes"}`, "919984fa5e6ef795"},
	{"search", `{"q":"shoes","page":2}`, "a790ab0996777526"},
	{"search", `{"page":2,"q":"shoes"}`, "a790ab0996777526"},
	{"search", `{"q":"a","q":"b"}`, "ef7b9887f2b54b23"},
	{"search", `{"q":`, "4310e2ed06ab3718"},
	{"x", `{}`, "d78af52d7bdc9012"},
	{"x", `{"a":[1,2,3]}`, "387a6fb28cde33a8"},
	{"x", `null`, "dff303ddd1befff1"},
}

func TestCallKeyPinned(t *testing.T) {
	tools := pinTools(t)
	for _, c := range pinnedKeys {
		fp, _ := tools[c.tool].Validate(json.RawMessage(c.args))
		if got := fmt.Sprintf("%016x", tool.CallKey(c.tool, fp)); got != c.key {
			t.Errorf("CallKey(%q, Validate(%q)) = %s, want %s", c.tool, c.args, got, c.key)
		}
	}
}

// pinnedFingerprints pins Fingerprint of decoded values, which the trace
// package uses for calls that were never validated.
var pinnedFingerprints = []struct {
	json, fp string
}{
	{`null`, "af63e34c8601f871"},
	{`true`, "af63e94c860202a3"},
	{`false`, "af63db4c8601ead9"},
	{`0`, "0c242be525cc5d72"},
	{`-0`, "0c23abe525cb83f2"},
	{`1.5`, "0e955ee527df71a3"},
	{`"A100"`, "d1035fd72b57ba7b"},
	{`""`, "9f8e8142ba675385"},
	{`[]`, "09612b07b5ecb5a5"},
	{`{}`, "08f44b07b5901a25"},
	{`[1,"1",[1]]`, "60333abee0be3f89"},
	{`{"b":[true,null],"a":{"c":"é"}}`, "569392e54341ea56"},
}

func TestFingerprintPinned(t *testing.T) {
	for _, c := range pinnedFingerprints {
		var v any
		if err := json.Unmarshal([]byte(c.json), &v); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%016x", tool.Fingerprint(v)); got != c.fp {
			t.Errorf("Fingerprint(%s) = %s, want %s", c.json, got, c.fp)
		}
	}
}

// CallKey of names of every length class (one byte of length, two).
func TestCallKeyPinnedNames(t *testing.T) {
	for _, c := range pinnedNameKeys {
		if got := fmt.Sprintf("%016x", tool.CallKey(c.name, c.fp)); got != c.key {
			t.Errorf("CallKey(%q, %#x) = %s, want %s", c.name, c.fp, got, c.key)
		}
	}
}

var pinnedNameKeys = []struct {
	name string
	fp   uint64
	key  string
}{
	{"", 0x0, "10c055e310a13625"},
	{"", 0x1, "f1c58eda05b1ec04"},
	{"", 0xff, "bbf9c87f985906ba"},
	{"", 0x100, "4b6dda58becd634a"},
	{"", 0x123456789abcdef, "854b3a6d43b54435"},
	{"", 0xffffffffffffffff, "966fdd3bf5e1169d"},
	{"x", 0x0, "5348cf8b09819514"},
	{"x", 0x1, "724396941470df35"},
	{"x", 0xff, "5d1eef18492eb5cb"},
	{"x", 0x100, "189b4b155b5567ef"},
	{"x", 0x123456789abcdef, "e9ce968ce45b4dd4"},
	{"x", 0xffffffffffffffff, "3b59ed33298dfd8c"},
	{"get_order", 0x0, "31d083cdac35e997"},
	{"get_order", 0x1, "12d5bcc4a1469f76"},
	{"get_order", 0xff, "c31436e1ee74c548"},
	{"get_order", 0x100, "6c7e08435a6216bc"},
	{"get_order", 0x123456789abcdef, "ec0c76f72abcd957"},
	{"get_order", 0xffffffffffffffff, "25d50d3887185e0f"},
	{strings.Repeat("n", 255), 0x0, "7e78035bfc305e50"},
	{strings.Repeat("n", 255), 0x1, "9d72ca65071fa871"},
	{strings.Repeat("n", 255), 0xff, "fd87dfb70afce08f"},
	{strings.Repeat("n", 255), 0x100, "43ca7ee64e04312b"},
	{strings.Repeat("n", 255), 0x123456789abcdef, "b42e050ab2e699b0"},
	{strings.Repeat("n", 255), 0xffffffffffffffff, "4c46391c4d41a6c8"},
	{strings.Repeat("n", 256), 0x0, "4acbd8221888f3ea"},
	{strings.Repeat("n", 256), 0x1, "69c69f2b23783e0b"},
	{strings.Repeat("n", 256), 0xff, "0187c221771556f5"},
	{strings.Repeat("n", 256), 0x100, "101e53ac6a5cc6c5"},
	{strings.Repeat("n", 256), 0x123456789abcdef, "a8f05deaf8daefaa"},
	{strings.Repeat("n", 256), 0xffffffffffffffff, "fa67083da9a0d462"},
	{strings.Repeat("n", 300), 0x0, "fccf04ebf2b822f6"},
	{strings.Repeat("n", 300), 0x1, "1bc9cbf4fda76d17"},
	{strings.Repeat("n", 300), 0xff, "c6cf4f1d3a1fb3e9"},
	{strings.Repeat("n", 300), 0x100, "c2218076448bf5d1"},
	{strings.Repeat("n", 300), 0x123456789abcdef, "321038c0e502c3f6"},
	{strings.Repeat("n", 300), 0xffffffffffffffff, "cbc643bf714f616e"},
}
