package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolloop/toolloop/tool"
)

// Masked replaces a value that must not be recorded.
const Masked = "<masked>"

// RedactOptions configure a Redactor. Nil, or the zero value, summarizes
// tool arguments and results, masks the default key and value patterns,
// and knows no tool's sensitive fields.
type RedactOptions struct {
	// Tools supplies each tool's sensitive argument fields
	// (tool.Definition.Sensitive).
	Tools *tool.Registry
	// Sensitive adds sensitive fields by tool name, for tools that are not
	// in Tools (a log read back without its registry). A field is a key,
	// matched at any depth, or a dotted path from the top, e.g. "card.number".
	Sensitive map[string][]string
	// KeyPatterns mask any value whose key matches, in arguments and
	// results of every tool; they are matched against the lower-cased key.
	// They add to DefaultKeyPatterns unless NoDefaultPatterns is set.
	KeyPatterns []*regexp.Regexp
	// ValuePatterns mask the matching parts of strings wherever content is
	// recorded: full arguments and results, message text, error messages.
	// They add to the default value rules (card numbers that pass the Luhn
	// check, API keys and bearer tokens) unless NoDefaultPatterns is set.
	ValuePatterns []*regexp.Regexp
	// NoDefaultPatterns drops the default key and value patterns.
	NoDefaultPatterns bool
	// FullContent records arguments and results whole, with sensitive
	// values masked. By default they are summarized: keys, value types and
	// lengths, never values (except true, false and null).
	FullContent bool
	// SummarizeText replaces message text (system, user and assistant) by
	// its length. By default text is kept, with value patterns masked.
	SummarizeText bool
}

// DefaultKeyPatterns returns the key patterns a Redactor masks unless told
// otherwise: passwords, secrets, tokens, keys, credentials, card data,
// national and bank account numbers.
func DefaultKeyPatterns() []*regexp.Regexp {
	return []*regexp.Regexp{
		regexp.MustCompile(`pass(word|wd|phrase)?$|^pwd$`),
		regexp.MustCompile(`secret`),
		regexp.MustCompile(`token`),
		regexp.MustCompile(`api[_-]?key|access[_-]?key|private[_-]?key`),
		regexp.MustCompile(`^auth(orization)?$|credential|cookie`),
		regexp.MustCompile(`card|^pan$|cvv|cvc`),
		regexp.MustCompile(`^ssn$|social[_-]?security|iban|account[_-]?number|routing[_-]?number|^pin$`),
	}
}

// valueRule masks the parts of a string that match re and, if check is
// set, pass it.
type valueRule struct {
	re    *regexp.Regexp
	check func(string) bool
}

