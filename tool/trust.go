package tool

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Trust is what a tool declares about the data flowing through it, for
// the run's taint tracking (loop's taint memory) and the policy rules
// over it (policy.Taint): whether its results may carry instructions
// from someone other than the user, whether it reads the user's private
// data, whether it sends data out, and which of its arguments say where
// something goes. The zero Trust is a tool written in Go that vouches
// for its results, reads nothing private and sends nothing out.
type Trust struct {
	// Untrusted declares that the results carry content from outside
	// the application (a web page, an e-mail, a file, a message another
	// person wrote, an MCP server's answer): text a model may read as
	// instructions. tool/mcp sets it for every MCP tool unless
	// configured otherwise.
	Untrusted bool
	// UntrustedFields names the result fields of an otherwise trusted
	// tool that carry outside content, e.g. "transactions.subject" of a
	// bank's transaction list. TrustedFields names those of an untrusted
	// tool it vouches for, e.g. "id". A field is a dotted path of object
	// keys; arrays on the way are walked through. The longest matching
	// path wins.
	UntrustedFields []string
	TrustedFields   []string
	// ReadsPrivate declares that the results hold the user's private
	// data (balances, messages, files): with untrusted content in the
	// same context, it could be sent out.
	ReadsPrivate bool
	// Outward declares that a call sends data outside the application
	// (a payment, a message, an e-mail, a web request).
	Outward bool
	// Destinations names the arguments (dotted paths) that say where
	// something goes: a recipient, an account, a URL, an e-mail address,
	// a path. Arguments whose schema has a format of email, idn-email,
	// uri, iri, uri-reference or hostname are destinations without being
	// named here.
	Destinations []string
	// Credentials declares that the tool writes credentials or the
	// user's identity (a password, a login e-mail, an API key): its
	// arguments must all come from the user or trusted data.
	Credentials bool
	// DestinationsUnknown says that nobody has said which arguments are
	// destinations: tool/mcp sets it for a tool whose configuration
	// declares no Destinations (not even none). When the schema's formats
	// mark none either, the default taint profile treats every argument
	// of such a write as a possible destination (policy.TaintRules).
	DestinationsUnknown bool
}

// clone returns a copy of tr that shares no slices with it.
func (tr Trust) clone() Trust {
	tr.UntrustedFields = slices.Clone(tr.UntrustedFields)
	tr.TrustedFields = slices.Clone(tr.TrustedFields)
	tr.Destinations = slices.Clone(tr.Destinations)
	return tr
}

// FieldUntrusted reports whether the result field at path (dotted object
// keys, arrays walked through; "" for the whole result) is untrusted: the
// longest of UntrustedFields and TrustedFields that is path or a prefix of
// it decides, and Untrusted when none is.
func (tr Trust) FieldUntrusted(path string) bool {
	best, untrusted := -1, tr.Untrusted
	match := func(fields []string, verdict bool) {
		for _, f := range fields {
			if (path == f || strings.HasPrefix(path, f+".")) && len(f) > best {
				best, untrusted = len(f), verdict
			}
		}
	}
	match(tr.UntrustedFields, true)
	match(tr.TrustedFields, false)
	return untrusted
}

// Mixed reports whether the trust of a result depends on its fields.
func (tr Trust) Mixed() bool { return len(tr.UntrustedFields)+len(tr.TrustedFields) > 0 }

// destinationFormats are the JSON Schema formats that name a place data
// goes to.
var destinationFormats = map[string]bool{
	"email": true, "idn-email": true, "uri": true, "iri": true, "uri-reference": true, "iri-reference": true, "hostname": true, "idn-hostname": true,
}

// destinations returns the argument paths of schema (a decoded JSON
// Schema object) whose format names a destination, followed by declared;
// a declared path whose first key the schema's properties do not have is
// an error, when the schema lists properties.
func destinations(schema map[string]any, declared []string) ([]string, error) {
	var out []string
	var walk func(prefix string, s map[string]any)
	walk = func(prefix string, s map[string]any) {
		if f, _ := s["format"].(string); destinationFormats[f] && prefix != "" {
			out = append(out, prefix)
		}
		if items, ok := s["items"].(map[string]any); ok {
			walk(prefix, items)
		}
		props, _ := s["properties"].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if sub, ok := props[k].(map[string]any); ok {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, sub)
			}
		}
	}
	walk("", schema)
	props, hasProps := schema["properties"].(map[string]any)
	for _, d := range declared {
		first, _, _ := strings.Cut(d, ".")
		if _, ok := props[first]; hasProps && !ok {
			return nil, fmt.Errorf("Trust.Destinations names %q, which is not an argument of the input schema", d)
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// Trust returns what the tool declares about its data (a copy); its
// Destinations include the arguments its schema's formats mark.
func (t *Tool) Trust() Trust {
	tr := t.def.Trust.clone()
	tr.Destinations = slices.Clone(t.destinations)
	return tr
}

// Destinations returns the arguments (dotted paths) that say where the
// call sends something: those Trust.Destinations names and those whose
// schema format is an address (see Trust.Destinations).
func (t *Tool) Destinations() []string { return slices.Clone(t.destinations) }
