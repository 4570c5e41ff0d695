package loop

import (
	"bytes"
	"cmp"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/tool"
)

// Taint tracking (docs/DESIGN.md §17). The decider remembers, purely from
// the run's events, which values the user's prompt and trusted results
// carried and which arrived only through untrusted results, and for each
// call of a batch works out which of its argument values are not known to
// be trusted (policy.Taint). The policy decides on those facts; the
// decider never blocks a call itself. The memory is part of State's JSON
// (memory.go), so resuming, a Temporal continue-as-new and a compaction
// of the conversation all keep it.

// CheckCalls records, in each check of a known tool, the trust of its
// result (tool.Trust) as a short comparable string, so that the decider,
// which has no tool registry, can taint the run when the result arrives:
// "trusted" or "untrusted", then ",private" for a tool that reads private
// data, ",untrusted_field=PATH" and ",trusted_field=PATH" for each field
// the tool declares. A check of a known tool without one (a log written
// before taint tracking) is taken as untrusted: when unsure, fail closed.

// resultTrust is a check's trust, decoded.
type resultTrust struct {
	untrusted                      bool
	untrustedFields, trustedFields []string
	private                        bool
}

// trustString is what a check records of t's declarations.
func trustString(t *tool.Tool) string {
	tr := t.Trust()
	var b strings.Builder
	if tr.Untrusted {
		b.WriteString("untrusted")
	} else {
		b.WriteString("trusted")
	}
	if tr.ReadsPrivate {
		b.WriteString(",private")
	}
	for _, f := range tr.UntrustedFields {
		b.WriteString(",untrusted_field=" + f)
	}
	for _, f := range tr.TrustedFields {
		b.WriteString(",trusted_field=" + f)
	}
	return b.String()
}

// trustedResult and untrustedResult are the common trusts, shared:
// never changed.
var trustedResult, untrustedResult = resultTrust{}, resultTrust{untrusted: true}

// parseTrust decodes a check's trust (shared: not to be changed); nil, which is untrusted, for one
// that is empty or that it cannot read.
func parseTrust(s string) *resultTrust {
	switch s {
	case "trusted":
		return &trustedResult
	case "untrusted":
		return &untrustedResult
	}
	parts := strings.Split(s, ",")
	r := &resultTrust{}
	switch parts[0] {
	case "trusted":
	case "untrusted":
		r.untrusted = true
	default:
		return nil
	}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		switch k {
		case "private":
			r.private = true
		case "untrusted_field":
			r.untrustedFields = append(r.untrustedFields, v)
		case "trusted_field":
			r.trustedFields = append(r.trustedFields, v)
		default:
			return nil
		}
	}
	return r
}

// UntrustedResult reports whether the check records a tool whose result
// is untrusted, wholly or in part; false for a check that records no
// trust at all.
func (c CallCheck) UntrustedResult() bool {
	r := parseTrust(c.Trust)
	return r != nil && (r.untrusted || r.mixed())
}

func (r *resultTrust) fieldUntrusted(path string) bool {
	if r == nil {
		return true
	}
	return tool.Trust{Untrusted: r.untrusted, UntrustedFields: r.untrustedFields, TrustedFields: r.trustedFields}.FieldUntrusted(path)
}

// mixed reports whether the result's trust depends on its fields.
func (r *resultTrust) mixed() bool {
	return r != nil && len(r.untrustedFields)+len(r.trustedFields) > 0
}

// taintMemory is the decider's memory of where values came from. Values
// are kept as 64-bit hashes of their normalised form (valueHash): the
// explanation quotes the argument itself, and the memory stays a few
// bytes per value.
type taintMemory struct {
	// Sources are the untrusted results that entered the context, in
	// order; the first one tainted the run.
	Sources []policy.Source `json:"sources,omitempty"`
	// Private is the first result of a tool that reads private data.
	Private *policy.Source `json:"private,omitempty"`
	// trusted holds the values of the prompt and of trusted results;
	// untrusted maps each value of an untrusted result to the index in
	// Sources of the first one that carried it, and is nil until one
	// does (a run that is never tainted never needs it).
	trusted   map[uint64]struct{}
	untrusted map[uint64]int
}

// taintJSON is taintMemory's encoding, its sets as sorted lists.
type taintJSON struct {
	Sources   []policy.Source `json:"sources,omitempty"`
	Private   *policy.Source  `json:"private,omitempty"`
	Trusted   []uint64        `json:"trusted,omitempty"`
	Untrusted []hashCount     `json:"untrusted,omitempty"`
}

