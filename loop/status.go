package loop

// Status is how a run ended. It implements error so that
// errors.Is(err, loop.MaxStepsExceeded) reads naturally on a run's error.
type Status string

// The statuses of docs/DESIGN.md §5.
const (
	FinalAnswer          Status = "final_answer"
	ToolNotAllowed       Status = "tool_not_allowed"
	PermissionDenied     Status = "permission_denied"
	ConfirmationRequired Status = "confirmation_required"
	MaxStepsExceeded     Status = "max_steps_exceeded"
	ToolTimeout          Status = "tool_timeout"
	DeadlineExceeded     Status = "deadline_exceeded"
	ToolBudgetExceeded   Status = "tool_budget_exceeded"
	CostBudgetExceeded   Status = "cost_budget_exceeded"
	SpinDetected         Status = "spin_detected"
	ToolOutcomeUnknown   Status = "tool_outcome_unknown"
	ProtocolError        Status = "protocol_error"
	ModelError           Status = "model_error"
	// ContextExhausted: the history could not be made to fit the model's
	// context window; every tool result that could be cleared was.
	ContextExhausted Status = "context_exhausted"
	Canceled         Status = "canceled"
	// InvalidOutput: the run has an output schema and the model's final
	// answer still did not match it after Config.OutputRetries
	// corrections (or no turn was left for one).
	InvalidOutput Status = "invalid_output"
	// CompensationFailed: writes of an all-or-nothing group that failed
	// had to be undone and at least one could not be (its compensation
	// failed, or its outcome could not be settled); the detail names what
	// is left for a person.
	CompensationFailed Status = "compensation_failed"
)

// Statuses lists every status, final_answer first.
func Statuses() []Status {
	return []Status{FinalAnswer, ToolNotAllowed, PermissionDenied, ConfirmationRequired,
		MaxStepsExceeded, ToolTimeout, DeadlineExceeded, ToolBudgetExceeded, CostBudgetExceeded,
		SpinDetected, ToolOutcomeUnknown, ProtocolError, ModelError, ContextExhausted, Canceled, InvalidOutput, CompensationFailed}
}

// Error makes a Status usable as an errors.Is target. It returns the bare
// status, so that printing a Status shows its name.
func (s Status) Error() string { return string(s) }

// Resumable reports whether a run that stopped with s can be continued
// later without starting over.
func (s Status) Resumable() bool { return s == ConfirmationRequired }

// StopError is the error of a run that did not end with a final answer.
// errors.Is(err, status) is true for its Status.
type StopError struct {
	Status Status
	Detail string
}

func (e *StopError) Error() string {
	return "toolloop: run stopped: " + string(e.Status) + ": " + e.Detail
}

// Is matches the run's status.
func (e *StopError) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}
