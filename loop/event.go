package loop

import (
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
)

// EventKind names what happened.
type EventKind string

// Event kinds, in the order a turn produces them.
const (
	// Started opens the run: its configuration and first messages.
	Started EventKind = "started"
	// ModelResponded carries the model's answer to one request.
	ModelResponded EventKind = "model_responded"
	// ModelFailed says a model request failed after its retries.
	ModelFailed EventKind = "model_failed"
	// CallsValidated carries, per call of the batch, whether the tool is
	// known and its arguments conform.
	CallsValidated EventKind = "calls_validated"
	// PolicyDecided carries the policy decision for each valid call.
	PolicyDecided EventKind = "policy_decided"
	// StagePlanned carries the batch's execution plan.
	StagePlanned EventKind = "stage_planned"
	// StageFinished carries the outcomes of one stage's calls.
	StageFinished EventKind = "stage_finished"
	// Interrupted says the caller's context ended (canceled or deadline)
	// between two steps.
	Interrupted EventKind = "interrupted"
	// Stopped closes the run with its status (for confirmation_required,
	// it pauses the run).
	Stopped EventKind = "stopped"
	// ConfirmationDecided records a human's answer to a pending call.
	ConfirmationDecided EventKind = "confirmation_decided"
	// ContextEdited records a context edit: the old tool results cleared
	// from the history before the next model request (Event.Edit).
	ContextEdited EventKind = "context_edited"
	// ContextSummarized records a compaction: the summary of the earlier
	// turns that replaces them (Event.Edit) and the summary request's
	// usage (Event.Response), or its failure.
	ContextSummarized EventKind = "context_summarized"
	// Compensated records what the compensations of a Compensate effect
	// did (Event.Compensations), in the effect's order.
	Compensated EventKind = "compensated"
	// Resumed marks where a driver picked a run up again from its log
	// (Resume, Continue); it changes nothing in the state.
	Resumed EventKind = "resumed"
)

// Event is one entry of a run's log. Which fields are set depends on Kind.
// At is the time the driver read from its clock; the decider uses no other
// time, so replaying the same events reproduces the same run.
//
// An event is immutable once appended to a log. Next never writes into the
// event it is given or into anything the event points to, and the State it
// builds shares parts of the event rather than copying them (an executed
// call's result in the history is its outcome's in the StageFinished
// event). A driver, store or observer therefore must not change an event
// after handing it over; to derive another, copy it first.
type Event struct {
	Seq  int       `json:"seq"`
	At   time.Time `json:"at"`
	Kind EventKind `json:"kind"`

	// Started.
	Start *StartInfo `json:"start,omitempty"`
	// ModelResponded.
	Response *llm.Response `json:"response,omitempty"`
	// ModelFailed keeps in Response what a stream had received before
	// it broke (no finish reason; calls as far as their arguments came),
	// so that the log shows what the run was shown; the decider does not
	// read it.
	//
	// ModelResponded, ModelFailed: time spent on the request and attempts.
	Latency  time.Duration `json:"latency,omitempty"`
	Attempts int           `json:"attempts,omitempty"`
	// ModelFailed, Interrupted, and StageFinished when the context ended.
	Failure *Failure `json:"failure,omitempty"`
	// CallsValidated: one per call of the batch.
	Checks []CallCheck `json:"checks,omitempty"`
	// PolicyDecided: one per call of the batch; calls that were not asked
	// about (invalid arguments) have an empty verdict.
	Decisions []policy.Decision `json:"decisions,omitempty"`
	// StagePlanned.
	Plan *executor.Plan `json:"plan,omitempty"`
	// StageFinished: the stage's index and its outcomes in stage order.
	Stage    int                `json:"stage,omitempty"`
	Outcomes []executor.Outcome `json:"outcomes,omitempty"`
	// Stopped.
	Status Status `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
	// ConfirmationDecided.
	Confirmation *Confirmation `json:"confirmation,omitempty"`
	// ContextEdited, ContextSummarized.
	Edit *ContextEdit `json:"edit,omitempty"`
	// TokensCounted.
	Count *TokenCount `json:"count,omitempty"`

	// Compensated: one per compensation of the effect, in its order.
	Compensations []CompensationOutcome `json:"compensations,omitempty"`
}

// Confirmation is a human's answer to a call that needed confirmation.
type Confirmation struct {
	CallID   string `json:"call_id"`
	Approved bool   `json:"approved"`
	By       string `json:"by"`
	Note     string `json:"note,omitempty"`
}

// StartInfo is the run's configuration as the log records it.
type StartInfo struct {
	RunID         string          `json:"run_id"`
	SessionID     string          `json:"session_id,omitempty"`
	Model         string          `json:"model,omitempty"`
	PromptVersion string          `json:"prompt_version,omitempty"`
	ToolsVersion  string          `json:"tools_version"`
	Identity      policy.Identity `json:"identity"`
	Budgets       Budgets         `json:"budgets"`
	Price         *Price          `json:"price,omitempty"`
	// Context is the run's context management, defaults filled in; nil
	// for none.
	Context  *ContextPolicy `json:"context,omitempty"`
	Messages []llm.Message  `json:"messages"`
	// Output is the schema the final answer must match, if any.
	Output *OutputSpec `json:"output,omitempty"`
	// Compensation is the run's compensation settings; nil leaves the
	// writes of a failed group, and makes no batch a group.
	Compensation *CompensationSpec `json:"compensation,omitempty"`
}

// FailureKind classifies a failure the run cannot hand to the model.
type FailureKind string

// Failure kinds.
const (
	FailCanceled FailureKind = "canceled"
	FailDeadline FailureKind = "deadline"
	FailModel    FailureKind = "model"
	// FailProtocol is a model reply that broke its provider's own
	// protocol (llm.KindProtocolError: a stream whose pieces contradict each
	// other): the run stops with protocol_error, not model_error, since
	// the fault is the reply's, not the request's.
	FailProtocol FailureKind = "protocol"
	// FailContextLength is a request the provider refused as longer than
	// the model's window (llm.KindContextLengthExceeded). A run with
	// context management clears old results and tries again; one
	// without stops with model_error.
	FailContextLength FailureKind = "context_length"
)

// Failure describes why a request or the run's context failed.
type Failure struct {
	Kind    FailureKind `json:"kind"`
	Message string      `json:"message"`
}

// CallCheck is the validation of one call.
type CallCheck struct {
	// Known is false when no registered tool has the call's name.
	Known bool `json:"known"`
	// Problem says why the arguments were rejected; empty when valid.
	Problem string `json:"problem,omitempty"`
	// Key identifies the call by tool name and canonical arguments.
	Key uint64 `json:"key"`
	// WriteKey is a write's idempotency key; empty for reads.
	WriteKey string `json:"write_key,omitempty"`
	// Group is the all-or-nothing group the call's tool names
	// (tool.Spec.AtomicGroup), and Undo, for a write, its compensating
	// tool (tool.Spec.Compensation); empty for none.
	Group string `json:"group,omitempty"`
	Undo  string `json:"undo,omitempty"`
	// Trust is the trust of the tool's result, as taint.go writes it.
	Trust string `json:"trust,omitempty"`
}
