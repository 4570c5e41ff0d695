package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/toolloop/toolloop/tool"
)

// Taint is what the decider knows, when a call is to be decided, about
// the data that led to it (loop's taint memory, docs/DESIGN.md §17).
type Taint struct {
	// Tainted is set once a result the run marks untrusted (tool.Trust)
	// has entered the model's context; Source is the first such result.
	Tainted bool    `json:"tainted"`
	Source  *Source `json:"source,omitempty"`
	// Private is the first result of a tool that reads private data
	// (tool.Trust.ReadsPrivate) the run has seen; nil when none.
	Private *Source `json:"private,omitempty"`
	// Args lists the call's argument values that are not known to come
	// from the user or a trusted result, when the run is tainted (a clean
	// run has no untrusted content for a value to come from).
	Args []Arg `json:"args,omitempty"`
}

// Source names a tool result: its call and tool.
type Source struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
}

func (s *Source) String() string {
	if s == nil {
		return "an earlier result"
	}
	return fmt.Sprintf("the result of call %s (%s)", s.CallID, s.Tool)
}

// Origin says where an argument value came from.
type Origin string

// Origins of an argument value that is not trusted. Untrusted: it appears
// in untrusted results and in neither the prompt nor a trusted result.
// Unknown: it appears nowhere the run has seen (the model composed it),
// which in a tainted run cannot be told apart from untrusted.
const (
	Untrusted Origin = "untrusted"
	Unknown   Origin = "unknown"
)

// Arg is one argument value whose origin is not trusted.
type Arg struct {
	// Path is the argument's dotted path ("recipient", "to.email").
	Path string `json:"path"`
	// Value is the value as the run compares it (normalised: lower
	// case, an IBAN without spaces, a URL without its scheme), clipped.
	Value string `json:"value"`
	// Embedded marks a link or an address (URL, e-mail, IBAN) found
	// inside a longer argument, such as a message's body, rather than
	// the whole argument.
	Embedded bool   `json:"embedded,omitempty"`
	Origin   Origin `json:"origin"`
	// From is the result the value came from, for Untrusted.
	From *Source `json:"from,omitempty"`
}

// explain says where a's value came from, for a decision's reason.
func (a Arg) explain(t *Taint) string {
	what := fmt.Sprintf("argument %s = %q", a.Path, a.Value)
	if a.Embedded {
		what = fmt.Sprintf("%q in argument %s", a.Value, a.Path)
	}
	if a.Origin == Untrusted {
		return fmt.Sprintf("%s appears only in untrusted content, in %s", what, a.From)
	}
	return fmt.Sprintf("%s appears neither in the prompt nor in a trusted result, and the run has read untrusted content (%s)", what, t.Source)
}

// Profile selects how strict TaintRules are.
type Profile string

// Profiles. Default asks for confirmation only where untrusted content
// could choose where something goes or change credentials; Strict also
// asks before every write or outward call once the run is tainted; Off
// allows every call.
const (
	ProfileDefault Profile = "default"
	ProfileStrict  Profile = "strict"
	ProfileOff     Profile = "off"
)

// ParseProfile reads a profile's name; "" is ProfileDefault.
func ParseProfile(name string) (Profile, error) {
	switch p := Profile(name); p {
	case "":
		return ProfileDefault, nil
	case ProfileDefault, ProfileStrict, ProfileOff:
		return p, nil
	}
	return "", fmt.Errorf("unknown taint policy %q (want default, strict or off)", name)
}

