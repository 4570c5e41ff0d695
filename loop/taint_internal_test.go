package loop

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
)

// trickyText is text whose values exercise every branch of normalising:
// IBANs with and without spaces, URLs in capitals, e-mail addresses,
// punctuation around words, every kind of space (ASCII and Unicode, at
// the edges and inside), letters whose lower case differs in length
// (İ, the Kelvin sign), long words and sentences around the length
// limits, and text that is not JSON.
var trickyText = []string{
	"Pay the Bill for December, 98.70 EUR to GB29 NWBK 6016 1331 9268 19 via HTTPS://WWW.Example.COM/Pay/ or mail Bob@Example.org.",
	"GB29NWBK60161331926819",
	"gb29 nwbk 6016 1331 9268 19",
	"US133000000121212121212!",
	"AB12 CDEFGHIJKLMNOPQRST",
	"ABCDEFGHIJKLMNOP1",
	"HTTP://Short.io",
	"www.Evil-Site.com/pay/",
	"see www.evil-site.com/pay, now",
	"https://ex.com/a b",
	"http://x@y.com",
	"ftp.example.dev/file",
	"Überweisung an José Müller, İstanbul; ǅemal ß",
	"\u00a0NBSP-edged\u00a0",
	"\u0085NEL\u0085",
	"Kelvin \u212a and \u212aelvin",
	"İİİİİİİİİİİİİİİİ1",
	"a\tb", "x \v y", "\f lead", "trail \f", ". spaced .", "(( Word ))", "\"quoted\"", "'single'",
	"..!!??", "   ", "", "{}", "[]", "<>", "a\vb", "a\fb c", "x\u2003y z", "tab\there\nnew\rline",
	"MiXeD CaSe WoRdS 12345678901234567890",
	"12345678901234567890", "1234 5678 9012 3456", "ab12 3456 7890 1234 5",
	"alice.smith+tag@Mail.Example.co.uk, bob@x.io",
	"invalid\xffutf8 word\xfe",
	strings.Repeat("long", 64) + "x",
	strings.Repeat("word ", 59) + "end.",
	strings.Repeat("word ", 60) + "end",
	strings.Repeat("w ", 150),
	"https://" + strings.Repeat("a", 260) + ".com/path",
}

// trickyJSON are results as a tool hands them over: JSON with and
// without escapes, keys that carry content, numbers, and text that is
// not JSON at all.
var trickyJSON = []string{
	`{"Name":"Alice Smith","Amount":12.50,"Flag":true,"List":["x","Y Z",null,1e3],"Nested":{"IBAN":"DE89 3704 0044 0532 0130 00"}}`,
	`{"text":"line one\nline two \"quoted\" \u00e9t\u00e9 \u003cb\u003e","path":"C:\\dir\\file.txt"}`,
	`["www.Example.com/A","mail@Example.COM",42,-0.5,false]`,
	`"just a string with Bob@Example.org and https://Site.dev/x/"`,
	`not json at all: Pay US133000000121212121212 now`,
	`{"subject":"pay US133000000121212121212 first","recipient":"GB29NWBK60161331926819"}`,
	`"{\"subject\":\"embedded ES9121000418450200051332\",\"recipient\":\"FR1420041010050500013M02606\"}"`,
	`""`,
	``,
	`{"k":"Überweisung an José","w":"\u00a0x\u00a0"}`,
}

// trickyMemory builds a taint memory from the tricky inputs: the prompt,
// trusted, untrusted, mixed and private results.
func trickyMemory() *taintMemory {
	m := newTaintMemory()
	m.addText(strings.Join(trickyText[:6], " | "))
	m.addText("The user's own words: Alice, José, " + landlordText)
	mixed := parseTrust("trusted,untrusted_field=subject")
	private := parseTrust("trusted,private")
	for i, text := range trickyText {
		content, _ := json.Marshal(text)
		var rt *resultTrust
		switch i % 3 {
		case 0:
			rt = &trustedResult
		case 1:
			rt = nil
		case 2:
			rt = mixed
		}
		m.noteResult(&llm.ToolResult{CallID: fmt.Sprintf("t%d", i), Name: "text", Content: content}, rt)
		m.noteResult(&llm.ToolResult{CallID: fmt.Sprintf("r%d", i), Name: "raw", Content: []byte(text)}, rt)
	}
	for i, content := range trickyJSON {
		for j, rt := range []*resultTrust{&trustedResult, &untrustedResult, mixed, private, nil} {
			m.noteResult(&llm.ToolResult{CallID: fmt.Sprintf("j%d_%d", i, j), Name: "json", Content: []byte(content)}, rt)
		}
	}
	return m
}