func defaultValueRules() []valueRule {
	return []valueRule{
		// 13 to 19 digits, optionally grouped by spaces or dashes, that
		// pass the Luhn check: payment card numbers, not order numbers.
		{re: regexp.MustCompile(`\b\d(?:[ -]?\d){12,18}\b`), check: luhn},
		{re: regexp.MustCompile(`\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}`)},
		{re: regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}`)},
		{re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)},
	}
}

// luhn reports whether the digits of s pass the Luhn check.
func luhn(s string) bool {
	sum, n := 0, 0
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		d := int(c - '0')
		if n%2 == 1 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		n++
	}
	return n >= 13 && sum%10 == 0
}

// Redactor decides what of a run's content may be recorded. It is
// immutable and safe for concurrent use.
type Redactor struct {
	sensitive map[string]map[string]bool // tool name -> fields
	keys      []*regexp.Regexp
	values    []valueRule
	full      bool
	text      bool
}

// NewRedactor builds a Redactor; opts may be nil.
func NewRedactor(opts *RedactOptions) *Redactor {
	var o RedactOptions
	if opts != nil {
		o = *opts
	}
	r := &Redactor{sensitive: map[string]map[string]bool{}, full: o.FullContent, text: o.SummarizeText}
	add := func(name string, fields []string) {
		if len(fields) == 0 {
			return
		}
		set := r.sensitive[name]
		if set == nil {
			set = map[string]bool{}
			r.sensitive[name] = set
		}
		for _, f := range fields {
			set[f] = true
		}
	}
	if o.Tools != nil {
		for _, t := range o.Tools.Tools() {
			add(t.Name(), t.Definition().Sensitive)
		}
	}
	for name, fields := range o.Sensitive {
		add(name, fields)
	}
	if !o.NoDefaultPatterns {
		r.keys = DefaultKeyPatterns()
		r.values = defaultValueRules()
	}
	r.keys = append(r.keys, o.KeyPatterns...)
	for _, re := range o.ValuePatterns {
		r.values = append(r.values, valueRule{re: re})
	}
	return r
}

// FullContent reports whether arguments and results are recorded whole.
func (r *Redactor) FullContent() bool { return r.full }

// Arguments returns what may be recorded of a call's arguments: a summary
// of their shape or, with full content, the arguments with sensitive
// values masked. The result is always valid JSON (arguments that are not
// become a string), or nil for empty arguments.
func (r *Redactor) Arguments(toolName string, args json.RawMessage) json.RawMessage {
	return r.rewrite(r.sensitive[toolName], args, r.full)
}

// Result returns what may be recorded of a tool result's content, as
// Arguments does for arguments. The tool's sensitive fields are masked in
// its results too.
func (r *Redactor) Result(toolName string, content json.RawMessage) json.RawMessage {
	return r.rewrite(r.sensitive[toolName], content, r.full)
}

// Summary returns the one-line summary of JSON content: keys, value types
// and lengths, sensitive values masked; never the values themselves.
// Summarizing a summary returns it unchanged.
func (r *Redactor) Summary(toolName string, raw json.RawMessage) string {
	return string(r.rewrite(r.sensitive[toolName], raw, false))
}

// summarize is rewrite for summaries of valid JSON, by a scanner that
// allocates nothing but its output: summaries are made for every call.
func (r *Redactor) summarize(fields map[string]bool, raw []byte) []byte {
	sc := scanner{r: r, fields: fields, in: raw, out: make([]byte, 0, len(raw)+16)}
	for k := range fields {
		if strings.IndexByte(k, '.') >= 0 {
			sc.paths = true
			break
		}
	}
	sc.value("", 0, false)
	return sc.out
}

// scanner summarizes JSON that json.Valid accepted.
type scanner struct {
	r      *Redactor
	fields map[string]bool
	paths  bool // some field is a dotted path
	in     []byte
	i      int
	out    []byte
}

func (s *scanner) ws() {
	for s.i < len(s.in) {
		switch s.in[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) marker(m string) {
	s.out = append(s.out, '"')
	s.out = append(s.out, m...)
	s.out = append(s.out, '"')
}

func (s *scanner) value(path string, depth int, masked bool) {
	s.ws()
	switch c := s.in[s.i]; {
	case c == '{':
		if masked || depth >= maxDepth {
			s.skip()
			if masked {
				s.marker(Masked)
			} else {
				s.marker("<object>")
			}
			return
		}
		s.object(path, depth)
	case c == '[':
		if masked {
			s.skip()
			s.marker(Masked)
			return
		}
		s.i++
		n := 0
		for {
			s.ws()
			if s.in[s.i] == ']' {
				s.i++
				break
			}
			if s.in[s.i] == ',' {
				s.i++
				continue
			}
			s.skip()
			n++
		}
		s.marker("<array:" + strconv.Itoa(n) + ">")
	case c == '"':
		start := s.i
		runes, escaped := s.str()
		switch {
		case masked:
			s.marker(Masked)
		case !escaped && marker.Match(s.in[start+1:s.i-1]):
			s.out = append(s.out, s.in[start:s.i]...)
		default:
			s.marker("<string:" + strconv.Itoa(runes) + ">")
		}
	case c == 't' || c == 'f' || c == 'n':
		n := 4
		if c == 'f' {
			n = 5
		}
		lit := s.in[s.i : s.i+n]
		s.i += n
		if masked && c != 'n' {
			s.marker(Masked)
		} else {
			s.out = append(s.out, lit...)
		}
	default: // a number
		for s.i < len(s.in) && strings.IndexByte("+-.0123456789eE", s.in[s.i]) >= 0 {
			s.i++
		}
		if masked {
			s.marker(Masked)
		} else {
			s.marker("<number>")
		}
	}
}

func (s *scanner) object(path string, depth int) {
	s.i++ // '{'
	s.out = append(s.out, '{')
	first := true
	for {
		s.ws()
		switch s.in[s.i] {
		case '}':
			s.i++
			s.out = append(s.out, '}')
			return
		case ',':
			s.i++
			continue
		}
		start := s.i
		_, escaped := s.str()
		tok := s.in[start:s.i]
		var key string
		if escaped {
			_ = json.Unmarshal(tok, &key) // valid JSON: cannot fail
		} else {
			key = string(tok[1 : len(tok)-1])
		}
		if !first {
			s.out = append(s.out, ',')
		}
		first = false
		if escaped {
			// Re-encode, as the decoder's walk does.
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(key) // a string always encodes
			tok = bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		}
		s.out = append(s.out, tok...)
		s.out = append(s.out, ':')
		s.ws()
		s.i++ // ':'
		child := ""
		if s.paths {
			child = key
			if path != "" {
				child = path + "." + key
			}
		}
		s.value(child, depth+1, s.r.sensitiveKey(s.fields, key, child))
	}
}

// str moves past the string at s.i and returns its length in runes and
// whether it holds escapes.
func (s *scanner) str() (runes int, escaped bool) {
	s.i++ // opening quote
	for s.i < len(s.in) {
		c := s.in[s.i]
		switch {
		case c == '"':
			s.i++
			return runes, escaped
		case c == '\\':
			escaped = true
			if s.in[s.i+1] == 'u' {
				// A surrogate pair is one rune.
				if s.i+11 < len(s.in) && s.in[s.i+6] == '\\' && s.in[s.i+7] == 'u' &&
					(s.in[s.i+2] == 'd' || s.in[s.i+2] == 'D') && strings.IndexByte("89abAB", s.in[s.i+3]) >= 0 {
					s.i += 12
				} else {
					s.i += 6
				}
			} else {
				s.i += 2
			}
			runes++
		case c < utf8.RuneSelf:
			s.i++
			runes++
		default:
			_, size := utf8.DecodeRune(s.in[s.i:])
			s.i += size
			runes++
		}
	}
	return runes, escaped
}

// skip moves past one value.
func (s *scanner) skip() {
	s.ws()
	switch s.in[s.i] {
	case '"':
		s.str()
	case '{', '[':
		depth := 0
		for s.i < len(s.in) {
			switch s.in[s.i] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return
			}
		}
	default:
		for s.i < len(s.in) && strings.IndexByte(",]} \t\n\r", s.in[s.i]) < 0 {
			s.i++
		}
	}
}

// Text returns what may be recorded of a message's text or an error
// message: the text with value patterns masked, or only its length when
// SummarizeText is set.
func (r *Redactor) Text(s string) string {
	if s == "" {
		return s
	}
	if r.text {
		return "<text:" + strconv.Itoa(utf8.RuneCountInString(s)) + ">"
	}
	return r.maskValues(s)
}

// Diagnostic returns an error message or a reason with value patterns
// masked; unlike Text it is never summarized.
func (r *Redactor) Diagnostic(s string) string { return r.maskValues(s) }

func (r *Redactor) maskValues(s string) string {
	for _, v := range r.values {
		if !v.re.MatchString(s) {
			continue
		}
		s = v.re.ReplaceAllStringFunc(s, func(m string) string {
			if v.check == nil || v.check(m) {
				return Masked
			}
			return m
		})
	}
	return s
}

func (r *Redactor) sensitiveKey(fields map[string]bool, key, path string) bool {
	if fields[key] || fields[path] {
		return true
	}
	lk := strings.ToLower(key)
	for _, re := range r.keys {
		if re.MatchString(lk) {
			return true
		}
	}
	return false
}

// maxDepth bounds how deep a summary follows nested objects.
const maxDepth = 8

var marker = regexp.MustCompile(`^<(string:\d+|number|masked|object|array:\d+|text:\d+|invalid JSON:\d+ bytes)>$`)

// rewrite summarizes raw JSON, or with full set masks it.
func (r *Redactor) rewrite(fields map[string]bool, raw json.RawMessage, full bool) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if !full && json.Valid(raw) {
		return r.summarize(fields, raw)
	}
	return r.walk(fields, raw, full)
}

// walk is rewrite by json.Decoder: for full content, and for summaries of
// what is not valid JSON.
func (r *Redactor) walk(fields map[string]bool, raw json.RawMessage, full bool) json.RawMessage {
	w := walker{r: r, fields: fields, full: full, dec: json.NewDecoder(bytes.NewReader(raw))}
	w.dec.UseNumber()
	w.enc = json.NewEncoder(&w.out)
	w.enc.SetEscapeHTML(false)
	err := w.value("", 0, false)
	if err == nil {
		if _, tail := w.dec.Token(); !errors.Is(tail, io.EOF) {
			err = errors.New("trailing data")
		}
	}
	if err != nil {
		// Not JSON: a summary says so; full content keeps the text as a
		// JSON string, value patterns masked.
		s := "<invalid JSON:" + strconv.Itoa(len(raw)) + " bytes>"
		if full {
			s = r.maskValues(string(raw))
		}
		w.out.Reset()
		w.str(s)
	}
	return w.out.Bytes()
}

type walker struct {
	r      *Redactor
	fields map[string]bool
	full   bool
	dec    *json.Decoder
	enc    *json.Encoder
	out    bytes.Buffer
}

// str writes s as a JSON string, leaving <, > and & as they are so that
// summaries stay readable.
func (w *walker) str(s string) {
	_ = w.enc.Encode(s)             // a string always encodes
	w.out.Truncate(w.out.Len() - 1) // Encode's newline
}

func (w *walker) value(path string, depth int, masked bool) error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t != '{' && t != '[' {
			return errors.New("unexpected delimiter")
		}
		if masked || (t == '{' && depth >= maxDepth) {
			if err := w.skipRest(); err != nil {
				return err
			}
			if masked {
				w.str(Masked)
			} else {
				w.str("<object>")
			}
			return nil
		}
		if t == '[' {
			return w.array(path, depth)
		}
		return w.object(path, depth)
	case string:
		switch {
		case masked:
			w.str(Masked)
		case w.full:
			w.str(w.r.maskValues(t))
		case marker.MatchString(t):
			w.str(t)
		default:
			w.str("<string:" + strconv.Itoa(utf8.RuneCountInString(t)) + ">")
		}
	case json.Number:
		switch {
		case masked:
			w.str(Masked)
		case !w.full:
			w.str("<number>")
		case w.r.maskValues(t.String()) != t.String():
			w.str(Masked)
		default:
			w.out.WriteString(t.String())
		}
	case bool:
		switch {
		case masked:
			w.str(Masked)
		case t:
			w.out.WriteString("true")
		default:
			w.out.WriteString("false")
		}
	case nil:
		w.out.WriteString("null")
	}
	return nil
}

func (w *walker) object(path string, depth int) error {
	w.out.WriteByte('{')
	for first := true; w.dec.More(); first = false {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return errors.New("object key is not a string")
		}
		if !first {
			w.out.WriteByte(',')
		}
		w.str(key)
		w.out.WriteByte(':')
		child := key
		if path != "" {
			child = path + "." + key
		}
		if err := w.value(child, depth+1, w.r.sensitiveKey(w.fields, key, child)); err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // '}'
	w.out.WriteByte('}')
	return err
}

func (w *walker) array(path string, depth int) error {
	if !w.full {
		n := 0
		for w.dec.More() {
			if err := w.skipValue(); err != nil {
				return err
			}
			n++
		}
		if _, err := w.dec.Token(); err != nil { // ']'
			return err
		}
		w.str("<array:" + strconv.Itoa(n) + ">")
		return nil
	}
	w.out.WriteByte('[')
	for first := true; w.dec.More(); first = false {
		if !first {
			w.out.WriteByte(',')
		}
		if err := w.value(path, depth+1, false); err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // ']'
	w.out.WriteByte(']')
	return err
}

// skipValue skips one whole value.
func (w *walker) skipValue() error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		return w.skipRest()
	}
	return nil
}

// skipRest skips to the end of the object or array just opened.
func (w *walker) skipRest() error {
	for depth := 1; depth > 0; {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			default:
				depth--
			}
		}
	}
	return nil
}
