package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/toolloop/toolloop/llm"
)

// DeskModelName is the model name runs of DeskModel record.
const DeskModelName = "order-desk-rules"

// orderIDPattern finds order IDs in a customer's message: a capital letter
// and three or more digits, as in A101.
var orderIDPattern = regexp.MustCompile(`\b[A-Z][0-9]{3,}\b`)

// DeskModel returns a model that needs no provider and no key: a few rules
// that read the customer's last message and drive the order desk's tools.
// It is the sandbox's model for prompts of one's own (toolloop run
// --provider sandbox) and for workers that serve many runs at once.
//
// The first turn after the customer's message calls one tool per order ID
// the message names (A101, K017, ...): refund_order when the message asks
// for a refund, cancel_order for a cancellation, track_shipment when it
// asks where a parcel is, query_order otherwise. The next turn answers
// with one line per result. A message without an order ID gets a question
// back.
//
// Its answer depends on the request's messages and step alone, never on
// earlier requests, so a run resumed in another process, or an activity
// retried on another Temporal worker, gets the answer an uninterrupted run
// would have got.
func DeskModel() llm.Model {
	return llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		last := -1
		for i, m := range req.Messages {
			if m.Role == llm.RoleUser {
				last = i
			}
		}
		if last < 0 {
			return nil, errors.New("orders: the desk model needs a customer message (role user)")
		}
		answered := false
		for _, m := range req.Messages[last+1:] {
			if m.Role == llm.RoleAssistant {
				answered = true
			}
		}
		var msg llm.Message
		if answered {
			msg = llm.Message{Role: llm.RoleAssistant, Text: summarizeResults(req.Messages[last+1:])}
		} else {
			msg = deskCalls(req.Messages[last].Text, req.Step)
		}
		return &llm.Response{Model: DeskModelName, Message: msg, Usage: deskUsage(req, msg)}, nil
	})
}

// deskCalls is the desk's first turn on a customer's message.
func deskCalls(text string, step int) llm.Message {
	ids := uniqueIDs(orderIDPattern.FindAllString(text, -1))
	if len(ids) == 0 {
		return llm.Message{Role: llm.RoleAssistant, Text: "Which order do you mean? Please give its ID, for example A101."}
	}
	lower := strings.ToLower(text)
	name := QueryOrder
	switch {
	case strings.Contains(lower, "refund") || strings.Contains(lower, "money back"):
		name = RefundOrder
	case strings.Contains(lower, "cancel"):
		name = CancelOrder
	case strings.Contains(lower, "where") || strings.Contains(lower, "track"):
		name = TrackShipment
	}
	calls := make([]llm.ToolCall, len(ids))
	for i, id := range ids {
		args := map[string]string{"order_id": id}
		if name == RefundOrder {
			args["reason"] = "the customer asked for it"
		}
		b, _ := json.Marshal(args) // a map of strings always encodes
		calls[i] = llm.ToolCall{ID: fmt.Sprintf("desk_%d_%d", step, i+1), Name: name, Arguments: b}
	}
	return llm.Message{Role: llm.RoleAssistant, ToolCalls: calls}
}

func uniqueIDs(ids []string) []string {
	out := ids[:0]
	for _, id := range ids {
		dup := false
		for _, o := range out {
			dup = dup || o == id
		}
		if !dup {
			out = append(out, id)
		}
	}
	return out
}

// summarizeResults answers with one line per tool result since the
// customer's message.
func summarizeResults(msgs []llm.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		r := m.Result
		if r == nil {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		content := string(r.Content)
		if len(content) > 240 {
			content = content[:240] + "..."
		}
		switch r.Status {
		case llm.StatusOK:
			fmt.Fprintf(&b, "%s (%s): done: %s", r.Name, r.CallID, content)
		default:
			fmt.Fprintf(&b, "%s (%s): %s %s: %s", r.Name, r.CallID, r.Status, r.ErrorKind, content)
		}
	}
	if b.Len() == 0 {
		return "Is there anything else I can do?"
	}
	return b.String()
}

// deskUsage counts tokens as roughly four characters each, so that token
// and cost budgets have something to count.
func deskUsage(req *llm.Request, out llm.Message) llm.Usage {
	in := 0
	for _, m := range req.Messages {
		in += len(m.Text)
		if m.Result != nil {
			in += len(m.Result.Content)
		}
		for _, c := range m.ToolCalls {
			in += len(c.Name) + len(c.Arguments)
		}
	}
	n := len(out.Text)
	for _, c := range out.ToolCalls {
		n += len(c.Name) + len(c.Arguments)
	}
	return llm.Usage{InputTokens: int64(in/4 + 1), OutputTokens: int64(n/4 + 1)}
}