func (m *taintMemory) MarshalJSON() ([]byte, error) {
	j := taintJSON{Sources: m.Sources, Private: m.Private, Trusted: slices.Sorted(maps.Keys(m.trusted))}
	for h, i := range m.untrusted {
		j.Untrusted = append(j.Untrusted, hashCount{h, i})
	}
	slices.SortFunc(j.Untrusted, func(a, b hashCount) int { return cmp.Compare(a.Key, b.Key) })
	return json.Marshal(&j)
}

func (m *taintMemory) UnmarshalJSON(b []byte) error {
	var j taintJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*m = taintMemory{Sources: j.Sources, Private: j.Private, trusted: make(map[uint64]struct{}, len(j.Trusted))}
	if len(j.Untrusted) > 0 {
		m.untrusted = make(map[uint64]int, len(j.Untrusted))
	}
	for _, h := range j.Trusted {
		m.trusted[h] = struct{}{}
	}
	for _, hc := range j.Untrusted {
		m.untrusted[hc.Key] = hc.N
	}
	return nil
}

func newTaintMemory() *taintMemory {
	return &taintMemory{trusted: map[uint64]struct{}{}}
}

// maxValuesPerResult bounds the values one result adds to the memory. A
// value past it is remembered nowhere, so an argument carrying it counts
// as Unknown, which a tainted run treats as untrusted.
const maxValuesPerResult = 512

// trackTaint runs the decider step next for ev, keeping the taint memory
// up to date around it: a stage's results are noted before the step (the
// batch may close in it), the prompt after Started (which resets the
// state), and a validated batch's facts after the step.
func trackTaint(s *State, ev *Event, next func(*State, *Event) Effect) Effect {
	if ev.Kind == StageFinished && s.Batch != nil && !s.Done {
		noteStage(s, ev)
	}
	eff := next(s, ev)
	switch {
	case ev.Kind == Started && ev.Start != nil:
		s.taint = newTaintMemory()
		for _, m := range ev.Start.Messages {
			switch {
			case m.Role == llm.RoleUser || m.Role == llm.RoleSystem:
				s.taint.addText(m.Text)
			case m.Result != nil:
				// A result from before this run: whose tool and how far
				// to trust it is unknown, so it is untrusted.
				s.taint.noteResult(m.Result, nil)
			}
		}
	case ev.Kind == CallsValidated && s.Batch != nil && eff.Kind == AuthorizeCalls:
		b := s.Batch
		b.Taint = make([]*policy.Taint, len(b.Calls))
		if s.taint == nil {
			// A state from before taint tracking: no facts, and the
			// taint rules fail closed.
			break
		}
		// The batch's facts in one allocation, not one per call.
		facts := make([]policy.Taint, len(eff.Calls))
		for k, i := range eff.Calls {
			b.Taint[i] = &facts[k]
			s.taint.facts(b.Calls[i], &facts[k])
		}
	}
	return eff
}

// noteStage adds the results of a finished stage to the memory.
func noteStage(s *State, ev *Event) {
	b := s.Batch
	if s.taint == nil {
		s.taint = newTaintMemory()
	}
	if ev.Stage >= len(b.Plan.Stages) {
		return
	}
	idx := b.Plan.Stages[ev.Stage]
	for j := range ev.Outcomes {
		if j >= len(idx) || idx[j] >= len(b.Calls) {
			break
		}
		i := idx[j]
		var rt *resultTrust
		if i < len(b.Checks) {
			rt = parseTrust(b.Checks[i].Trust)
		}
		if rt != nil && !rt.untrusted && !rt.mixed() && b.Taint != nil && i < len(b.Taint) && b.Taint[i] != nil && len(b.Taint[i].Args) > 0 {
			// A trusted tool called with untrusted values may hand them
			// back (a file written, then read): its result is no better
			// than its arguments.
			c := *rt
			c.untrusted = true
			rt = &c
		}
		s.taint.noteResult(&ev.Outcomes[j].Result, rt)
	}
}

