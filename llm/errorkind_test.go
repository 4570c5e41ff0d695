package llm_test

import (
	"encoding/json"
	"testing"

	"github.com/toolloop/toolloop/llm"
)

// TestErrorKindWireValues pins every kind's value: each is written into
// run logs, traces and Temporal histories, and read by models, so a
// renamed constant must keep its value for recorded runs to decode and
// replay.
func TestErrorKindWireValues(t *testing.T) {
	for _, tt := range []struct {
		kind llm.ErrorKind
		wire string
	}{
		{llm.KindRateLimited, "rate_limited"},
		{llm.KindUnavailable, "unavailable"},
		{llm.KindTimeout, "timeout"},
		{llm.KindNotFound, "not_found"},
		{llm.KindInvalidArguments, "invalid_arguments"},
		{llm.KindNeedsInput, "needs_input"},
		{llm.KindInternal, "internal"},
		{llm.KindToolError, "tool_error"},
		{llm.KindToolNotAllowed, "tool_not_allowed"},
		{llm.KindPermissionDenied, "permission_denied"},
		{llm.KindAwaitingConfirmation, "awaiting_confirmation"},
		{llm.KindCanceled, "canceled"},
		{llm.KindRunStopped, "run_stopped"},
		{llm.KindOutcomeUnknown, "outcome_unknown"},
		{llm.KindIdempotencyConflict, "idempotency_conflict"},
		{llm.KindWriteInProgress, "write_in_progress"},
		{llm.KindAuthentication, "authentication"},
		{llm.KindUnknownModel, "unknown_model"},
		{llm.KindContextLengthExceeded, "context_length_exceeded"},
		{llm.KindRefusal, "refusal"},
		{llm.KindBadRequest, "bad_request"},
		{llm.KindBadResponse, "bad_response"},
		{llm.KindProtocolError, "protocol_error"},
	} {
		b, err := json.Marshal(llm.ToolResult{ErrorKind: tt.kind})
		if err != nil {
			t.Fatal(err)
		}
		var back struct {
			ErrorKind string `json:"error_kind"`
		}
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.ErrorKind != tt.wire {
			t.Errorf("kind encodes as %q, want %q (a recorded value must not change)", back.ErrorKind, tt.wire)
		}
	}
}
