package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolloop/toolloop/tool"
)

func ExampleNew() {
	type GetOrderIn struct {
		OrderID string `json:"order_id" jsonschema:"the order number, e.g. A100"`
	}
	type GetOrderOut struct {
		Status string `json:"status"`
	}
	getOrder, err := tool.New(tool.Spec[GetOrderIn]{
		Name:        "get_order",
		Description: "Look up an order by its number",
		Resources:   func(in GetOrderIn) []string { return []string{"order:" + in.OrderID} },
	}, func(ctx context.Context, in GetOrderIn) (GetOrderOut, error) {
		if in.OrderID != "A100" {
			return GetOrderOut{}, tool.NotFound("no order " + in.OrderID)
		}
		return GetOrderOut{Status: "shipped"}, nil
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	out, err := getOrder.Call(ctx, json.RawMessage(`{"order_id":"A100"}`))
	fmt.Println(string(out), err)

	// A classified failure: the model can try something else.
	_, err = getOrder.Call(ctx, json.RawMessage(`{"order_id":"Z9"}`))
	fmt.Println(tool.KindOf(err), err)

	// Arguments that do not match the schema never reach the handler.
	_, err = getOrder.Call(ctx, json.RawMessage(`{"orderId":"A100"}`))
	var te *tool.Error
	fmt.Println(errors.As(err, &te), te.Kind)

	fmt.Println(getOrder.Effect(), getOrder.Risk(), getOrder.Resources(json.RawMessage(`{"order_id":"A100"}`)))
	// Output:
	// {"status":"shipped"} <nil>
	// not_found not_found: no order Z9
	// true invalid_arguments
	// read_only low [order:A100]
}

func ExampleNewRegistry() {
	type In struct {
		OrderID string `json:"order_id"`
	}
	get := tool.MustNew(tool.Spec[In]{Name: "get_order", Description: "Look up an order"},
		func(context.Context, In) (string, error) { return "shipped", nil })
	refund := tool.MustNew(tool.Spec[In]{Name: "refund", Description: "Refund an order", Effect: tool.Write},
		func(context.Context, In) (string, error) { return "refunded", nil })

	reg, err := tool.NewRegistry(get, refund)
	if err != nil {
		panic(err)
	}
	fmt.Println(reg.Names())
	for _, d := range reg.Definitions() {
		fmt.Printf("%s: %s\n", d.Name, d.Description)
	}
	t, ok := reg.Lookup("refund")
	fmt.Println(ok, t.Effect(), t.Risk())
	_, ok = reg.Lookup("delete_order")
	fmt.Println(ok)

	// The version does not depend on registration order.
	reg2, _ := tool.NewRegistry(refund, get)
	fmt.Println(reg.Version() == reg2.Version())

	_, err = tool.NewRegistry(get, get)
	fmt.Println(err)
	// Output:
	// [get_order refund]
	// get_order: Look up an order
	// refund: Refund an order
	// true write high
	// false
	// true
	// tool registry: two tools are named "get_order"
}