// noteResult adds a result's values, as trusted or untrusted field by
// field as rt says (nil: all untrusted). Where trust goes by field, a
// result that is neither a JSON object or array nor text holding one is
// untrusted whole: it has no fields to tell apart.
func (m *taintMemory) noteResult(r *llm.ToolResult, rt *resultTrust) {
	src := policy.Source{CallID: r.CallID, Tool: r.Name}
	if rt != nil && rt.private && m.Private == nil {
		// A copy of its own, so that src stays on the stack for the
		// results that are not private.
		private := src
		m.Private = &private
	}
	rv := resultValues{values: valueSink{m: m, counted: true}, src: src, srcIdx: -1, rt: rt, raw: r.Content}
	switch content := r.Content; {
	case !rt.mixed() && bytes.IndexByte(content, '\\') < 0:
		// Trust is the same for every field, and the JSON has no
		// escapes: its string literals are its strings as they are, so
		// it is read in place, without decoding: each literal (the text
		// between its quotes) and each run of text between them
		// (numbers, true, false, the punctuation, which normalising
		// drops). Text that is not JSON is one run, or split at its
		// quotes, which gives the same values. Read from its bytes, the
		// result is copied to a string only if a value needs one.
		untrusted := rt.fieldUntrusted("")
		start := 0
		for i := 0; i < len(content); i++ {
			if content[i] == '"' {
				if i > start {
					rv.addRawAs(untrusted, start, i)
				}
				start = i + 1
			}
		}
		if start < len(content) {
			rv.addRawAs(untrusted, start, len(content))
		}
	case len(content) > 0:
		// doc is declared here, where it is decoded into: declared for
		// the whole switch, it went to the heap for every result.
		var doc any
		if json.Unmarshal(r.Content, &doc) != nil {
			// Not JSON: no fields a declaration could vouch for.
			rv.addRawAs(rt.fieldUntrusted("") || rt.mixed(), 0, len(content))
			return
		}
		if text, ok := doc.(string); ok && rt.mixed() {
			// A result that is text holding JSON (an MCP server answers
			// with text) has its fields in that JSON. Text that is not
			// JSON has no fields a declaration could vouch for: fail
			// closed.
			var inner any
			_ = json.Unmarshal([]byte(text), &inner)
			switch inner.(type) {
			case map[string]any, []any:
				doc = inner
			default:
				rv.addAs(true, text)
				return
			}
		}
		walkLeaves("", doc, true, rv.add)
	default:
		rv.addRawAs(rt.fieldUntrusted("") || rt.mixed(), 0, len(content))
	}
	if rv.srcIdx < 0 && rt.fieldUntrusted("") && (len(r.Content) == 0 || !rt.mixed()) {
		// An untrusted result that carries nothing (empty, or the JSON
		// string "") still came from outside: the run is tainted all the
		// same, as by any other result of the tool.
		m.Sources = append(m.Sources, src)
	}
}

// resultValues adds one result's texts to the memory, each as trusted or
// untrusted; the result becomes a source the first time it adds a text
// as untrusted, whether or not the text has values.
type resultValues struct {
	values valueSink
	src    policy.Source
	srcIdx int // src's index in the memory's Sources; -1 before it is one
	rt     *resultTrust
	// raw is the result's content, read in place when it can be, and
	// str the same as a string once a value needed one.
	raw []byte
	str string
}

// addAs adds text's values, as untrusted or trusted.
func (r *resultValues) addAs(untrusted bool, text string) {
	r.as(untrusted)
	addValues(&r.values, text, func(i, j int) string { return text[i:j] })
}

// addRawAs adds the values of the content's bytes from i to j, read in
// place, as untrusted or trusted.
func (r *resultValues) addRawAs(untrusted bool, i, j int) {
	r.as(untrusted)
	addValues(&r.values, r.raw[i:j], func(k, l int) string { return r.rawString()[i+k : i+l] })
}

// as has the values added next go in as untrusted or trusted.
func (r *resultValues) as(untrusted bool) {
	r.values.src = -1
	if untrusted {
		if r.srcIdx < 0 {
			r.srcIdx = len(r.values.m.Sources)
			r.values.m.Sources = append(r.values.m.Sources, r.src)
		}
		r.values.src = r.srcIdx
	}
}

// rawString returns the result's content as a string, made the first
// time a value read in place needs one.
func (r *resultValues) rawString() string {
	if len(r.str) != len(r.raw) {
		r.str = string(r.raw)
	}
	return r.str
}

// add adds the text found at path, trusted as rt says for that path.
func (r *resultValues) add(path, text string) { r.addAs(r.rt.fieldUntrusted(path), text) }

