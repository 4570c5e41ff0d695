package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/tool/mcp"
)

type refundIn struct {
	OrderID string `json:"order_id"`
}

type refundOut struct {
	RefundID string `json:"refund_id"`
}

type reverseIn struct {
	RefundID string `json:"refund_id"`
	Reason   string `json:"reason"`
}

// till is an MCP server with refund (a write), reverse (a write that
// undoes a refund), voucher (a write that fails for order B) and balance
// (read-only); it counts the refunds that stand.
type till struct {
	srv      *mcpsdk.Server
	mu       sync.Mutex
	standing map[string]bool
	reasons  []string
}

func newTill() *till {
	b := &till{standing: map[string]bool{}}
	b.srv = mcpsdk.NewServer(&mcpsdk.Implementation{Name: "till", Version: "v1"}, nil)
	mcpsdk.AddTool(b.srv, &mcpsdk.Tool{Name: "refund", Description: "refund an order"},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in refundIn) (*mcpsdk.CallToolResult, refundOut, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.standing["R-"+in.OrderID] = true
			return nil, refundOut{RefundID: "R-" + in.OrderID}, nil
		})
	mcpsdk.AddTool(b.srv, &mcpsdk.Tool{Name: "reverse", Description: "reverse a refund"},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in reverseIn) (*mcpsdk.CallToolResult, refundOut, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			if !b.standing[in.RefundID] {
				return nil, refundOut{}, fmt.Errorf("no refund %s", in.RefundID)
			}
			delete(b.standing, in.RefundID)
			b.reasons = append(b.reasons, in.Reason)
			return nil, refundOut{RefundID: in.RefundID}, nil
		})
	mcpsdk.AddTool(b.srv, &mcpsdk.Tool{Name: "voucher", Description: "issue a voucher"},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in refundIn) (*mcpsdk.CallToolResult, any, error) {
			if in.OrderID == "B" {
				return nil, nil, fmt.Errorf("order B has not shipped")
			}
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "V-" + in.OrderID}}}, nil, nil
		})
	mcpsdk.AddTool(b.srv, &mcpsdk.Tool{Name: "balance", Description: "the till's balance",
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "100"}}}, nil, nil
		})
	return b
}

func (b *till) connect(t *testing.T, opts *mcp.Options) *mcp.Source {
	t.Helper()
	return connect(t, &fixture{srv: b.srv}, opts)
}

var refundUndone = map[string]mcp.ToolConfig{
	"refund": {Compensation: &tool.Compensation{Tool: "reverse",
		Args: map[string]string{"refund_id": "result.refund_id", "reason": `="voucher failed"`}}},
}

