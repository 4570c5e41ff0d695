package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// Identity is who the run acts for. The application sets it; the model
// cannot.
type Identity struct {
	Name  string   `json:"name"`
	Roles []string `json:"roles,omitempty"`
}

// Verdict is the outcome of a policy decision.
type Verdict string

// Verdicts. NotAllowed means the tool is outside the run's allowlist (status
// tool_not_allowed); Deny means this identity may not make this call (status
// permission_denied).
const (
	Allow      Verdict = "allow"
	Deny       Verdict = "deny"
	NotAllowed Verdict = "not_allowed"
	Confirm    Verdict = "needs_confirmation"
)

// Request is one call to decide on.
type Request struct {
	Identity Identity
	Call     llm.ToolCall
	Tool     *tool.Tool
	// Risk is the tool's declared risk.
	Risk tool.Risk
	// Taint is what the run's taint tracking knows about this call:
	// whether untrusted content has entered the run and where each
	// argument value came from (see Taint). Nil when the driver passed
	// none; the taint rules then fail closed.
	Taint *Taint
}

// Decision is a verdict with the reason a person reading the trace needs.
type Decision struct {
	Verdict Verdict `json:"verdict"`
	// Rule names the rule that decided.
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// Policy is the policy-engine boundary.
type Policy interface {
	Decide(ctx context.Context, req Request) (Decision, error)
}

// Func adapts a function to the Policy interface.
type Func func(ctx context.Context, req Request) (Decision, error)

// Decide calls f.
func (f Func) Decide(ctx context.Context, req Request) (Decision, error) { return f(ctx, req) }

// AllowAll allows every call to a registered tool.
func AllowAll() Policy {
	return Func(func(context.Context, Request) (Decision, error) {
		return Decision{Verdict: Allow, Rule: "allow_all", Reason: "no policy configured"}, nil
	})
}

// Chain asks each policy in order; the first verdict other than Allow wins,
// and so does the first error. A call all of them allow is allowed.
func Chain(policies ...Policy) Policy {
	ps := slices.Clone(policies)
	return Func(func(ctx context.Context, req Request) (Decision, error) {
		for _, p := range ps {
			d, err := p.Decide(ctx, req)
			if err != nil || d.Verdict != Allow {
				return d, err
			}
		}
		return Decision{Verdict: Allow, Rule: "chain", Reason: "allowed by every rule"}, nil
	})
}

// Allowlist allows only the named tools; any other is NotAllowed.
func Allowlist(names ...string) Policy {
	allowed := make(map[string]bool, len(names))
	for _, n := range names {
		allowed[n] = true
	}
	return Func(func(_ context.Context, req Request) (Decision, error) {
		if allowed[req.Call.Name] {
			return Decision{Verdict: Allow, Rule: "allowlist", Reason: "tool is on the allowlist"}, nil
		}
		return Decision{Verdict: NotAllowed, Rule: "allowlist",
			Reason: fmt.Sprintf("tool %q is not on this run's allowlist", req.Call.Name)}, nil
	})
}

// Grants maps an identity name, or "role:NAME" for a role, to the tools it
// may call; "*" stands for every tool. The "role:" prefix is reserved: an
// identity whose name starts with it gets no grants by name.
type Grants map[string][]string

const rolePrefix = "role:"

// Permissions allows a call only when the identity, or one of its roles, is
// granted the tool; otherwise it denies.
func Permissions(grants Grants) Policy {
	g := make(map[string]map[string]bool, len(grants))
	for who, tools := range grants {
		set := make(map[string]bool, len(tools))
		for _, t := range tools {
			set[t] = true
		}
		g[who] = set
	}
	granted := func(who, name string) bool { return g[who][name] || g[who]["*"] }
	return Func(func(_ context.Context, req Request) (Decision, error) {
		// An identity named "role:X" is not the role X: identity names and
		// role keys share the grant map, so the prefix is reserved for roles.
		if !strings.HasPrefix(req.Identity.Name, rolePrefix) && granted(req.Identity.Name, req.Call.Name) {
			return Decision{Verdict: Allow, Rule: "permissions", Reason: "identity is granted the tool"}, nil
		}
		for _, r := range req.Identity.Roles {
			if granted(rolePrefix+r, req.Call.Name) {
				return Decision{Verdict: Allow, Rule: "permissions", Reason: "role " + r + " is granted the tool"}, nil
			}
		}
		who := req.Identity.Name
		if who == "" {
			who = "(anonymous)"
		}
		return Decision{Verdict: Deny, Rule: "permissions",
			Reason: fmt.Sprintf("identity %s is not granted tool %q", who, req.Call.Name)}, nil
	})
}

// ConfirmWrites asks for human confirmation before any write, except the
// tools named in exempt.
func ConfirmWrites(exempt ...string) Policy {
	skip := make(map[string]bool, len(exempt))
	for _, n := range exempt {
		skip[n] = true
	}
	return Func(func(_ context.Context, req Request) (Decision, error) {
		if req.Tool != nil && req.Tool.Effect() == tool.Write && !skip[req.Call.Name] {
			return Decision{Verdict: Confirm, Rule: "confirm_writes",
				Reason: fmt.Sprintf("%q is a write and writes need human confirmation", req.Call.Name)}, nil
		}
		return Decision{Verdict: Allow, Rule: "confirm_writes", Reason: "not a write"}, nil
	})
}

// ConfirmRisk asks for human confirmation before any call whose tool
// declares a risk of at least min.
func ConfirmRisk(min tool.Risk) Policy {
	level := map[tool.Risk]int{tool.RiskLow: 1, tool.RiskMedium: 2, tool.RiskHigh: 3}
	return Func(func(_ context.Context, req Request) (Decision, error) {
		if req.Risk == "" && req.Tool != nil {
			req.Risk = req.Tool.Risk() // never let a missing field lower the risk
		}
		if level[req.Risk] >= level[min] {
			return Decision{Verdict: Confirm, Rule: "confirm_risk",
				Reason: fmt.Sprintf("%q is %s risk; %s and above need human confirmation", req.Call.Name, req.Risk, min)}, nil
		}
		return Decision{Verdict: Allow, Rule: "confirm_risk", Reason: "risk below the confirmation level"}, nil
	})
}

// ConfirmDeclared asks for human confirmation before any call to a tool
// whose definition declares NeedsConfirmation.
func ConfirmDeclared() Policy {
	return Func(func(_ context.Context, req Request) (Decision, error) {
		if req.Tool != nil && req.Tool.NeedsConfirmation() {
			return Decision{Verdict: Confirm, Rule: "confirm_declared",
				Reason: fmt.Sprintf("%q declares that its calls need human confirmation", req.Call.Name)}, nil
		}
		return Decision{Verdict: Allow, Rule: "confirm_declared", Reason: "the tool does not ask for confirmation"}, nil
	})
}
