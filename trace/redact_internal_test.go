package trace

import "testing"

// TestSummarizeMatchesDecoder checks the fast summary scanner against the
// json.Decoder walk it stands in for.
func TestSummarizeMatchesDecoder(t *testing.T) {
	r := NewRedactor(&RedactOptions{Sensitive: map[string][]string{"t": {"secret_field", "card.number"}}})
	fields := r.sensitive["t"]
	for _, in := range []string{
		`{}`, `[]`, `"x"`, `12.5e3`, `true`, `null`, ` { "a" : 1 , "b" : [1, {"c": 2}, "x"] } `,
		`{"order_id":"A100","page":2,"ok":true,"no":false,"none":null}`,
		`{"password":"hunter2","Password":{"a":1},"api_key":[1,2],"token":true,"n":null}`,
		`{"secret_field":"x","card":{"number":"4111","exp":"12/30"},"nested":{"card":{"number":1}}}`,
		`{"s":"h\u00e9llo \ud83d\ude00 \"q\" \\ \n","k\u0065y":"v","é":"ü"}`,
		`{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":{"j":1}}}}}}}}}}`,
		`{"m":"<string:4>","n":"<masked>","o":"<array:3>"}`,
		`[{"a":1},[2,[3]],"]",{"}":"{"}]`,
	} {
		fast := string(r.summarize(fields, []byte(in)))
		slow := string(r.walk(fields, []byte(in), false))
		if fast != slow {
			t.Errorf("%s\n fast %s\n slow %s", in, fast, slow)
		}
	}
}
