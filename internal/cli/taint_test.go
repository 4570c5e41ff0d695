package cli

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/tool"
)

// --taint-policy picks TaintRules' profile (default when not given),
// composes with --confirm-writes, is recorded for resume, and refuses
// other values.
func TestTaintPolicyFlag(t *testing.T) {
	parse := func(args ...string) (*sourceFlags, error) {
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := addSourceFlags(fs)
		return f, fs.Parse(args)
	}
	if _, err := parse("--taint-policy", "paranoid"); err == nil || !strings.Contains(err.Error(), "default, strict, off") {
		t.Fatalf("--taint-policy paranoid: %v", err)
	}
	type payIn struct {
		Recipient string `json:"recipient"`
	}
	pay := tool.MustNew(tool.Spec[payIn]{Name: "pay", Effect: tool.Write, Trust: tool.Trust{Outward: true, Destinations: []string{"recipient"}}},
		func(context.Context, payIn) (string, error) { return "", nil })
	tainted := &policy.Taint{Tainted: true, Source: &policy.Source{CallID: "c1", Tool: "fetch"},
		Args: []policy.Arg{{Path: "recipient", Value: "x", Origin: policy.Untrusted, From: &policy.Source{CallID: "c1", Tool: "fetch"}}}}
	req := policy.Request{Call: llm.ToolCall{ID: "c2", Name: "pay"}, Tool: pay, Taint: tainted}
	for _, c := range []struct {
		args      []string
		rule      string // "" for no policy
		canonical string
	}{
		{nil, "taint_destination", " --taint-policy default"},
		{[]string{"--taint-policy", "off"}, "", " --taint-policy off"},
		{[]string{"--taint-policy", "default"}, "taint_destination", " --taint-policy default"},
		{[]string{"--taint-policy", "strict", "--confirm-writes"}, "confirm_writes", " --taint-policy strict"},
	} {
		f, err := parse(c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(f.canonical(), c.canonical) {
			t.Errorf("%v: canonical %q, want it to hold %q", c.args, f.canonical(), c.canonical)
		}
		p := f.policy()
		if c.rule == "" {
			if p != nil {
				t.Errorf("%v: a policy, want none", c.args)
			}
			continue
		}
		d, err := p.Decide(context.Background(), req)
		if err != nil || d.Rule != c.rule {
			t.Errorf("%v: decision %+v, %v; want rule %s", c.args, d, err, c.rule)
		}
	}
}
