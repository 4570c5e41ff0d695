package loop_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// A durable run pauses for a person's confirmation, the answer is recorded
// in the run's log, and the run is resumed from the store. The pause could
// last days and the resuming process could be another one: everything the
// run needs is in the store.
func ExampleRunner_Resume() {
	type refundIn struct {
		OrderID string `json:"order_id"`
	}
	refunds := 0
	refund := tool.MustNew(tool.Spec[refundIn]{Name: "refund_order", Description: "refund an order", Effect: tool.Write},
		func(ctx context.Context, in refundIn) (map[string]any, error) {
			refunds++
			return map[string]any{"order_id": in.OrderID, "refunded": true}, nil
		})
	tools, _ := tool.NewRegistry(refund)
	st := store.NewMemory()
	runner, err := loop.NewRunner(loop.Config{
		Model: llmtest.New(
			llmtest.Calls(llmtest.Call("call_1", "refund_order", `{"order_id":"A100"}`)),
			llmtest.Text("Order A100 is refunded."),
		),
		Tools:    tools,
		Policy:   policy.ConfirmWrites(), // every write waits for a person
		Store:    st,
		NewRunID: func() string { return "run-1" },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	paused, err := runner.Run(ctx, []llm.Message{llm.UserMessage("Refund order A100.")})
	fmt.Println(paused.Status, paused.Pending[0].CallID, paused.Pending[0].Tool, refunds)
	// The pause is an error too, so that it never passes for an answer.
	fmt.Println(errors.Is(err, loop.ConfirmationRequired), paused.Status.Resumable())

	// Later, a person approves; Decide appends the answer to the log.
	answer := loop.Confirmation{CallID: "call_1", Approved: true, By: "bob", Note: "receipt checked"}
	if err := loop.Decide(ctx, st, "run-1", answer, time.Now()); err != nil {
		fmt.Println(err)
		return
	}

	res, err := runner.Resume(ctx, "run-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.Answer(), refunds)
	// Output:
	// confirmation_required call_1 refund_order 0
	// true true
	// final_answer Order A100 is refunded. 1
}