// addText adds text's values as trusted, with no limit on their number.
func (m *taintMemory) addText(text string) {
	v := valueSink{m: m, src: -1}
	addValues(&v, text, func(i, j int) string { return text[i:j] })
}

// valueSink adds values to the memory: to the trusted set, or, when src
// is not negative, to the untrusted map under the source at that index
// (unless an earlier source carried them). When counted, the values
// count against maxValuesPerResult and those past it are dropped.
type valueSink struct {
	m       *taintMemory
	counted bool
	n       int
	src     int
}

// add adds the value whose hash is h.
func (v *valueSink) add(h uint64) {
	if v.counted {
		if v.n >= maxValuesPerResult {
			return
		}
		v.n++
	}
	if v.src < 0 {
		v.m.trusted[h] = struct{}{}
	} else if _, seen := v.m.untrusted[h]; !seen {
		if v.m.untrusted == nil {
			v.m.untrusted = map[uint64]int{}
		}
		v.m.untrusted[h] = v.src
	}
}

// again counts a value that add has just added (or dropped) again: it
// stays in the memory as it is, or stays dropped.
func (v *valueSink) again() {
	if v.counted && v.n < maxValuesPerResult {
		v.n++
	}
}

// addValues adds every value of text the memory keeps, in this order:
// the whole text (normalised, when short), its addresses, and its words
// (account and file names, recipients, channels). Text that is a
// result's bytes is read in place; str(i, j) is text[i:j] as a string,
// for the values that need one.
func addValues[T string | []byte](v *valueSink, text T, str func(i, j int) string) {
	whole, wholeLen := uint64(0), -1
	if len(text) <= 300 {
		var ok bool
		if whole, wholeLen, ok = inPlaceHash(text); !ok {
			whole, wholeLen = slowNormalisedHash(str(0, len(text)))
		}
		if wholeLen > 0 && wholeLen <= 256 {
			v.add(whole)
		}
	}
	if mayHoldAddress(text) {
		eachAddress(str(0, len(text)), func(a string) { v.add(valueHash(a)) })
	}
	start := -1
	for i := 0; i <= len(text); i++ {
		if i < len(text) && !wordBreak[text[i]] {
			if start < 0 {
				start = i
			}
			continue
		}
		if start < 0 {
			continue
		}
		switch {
		case start == 0 && i == len(text) && wholeLen >= 0:
			// The text is one word (a JSON key, a name): the value
			// just added. It counts again, as every value does, but
			// adding it to the memory again would change nothing.
			if wholeLen > 256 {
				v.add(whole)
			} else if wholeLen > 0 {
				v.again()
			}
		default:
			h, n, ok := inPlaceHash(text[start:i])
			if !ok {
				h, n = slowNormalisedHash(str(start, i))
			}
			if n > 0 {
				v.add(h)
			}
		}
		start = -1
	}
}

// mayHoldAddress reports whether eachAddress could find anything in
// text: whether it has an '@' or a '.', or is long enough for an IBAN
// and has a digit.
func mayHoldAddress[T string | []byte](text T) bool {
	digit := false
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '@' || c == '.':
			return true
		case '0' <= c && c <= '9':
			digit = true
		}
	}
	return digit && len(text) >= 15
}

// facts works out the policy's taint facts for call c into t, which is
// zero.
func (m *taintMemory) facts(c llm.ToolCall, t *policy.Taint) {
	t.Private = m.Private
	if len(m.Sources) == 0 {
		return
	}
	t.Tainted, t.Source = true, &m.Sources[0]
	var doc any
	if json.Unmarshal(c.Arguments, &doc) != nil {
		// Arguments that are not JSON never pass validation; nothing to
		// say about them.
		return
	}
	origin := func(v string) (policy.Origin, *policy.Source, bool) {
		h := valueHash(v)
		if _, ok := m.trusted[h]; ok {
			return "", nil, true
		}
		if i, ok := m.untrusted[h]; ok && i < len(m.Sources) {
			return policy.Untrusted, &m.Sources[i], false
		}
		return policy.Unknown, nil, false
	}
	walkLeaves("", doc, false, func(path, text string) {
		whole := normalise(text)
		if whole == "" {
			return
		}
		if o, from, ok := origin(whole); !ok {
			t.Args = append(t.Args, policy.Arg{Path: path, Value: clip(whole), Origin: o, From: from})
		}
		for _, v := range addresses(text) {
			if v == whole {
				continue
			}
			if o, from, ok := origin(v); !ok {
				t.Args = append(t.Args, policy.Arg{Path: path, Value: clip(v), Embedded: true, Origin: o, From: from})
			}
		}
	})
}