const landlordText = "my landlord GB29 NWBK 6016 1331 9268 19"

// The taint memory and the facts worked out from it for a set of tricky
// inputs are pinned: how values are read, normalised and hashed may be
// made faster, but the memory (which is part of State's JSON) and every
// fact the policy sees must stay as they are.
func TestTaintMemoryPinned(t *testing.T) {
	m := trickyMemory()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var j taintJSON
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	got := fmt.Sprintf("%d sources, %d trusted, %d untrusted, sha256 %s", len(j.Sources), len(j.Trusted), len(j.Untrusted), hex.EncodeToString(sum[:8]))
	// 84 sources: the two untrusted results that are the JSON string ""
	// became sources when an untrusted result that carries nothing was
	// made to taint the run as an empty one does (82 before).
	const want = "84 sources, 133 trusted, 126 untrusted, sha256 d5ff1e1deef0782d"
	if got != want {
		t.Errorf("memory: %s\nwant        %s", got, want)
	}

	var args []string
	for _, text := range append(append([]string{}, trickyText...), "unseen value", "US133000000121212121212", "bob@example.org", "Alice", "ALICE SMITH", "12.5", "1000") {
		a, _ := json.Marshal(map[string]any{"v": text, "n": map[string]any{"w": strings.ToUpper(text)}})
		args = append(args, string(a))
	}
	var facts []policy.Taint
	for i, a := range args {
		var f policy.Taint
		m.facts(llm.ToolCall{ID: fmt.Sprint("c", i), Name: "echo", Arguments: json.RawMessage(a)}, &f)
		facts = append(facts, f)
	}
	fb, err := json.Marshal(facts)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range facts {
		n += len(f.Args)
	}
	fsum := sha256.Sum256(fb)
	const wantFacts = "50 args, sha256 f92b978967435d5f"
	if got := fmt.Sprintf("%d args, sha256 %s", n, hex.EncodeToString(fsum[:8])); got != wantFacts {
		t.Errorf("facts: %s, want %s; facts:\n%s", got, wantFacts, fb)
	}
}

// BenchmarkTaintNoteResult notes results into a fresh memory: the
// planned workload's trusted results ({"ok":true,"key":"k1"}), a
// trusted result of prose, and the tricky inputs under every trust.
func BenchmarkTaintNoteResult(b *testing.B) {
	planned := make([]llm.ToolResult, 15)
	for i := range planned {
		planned[i] = llm.ToolResult{CallID: fmt.Sprint("call_", i), Name: "read_a", Content: []byte(fmt.Sprintf(`{"ok":true,"key":"k%d"}`, i/3+1))}
	}
	prose := llm.ToolResult{CallID: "p", Name: "doc", Content: []byte(`{"title":"Quarterly report","body":"Revenue grew in the third quarter, driven by new customers in Europe and Asia; costs stayed flat and the team expects the same next quarter","pages":12}`)}
	b.Run("planned", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m := newTaintMemory()
			m.addText("do the planned work")
			for i := range planned {
				m.noteResult(&planned[i], &trustedResult)
			}
		}
	})
	b.Run("prose", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m := newTaintMemory()
			m.noteResult(&prose, &trustedResult)
		}
	})
	b.Run("tricky", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			trickyMemory()
		}
	})
}

