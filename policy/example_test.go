package policy_test

import (
	"context"
	"fmt"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/tool"
)

func ExampleChain() {
	type In struct {
		OrderID string `json:"order_id"`
	}
	get := tool.MustNew(tool.Spec[In]{Name: "get_order"},
		func(context.Context, In) (string, error) { return "shipped", nil })
	refund := tool.MustNew(tool.Spec[In]{Name: "refund", Effect: tool.Write},
		func(context.Context, In) (string, error) { return "refunded", nil })
	del := tool.MustNew(tool.Spec[In]{Name: "delete_order", Effect: tool.Write},
		func(context.Context, In) (string, error) { return "deleted", nil })

	p := policy.Chain(
		policy.Allowlist("get_order", "refund"),
		policy.Permissions(policy.Grants{
			"role:support": {"get_order", "refund"},
			"guest":        {"get_order"},
		}),
		policy.ConfirmWrites(),
	)

	ask := func(who policy.Identity, t *tool.Tool) {
		d, err := p.Decide(context.Background(), policy.Request{
			Identity: who,
			Call:     llm.ToolCall{ID: "call_1", Name: t.Name(), Arguments: []byte(`{"order_id":"A100"}`)},
			Tool:     t,
			Risk:     t.Risk(),
		})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-6s %-12s -> %s (%s)\n", who.Name, t.Name(), d.Verdict, d.Rule)
	}
	support := policy.Identity{Name: "sam", Roles: []string{"support"}}
	guest := policy.Identity{Name: "guest"}
	ask(support, get)
	ask(support, refund)
	ask(support, del)
	ask(guest, refund)
	// Output:
	// sam    get_order    -> allow (chain)
	// sam    refund       -> needs_confirmation (confirm_writes)
	// sam    delete_order -> not_allowed (allowlist)
	// guest  refund       -> deny (permissions)
}