// walkLeaves calls f with the dotted path and text of every string,
// number and boolean in doc, and, with keys, of every object key (at its
// object's path: a result's keys can carry content, an argument's are
// its schema's names); arrays are walked through without adding to the
// path.
func walkLeaves(path string, doc any, keys bool, f func(path, text string)) {
	switch v := doc.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if keys {
				f(path, k)
			}
			p := k
			if path != "" {
				p = path + "." + k
			}
			walkLeaves(p, v[k], keys, f)
		}
	case []any:
		for _, e := range v {
			walkLeaves(path, e, keys, f)
		}
	case string:
		f(path, v)
	case float64:
		f(path, strconv.FormatFloat(v, 'f', -1, 64))
	case bool:
		f(path, strconv.FormatBool(v))
	}
}

var (
	ibanPattern  = regexp.MustCompile(`\b[A-Za-z]{2}[0-9]{2}(?: ?[A-Za-z0-9]){10,30}\b`)
	emailPattern = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)
	urlPattern   = regexp.MustCompile(`(?i)\b(?:https?://|www\.)[^\s<>"'()\[\]{}]+|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|org|net|io|dev|ai|co|uk|de|ch|fr|info|biz|app)(?:/[^\s<>"'()\[\]{}]*)?\b`)
)

// addresses returns the links and addresses in text, normalised: IBANs,
// e-mail addresses and URLs.
func addresses(text string) []string {
	var out []string
	eachAddress(text, func(v string) { out = append(out, v) })
	return out
}

// eachAddress calls f with each link and address in text (see
// addresses). Each pattern runs only on text that could hold a match.
func eachAddress(text string, f func(string)) {
	if len(text) >= 15 && hasDigitAfter(text, 0) {
		for _, m := range ibanPattern.FindAllString(text, -1) {
			if iban := strings.ReplaceAll(m, " ", ""); len(iban) >= 15 && hasDigitAfter(iban, 4) {
				f(strings.ToLower(iban))
			}
		}
	}
	if strings.IndexByte(text, '@') >= 0 {
		for _, m := range emailPattern.FindAllString(text, -1) {
			f(strings.ToLower(m))
		}
	}
	if strings.IndexByte(text, '.') >= 0 {
		for _, m := range urlPattern.FindAllString(text, -1) {
			if !strings.Contains(m, "@") {
				f(normaliseURL(m))
			}
		}
	}
}

// hasDigitAfter reports whether s has a digit at or after index i: an
// IBAN's account part has digits, a long word does not.
func hasDigitAfter(s string, i int) bool {
	for ; i < len(s); i++ {
		if '0' <= s[i] && s[i] <= '9' {
			return true
		}
	}
	return false
}

// wordBreak holds the bytes that separate words.
var wordBreak = [256]bool{' ': true, '\t': true, '\n': true, '\r': true, ',': true, ';': true, '!': true, '?': true,
	'(': true, ')': true, '[': true, ']': true, '{': true, '}': true, '<': true, '>': true, '"': true, '\'': true, '`': true}

// normalise is how values are compared: trimmed of spaces and of the
// punctuation a sentence puts around a word, in lower case, an IBAN
// without its spaces, a URL without its scheme, "www." and final '/'.
func normalise(s string) string {
	s = strings.ToLower(trimPunct(strings.TrimSpace(s)))
	if s == "" {
		return ""
	}
	if len(s) >= 15 && hasDigitAfter(s, 0) && ibanPattern.FindString(s) == s {
		if iban := strings.ReplaceAll(s, " ", ""); len(iban) >= 15 && hasDigitAfter(iban, 4) {
			return iban
		}
	}
	if !strings.ContainsAny(s, " @") && (strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "www.")) {
		return normaliseURL(s)
	}
	if strings.ContainsAny(s, " \t\n\r") {
		return strings.Join(strings.Fields(s), " ")
	}
	return s
}

// punct holds the punctuation normalise trims: ".,;:!?\"'`()[]{}<>".
var punct = [256]bool{'.': true, ',': true, ';': true, ':': true, '!': true, '?': true, '"': true, '\'': true, '`': true,
	'(': true, ')': true, '[': true, ']': true, '{': true, '}': true, '<': true, '>': true}

