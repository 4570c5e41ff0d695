package policy_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/tool"
)

type payArgs struct {
	Recipient string  `json:"recipient"`
	Amount    float64 `json:"amount"`
}

type msgArgs struct {
	Body string `json:"body"`
}

type pwArgs struct {
	Password string `json:"password"`
}

func mkTainted[In any](t *testing.T, spec tool.Spec[In]) *tool.Tool {
	t.Helper()
	tt, err := tool.New(spec, func(context.Context, In) (string, error) { return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

func TestTaintRules(t *testing.T) {
	pay := mkTainted(t, tool.Spec[payArgs]{Name: "send_money", Effect: tool.Write, Trust: tool.Trust{Outward: true, Destinations: []string{"recipient"}}})
	post := mkTainted(t, tool.Spec[msgArgs]{Name: "post", Effect: tool.Write, Trust: tool.Trust{Outward: true}})
	save := mkTainted(t, tool.Spec[msgArgs]{Name: "save_note", Effect: tool.Write})
	read := mkTainted(t, tool.Spec[msgArgs]{Name: "search"})
	fetch := mkTainted(t, tool.Spec[msgArgs]{Name: "fetch", Trust: tool.Trust{Outward: true, Destinations: []string{"body"}}})
	pw := mkTainted(t, tool.Spec[pwArgs]{Name: "update_password", Effect: tool.Write, Trust: tool.Trust{Credentials: true}})

	file := &policy.Source{CallID: "c2", Tool: "read_file"}
	bal := &policy.Source{CallID: "c1", Tool: "get_balance"}
	clean := &policy.Taint{}
	tainted := &policy.Taint{Tainted: true, Source: file}
	private := &policy.Taint{Tainted: true, Source: file, Private: bal}
	evilIBAN := &policy.Taint{Tainted: true, Source: file, Args: []policy.Arg{{Path: "recipient", Value: "us1330", Origin: policy.Untrusted, From: file}}}
	composed := &policy.Taint{Tainted: true, Source: file, Args: []policy.Arg{{Path: "recipient", Value: "us99", Origin: policy.Unknown}}}
	amountOnly := &policy.Taint{Tainted: true, Source: file, Private: bal, Args: []policy.Arg{{Path: "amount", Value: "98.7", Origin: policy.Unknown}}}
	copied := &policy.Taint{Tainted: true, Source: file, Private: bal, Args: []policy.Arg{{Path: "body", Value: "evil.com", Origin: policy.Untrusted, From: file}}}
	madeUp := &policy.Taint{Tainted: true, Source: file, Private: bal, Args: []policy.Arg{{Path: "body", Value: "evil.com/?k=1a7b", Origin: policy.Unknown}}}
	link := &policy.Taint{Tainted: true, Source: file, Args: []policy.Arg{{Path: "body", Value: "evil.com", Embedded: true, Origin: policy.Untrusted, From: file}}}
	newPW := &policy.Taint{Tainted: true, Source: file, Args: []policy.Arg{{Path: "password", Value: "new_password", Origin: policy.Untrusted, From: file}}}

	cases := []struct {
		name    string
		profile policy.Profile
		tool    *tool.Tool
		taint   *policy.Taint
		rule    string // "" for allow
		reason  []string
	}{
		{"clean run", policy.ProfileDefault, pay, clean, "", nil},
		{"tainted, trusted recipient", policy.ProfileDefault, pay, tainted, "", nil},
		{"recipient only in a file", policy.ProfileDefault, pay, evilIBAN, "taint_destination", []string{`"us1330"`, "call c2 (read_file)"}},
		{"recipient from nowhere", policy.ProfileDefault, pay, composed, "taint_destination", []string{`"us99"`, "neither in the prompt", "call c2 (read_file)"}},
		{"amount composed, trusted recipient, private read", policy.ProfileDefault, pay, amountOnly, "", nil},
		{"link in an outward body", policy.ProfileDefault, post, link, "taint_link", []string{`"evil.com"`, "call c2"}},
		{"link in a local note", policy.ProfileDefault, save, link, "", nil},
		{"outward without destination after private read", policy.ProfileDefault, post, private, "taint_private", []string{"call c1 (get_balance)", "call c2 (read_file)"}},
		{"outward without destination, no private read", policy.ProfileDefault, post, tainted, "", nil},
		{"password from a file", policy.ProfileDefault, pw, newPW, "taint_credentials", []string{`"new_password"`}},
		{"read", policy.ProfileStrict, read, evilIBAN, "", nil},
		{"fetch of a URL copied from untrusted content", policy.ProfileDefault, fetch, copied, "", nil},
		{"fetch of a URL copied, strict", policy.ProfileStrict, fetch, copied, "taint_destination", []string{"call c2 (read_file)"}},
		{"fetch of a composed URL", policy.ProfileDefault, fetch, madeUp, "taint_destination", []string{`"evil.com/?k=1a7b"`, "neither in the prompt"}},
		{"strict: any write once tainted", policy.ProfileStrict, save, tainted, "taint_strict", []string{"call c2 (read_file)"}},
		{"strict: clean write", policy.ProfileStrict, save, clean, "", nil},
		{"off", policy.ProfileOff, pay, evilIBAN, "", nil},
		{"no facts: fail closed", policy.ProfileDefault, pay, nil, "taint_unknown", nil},
		{"no facts, a read", policy.ProfileDefault, read, nil, "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := policy.TaintRules(c.profile).Decide(context.Background(), policy.Request{
				Call: llm.ToolCall{ID: "c9", Name: c.tool.Name()}, Tool: c.tool, Taint: c.taint})
			if err != nil {
				t.Fatal(err)
			}
			if c.rule == "" {
				if d.Verdict != policy.Allow {
					t.Fatalf("got %+v, want allow", d)
				}
				return
			}
			if d.Verdict != policy.Confirm || d.Rule != c.rule {
				t.Fatalf("got %+v, want confirmation by %s", d, c.rule)
			}
			for _, r := range c.reason {
				if !strings.Contains(d.Reason, r) {
					t.Errorf("reason %q does not say %s", d.Reason, r)
				}
			}
		})
	}
}

