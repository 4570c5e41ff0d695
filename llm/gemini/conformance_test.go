package gemini_test

import (
	"net/http"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
)

// conformanceReplies are the Gemini API's wire replies for the suite's
// cases (see the llmtest.Case comments for the values each carries).
var conformanceReplies = map[llmtest.Case]reply{
	llmtest.CaseFinalAnswer:   ok("final_answer.json"),
	llmtest.CaseSingleCall:    ok("single_call.json"),
	llmtest.CaseParallelCalls: ok("parallel_calls.json"),
	llmtest.CaseRateLimited:   {http.StatusTooManyRequests, "rate_limited.json"},
	llmtest.CaseServerError:   {http.StatusInternalServerError, "server_error.json"},
	llmtest.CaseUnauthorized:  {http.StatusUnauthorized, "unauthorized.json"},
	llmtest.CaseContextLength: {http.StatusBadRequest, "context_length.json"},
	llmtest.CaseTruncated:     ok("truncated.json"),
	llmtest.CaseReasoningCall: ok("reasoning_call.json"),
}

func TestConformance(t *testing.T) {
	llmtest.RunConformance(t, llmtest.Harness{
		NewModel: func(t *testing.T, c llmtest.Case) (llm.Model, func() []byte, bool) {
			rp, ok := conformanceReplies[c]
			if !ok {
				// invalid_arguments: Gemini sends args as a JSON object,
				// never as a string that could be cut off.
				return nil, nil, true
			}
			s := newServer(t, rp)
			return s.model(t, nil), s.last, false
		},
		Results: resultsSent,
		// The SDK retries only when the client is built with
		// HTTPOptions.RetryOptions; these clients are not, and the
		// 429's RetryInfo detail gives RetryAfter.
		RetriesOnItsOwn: false,
	})
}
