package anthropic

import (
	"errors"
	"slices"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// ServerClearToolUses configures Anthropic's own context editing
// (Options.ServerClearToolUses): the API clears the oldest tool results
// of a request on its side, before the model reads it, once the request
// passes a number of input tokens (strategy clear_tool_uses_20250919,
// beta context-management-2025-06-27). The SDK has the field only in its
// beta API; the adapter adds it to each request (context_management) with
// the beta header. The zero value takes the API's defaults.
//
// Unlike the loop's own clearing (loop.ContextPolicy), these edits are
// not in the run's log: the request the log rebuilds is the whole one,
// and only the provider's reported input tokens show what it cleared. A
// clearing rewrites the prompt from the first result it clears, so the
// prompt cache is written again from there: ClearAtLeast makes each
// clearing big enough to be worth that.
type ServerClearToolUses struct {
	// TriggerTokens is the request's input tokens past which the API
	// clears; 0 for the API's default (100,000).
	TriggerTokens int64
	// Keep is how many of the latest tool uses stay; 0 for the API's
	// default (3).
	Keep int64
	// ClearAtLeast is the fewest input tokens a clearing removes; 0 for
	// none.
	ClearAtLeast int64
	// ExcludeTools names tools whose results are never cleared.
	ExcludeTools []string
}

// contextManagementBeta is the beta that lets a request carry
// context_management.
const contextManagementBeta = anthropic.AnthropicBetaContextManagement2025_06_27

func (s *ServerClearToolUses) validate() error {
	if s != nil && (s.TriggerTokens < 0 || s.Keep < 0 || s.ClearAtLeast < 0) {
		return errors.New("anthropic: Options.ServerClearToolUses: TriggerTokens, Keep and ClearAtLeast must not be negative (0 takes the API's default)")
	}
	return nil
}

// requestOptions are the options that put s into every request: the beta
// header and the context_management field.
func (s *ServerClearToolUses) requestOptions() []option.RequestOption {
	edit := &anthropic.BetaClearToolUses20250919EditParam{ExcludeTools: slices.Clone(s.ExcludeTools)}
	if s.TriggerTokens > 0 {
		edit.Trigger = anthropic.BetaClearToolUses20250919EditTriggerUnionParam{OfInputTokens: &anthropic.BetaInputTokensTriggerParam{Value: s.TriggerTokens}}
	}
	if s.Keep > 0 {
		edit.Keep = anthropic.BetaToolUsesKeepParam{Value: s.Keep}
	}
	if s.ClearAtLeast > 0 {
		edit.ClearAtLeast = anthropic.BetaInputTokensClearAtLeastParam{Value: s.ClearAtLeast}
	}
	cfg := anthropic.BetaContextManagementConfigParam{Edits: []anthropic.BetaContextManagementConfigEditUnionParam{{OfClearToolUses20250919: edit}}}
	return []option.RequestOption{option.WithMiddleware(addBeta(contextManagementBeta)), option.WithJSONSet("context_management", cfg)}
}