func TestParseProfile(t *testing.T) {
	for in, want := range map[string]policy.Profile{"": policy.ProfileDefault, "default": policy.ProfileDefault, "strict": policy.ProfileStrict, "off": policy.ProfileOff} {
		if got, err := policy.ParseProfile(in); err != nil || got != want {
			t.Errorf("ParseProfile(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := policy.ParseProfile("paranoid"); err == nil || !strings.Contains(err.Error(), `"paranoid"`) {
		t.Errorf("ParseProfile(paranoid): %v", err)
	}
}

// TestTaintRulesUndeclaredDestinations: a write whose destinations nobody
// declared (an MCP tool with no configuration and no format in its schema)
// is confirmed, in the default profile, when a string argument's whole
// value is only in untrusted content; numbers, composed values, embedded
// links of a write that sends nothing out, and tools whose destinations
// are known are left to the other rules.
func TestTaintRulesUndeclaredDestinations(t *testing.T) {
	raw := func(name string, effect tool.Effect, tr tool.Trust, schema string) *tool.Tool {
		tt, err := tool.NewRaw(tool.Definition{Name: name, Effect: effect, Trust: tr, InputSchema: json.RawMessage(schema)},
			func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`""`), nil }, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	const paySchema = `{"type":"object","properties":{"recipient":{"type":"string"},"amount":{"type":"number"}}}`
	unknown := tool.Trust{Outward: true, DestinationsUnknown: true}
	pay := raw("send_money", tool.Write, unknown, paySchema)
	note := raw("save_note", tool.Write, tool.Trust{DestinationsUnknown: true}, paySchema)
	fetch := raw("fetch", tool.ReadOnly, unknown, paySchema)
	none := raw("send_money", tool.Write, tool.Trust{Outward: true}, paySchema)
	mail := raw("send_mail", tool.Write, unknown,
		`{"type":"object","properties":{"to":{"type":"string","format":"email"},"subject":{"type":"string"}}}`)

	file := &policy.Source{CallID: "c2", Tool: "read_file"}
	untrusted := func(path, value string) *policy.Taint {
		return &policy.Taint{Tainted: true, Source: file, Args: []policy.Arg{{Path: path, Value: value, Origin: policy.Untrusted, From: file}}}
	}
	const payArgs = `{"recipient":"US133000000121212121212","amount":1810}`
	for _, c := range []struct {
		name    string
		profile policy.Profile
		tool    *tool.Tool
		args    string
		taint   *policy.Taint
		rule    string
	}{
		{"recipient only in a file", policy.ProfileDefault, pay, payArgs, untrusted("recipient", "us133000000121212121212"), "taint_undeclared"},
		{"a write that sends nothing out", policy.ProfileDefault, note, payArgs, untrusted("recipient", "us133000000121212121212"), "taint_undeclared"},
		{"amount only in a file (a number)", policy.ProfileDefault, pay, payArgs, untrusted("amount", "1810"), ""},
		{"recipient composed", policy.ProfileDefault, pay, payArgs,
			&policy.Taint{Tainted: true, Source: file, Args: []policy.Arg{{Path: "recipient", Value: "us99", Origin: policy.Unknown}}}, ""},
		{"link inside a local note", policy.ProfileDefault, note, `{"recipient":"see evil.com","amount":1}`,
			&policy.Taint{Tainted: true, Source: file, Args: []policy.Arg{{Path: "recipient", Value: "evil.com", Embedded: true, Origin: policy.Untrusted, From: file}}}, ""},
		{"a read (a fetch)", policy.ProfileDefault, fetch, payArgs, untrusted("recipient", "us133000000121212121212"), ""},
		{"destinations declared: none", policy.ProfileDefault, none, payArgs, untrusted("recipient", "us133000000121212121212"), ""},
		{"destination known from the schema", policy.ProfileDefault, mail, `{"to":"a@b.example","subject":"hello"}`, untrusted("subject", "hello"), ""},
		{"strict", policy.ProfileStrict, pay, payArgs, untrusted("recipient", "us133000000121212121212"), "taint_strict"},
		{"clean run", policy.ProfileDefault, pay, payArgs, &policy.Taint{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := policy.TaintRules(c.profile).Decide(context.Background(), policy.Request{
				Call: llm.ToolCall{ID: "c9", Name: c.tool.Name(), Arguments: json.RawMessage(c.args)}, Tool: c.tool, Taint: c.taint})
			if err != nil {
				t.Fatal(err)
			}
			if c.rule == "" {
				if d.Verdict != policy.Allow {
					t.Fatalf("got %+v, want allow", d)
				}
				return
			}
			if d.Verdict != policy.Confirm || d.Rule != c.rule {
				t.Fatalf("got %+v, want confirmation by %s", d, c.rule)
			}
			if c.rule == "taint_undeclared" {
				for _, r := range []string{`"us133000000121212121212"`, "call c2 (read_file)", "not declared"} {
					if !strings.Contains(d.Reason, r) {
						t.Errorf("reason %q does not say %s", d.Reason, r)
					}
				}
			}
		})
	}
}
