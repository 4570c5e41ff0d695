package loop

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/tool"
)

// The effect handlers below are the work behind the decider's effects
// that every driver does alike: the in-process Runner calls them directly,
// the Temporal workflow's activities call them on a worker. Each is
// deterministic given its inputs (Authorize given the policy's answers),
// so a replayed run finds the same checks, decisions and plans.

// CheckCalls validates each call of a batch (a ValidateCalls effect):
// whether a registered tool has its name, whether its arguments are within
// limits (Budgets.ArgumentLimits) and conform to the tool's schema, the
// call's key for spin detection, and a valid write's idempotency key
// (WriteKey). The result is the CallsValidated event's payload, one check
// per call.
func CheckCalls(tools *tool.Registry, calls []llm.ToolCall, limits tool.Limits, runID, requestID string) []CallCheck {
	checks := make([]CallCheck, len(calls))
	for i, c := range calls {
		t, ok := tools.Lookup(c.Name)
		if !ok {
			continue
		}
		fp, err := t.ValidateWithin(c.Arguments, limits)
		checks[i] = CallCheck{Known: true, Key: tool.CallKey(c.Name, fp), Group: t.AtomicGroup(), Trust: trustString(t)}
		if err != nil {
			checks[i].Problem = err.Error()
			var te *tool.Error
			if errors.As(err, &te) && te.Msg != "" {
				checks[i].Problem = te.Msg
			}
			continue
		}
		if t.Effect() == tool.Write {
			checks[i].WriteKey = WriteKey(t, c, checks[i].Key, runID, requestID)
			if u := t.Compensation(); u != nil {
				checks[i].Undo = u.Tool
			}
		}
	}
	return checks
}

// WriteKey derives a write's idempotency key, which the ledger keeps
// across runs and processes, so its format is fixed: the tool's business
// key (tool.Spec.IdempotencyKey) if it gives one; else, when the run
// serves a business request, requestID + "/" + tool name + "/" + the
// call key in 16 hex digits (the same request asking for the same write
// finds it done); else runID + "/" + call ID.
func WriteKey(t *tool.Tool, c llm.ToolCall, callKey uint64, runID, requestID string) string {
	if k := t.IdempotencyKey(c.Arguments); k != "" {
		return k
	}
	if requestID != "" {
		return requestID + "/" + c.Name + "/" + ArgsHash(callKey)
	}
	return runID + "/" + c.ID
}

// ArgsHash is the ledger's fingerprint of a write's arguments: the call's
// key (tool.CallKey) in 16 lowercase hex digits. A key reused with another
// fingerprint is refused.
func ArgsHash(callKey uint64) string {
	h := strconv.FormatUint(callKey, 16)
	return "0000000000000000"[len(h):] + h
}

// Authorize asks the policy about the calls listed in idx (an
// AuthorizeCalls effect) and returns one decision per call of the batch,
// empty for those not asked. A nil policy allows every call. It fails
// closed: a policy that returns an error denies the call, with the error as
// the reason. The error is non-nil only when ctx ended, and the driver then
// records an interruption rather than decisions.
//
// Authorize passes the policy no taint facts, so that taint rules
// (policy.TaintRules) fail closed; drivers use AuthorizeTainted.
func Authorize(ctx context.Context, p policy.Policy, who policy.Identity, tools *tool.Registry, calls []llm.ToolCall, idx []int) ([]policy.Decision, error) {
	return AuthorizeTainted(ctx, p, who, tools, calls, idx, nil)
}

// AuthorizeTainted is Authorize with the batch's taint facts
// (Batch.Taint, by call index) in each policy.Request.
func AuthorizeTainted(ctx context.Context, p policy.Policy, who policy.Identity, tools *tool.Registry, calls []llm.ToolCall, idx []int, taint []*policy.Taint) ([]policy.Decision, error) {
	decisions := make([]policy.Decision, len(calls))
	for _, i := range idx {
		if i < 0 || i >= len(calls) {
			return nil, fmt.Errorf("loop: call index %d out of range (batch of %d)", i, len(calls))
		}
		c := calls[i]
		if p == nil {
			decisions[i] = policy.Decision{Verdict: policy.Allow, Rule: "none", Reason: "no policy configured"}
			continue
		}
		t, ok := tools.Lookup(c.Name)
		if !ok {
			decisions[i] = policy.Decision{Verdict: policy.NotAllowed, Rule: "registry",
				Reason: fmt.Sprintf("tool %q is not registered", c.Name)}
			continue
		}
		req := policy.Request{Identity: who, Call: c, Tool: t, Risk: t.Risk()}
		if i < len(taint) {
			req.Taint = taint[i]
		}
		dec, err := p.Decide(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			dec = PolicyFailure(err.Error())
		}
		decisions[i] = dec
	}
	return decisions, nil
}

// PolicyFailure is the decision on a call the policy could not decide
// (it failed saying why): a denial, since a policy that cannot decide
// does not allow. Every driver fails closed with it.
func PolicyFailure(why string) policy.Decision {
	return policy.Decision{Verdict: policy.Deny, Rule: "policy_error", Reason: "the policy engine failed: " + why}
}

// PlanCalls plans the calls of a batch listed in idx (a PlanBatch effect)
// with planner: approved marks, by batch index, calls a human approved,
// which the planner runs alone (docs/DESIGN.md §6, rule 1). It fails only when
// a call names a tool tools does not have, or an index is out of range.
func PlanCalls(planner executor.Planner, tools *tool.Registry, calls []llm.ToolCall, idx []int, approved []bool) (executor.Plan, error) {
	pcs := make([]executor.PlanCall, len(idx))
	for j, i := range idx {
		if i < 0 || i >= len(calls) {
			return executor.Plan{}, fmt.Errorf("loop: call index %d out of range (batch of %d)", i, len(calls))
		}
		t, ok := tools.Lookup(calls[i].Name)
		if !ok {
			return executor.Plan{}, fmt.Errorf("loop: tool %q is not registered", calls[i].Name)
		}
		pcs[j] = executor.PlanCall{Call: calls[i], Tool: t, NeedsConfirmation: i < len(approved) && approved[i]}
	}
	return executor.PlanPart(planner, pcs, idx), nil
}

// StageCalls returns the executor's calls for the stage whose batch
// indexes are idx (an ExecuteStage effect): each with the run's tool
// timeout and, for a valid write, its idempotency key, arguments
// fingerprint and run ID. Tools are looked up in tools; with a nil
// registry they are left out, for a driver that sends the calls to
// another process (which looks them up by name).
func StageCalls(s *State, idx []int, tools *tool.Registry) []executor.Call {
	b := s.Batch
	calls := make([]executor.Call, len(idx))
	for j, i := range idx {
		c := executor.Call{Call: b.Calls[i], Timeout: s.Budgets.ToolTimeout}
		if tools != nil {
			c.Tool, _ = tools.Lookup(c.Call.Name)
		}
		if i < len(b.Checks) && b.Checks[i].WriteKey != "" {
			c.IdempotencyKey, c.ArgsHash, c.RunID = b.Checks[i].WriteKey, ArgsHash(b.Checks[i].Key), s.RunID
		}
		calls[j] = c
	}
	return calls
}
