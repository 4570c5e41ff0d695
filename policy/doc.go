// Package policy is the policy-engine boundary: it decides whether an
// identity may make a tool call. It takes a Request (the run's Identity,
// the call with its arguments, the tool's definition and its declared
// risk) and gives a Decision: a Verdict with the rule that decided and a
// reason a person reading the trace can follow.
//
// The verdicts map onto the run's exits: Allow lets the call be planned;
// NotAllowed (the tool is outside the run's allowlist) stops the run with
// tool_not_allowed; Deny (this identity may not) with permission_denied;
// Confirm pauses the run with confirmation_required until a person
// answers. Decisions rest on what the application knows (the identity it
// set, the tool's declared effect and risk, the arguments), never on
// anything the prompt claims.
//
// Policy is a one-method interface and Func adapts a function. The
// built-in rules are Allowlist, Permissions (Grants by name or role),
// ConfirmWrites, ConfirmRisk, ConfirmDeclared, AllowAll and TaintRules;
// Chain asks
// several in order and returns the first verdict that is not Allow. A
// policy may do I/O (a permission service); the loop records its decision
// per call in the run's log, and it fails closed: a policy that returns an
// error denies the call.
//
// TaintRules follow the data rather than the tool: the loop tells the
// policy (Request.Taint) whether untrusted content has entered the run
// and which of a call's argument values are not known to come from the
// user or a trusted result, and TaintRules asks for confirmation where
// such a value would choose where something goes, change credentials, or
// where private data could leave with it. Its reasons name the value and
// the call whose result it came from.
//
// The package never executes a tool or calls a model, and its built-in
// rules keep no state between decisions. It depends on llm and tool only; the loop asks
// it once per valid call of each batch.
package policy
