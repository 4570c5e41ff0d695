package orders_test

import (
	"context"
	"fmt"

	"github.com/toolloop/toolloop/examples/orders"
)

// ExampleScenario_Run plays the normal scenario: the scripted model looks
// up order A100, tracks its parcel and answers.
func ExampleScenario_Run() {
	s, _ := orders.Lookup("normal")
	res, book, err := s.Run(context.Background())
	if err != nil {
		fmt.Println("setup failed:", err)
		return
	}
	// Status implements error; print its string value, not its Error().
	fmt.Printf("mode=%s status=%s\n", s.Name, string(res.Status))
	fmt.Println("steps:", res.Steps, "tool calls:", res.ToolCalls, "refunds:", book.TotalRefunds())
	// Output:
	// mode=normal status=final_answer
	// steps: 3 tool calls: 2 refunds: 0
}
