package tool_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/tool"
)

type refundArgs struct {
	OrderID string `json:"order_id"`
}

type refundResult struct {
	RefundID string `json:"refund_id"`
	Amount   int    `json:"amount"`
}

func TestCompensationArguments(t *testing.T) {
	args := json.RawMessage(`{"order_id":"A1","customer":{"id":"C7"}}`)
	result := json.RawMessage(`{"refund_id":"R-A1","amount":640}`)
	for _, c := range []struct {
		name    string
		mapping map[string]string
		want    string
		err     string
	}{
		{"fields", map[string]string{"refund_id": "result.refund_id", "order": "args.order_id"}, `{"order":"A1","refund_id":"R-A1"}`, ""},
		{"nested and whole", map[string]string{"who": "args.customer.id", "original": "result"}, `{"original":{"amount":640,"refund_id":"R-A1"},"who":"C7"}`, ""},
		{"literal", map[string]string{"reason": `="all or nothing"`, "n": "=2"}, `{"n":2,"reason":"all or nothing"}`, ""},
		{"missing field", map[string]string{"id": "result.reversal_id"}, "", `argument "id": result.reversal_id: the original result has no field "reversal_id"`},
		{"through a string", map[string]string{"id": "args.order_id.x"}, "", `the original args has no field "x"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			comp := &tool.Compensation{Tool: "reverse_refund", Args: c.mapping}
			got, err := comp.Arguments(args, result)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil || string(got) != c.want {
				t.Fatalf("Arguments = %s, %v; want %s", got, err, c.want)
			}
		})
	}
}

func TestCompensateWith(t *testing.T) {
	comp := tool.CompensateWith("reverse_refund", func(in refundArgs, out refundResult) (map[string]any, error) {
		return map[string]any{"refund_id": out.RefundID, "order_id": in.OrderID}, nil
	})
	got, err := comp.Arguments(json.RawMessage(`{"order_id":"A1"}`), json.RawMessage(`{"refund_id":"R-A1"}`))
	if err != nil || string(got) != `{"order_id":"A1","refund_id":"R-A1"}` {
		t.Fatalf("Arguments = %s, %v", got, err)
	}
	bad := &tool.Compensation{Tool: "reverse_refund", Build: func(_, _ json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`[1]`), nil
	}}
	if _, err := bad.Arguments(nil, nil); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Errorf("a Build that makes an array: %v", err)
	}
}

func refundNoop(context.Context, refundArgs) (refundResult, error) { return refundResult{}, nil }

// Declarations are checked when the tool and the registry are built, each
// error naming what is wrong.
func TestCompensationDeclarationChecked(t *testing.T) {
	for _, c := range []struct {
		name string
		spec tool.Spec[refundArgs]
		err  string
	}{
		{"read", tool.Spec[refundArgs]{Name: "r", Compensation: &tool.Compensation{Tool: "u"}}, "only a write can declare a compensation"},
		{"bad source", tool.Spec[refundArgs]{Name: "r", Effect: tool.Write,
			Compensation: &tool.Compensation{Tool: "u", Args: map[string]string{"id": "output.id"}}}, `compensation argument "id": source "output.id"`},
		{"bad literal", tool.Spec[refundArgs]{Name: "r", Effect: tool.Write,
			Compensation: &tool.Compensation{Tool: "u", Args: map[string]string{"id": "=nope"}}}, `literal "nope" is not JSON`},
		{"empty field", tool.Spec[refundArgs]{Name: "r", Effect: tool.Write,
			Compensation: &tool.Compensation{Tool: "u", Args: map[string]string{"id": "args..x"}}}, "empty field name"},
		{"bad group", tool.Spec[refundArgs]{Name: "r", AtomicGroup: "a group"}, `atomic group "a group"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := tool.New(c.spec, refundNoop); err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("New: %v, want an error containing %q", err, c.err)
			}
		})
	}
	refund := tool.MustNew(tool.Spec[refundArgs]{Name: "refund", Effect: tool.Write, AtomicGroup: "money",
		Compensation: &tool.Compensation{Tool: "reverse", Args: map[string]string{"id": "result.refund_id"}}}, refundNoop)
	if refund.AtomicGroup() != "money" || refund.Compensation().Tool != "reverse" {
		t.Errorf("group %q, compensation %+v", refund.AtomicGroup(), refund.Compensation())
	}
	read := tool.MustNew(tool.Spec[refundArgs]{Name: "reverse"}, refundNoop)
	write := tool.MustNew(tool.Spec[refundArgs]{Name: "reverse", Effect: tool.Write}, refundNoop)
	if _, err := tool.NewRegistry(refund); err == nil || !strings.Contains(err.Error(), `compensated by "reverse", which is not in the registry`) {
		t.Errorf("missing compensating tool: %v", err)
	}
	if _, err := tool.NewRegistry(refund, read); err == nil || !strings.Contains(err.Error(), "which is not a write") {
		t.Errorf("compensating tool is a read: %v", err)
	}
	reg, err := tool.NewRegistry(refund, write)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := tool.NewRegistry(tool.MustNew(tool.Spec[refundArgs]{Name: "refund", Effect: tool.Write}, refundNoop), write)
	if reg.Version() == plain.Version() {
		t.Error("the compensation does not change the tool set's version")
	}
}