// TestConfiguredCompensation: a configuration gives refund its
// compensation (reverse, prefixed as every name) and the server's writes
// a group; a run that refunds A and fails the voucher for B has the refund
// reversed on the server, with the mapped arguments.
func TestConfiguredCompensation(t *testing.T) {
	b := newTill()
	src := b.connect(t, &mcp.Options{Prefix: "till_", AtomicGroup: "money", Tools: refundUndone})
	tools := toolsByName(t, src)
	refund := tools["till_refund"]
	if c := refund.Compensation(); c == nil || c.Tool != "till_reverse" || c.Args["refund_id"] != "result.refund_id" {
		t.Fatalf("refund's compensation: %+v", refund.Compensation())
	}
	for name, want := range map[string]string{"till_refund": "money", "till_voucher": "money", "till_reverse": "money", "till_balance": ""} {
		if g := tools[name].AtomicGroup(); g != want {
			t.Errorf("%s: group %q, want %q", name, g, want)
		}
	}
	reg, err := tool.NewRegistry(tools["till_refund"], tools["till_voucher"], tools["till_reverse"])
	if err != nil {
		t.Fatal(err)
	}
	res, _ := loop.Run(context.Background(), loop.Config{
		Model: llmtest.New(llmtest.Calls(
			llmtest.Call("c1", "till_refund", map[string]string{"order_id": "A"}),
			llmtest.Call("c2", "till_voucher", map[string]string{"order_id": "B"})), llmtest.Text("neither")),
		Tools: reg, Compensation: loop.CompensateWrites,
		Executor: executor.New(&executor.Options{Ledger: store.NewMemory()}),
	}, []llm.Message{llm.UserMessage("both or neither")})
	if res.Status != loop.FinalAnswer || res.Writes == nil || res.Writes.Outcome != loop.WritesUndone {
		t.Fatalf("status %s (%s), writes %+v", res.Status, res.Detail, res.Writes)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.standing["R-A"] || len(b.reasons) != 1 || b.reasons[0] != "voucher failed" {
		t.Errorf("the refund stands: %v, reversals with reasons %q", b.standing, b.reasons)
	}
}

// TestToolConfigErrors: each mistake in a configuration fails the
// listing with an error naming the tool and what is wrong, even with
// OnSkipped set (which leaves out only tools the server describes badly).
func TestToolConfigErrors(t *testing.T) {
	comp := func(undo string, args map[string]string) map[string]mcp.ToolConfig {
		return map[string]mcp.ToolConfig{"refund": {Compensation: &tool.Compensation{Tool: undo, Args: args}}}
	}
	trust := func(name string, c mcp.TrustConfig) mcp.Options {
		return mcp.Options{Tools: map[string]mcp.ToolConfig{name: {Trust: &c}}}
	}
	for _, tc := range []struct {
		name string
		opts mcp.Options
		want []string
	}{
		{"unknown tool", mcp.Options{Tools: map[string]mcp.ToolConfig{"refnud": {AtomicGroup: "money"}}},
			[]string{`tool "refnud": configuration: the server offers no tool of that name`}},
		{"filtered out", mcp.Options{Tools: refundUndone, Filter: func(t *mcpsdk.Tool) bool { return t.Name != "refund" }},
			[]string{`tool "refund": configuration: the server offers no tool of that name (or Options.Filter left it out)`}},
		{"missing compensating tool", mcp.Options{Tools: comp("unrefund", map[string]string{"refund_id": "result.refund_id"})},
			[]string{`tool "refund": configuration: its compensation names tool "unrefund", which the server does not offer`}},
		{"read-only compensating tool", mcp.Options{Tools: comp("balance", nil)},
			[]string{`tool "refund": configuration: its compensation names tool "balance", which is read-only`}},
		{"itself", mcp.Options{Tools: comp("refund", nil)},
			[]string{`tool "refund": configuration: its compensation names the tool itself`}},
		{"bad source", mcp.Options{Tools: comp("reverse", map[string]string{"refund_id": "reslut.refund_id"})},
			[]string{`tool "refund"`, `compensation argument "refund_id"`, "reslut.refund_id"}},
		{"read-only compensated", mcp.Options{Tools: map[string]mcp.ToolConfig{"balance": {Compensation: &tool.Compensation{Tool: "reverse"}}}},
			[]string{`tool "balance"`, "only a write can declare a compensation"}},
		{"bad group", mcp.Options{Tools: map[string]mcp.ToolConfig{"voucher": {AtomicGroup: "money box"}}},
			[]string{`tool "voucher"`, `atomic group "money box"`}},
		{"destination not an argument", trust("refund", mcp.TrustConfig{Destinations: []string{"order"}}),
			[]string{`tool "refund": configuration: trust: destination "order" is not an argument: the schema has no property "order" (it has order_id)`}},
		{"destination inside a string", trust("refund", mcp.TrustConfig{Destinations: []string{"order_id.host"}}),
			[]string{`tool "refund": configuration: trust: destination "order_id.host" is not an argument: order_id is a string, which has no fields`}},
		{"result field not in the output schema", trust("refund", mcp.TrustConfig{TrustedFields: []string{"refund"}}),
			[]string{`tool "refund": configuration: trust: result field "refund" cannot be one: the schema has no property "refund" (it has refund_id)`}},
		{"empty key", trust("voucher", mcp.TrustConfig{UntrustedFields: []string{"note..text"}}),
			[]string{`tool "voucher": configuration: trust: result field "note..text" cannot be one: it has an empty key`}},
		{"trusted and untrusted", trust("refund", mcp.TrustConfig{TrustedFields: []string{"refund_id"}, UntrustedFields: []string{"refund_id"}}),
			[]string{`tool "refund": configuration: trust: result field "refund_id" is declared both trusted and untrusted`}},
		{"credentials of a read", trust("balance", mcp.TrustConfig{Credentials: ptr(true)}),
			[]string{`tool "balance": configuration: trust: credentials is declared, but the server marks the tool read-only`}},
		{"server-wide destinations", mcp.Options{Trust: &mcp.TrustConfig{Destinations: []string{"order_id"}}},
			[]string{`configuration of the server's trust: destinations and result fields are a tool's own`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var skipped []string
			tc.opts.OnSkipped = func(t *mcpsdk.Tool, err error) { skipped = append(skipped, t.Name) }
			src := newTill().connect(t, &tc.opts)
			_, err := src.Tools(context.Background())
			if err == nil {
				t.Fatal("the configuration was accepted")
			}
			if ce := (*mcp.ConfigError)(nil); !errors.As(err, &ce) {
				t.Errorf("error %q is not a ConfigError", err)
			}
			for _, w := range append(tc.want, `server "till"`) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if len(skipped) > 0 {
				t.Errorf("tools %v skipped instead of failing", skipped)
			}
		})
	}
}

// TestConfiguredTrust: the server's trust applies to every tool and a
// tool's own has the last word on what it sets; what neither sets keeps
// MCP's defaults (results untrusted, outward unless openWorldHint is
// false, destinations unknown), and declaring destinations, even none,
// makes them known.
func TestConfiguredTrust(t *testing.T) {
	src := newTill().connect(t, &mcp.Options{
		Trust: &mcp.TrustConfig{ReadsPrivate: ptr(true)},
		Tools: map[string]mcp.ToolConfig{
			"refund": {Trust: &mcp.TrustConfig{TrustedFields: []string{"refund_id"}, Destinations: []string{"order_id"},
				Outward: ptr(false), Credentials: ptr(true)}},
			"reverse": {Trust: &mcp.TrustConfig{Destinations: []string{}, ReadsPrivate: ptr(false)}},
			"balance": {Trust: &mcp.TrustConfig{Trusted: ptr(true)}},
		}})
	tools := toolsByName(t, src)
	for name, want := range map[string]tool.Trust{
		"refund":  {Untrusted: true, TrustedFields: []string{"refund_id"}, Destinations: []string{"order_id"}, ReadsPrivate: true, Credentials: true},
		"reverse": {Untrusted: true, Outward: true},
		"voucher": {Untrusted: true, ReadsPrivate: true, Outward: true, DestinationsUnknown: true},
		"balance": {ReadsPrivate: true, Outward: true, DestinationsUnknown: true},
	} {
		got := tools[name].Trust()
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Errorf("%s: trust %+v, want %+v", name, got, want)
		}
	}
}