// trimPunct trims the punctuation in punct from both ends of s.
func trimPunct(s string) string {
	i, j := 0, len(s)
	for i < j && punct[s[i]] {
		i++
	}
	for j > i && punct[s[j-1]] {
		j--
	}
	return s[i:j]
}

// asciiSpace holds the ASCII bytes that strings.TrimSpace and
// strings.Fields take as space.
var asciiSpace = [256]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// normalisedHash returns valueHash(normalise(s)) and the length of
// normalise(s).
func normalisedHash(s string) (uint64, int) {
	if h, n, ok := inPlaceHash(s); ok {
		return h, n
	}
	return slowNormalisedHash(s)
}

// inPlaceHash is normalisedHash for the values that are the common case,
// ASCII text that is not an IBAN or a URL with a scheme or "www.": it
// works in place, without normalise's copies, hashing the lower-case
// bytes as it reads them, and the words of text with spaces as
// strings.Fields and a join would leave them. For any other value it
// returns false, and the value is for normalise. Every value of a result
// goes through it, read in place from the result's bytes.
func inPlaceHash[T string | []byte](s T) (h uint64, n int, ok bool) {
	// strings.TrimSpace, then trimPunct.
	i, j := 0, len(s)
	for i < j && asciiSpace[s[i]] {
		i++
	}
	for j > i && asciiSpace[s[j-1]] {
		j--
	}
	if i < j && (s[i] >= utf8.RuneSelf || s[j-1] >= utf8.RuneSelf) {
		// A Unicode space may come first or last.
		return 0, 0, false
	}
	for i < j && punct[s[i]] {
		i++
	}
	for j > i && punct[s[j-1]] {
		j--
	}
	t := s[i:j]
	if len(t) == 0 {
		return valueHash(""), 0, true
	}
	var digit, spaced bool
	ibanOnly := true // only letters, digits and ' ', as in an IBAN
	for k := 0; k < len(t); k++ {
		switch c := t[k]; {
		case c >= utf8.RuneSelf:
			// Unicode has its own lower case.
			return 0, 0, false
		case '0' <= c && c <= '9':
			digit = true
		case c == ' ':
			spaced = true
		case c == '\t' || c == '\n' || c == '\r':
			spaced, ibanOnly = true, false
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		default:
			ibanOnly = false
		}
	}
	if len(t) >= 15 && digit && ibanOnly || hasPrefixFold(t, "http://") || hasPrefixFold(t, "https://") || hasPrefixFold(t, "www.") {
		// Maybe an IBAN or a URL.
		return 0, 0, false
	}
	h = fnvOffset
	if !spaced {
		for k := 0; k < len(t); k++ {
			h = (h ^ uint64(lowerASCII(t[k]))) * fnvPrime
		}
		return h, len(t), true
	}
	// The words, each after one ' ' but the first.
	for k := 0; k < len(t); {
		for k < len(t) && asciiSpace[t[k]] {
			k++
		}
		if k == len(t) {
			break
		}
		if n > 0 {
			h = (h ^ ' ') * fnvPrime
			n++
		}
		for ; k < len(t) && !asciiSpace[t[k]]; k++ {
			h = (h ^ uint64(lowerASCII(t[k]))) * fnvPrime
			n++
		}
	}
	return h, n, true
}

// slowNormalisedHash is normalisedHash by way of normalise.
func slowNormalisedHash(s string) (uint64, int) {
	w := normalise(s)
	return valueHash(w), len(w)
}

// lowerASCII is c in lower case.
func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// hasPrefixFold reports whether s begins with prefix, which is in lower
// case, in any case.
func hasPrefixFold[T string | []byte](s T, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for k := 0; k < len(prefix); k++ {
		if lowerASCII(s[k]) != prefix[k] {
			return false
		}
	}
	return true
}

func normaliseURL(u string) string {
	u = strings.ToLower(strings.TrimRight(u, ".,;:!?"))
	u = strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
	u = strings.TrimPrefix(u, "www.")
	return strings.TrimRight(u, "/")
}

// The 64-bit FNV-1a hash's offset basis and prime.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// valueHash is the 64-bit FNV-1a hash of v.
func valueHash(v string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= fnvPrime
	}
	return h
}

// clip shortens a value quoted in a reason.
func clip(v string) string {
	if len(v) <= 80 {
		return v
	}
	return v[:77] + "..."
}
