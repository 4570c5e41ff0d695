package policy_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/tool"
)

type in struct {
	OrderID string `json:"order_id,omitempty"`
}

func mk(t *testing.T, name string, effect tool.Effect, risk tool.Risk) *tool.Tool {
	t.Helper()
	tl, err := tool.New(tool.Spec[in]{Name: name, Effect: effect, Risk: risk},
		func(context.Context, in) (bool, error) { return true, nil })
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// request builds the request the loop sends: the tool's declared risk filled in.
func request(who policy.Identity, tl *tool.Tool) policy.Request {
	return policy.Request{
		Identity: who,
		Call:     llm.ToolCall{ID: "c1", Name: tl.Name(), Arguments: []byte(`{"order_id":"A1"}`)},
		Tool:     tl,
		Risk:     tl.Risk(),
	}
}

func decide(t *testing.T, p policy.Policy, req policy.Request) policy.Decision {
	t.Helper()
	d, err := p.Decide(context.Background(), req)
	if err != nil {
		t.Fatalf("Decide(%s): %v", req.Call.Name, err)
	}
	if d.Rule == "" || d.Reason == "" {
		t.Errorf("Decide(%s) = %+v: every decision needs a rule and a reason", req.Call.Name, d)
	}
	return d
}

var (
	alice = policy.Identity{Name: "alice"}
	bob   = policy.Identity{Name: "bob", Roles: []string{"support"}}
	carol = policy.Identity{Name: "carol", Roles: []string{"viewer", "admin"}}
	anon  = policy.Identity{}
)

func TestAllowAll(t *testing.T) {
	w := mk(t, "refund", tool.Write, "")
	d := decide(t, policy.AllowAll(), request(anon, w))
	if d.Verdict != policy.Allow {
		t.Errorf("AllowAll = %+v", d)
	}
}

func TestAllowlist(t *testing.T) {
	p := policy.Allowlist("get_order", "list_orders")
	for _, name := range []string{"get_order", "list_orders"} {
		d := decide(t, p, request(alice, mk(t, name, tool.ReadOnly, "")))
		if d.Verdict != policy.Allow || d.Rule != "allowlist" {
			t.Errorf("%s: %+v, want allow", name, d)
		}
	}
	for _, name := range []string{"cancel_order", "Get_order", "get_orders"} {
		d := decide(t, p, request(alice, mk(t, name, tool.ReadOnly, "")))
		if d.Verdict != policy.NotAllowed || d.Rule != "allowlist" {
			t.Errorf("%s: %+v, want not_allowed", name, d)
		}
		if !strings.Contains(d.Reason, name) {
			t.Errorf("%s: reason %q does not name the tool", name, d.Reason)
		}
	}
	// An empty allowlist allows nothing.
	if d := decide(t, policy.Allowlist(), request(alice, mk(t, "get_order", tool.ReadOnly, ""))); d.Verdict != policy.NotAllowed {
		t.Errorf("empty allowlist: %+v", d)
	}
	// The allowlist judges the call's name, even for a call to a tool the
	// registry does not know (Tool nil).
	req := policy.Request{Identity: alice, Call: llm.ToolCall{ID: "c9", Name: "rm_rf"}}
	if d := decide(t, p, req); d.Verdict != policy.NotAllowed {
		t.Errorf("unknown tool: %+v", d)
	}
}

func TestAllowlistCopiesNames(t *testing.T) {
	names := []string{"get_order"}
	p := policy.Allowlist(names...)
	names[0] = "cancel_order"
	if d := decide(t, p, request(alice, mk(t, "cancel_order", tool.Write, ""))); d.Verdict != policy.NotAllowed {
		t.Errorf("Allowlist follows later edits of its argument: %+v", d)
	}
}

func TestPermissions(t *testing.T) {
	get := mk(t, "get_order", tool.ReadOnly, "")
	refund := mk(t, "refund", tool.Write, "")
	del := mk(t, "delete_customer", tool.Write, "")
	p := policy.Permissions(policy.Grants{
		"alice":        {"get_order"},
		"role:support": {"get_order", "refund"},
		"role:admin":   {"*"},
	})
	tests := []struct {
		who  policy.Identity
		tl   *tool.Tool
		want policy.Verdict
	}{
		{alice, get, policy.Allow},
		{alice, refund, policy.Deny},
		{bob, get, policy.Allow},    // by role
		{bob, refund, policy.Allow}, // by role
		{bob, del, policy.Deny},
		{carol, del, policy.Allow}, // "*" through her second role
		{carol, refund, policy.Allow},
		{anon, get, policy.Deny},
		{policy.Identity{Name: "dave", Roles: []string{"nobody"}}, get, policy.Deny},
		// Role names are not identity names and vice versa.
		{policy.Identity{Roles: []string{"alice"}}, get, policy.Deny},
		{policy.Identity{Name: "support"}, refund, policy.Deny},
	}
	for _, tt := range tests {
		d := decide(t, p, request(tt.who, tt.tl))
		if d.Verdict != tt.want || d.Rule != "permissions" {
			t.Errorf("%+v calling %s: %+v, want %s", tt.who, tt.tl.Name(), d, tt.want)
		}
	}
}

func TestPermissionsReasons(t *testing.T) {
	get := mk(t, "get_order", tool.ReadOnly, "")
	p := policy.Permissions(policy.Grants{"role:support": {"get_order"}})
	if d := decide(t, p, request(bob, get)); !strings.Contains(d.Reason, "support") {
		t.Errorf("reason %q does not name the granting role", d.Reason)
	}
	d := decide(t, p, request(alice, get))
	if !strings.Contains(d.Reason, "alice") || !strings.Contains(d.Reason, "get_order") {
		t.Errorf("deny reason %q should name the identity and the tool", d.Reason)
	}
	d = decide(t, p, request(anon, get))
	if d.Verdict != policy.Deny || !strings.Contains(d.Reason, "anonymous") {
		t.Errorf("anonymous: %+v", d)
	}
}

// "*" grants every tool to the identity that holds it, and only to it.
func TestPermissionsWildcardIdentity(t *testing.T) {
	p := policy.Permissions(policy.Grants{"root": {"*"}})
	for _, name := range []string{"get_order", "refund", "anything"} {
		if d := decide(t, p, request(policy.Identity{Name: "root"}, mk(t, name, tool.Write, ""))); d.Verdict != policy.Allow {
			t.Errorf("root calling %s: %+v", name, d)
		}
		if d := decide(t, p, request(alice, mk(t, name, tool.Write, ""))); d.Verdict != policy.Deny {
			t.Errorf("alice calling %s: %+v", name, d)
		}
	}
	// A grant for the identity "*" is not a grant for everybody.
	p = policy.Permissions(policy.Grants{"*": {"get_order"}})
	if d := decide(t, p, request(alice, mk(t, "get_order", tool.ReadOnly, ""))); d.Verdict != policy.Deny {
		t.Errorf(`grant to identity "*" applied to alice: %+v`, d)
	}
}

// An identity whose name looks like a role key must not inherit that
// role's grants: identity names often come from user input (a login name),
// roles from the application.
func TestPermissionsIdentityCannotImpersonateRole(t *testing.T) {
	p := policy.Permissions(policy.Grants{"role:admin": {"*"}})
	mallory := policy.Identity{Name: "role:admin"}
	if d := decide(t, p, request(mallory, mk(t, "delete_customer", tool.Write, ""))); d.Verdict != policy.Deny {
		t.Errorf(`identity named "role:admin" got the admin role's grants: %+v`, d)
	}
	// The genuine role still works.
	if d := decide(t, p, request(policy.Identity{Name: "x", Roles: []string{"admin"}}, mk(t, "delete_customer", tool.Write, ""))); d.Verdict != policy.Allow {
		t.Errorf("admin role: %+v", d)
	}
}

func TestPermissionsCopiesGrants(t *testing.T) {
	g := policy.Grants{"alice": {"get_order"}}
	p := policy.Permissions(g)
	g["alice"][0] = "refund"
	g["bob"] = []string{"*"}
	if d := decide(t, p, request(alice, mk(t, "get_order", tool.ReadOnly, ""))); d.Verdict != policy.Allow {
		t.Errorf("alice lost a grant after the map was edited: %+v", d)
	}
	if d := decide(t, p, request(bob, mk(t, "refund", tool.Write, ""))); d.Verdict != policy.Deny {
		t.Errorf("bob gained a grant after the map was edited: %+v", d)
	}
}

func TestConfirmWrites(t *testing.T) {
	read := mk(t, "get_order", tool.ReadOnly, tool.RiskHigh)
	write := mk(t, "refund", tool.Write, tool.RiskLow)
	note := mk(t, "add_note", tool.Write, "")

	p := policy.ConfirmWrites()
	d := decide(t, p, request(alice, write))
	if d.Verdict != policy.Confirm || d.Rule != "confirm_writes" || !strings.Contains(d.Reason, "refund") {
		t.Errorf("write: %+v, want needs_confirmation naming the tool", d)
	}
	if d := decide(t, p, request(alice, read)); d.Verdict != policy.Allow {
		t.Errorf("read: %+v, want allow (effect decides, not risk)", d)
	}

	p = policy.ConfirmWrites("add_note")
	if d := decide(t, p, request(alice, note)); d.Verdict != policy.Allow {
		t.Errorf("exempt write: %+v, want allow", d)
	}
	if d := decide(t, p, request(alice, write)); d.Verdict != policy.Confirm {
		t.Errorf("non-exempt write: %+v, want needs_confirmation", d)
	}
	// Without a tool (unknown to the registry) there is no effect to judge;
	// the allowlist is the rule that stops such calls.
	if d := decide(t, p, policy.Request{Identity: alice, Call: llm.ToolCall{ID: "c", Name: "refund"}}); d.Verdict != policy.Allow {
		t.Errorf("no tool: %+v", d)
	}
}

func TestConfirmRisk(t *testing.T) {
	low := mk(t, "get_order", tool.ReadOnly, "") // low by default
	medium := mk(t, "export", tool.ReadOnly, tool.RiskMedium)
	high := mk(t, "refund", tool.Write, "") // high by default
	tests := []struct {
		min  tool.Risk
		tl   *tool.Tool
		want policy.Verdict
	}{
		{tool.RiskHigh, low, policy.Allow},
		{tool.RiskHigh, medium, policy.Allow},
		{tool.RiskHigh, high, policy.Confirm},
		{tool.RiskMedium, low, policy.Allow},
		{tool.RiskMedium, medium, policy.Confirm},
		{tool.RiskMedium, high, policy.Confirm},
		{tool.RiskLow, low, policy.Confirm},
		// An unknown threshold fails closed: everything needs a human.
		{"critical", low, policy.Confirm},
	}
	for _, tt := range tests {
		d := decide(t, policy.ConfirmRisk(tt.min), request(alice, tt.tl))
		if d.Verdict != tt.want || d.Rule != "confirm_risk" {
			t.Errorf("ConfirmRisk(%s) on %s risk: %+v, want %s", tt.min, tt.tl.Risk(), d, tt.want)
		}
		if d.Verdict == policy.Confirm && !strings.Contains(d.Reason, string(tt.tl.Risk())) {
			t.Errorf("reason %q does not state the risk", d.Reason)
		}
	}
}

// The decision rests on the risk the tool declares. A request that names
// the tool but leaves Risk empty must not slip past the threshold.
func TestConfirmRiskFallsBackToToolRisk(t *testing.T) {
	high := mk(t, "refund", tool.Write, "")
	req := request(alice, high)
	req.Risk = ""
	if d := decide(t, policy.ConfirmRisk(tool.RiskHigh), req); d.Verdict != policy.Confirm {
		t.Errorf("high-risk tool with Risk unset: %+v, want needs_confirmation", d)
	}
}

// fixed is a policy with a fixed answer that counts how often it is asked.
type fixed struct {
	d     policy.Decision
	err   error
	calls int
}

func (f *fixed) Decide(context.Context, policy.Request) (policy.Decision, error) {
	f.calls++
	return f.d, f.err
}

func TestChain(t *testing.T) {
	allow := func() *fixed { return &fixed{d: policy.Decision{Verdict: policy.Allow, Rule: "a", Reason: "ok"}} }
	deny := &fixed{d: policy.Decision{Verdict: policy.Deny, Rule: "deny_rule", Reason: "no"}}
	confirm := &fixed{d: policy.Decision{Verdict: policy.Confirm, Rule: "confirm_rule", Reason: "ask"}}
	w := mk(t, "refund", tool.Write, "")

	a1, a2, a3 := allow(), allow(), allow()
	d := decide(t, policy.Chain(a1, a2, a3), request(alice, w))
	if d.Verdict != policy.Allow || d.Rule != "chain" {
		t.Errorf("all allow: %+v", d)
	}
	if a1.calls != 1 || a2.calls != 1 || a3.calls != 1 {
		t.Errorf("each policy asked %d, %d, %d times, want once", a1.calls, a2.calls, a3.calls)
	}

	// The first verdict other than allow wins; later policies are not asked.
	a1, last := allow(), allow()
	d = decide(t, policy.Chain(a1, confirm, deny, last), request(alice, w))
	if d != confirm.d {
		t.Errorf("allow, confirm, deny: %+v, want the confirm decision", d)
	}
	if last.calls != 0 || deny.calls != 0 {
		t.Error("the chain kept asking after a decisive verdict")
	}
	d = decide(t, policy.Chain(allow(), deny, confirm), request(alice, w))
	if d != deny.d {
		t.Errorf("allow, deny, confirm: %+v, want the deny decision", d)
	}

	// An error stops the chain and propagates.
	boom := errors.New("policy store down")
	failing := &fixed{d: policy.Decision{Verdict: policy.Allow}, err: boom}
	after := allow()
	_, err := policy.Chain(allow(), failing, after).Decide(context.Background(), request(alice, w))
	if !errors.Is(err, boom) {
		t.Errorf("error = %v, want the failing policy's error", err)
	}
	if after.calls != 0 {
		t.Error("the chain kept asking after an error")
	}

	// An empty chain allows.
	if d := decide(t, policy.Chain(), request(alice, w)); d.Verdict != policy.Allow {
		t.Errorf("empty chain: %+v", d)
	}
}

func TestChainCopiesPolicies(t *testing.T) {
	deny := &fixed{d: policy.Decision{Verdict: policy.Deny, Rule: "deny", Reason: "no"}}
	ps := []policy.Policy{policy.AllowAll()}
	chain := policy.Chain(ps...)
	ps[0] = deny
	if d := decide(t, chain, request(alice, mk(t, "get_order", tool.ReadOnly, ""))); d.Verdict != policy.Allow {
		t.Errorf("Chain follows later edits of its argument: %+v", d)
	}
}

// A realistic policy: an allowlist, then permissions, then confirmation of
// writes. Each layer produces its own verdict.
func TestChainRealistic(t *testing.T) {
	get := mk(t, "get_order", tool.ReadOnly, "")
	refund := mk(t, "refund", tool.Write, "")
	del := mk(t, "delete_customer", tool.Write, "")
	p := policy.Chain(
		policy.Allowlist("get_order", "refund"),
		policy.Permissions(policy.Grants{"role:support": {"get_order", "refund"}, "alice": {"get_order"}}),
		policy.ConfirmWrites(),
	)
	tests := []struct {
		who  policy.Identity
		tl   *tool.Tool
		want policy.Verdict
		rule string
	}{
		{bob, get, policy.Allow, "chain"},
		{bob, refund, policy.Confirm, "confirm_writes"},
		{bob, del, policy.NotAllowed, "allowlist"},
		{alice, refund, policy.Deny, "permissions"},
		{anon, get, policy.Deny, "permissions"},
	}
	for _, tt := range tests {
		d := decide(t, p, request(tt.who, tt.tl))
		if d.Verdict != tt.want || d.Rule != tt.rule {
			t.Errorf("%s calling %s: %+v, want %s by %s", tt.who.Name, tt.tl.Name(), d, tt.want, tt.rule)
		}
	}
}

func TestFunc(t *testing.T) {
	var got policy.Request
	p := policy.Func(func(_ context.Context, req policy.Request) (policy.Decision, error) {
		got = req
		return policy.Decision{Verdict: policy.Deny, Rule: "custom", Reason: "business hours only"}, nil
	})
	req := request(carol, mk(t, "refund", tool.Write, ""))
	d := decide(t, p, req)
	if d.Verdict != policy.Deny || got.Identity.Name != "carol" || got.Call.ID != "c1" || got.Risk != tool.RiskHigh {
		t.Errorf("Func: decision %+v, request %+v", d, got)
	}
}

func TestConfirmDeclared(t *testing.T) {
	flagged := tool.MustNew(tool.Spec[struct{}]{Name: "wire_money", NeedsConfirmation: true},
		func(context.Context, struct{}) (string, error) { return "", nil })
	plain := tool.MustNew(tool.Spec[struct{}]{Name: "read_balance"},
		func(context.Context, struct{}) (string, error) { return "", nil })
	p := policy.ConfirmDeclared()
	for _, tc := range []struct {
		t    *tool.Tool
		want policy.Verdict
	}{{flagged, policy.Confirm}, {plain, policy.Allow}} {
		d, err := p.Decide(context.Background(), policy.Request{Call: llm.ToolCall{Name: tc.t.Name()}, Tool: tc.t})
		if err != nil || d.Verdict != tc.want {
			t.Errorf("%s: %+v %v, want %s", tc.t.Name(), d, err, tc.want)
		}
	}
}