// normalisedHash, which reads values in place, agrees with normalise and
// valueHash on every text and on each of its words, and addValues adds
// the values (and counts as many) that normalise finds, whether it reads
// a string or a result's bytes.
func FuzzNormalisedHash(f *testing.F) {
	for _, s := range trickyText {
		f.Add(s)
	}
	for _, s := range trickyJSON {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkNormalisedHash(t, s)
		for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r < utf8.RuneSelf && wordBreak[r] }) {
			checkNormalisedHash(t, w)
		}

		want := map[uint64]struct{}{}
		values := referenceValues(s)
		if len(values) > maxValuesPerResult {
			values = values[:maxValuesPerResult]
		}
		for _, v := range values {
			want[valueHash(v)] = struct{}{}
		}
		fromString := valueSink{m: newTaintMemory(), counted: true, src: -1}
		addValues(&fromString, s, func(i, j int) string { return s[i:j] })
		raw := []byte(s)
		fromBytes := valueSink{m: newTaintMemory(), counted: true, src: -1}
		addValues(&fromBytes, raw, func(i, j int) string { return string(raw[i:j]) })
		for _, got := range []valueSink{fromString, fromBytes} {
			if got.n != len(values) || !maps.Equal(got.m.trusted, want) {
				t.Fatalf("addValues(%q) counted %d values and kept %d, want %d and %d: %q", s, got.n, len(got.m.trusted), len(values), len(want), values)
			}
		}
	})
}

// referenceValues is the values of text, found by way of normalise: the
// whole text (normalised, when short), its addresses, and its words.
func referenceValues(text string) []string {
	var out []string
	if len(text) <= 300 {
		if w := normalise(text); w != "" && len(w) <= 256 {
			out = append(out, w)
		}
	}
	out = append(out, addresses(text)...)
	for _, word := range strings.FieldsFunc(text, func(r rune) bool { return r < utf8.RuneSelf && wordBreak[r] }) {
		if w := normalise(word); w != "" {
			out = append(out, w)
		}
	}
	return out
}

func checkNormalisedHash(t *testing.T, s string) {
	t.Helper()
	w := normalise(s)
	if h, n := normalisedHash(s); n != len(w) || n > 0 && h != valueHash(w) {
		t.Fatalf("normalisedHash(%q) = %x, %d; normalise gives %q, hash %x", s, h, n, w, valueHash(w))
	}
	hs, ns, oks := inPlaceHash(s)
	hb, nb, okb := inPlaceHash([]byte(s))
	if hs != hb || ns != nb || oks != okb {
		t.Fatalf("inPlaceHash(%q) = %x, %d, %v; from its bytes %x, %d, %v", s, hs, ns, oks, hb, nb, okb)
	}
}

// The hand-written trims are the standard library's.
func TestTrimPunctIsStringsTrim(t *testing.T) {
	for _, s := range append(trickyText, "", ".", "..a..", "\"'`()[]{}<>x<>", "x.,;:!?", "é.", ".é") {
		if got, want := trimPunct(s), strings.Trim(s, ".,;:!?\"'`()[]{}<>"); got != want {
			t.Errorf("trimPunct(%q) = %q, strings.Trim gives %q", s, got, want)
		}
	}
}

// An untrusted result that carries no value taints the run as an empty
// one does, whatever its JSON: the tool is outside content all the same.
func TestUntrustedResultWithoutValuesTaints(t *testing.T) {
	for _, content := range []string{``, `""`, `{}`, `[]`, `null`, `" "`} {
		m := newTaintMemory()
		m.noteResult(&llm.ToolResult{CallID: "c1", Name: "fetch", Content: []byte(content)}, &untrustedResult)
		if len(m.Sources) != 1 || m.Sources[0].CallID != "c1" {
			t.Errorf("untrusted result %q: sources %+v; want the run tainted by c1", content, m.Sources)
		}
		m = newTaintMemory()
		m.noteResult(&llm.ToolResult{CallID: "c2", Name: "read", Content: []byte(content)}, &trustedResult)
		if len(m.Sources) != 0 {
			t.Errorf("trusted result %q: sources %+v; want none", content, m.Sources)
		}
	}
}
