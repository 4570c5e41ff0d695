package llm

import (
	"fmt"
	"strings"
)

// CheckHistory verifies the history invariant: every tool call has a
// non-empty ID that is unique in the conversation, is answered by exactly one
// tool message with that ID after the assistant message that made it, and
// every tool message answers a call made earlier. It returns the first
// violation found, or nil.
func CheckHistory(msgs []Message) error {
	open := map[string]string{}   // call ID -> tool name, awaiting a result
	answered := map[string]bool{} // call ID -> already has its result
	var order []string            // call IDs in the order they were made
	for i, m := range msgs {
		switch m.Role {
		case RoleAssistant:
			for _, c := range m.ToolCalls {
				if c.ID == "" {
					return fmt.Errorf("message %d: tool call %q has an empty ID", i, c.Name)
				}
				if _, dup := open[c.ID]; dup || answered[c.ID] {
					return fmt.Errorf("message %d: tool call ID %q is used twice", i, c.ID)
				}
				open[c.ID] = c.Name
				order = append(order, c.ID)
			}
		case RoleTool:
			if m.Result == nil {
				return fmt.Errorf("message %d: tool message without a result", i)
			}
			id := m.Result.CallID
			if answered[id] {
				return fmt.Errorf("message %d: call %q has a second result", i, id)
			}
			if _, ok := open[id]; !ok {
				return fmt.Errorf("message %d: result for unknown call %q", i, id)
			}
			delete(open, id)
			answered[id] = true
		}
	}
	// Report the earliest unanswered call, so the error is the same on
	// every run (ranging over the map would pick one at random).
	for _, id := range order {
		if name, ok := open[id]; ok {
			return fmt.Errorf("tool call %q (%s) has no result", id, name)
		}
	}
	return nil
}

// CheckUserMessages reports the first user message that has nothing to
// say (its text empty or only white space), naming its index, or nil.
// Providers are given nothing to answer by such a message: sent as it is,
// a conversation of only that message reached Gemini with no contents and
// Anthropic with no messages, the adapters having nothing to send. A run
// refuses it up front instead (loop.Runner.Run).
func CheckUserMessages(msgs []Message) error {
	for i, m := range msgs {
		if m.Role == RoleUser && strings.TrimSpace(m.Text) == "" {
			return fmt.Errorf("message %d: the user message is empty; a model has nothing to answer", i)
		}
	}
	return nil
}
