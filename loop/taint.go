package loop

import (
	"cmp"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

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
	// Sources of the first one that carried it.
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
	*m = taintMemory{Sources: j.Sources, Private: j.Private, trusted: map[uint64]struct{}{}, untrusted: map[uint64]int{}}
	for _, h := range j.Trusted {
		m.trusted[h] = struct{}{}
	}
	for _, hc := range j.Untrusted {
		m.untrusted[hc.Key] = hc.N
	}
	return nil
}

func newTaintMemory() *taintMemory {
	return &taintMemory{trusted: map[uint64]struct{}{}, untrusted: map[uint64]int{}}
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
				s.taint.addText(m.Text, nil)
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
	srcIdx := -1
	n := 0
	addAs := func(untrusted bool, text string) {
		if !untrusted {
			m.addText(text, &n)
			return
		}
		if srcIdx < 0 {
			srcIdx = len(m.Sources)
			m.Sources = append(m.Sources, src)
		}
		eachValue(text, func(v string) {
			if n >= maxValuesPerResult {
				return
			}
			n++
			h := valueHash(v)
			if _, seen := m.untrusted[h]; !seen {
				m.untrusted[h] = srcIdx
			}
		})
	}
	add := func(path, text string) { addAs(rt.fieldUntrusted(path), text) }
	content := string(r.Content)
	switch {
	case !rt.mixed() && strings.IndexByte(content, '\\') < 0:
		// Trust is the same for every field, and the JSON has no
		// escapes: its string literals are its strings as they are, so
		// it is read in place, without decoding.
		eachLiteral(content, func(text string) { add("", text) })
	case len(content) > 0:
		// doc is declared here, where it is decoded into: declared for
		// the whole switch, it went to the heap for every result.
		var doc any
		if json.Unmarshal(r.Content, &doc) != nil {
			// Not JSON: no fields a declaration could vouch for.
			addAs(rt.fieldUntrusted("") || rt.mixed(), content)
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
				addAs(true, text)
				return
			}
		}
		walkLeaves("", doc, true, add)
	default:
		addAs(rt.fieldUntrusted("") || rt.mixed(), content)
	}
	if srcIdx < 0 && rt.fieldUntrusted("") && len(r.Content) == 0 {
		// An empty untrusted result carries nothing, but the tool is
		// still outside content: the run is tainted all the same.
		m.Sources = append(m.Sources, src)
	}
}

// addText adds text's values as trusted; n, when not nil, counts them
// against maxValuesPerResult.
func (m *taintMemory) addText(text string, n *int) {
	eachValue(text, func(v string) {
		if n != nil {
			if *n >= maxValuesPerResult {
				return
			}
			*n++
		}
		m.trusted[valueHash(v)] = struct{}{}
	})
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

// eachLiteral calls f with each string literal of the JSON text s (the
// text between its quotes) and each run of text between them (numbers,
// true, false, the punctuation, which normalising drops); s has no
// escapes. Text that is not JSON is one run, or split at its quotes,
// which gives the same values.
func eachLiteral(s string, f func(text string)) {
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			if i > start {
				f(s[start:i])
			}
			start = i + 1
		}
	}
	if start < len(s) {
		f(s[start:])
	}
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
	if len(text) >= 15 && strings.ContainsAny(text, "0123456789") {
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
	return strings.ContainsAny(s[i:], "0123456789")
}

// eachValue calls f with every value of text the memory keeps: the whole
// text (normalised, when short), its addresses, and its words (account
// and file names, recipients, channels).
func eachValue(text string, f func(string)) {
	if len(text) <= 300 {
		if w := normalise(text); w != "" && len(w) <= 256 {
			f(w)
		}
	}
	eachAddress(text, f)
	start := -1
	for i := 0; i <= len(text); i++ {
		if i < len(text) && !isWordBreak(text[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			if w := normalise(text[start:i]); w != "" {
				f(w)
			}
			start = -1
		}
	}
}

// isWordBreak reports whether c separates words.
func isWordBreak(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ';', '!', '?', '(', ')', '[', ']', '{', '}', '<', '>', '"', '\'', '`':
		return true
	}
	return false
}

// normalise is how values are compared: trimmed of spaces and of the
// punctuation a sentence puts around a word, in lower case, an IBAN
// without its spaces, a URL without its scheme, "www." and final '/'.
func normalise(s string) string {
	s = strings.ToLower(strings.Trim(strings.TrimSpace(s), ".,;:!?\"'`()[]{}<>"))
	if s == "" {
		return ""
	}
	if len(s) >= 15 && strings.ContainsAny(s, "0123456789") && ibanPattern.FindString(s) == s {
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

func normaliseURL(u string) string {
	u = strings.ToLower(strings.TrimRight(u, ".,;:!?"))
	u = strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
	u = strings.TrimPrefix(u, "www.")
	return strings.TrimRight(u, "/")
}

// valueHash is the 64-bit FNV-1a hash of v.
func valueHash(v string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= 1099511628211
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
