package openai_test

import (
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/llm/openai"
)

func TestChatConformance(t *testing.T) {
	llmtest.RunConformance(t, llmtest.Harness{
		NewModel: func(t *testing.T, c llmtest.Case) (llm.Model, func() []byte, bool) {
			switch c {
			case llmtest.CaseReasoningCall:
				return nil, nil, true // Chat Completions keeps no reasoning state
			case llmtest.CaseStreamWithoutFinishReason:
				// As OpenRouter and Novita stream: usage, [DONE], no
				// finish reason.
				s := newSSEServer(t, readFixture(t, "chat", "stream_no_finish_reason.sse"), 1, 0, false)
				return openai.NewChat(s.client(), nil), func() []byte { return s.request(0) }, false
			}
			s := newServer(t, "chat", caseReplies[c])
			return openai.NewChat(s.client(), nil), s.last, false
		},
		Results: chatResults,
	})
}

func TestResponsesConformance(t *testing.T) {
	llmtest.RunConformance(t, llmtest.Harness{
		NewModel: func(t *testing.T, c llmtest.Case) (llm.Model, func() []byte, bool) {
			if c == llmtest.CaseStreamWithoutFinishReason {
				return nil, nil, true // a Responses stream ends with its terminal event
			}
			s := newServer(t, "responses", caseReplies[c])
			// A reasoning model asked for its reasoning items, as the
			// adapter does when reasoning is configured.
			return openai.NewResponses(s.client(), &openai.ResponsesOptions{KeepReasoning: new(true)}), s.last, false
		},
		Results: responsesResults,
	})
}