// TaintRules asks for confirmation of the calls untrusted content may
// have steered, going by the request's Taint facts and the tool's
// declarations (tool.Trust). With ProfileDefault, a write or outward call
// needs confirmation when:
//
//   - a destination argument (tool.Tool.Destinations) has a value that
//     is only in untrusted content, or, the run being tainted, nowhere
//     the run has seen (rule taint_destination); for a read that sends
//     out (a web fetch) only the latter, since a destination copied
//     whole from untrusted content carries nothing its author did not
//     write;
//   - an outward call carries a link or address (URL, e-mail, IBAN) in
//     any argument that is only in untrusted content, or nowhere, in a
//     tainted run (rule taint_link);
//   - the tool writes credentials or identity and any of its argument
//     values is not trusted, in a tainted run (rule taint_credentials);
//   - the run is tainted and has read private data, and the outward call
//     has no destination argument whose value is trusted to tell where
//     the data goes (rule taint_private);
//   - the tool is a write whose destinations nobody declared
//     (tool.Trust.DestinationsUnknown, no schema format marks one) and an
//     argument's whole value is only in untrusted content: any argument
//     may say where the write goes (rule taint_undeclared).
//
// ProfileStrict confirms the reads' untrusted destinations too, and
// every write and every outward call of a tainted run (rule
// taint_strict).
// Reads that send nothing out are always allowed. Every reason names the
// value and the call whose result it came from. A request without Taint
// facts fails closed: a write or outward call needs confirmation.
// Compose it with the other rules with Chain.
func TaintRules(profile Profile) Policy {
	return Func(func(_ context.Context, req Request) (Decision, error) {
		allow := Decision{Verdict: Allow, Rule: "taint", Reason: "no untrusted content steers this call"}
		if profile == ProfileOff || req.Tool == nil {
			return allow, nil
		}
		tr := req.Tool.Trust()
		if req.Tool.Effect() != tool.Write && !tr.Outward {
			return allow, nil
		}
		t := req.Taint
		confirm := func(rule, why string) (Decision, error) {
			return Decision{Verdict: Confirm, Rule: rule, Reason: fmt.Sprintf("%q: %s", req.Call.Name, why)}, nil
		}
		if t == nil {
			return confirm("taint_unknown", "the run's taint facts did not reach the policy, so the arguments' origin is unknown")
		}
		if !t.Tainted {
			return allow, nil
		}
		isDest := func(path string) bool {
			return slices.ContainsFunc(tr.Destinations, func(d string) bool { return path == d || strings.HasPrefix(path, d+".") })
		}
		if profile == ProfileDefault && tr.DestinationsUnknown && len(tr.Destinations) == 0 && req.Tool.Effect() == tool.Write {
			// Nobody said which arguments say where the write goes:
			// fail closed, each could. A value copied whole from
			// untrusted content is what an injection steers; one the
			// model composed is what harmless tasks write (a message's
			// text), and is left to the other rules.
			strs := stringPaths(req.Call.Arguments)
			for _, a := range t.Args {
				if a.Origin == Untrusted && !a.Embedded && strs[a.Path] {
					return confirm("taint_undeclared", "its destination arguments are not declared, so each may be one, and "+a.explain(t))
				}
			}
		}
		for _, a := range t.Args {
			if !isDest(a.Path) {
				continue
			}
			if profile == ProfileDefault && req.Tool.Effect() != tool.Write && a.Origin == Untrusted {
				// A read (a web fetch) whose destination was copied
				// whole from untrusted content tells its author nothing
				// they did not write; one the model composed could carry
				// private data out in it, and is confirmed.
				continue
			}
			return confirm("taint_destination", "destination "+a.explain(t))
		}
		if tr.Outward {
			for _, a := range t.Args {
				if a.Embedded {
					return confirm("taint_link", "the outward call carries "+a.explain(t))
				}
			}
		}
		if tr.Credentials && len(t.Args) > 0 {
			return confirm("taint_credentials", "it writes credentials or identity, and "+t.Args[0].explain(t))
		}
		if profile == ProfileStrict {
			return confirm("taint_strict", fmt.Sprintf("the run is tainted by %s, and the strict profile confirms every write and outward call after that", t.Source))
		}
		if tr.Outward && t.Private != nil && len(tr.Destinations) == 0 {
			return confirm("taint_private", fmt.Sprintf("it sends data out, the run has read private data (%s) and untrusted content (%s), and no trusted destination argument says where the data goes",
				t.Private, t.Source))
		}
		return allow, nil
	})
}

// stringPaths returns the dotted paths (arrays walked through) of the
// string values in the JSON arguments args: the ones that can name a
// place, as numbers and booleans cannot.
func stringPaths(args json.RawMessage) map[string]bool {
	var doc any
	if json.Unmarshal(args, &doc) != nil {
		return nil
	}
	paths := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				p := k
				if path != "" {
					p = path + "." + k
				}
				walk(p, e)
			}
		case []any:
			for _, e := range v {
				walk(path, e)
			}
		case string:
			paths[path] = true
		}
	}
	walk("", doc)
	return paths
}
