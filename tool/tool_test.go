package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

type orderIn struct {
	OrderID string   `json:"order_id" jsonschema:"the order to look up"`
	Limit   int      `json:"limit,omitempty"`
	Tags    []string `json:"tags,omitempty"`
}

type orderOut struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
	Limit   int    `json:"limit,omitempty"`
}

type optionalIn struct {
	Query string `json:"query,omitempty"`
	Page  int    `json:"page,omitempty"`
}

type addressIn struct {
	Street string `json:"street"`
	City   string `json:"city"`
}

type shipIn struct {
	OrderID string    `json:"order_id"`
	To      addressIn `json:"to"`
}

func getOrder(t *testing.T) (*tool.Tool, *int) {
	t.Helper()
	calls := new(int)
	tl, err := tool.New(tool.Spec[orderIn]{
		Name:        "get_order",
		Description: "Look up an order",
		Resources:   func(in orderIn) []string { return []string{"order:" + in.OrderID} },
		Sensitive:   []string{"order_id"},
	}, func(ctx context.Context, in orderIn) (orderOut, error) {
		*calls++
		if in.OrderID == "missing" {
			return orderOut{}, tool.NotFound("no order " + in.OrderID)
		}
		return orderOut{OrderID: in.OrderID, Status: "shipped", Limit: in.Limit}, nil
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tl, calls
}

// schemaOf decodes a tool's input schema into a generic map.
func schemaOf(t *testing.T, tl *tool.Tool) map[string]any {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal(tl.Definition().InputSchema, &s); err != nil {
		t.Fatalf("input schema is not JSON: %v", err)
	}
	return s
}

// toolError asserts that err is a *tool.Error of the given kind and returns it.
func toolError(t *testing.T, err error, kind llm.ErrorKind) *tool.Error {
	t.Helper()
	var te *tool.Error
	if !errors.As(err, &te) {
		t.Fatalf("error = %v (%T), want a *tool.Error", err, err)
	}
	if te.Kind != kind {
		t.Fatalf("error kind = %q, want %q (error: %v)", te.Kind, kind, err)
	}
	return te
}

func TestSchemaInferredFromStruct(t *testing.T) {
	tl, _ := getOrder(t)
	s := schemaOf(t, tl)
	if s["type"] != "object" {
		t.Errorf("type = %v, want object", s["type"])
	}
	if s["additionalProperties"] != false {
		t.Errorf("additionalProperties = %v, want false", s["additionalProperties"])
	}
	props, _ := s["properties"].(map[string]any)
	for _, p := range []string{"order_id", "limit", "tags"} {
		if _, ok := props[p]; !ok {
			t.Errorf("schema has no property %q: %v", p, props)
		}
	}
	if got := props["order_id"].(map[string]any)["type"]; got != "string" {
		t.Errorf("order_id type = %v, want string", got)
	}
	if got := props["limit"].(map[string]any)["type"]; got != "integer" {
		t.Errorf("limit type = %v, want integer", got)
	}
	if got := props["order_id"].(map[string]any)["description"]; got != "the order to look up" {
		t.Errorf("order_id description = %v", got)
	}
	// Fields without omitempty are required; the others are optional.
	if got := fmt.Sprint(s["required"]); got != "[order_id]" {
		t.Errorf("required = %v, want [order_id]", got)
	}
}

func TestValidate(t *testing.T) {
	tl, _ := getOrder(t)
	tests := []struct {
		name string
		args string
		// wantMsg lists substrings the model-facing message must contain;
		// nil means the arguments are valid.
		wantMsg []string
	}{
		{"valid", `{"order_id":"A1"}`, nil},
		{"valid with optional fields", `{"order_id":"A1","limit":3,"tags":["x"]}`, nil},
		{"valid integral float", `{"order_id":"A1","limit":3.0}`, nil},
		{"invalid JSON", `{"order_id":`, []string{"not valid JSON"}},
		{"not JSON at all", `order_id=A1`, []string{"not valid JSON"}},
		{"trailing garbage", `{"order_id":"A1"} x`, []string{"not valid JSON"}},
		{"wrong type", `{"order_id":5}`, []string{"order_id", "string"}},
		{"wrong nested type", `{"order_id":"A1","tags":[1]}`, []string{"tags"}},
		{"fraction for integer", `{"order_id":"A1","limit":1.5}`, []string{"limit", "integer"}},
		{"missing required field", `{"limit":1}`, []string{"order_id", "missing"}},
		{"extra field", `{"order_id":"A1","orderId":"A1"}`, []string{"orderId"}},
		{"array instead of object", `["A1"]`, []string{"object"}},
		{"null", `null`, []string{"object"}},
		{"empty arguments mean {}", ``, []string{"order_id", "missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tl.Validate(json.RawMessage(tt.args))
			if tt.wantMsg == nil {
				if err != nil {
					t.Fatalf("Validate(%s) = %v, want nil", tt.args, err)
				}
				return
			}
			te := toolError(t, err, llm.KindInvalidArguments)
			for _, w := range tt.wantMsg {
				if !strings.Contains(te.Msg, w) {
					t.Errorf("message %q does not mention %q", te.Msg, w)
				}
			}
			if !strings.Contains(err.Error(), string(llm.KindInvalidArguments)) {
				t.Errorf("Error() = %q, want the kind in it", err.Error())
			}
		})
	}
}

func TestValidateNested(t *testing.T) {
	tl := tool.MustNew(tool.Spec[shipIn]{Name: "ship", Effect: tool.Write},
		func(_ context.Context, in shipIn) (string, error) { return in.To.City, nil })
	if _, err := tl.Validate(json.RawMessage(`{"order_id":"A1","to":{"street":"Main 1","city":"Oslo"}}`)); err != nil {
		t.Fatalf("valid nested arguments rejected: %v", err)
	}
	_, err := tl.Validate(json.RawMessage(`{"order_id":"A1","to":{"street":"Main 1"}}`))
	te := toolError(t, err, llm.KindInvalidArguments)
	if !strings.Contains(te.Msg, "city") {
		t.Errorf("message %q does not name the missing nested field", te.Msg)
	}
	_, err = tl.Validate(json.RawMessage(`{"order_id":"A1","to":{"street":"Main 1","city":"Oslo","zip":1}}`))
	te = toolError(t, err, llm.KindInvalidArguments)
	if !strings.Contains(te.Msg, "zip") {
		t.Errorf("message %q does not name the extra nested field", te.Msg)
	}
}

func TestMissingArgumentsMeanEmptyObject(t *testing.T) {
	var got []optionalIn
	tl := tool.MustNew(tool.Spec[optionalIn]{Name: "list_orders"},
		func(_ context.Context, in optionalIn) ([]string, error) {
			got = append(got, in)
			return []string{}, nil
		})
	for _, args := range []json.RawMessage{nil, {}, json.RawMessage(`{}`)} {
		fp, err := tl.Validate(args)
		if err != nil {
			t.Fatalf("Validate(%q) = %v", args, err)
		}
		if fp != tool.Fingerprint(map[string]any{}) {
			t.Errorf("Validate(%q) fingerprint differs from that of {}", args)
		}
		out, err := tl.Call(context.Background(), args)
		if err != nil || string(out) != `[]` {
			t.Fatalf("Call(%q) = %s, %v", args, out, err)
		}
	}
	if len(got) != 3 || slices.ContainsFunc(got, func(in optionalIn) bool { return in != (optionalIn{}) }) {
		t.Errorf("handler inputs = %+v, want three zero values", got)
	}
}

func TestCallRunsHandlerOnlyOnValidArguments(t *testing.T) {
	tl, calls := getOrder(t)
	ctx := context.Background()

	out, err := tl.Call(ctx, json.RawMessage(`{"limit":2, "order_id":"A1"}`))
	if err != nil {
		t.Fatal(err)
	}
	var o orderOut
	if err := json.Unmarshal(out, &o); err != nil || o != (orderOut{OrderID: "A1", Status: "shipped", Limit: 2}) {
		t.Errorf("Call output = %s (%v)", out, err)
	}

	for _, bad := range []string{`{`, `{"order_id":1}`, `{}`, `{"order_id":"A1","x":1}`} {
		if _, err := tl.Call(ctx, json.RawMessage(bad)); tool.KindOf(err) != llm.KindInvalidArguments {
			t.Errorf("Call(%s) error = %v, want invalid_arguments", bad, err)
		}
	}
	if *calls != 1 {
		t.Errorf("handler ran %d times, want 1 (only for the valid call)", *calls)
	}

	// A handler's classified error reaches the caller unchanged.
	_, err = tl.Call(ctx, json.RawMessage(`{"order_id":"missing"}`))
	te := toolError(t, err, llm.KindNotFound)
	if te.Msg != "no order missing" {
		t.Errorf("message = %q", te.Msg)
	}
}

func TestInvokeDecodesAndEncodes(t *testing.T) {
	tl, calls := getOrder(t)
	out, err := tl.Invoke(context.Background(), json.RawMessage(`{"order_id":"B2","limit":9}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"order_id":"B2","status":"shipped","limit":9}` {
		t.Errorf("Invoke output = %s", out)
	}
	if *calls != 1 {
		t.Errorf("handler ran %d times", *calls)
	}

	// Invoke does not validate, but decoding still fails cleanly, as an
	// invalid_arguments error naming the field, before the handler runs.
	_, err = tl.Invoke(context.Background(), json.RawMessage(`{"order_id":7}`))
	te := toolError(t, err, llm.KindInvalidArguments)
	if !strings.Contains(te.Msg, "order_id") {
		t.Errorf("decode error %q does not name the field", te.Msg)
	}
	_, err = tl.Invoke(context.Background(), json.RawMessage(`{"order_id":`))
	toolError(t, err, llm.KindInvalidArguments)
	if *calls != 1 {
		t.Errorf("handler ran on undecodable arguments (%d calls)", *calls)
	}
}

func TestInvokePassesContext(t *testing.T) {
	type key struct{}
	tl := tool.MustNew(tool.Spec[optionalIn]{Name: "ctx_tool"},
		func(ctx context.Context, _ optionalIn) (string, error) {
			v, _ := ctx.Value(key{}).(string)
			return v, ctx.Err()
		})
	ctx := context.WithValue(context.Background(), key{}, "marker")
	out, err := tl.Call(ctx, nil)
	if err != nil || string(out) != `"marker"` {
		t.Errorf("Call = %s, %v", out, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := tl.Call(cctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Call with canceled context = %v", err)
	}
}

func TestInvokeUnencodableOutput(t *testing.T) {
	tl := tool.MustNew(tool.Spec[optionalIn]{Name: "bad_out"},
		func(context.Context, optionalIn) (func(), error) { return func() {}, nil })
	_, err := tl.Call(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "encoding result") {
		t.Fatalf("Call = %v, want an encoding error", err)
	}
	if tool.KindOf(err) != llm.KindInternal {
		t.Errorf("kind = %q, want internal", tool.KindOf(err))
	}
}

func TestMapInput(t *testing.T) {
	tl, err := tool.New(tool.Spec[map[string]any]{Name: "free_form"},
		func(_ context.Context, in map[string]any) (int, error) { return len(in), nil })
	if err != nil {
		t.Fatalf("New with a map input: %v", err)
	}
	out, err := tl.Call(context.Background(), json.RawMessage(`{"a":1,"b":[true]}`))
	if err != nil || string(out) != "2" {
		t.Errorf("Call = %s, %v", out, err)
	}
	if _, err := tl.Validate(json.RawMessage(`[1]`)); tool.KindOf(err) != llm.KindInvalidArguments {
		t.Errorf("array accepted by a map tool: %v", err)
	}
}

func TestNewRaw(t *testing.T) {
	var got []string
	def := tool.Definition{
		Name:        "refund",
		Description: "Refund an order",
		InputSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"order_id": {"type": "string", "minLength": 2},
				"amount": {"type": "number", "minimum": 0}
			},
			"required": ["order_id", "amount"],
			"additionalProperties": false
		}`),
		Effect:    tool.Write,
		Sensitive: []string{"amount"},
	}
	tl, err := tool.NewRaw(def, func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
		got = append(got, string(args))
		return json.RawMessage(`{"refunded":true}`), nil
	}, func(args json.RawMessage) []string {
		var in struct {
			OrderID string `json:"order_id"`
		}
		_ = json.Unmarshal(args, &in)
		return []string{"refund:" + in.OrderID}
	})
	if err != nil {
		t.Fatalf("NewRaw: %v", err)
	}
	ctx := context.Background()

	out, err := tl.Call(ctx, json.RawMessage(`{"order_id":"A100","amount":5}`))
	if err != nil || string(out) != `{"refunded":true}` {
		t.Fatalf("Call = %s, %v", out, err)
	}
	bad := map[string]string{
		`{"order_id":"A100"}`:                      "amount",
		`{"order_id":"A","amount":5}`:              "order_id",
		`{"order_id":"A100","amount":-1}`:          "amount",
		`{"order_id":"A100","amount":"5"}`:         "amount",
		`{"order_id":"A100","amount":5,"note":""}`: "note",
	}
	for args, field := range bad {
		_, err := tl.Call(ctx, json.RawMessage(args))
		te := toolError(t, err, llm.KindInvalidArguments)
		if !strings.Contains(te.Msg, field) {
			t.Errorf("Call(%s): message %q does not mention %q", args, te.Msg, field)
		}
	}
	if len(got) != 1 {
		t.Errorf("raw handler ran %d times, want 1: %q", len(got), got)
	}
	if r := tl.Resources(json.RawMessage(`{"order_id":"A100","amount":5}`)); !slices.Equal(r, []string{"refund:A100"}) {
		t.Errorf("Resources = %v", r)
	}
	if tl.Effect() != tool.Write || tl.Risk() != tool.RiskHigh {
		t.Errorf("effect, risk = %q, %q; want write, high", tl.Effect(), tl.Risk())
	}

	// The tool keeps its own copy of the definition it was given.
	def.InputSchema[0] = 'X'
	def.Sensitive[0] = "changed"
	d := tl.Definition()
	if d.InputSchema[0] != '{' || d.Sensitive[0] != "amount" {
		t.Errorf("NewRaw shares the caller's definition: schema %q, sensitive %v", d.InputSchema[:1], d.Sensitive)
	}
}

func TestNewRawErrors(t *testing.T) {
	ok := func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	obj := json.RawMessage(`{"type":"object"}`)
	tests := []struct {
		name    string
		def     tool.Definition
		fn      tool.RawHandler
		wantErr string
	}{
		{"nil handler", tool.Definition{Name: "t", InputSchema: obj}, nil, "nil handler"},
		{"no schema", tool.Definition{Name: "t"}, ok, "InputSchema is required"},
		{"schema not JSON", tool.Definition{Name: "t", InputSchema: json.RawMessage(`{type:object}`)}, ok, "not a JSON Schema"},
		{"schema not a schema", tool.Definition{Name: "t", InputSchema: json.RawMessage(`[1,2]`)}, ok, "not a JSON Schema"},
		{"string schema", tool.Definition{Name: "t", InputSchema: json.RawMessage(`{"type":"string"}`)}, ok, "must describe a JSON object"},
		{"schema without type", tool.Definition{Name: "t", InputSchema: json.RawMessage(`{}`)}, ok, "must describe a JSON object"},
		{"bad name", tool.Definition{Name: "bad name", InputSchema: obj}, ok, "tool name"},
		{"unknown effect", tool.Definition{Name: "t", InputSchema: obj, Effect: "delete"}, ok, `unknown effect "delete"`},
		{"unknown risk", tool.Definition{Name: "t", InputSchema: obj, Risk: "extreme"}, ok, `unknown risk "extreme"`},
		{"unknown timeout action", tool.Definition{Name: "t", InputSchema: obj, OnTimeout: "retry"}, ok, `unknown timeout action "retry"`},
		{"negative timeout", tool.Definition{Name: "t", InputSchema: obj, Timeout: -time.Second}, ok, "negative timeout"},
		{"unresolvable ref", tool.Definition{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`)}, ok, "resolving input schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, err := tool.NewRaw(tt.def, tt.fn, nil)
			if err == nil {
				t.Fatalf("NewRaw succeeded: %+v", tl.Definition())
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestNames(t *testing.T) {
	noop := func(context.Context, optionalIn) (int, error) { return 0, nil }
	good := []string{"a", "get_order", "get-order", "Tool9", strings.Repeat("x", 64)}
	for _, n := range good {
		if _, err := tool.New(tool.Spec[optionalIn]{Name: n}, noop); err != nil {
			t.Errorf("name %q rejected: %v", n, err)
		}
	}
	bad := []string{"", "get order", "get.order", "naïve", "a/b", strings.Repeat("x", 65), "tool\n"}
	for _, n := range bad {
		_, err := tool.New(tool.Spec[optionalIn]{Name: n}, noop)
		if err == nil {
			t.Errorf("name %q accepted", n)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", n)) || !strings.Contains(err.Error(), "64") {
			t.Errorf("name %q: error %q should quote the name and state the rule", n, err)
		}
	}
}

func TestNewErrors(t *testing.T) {
	noop := func(context.Context, optionalIn) (int, error) { return 0, nil }
	tests := []struct {
		name    string
		build   func() (*tool.Tool, error)
		wantErr string
	}{
		{"nil handler", func() (*tool.Tool, error) {
			return tool.New[optionalIn, int](tool.Spec[optionalIn]{Name: "t"}, nil)
		}, "nil handler"},
		{"string input", func() (*tool.Tool, error) {
			return tool.New(tool.Spec[string]{Name: "t"}, func(context.Context, string) (int, error) { return 0, nil })
		}, "JSON object"},
		{"slice input", func() (*tool.Tool, error) {
			return tool.New(tool.Spec[[]int]{Name: "t"}, func(context.Context, []int) (int, error) { return 0, nil })
		}, "JSON object"},
		{"uninferable input", func() (*tool.Tool, error) {
			return tool.New(tool.Spec[struct{ C chan int }]{Name: "t"},
				func(context.Context, struct{ C chan int }) (int, error) { return 0, nil })
		}, "inferring input schema"},
		{"unknown effect", func() (*tool.Tool, error) {
			return tool.New(tool.Spec[optionalIn]{Name: "t", Effect: "Write"}, noop)
		}, `unknown effect "Write"`},
		{"unknown risk", func() (*tool.Tool, error) {
			return tool.New(tool.Spec[optionalIn]{Name: "t", Risk: "critical"}, noop)
		}, `unknown risk "critical"`},
		{"unknown timeout action", func() (*tool.Tool, error) {
			return tool.New(tool.Spec[optionalIn]{Name: "t", OnTimeout: "ignore"}, noop)
		}, `unknown timeout action "ignore"`},
		{"negative timeout", func() (*tool.Tool, error) {
			return tool.New(tool.Spec[optionalIn]{Name: "t", Timeout: -1}, noop)
		}, "negative timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, err := tt.build()
			if err == nil {
				t.Fatalf("built %+v, want an error", tl.Definition())
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %q, want it to contain %q", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), `"t"`) {
				t.Errorf("error = %q does not name the tool", err)
			}
		})
	}
}

func TestMustNewPanics(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("MustNew with a bad name did not panic")
		}
		if err, ok := r.(error); !ok || !strings.Contains(err.Error(), "tool name") {
			t.Errorf("panic value = %v", r)
		}
	}()
	tool.MustNew(tool.Spec[optionalIn]{Name: "bad name"}, func(context.Context, optionalIn) (int, error) { return 0, nil })
}

func TestDefaults(t *testing.T) {
	noop := func(context.Context, optionalIn) (int, error) { return 0, nil }
	tests := []struct {
		spec      tool.Spec[optionalIn]
		effect    tool.Effect
		risk      tool.Risk
		onTimeout tool.TimeoutAction
	}{
		{tool.Spec[optionalIn]{Name: "a"}, tool.ReadOnly, tool.RiskLow, tool.TimeoutStop},
		{tool.Spec[optionalIn]{Name: "b", Effect: tool.ReadOnly}, tool.ReadOnly, tool.RiskLow, tool.TimeoutStop},
		{tool.Spec[optionalIn]{Name: "c", Effect: tool.Write}, tool.Write, tool.RiskHigh, tool.TimeoutStop},
		{tool.Spec[optionalIn]{Name: "d", Effect: tool.Write, Risk: tool.RiskMedium}, tool.Write, tool.RiskMedium, tool.TimeoutStop},
		{tool.Spec[optionalIn]{Name: "e", Risk: tool.RiskHigh, OnTimeout: tool.TimeoutReport}, tool.ReadOnly, tool.RiskHigh, tool.TimeoutReport},
	}
	for _, tt := range tests {
		tl := tool.MustNew(tt.spec, noop)
		d := tl.Definition()
		if tl.Effect() != tt.effect || d.Effect != tt.effect {
			t.Errorf("%s: effect = %q / %q, want %q", tt.spec.Name, tl.Effect(), d.Effect, tt.effect)
		}
		if tl.Risk() != tt.risk || d.Risk != tt.risk {
			t.Errorf("%s: risk = %q / %q, want %q", tt.spec.Name, tl.Risk(), d.Risk, tt.risk)
		}
		if tl.OnTimeout() != tt.onTimeout || d.OnTimeout != tt.onTimeout {
			t.Errorf("%s: on timeout = %q / %q, want %q", tt.spec.Name, tl.OnTimeout(), d.OnTimeout, tt.onTimeout)
		}
		if tl.Timeout() != 0 {
			t.Errorf("%s: timeout = %v, want 0 (executor default)", tt.spec.Name, tl.Timeout())
		}
	}
}

func TestAccessors(t *testing.T) {
	tl := tool.MustNew(tool.Spec[optionalIn]{
		Name: "search", Description: "Search orders", Timeout: 3 * time.Second,
		Sensitive: []string{"query"}, ExclusiveGroup: "erp",
	}, func(context.Context, optionalIn) (int, error) { return 0, nil })
	if tl.Name() != "search" || tl.Timeout() != 3*time.Second {
		t.Errorf("Name, Timeout = %q, %v", tl.Name(), tl.Timeout())
	}
	d := tl.Definition()
	if d.Name != "search" || d.Description != "Search orders" || d.Timeout != 3*time.Second ||
		!slices.Equal(d.Sensitive, []string{"query"}) || d.ExclusiveGroup != "erp" {
		t.Errorf("Definition = %+v", d)
	}
}

func TestSpecSensitiveIsCopied(t *testing.T) {
	sensitive := []string{"query"}
	tl := tool.MustNew(tool.Spec[optionalIn]{Name: "s", Sensitive: sensitive},
		func(context.Context, optionalIn) (int, error) { return 0, nil })
	sensitive[0] = "changed"
	if got := tl.Definition().Sensitive; !slices.Equal(got, []string{"query"}) {
		t.Errorf("Sensitive = %v; New shares the spec's slice", got)
	}
}

func TestDefinitionReturnsCopy(t *testing.T) {
	tl, _ := getOrder(t)
	before := tl.Definition()
	before.InputSchema = slices.Clone(before.InputSchema)
	schemaBefore := string(before.InputSchema)

	d := tl.Definition()
	d.Name = "other"
	d.Effect = tool.Write
	d.Sensitive[0] = "changed"
	d.Sensitive = append(d.Sensitive, "more")
	for i := range d.InputSchema {
		d.InputSchema[i] = ' '
	}

	after := tl.Definition()
	if tl.Name() != "get_order" || after.Name != "get_order" || after.Effect != tool.ReadOnly {
		t.Errorf("definition changed: %+v", after)
	}
	if !slices.Equal(after.Sensitive, []string{"order_id"}) {
		t.Errorf("Sensitive = %v, want [order_id]", after.Sensitive)
	}
	if string(after.InputSchema) != schemaBefore {
		t.Errorf("InputSchema changed through a returned copy: %q", after.InputSchema)
	}
	// And the tool still validates as before.
	if _, err := tl.Validate(json.RawMessage(`{"order_id":"A1"}`)); err != nil {
		t.Errorf("Validate after mutation: %v", err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("definition changed:\nbefore %+v\n after %+v", before, after)
	}
}

func TestResources(t *testing.T) {
	tl, _ := getOrder(t)
	if got := tl.Resources(json.RawMessage(`{"order_id":"A100"}`)); !slices.Equal(got, []string{"order:A100"}) {
		t.Errorf("Resources = %v, want [order:A100]", got)
	}
	// Key order and white space do not matter.
	if got := tl.Resources(json.RawMessage(` { "limit" : 1 , "order_id" : "B7" } `)); !slices.Equal(got, []string{"order:B7"}) {
		t.Errorf("Resources = %v, want [order:B7]", got)
	}
	// Arguments that cannot be decoded touch nothing known.
	if got := tl.Resources(json.RawMessage(`{"order_id":`)); got != nil {
		t.Errorf("Resources(invalid JSON) = %v, want nil", got)
	}
	if got := tl.Resources(json.RawMessage(`{"order_id":5}`)); got != nil {
		t.Errorf("Resources(wrong type) = %v, want nil", got)
	}

	// A tool without a Resources function touches nothing shared.
	plain := tool.MustNew(tool.Spec[optionalIn]{Name: "plain"},
		func(context.Context, optionalIn) (int, error) { return 0, nil })
	if got := plain.Resources(json.RawMessage(`{"query":"x"}`)); got != nil {
		t.Errorf("Resources without a function = %v, want nil", got)
	}
}

// Missing arguments mean {} everywhere, so a tool that declares a fixed
// resource still reports it when the model sends no arguments.
func TestResourcesOfMissingArguments(t *testing.T) {
	tl := tool.MustNew(tool.Spec[optionalIn]{
		Name:      "reindex",
		Effect:    tool.Write,
		Resources: func(optionalIn) []string { return []string{"index"} },
	}, func(context.Context, optionalIn) (int, error) { return 0, nil })
	for _, args := range []json.RawMessage{nil, {}, json.RawMessage(`{}`)} {
		if got := tl.Resources(args); !slices.Equal(got, []string{"index"}) {
			t.Errorf("Resources(%q) = %v, want [index]", args, got)
		}
	}
}

func TestValidateFingerprint(t *testing.T) {
	tl, _ := getOrder(t)
	a, err := tl.Validate(json.RawMessage(`{"order_id":"A1","limit":2}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tl.Validate(json.RawMessage("{\n  \"limit\": 2,\n  \"order_id\": \"A1\"\n}"))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("fingerprints differ for reordered keys and white space")
	}
	c, _ := tl.Validate(json.RawMessage(`{"order_id":"A2","limit":2}`))
	if a == c {
		t.Error("fingerprints equal for different values")
	}
	// Invalid arguments still get a fingerprint, so a model that repeats
	// the same broken call can be spotted; it depends on the bytes.
	x1, err1 := tl.Validate(json.RawMessage(`{"order_id":`))
	x2, err2 := tl.Validate(json.RawMessage(`{"order_id":`))
	x3, _ := tl.Validate(json.RawMessage(`{"order_id":"`))
	if err1 == nil || err2 == nil || x1 != x2 || x1 == x3 {
		t.Errorf("invalid-JSON fingerprints: %x %x %x (errors %v, %v)", x1, x2, x3, err1, err2)
	}
	// Schema violations get the value's fingerprint.
	y, err := tl.Validate(json.RawMessage(`{"order_id":1}`))
	if err == nil || y != tool.Fingerprint(map[string]any{"order_id": 1.0}) {
		t.Errorf("schema-invalid fingerprint = %x, %v", y, err)
	}
}

func TestErrorType(t *testing.T) {
	cause := errors.New("HTTP 429")
	tests := []struct {
		err       error
		kind      llm.ErrorKind
		msg       string
		errString string
	}{
		{tool.NotFound("no order A1"), llm.KindNotFound, "no order A1", "not_found: no order A1"},
		{tool.NeedsInput("which address?"), llm.KindNeedsInput, "which address?", "needs_input: which address?"},
		{tool.RateLimited(2*time.Second, cause), llm.KindRateLimited, "rate limited", "rate_limited: rate limited"},
		{tool.Unavailable(cause), llm.KindUnavailable, "temporarily unavailable", "unavailable: temporarily unavailable"},
		{&tool.Error{Kind: llm.KindInternal, Err: cause}, llm.KindInternal, "", "internal: HTTP 429"},
		{&tool.Error{Kind: llm.KindTimeout}, llm.KindTimeout, "", "timeout"},
	}
	for _, tt := range tests {
		te := toolError(t, tt.err, tt.kind)
		if te.Msg != tt.msg {
			t.Errorf("%v: Msg = %q, want %q", tt.err, te.Msg, tt.msg)
		}
		if tt.err.Error() != tt.errString {
			t.Errorf("Error() = %q, want %q", tt.err.Error(), tt.errString)
		}
	}
	rl := toolError(t, tool.RateLimited(2*time.Second, cause), llm.KindRateLimited)
	if rl.RetryAfter != 2*time.Second {
		t.Errorf("RetryAfter = %v", rl.RetryAfter)
	}
	if !errors.Is(tool.RateLimited(0, cause), cause) || !errors.Is(tool.Unavailable(cause), cause) {
		t.Error("tool errors do not unwrap to their cause")
	}
}

func TestKindOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want llm.ErrorKind
	}{
		{"nil", nil, ""},
		{"not found", tool.NotFound("x"), llm.KindNotFound},
		{"wrapped tool error", fmt.Errorf("lookup: %w", tool.Unavailable(nil)), llm.KindUnavailable},
		{"deadline", context.DeadlineExceeded, llm.KindTimeout},
		{"wrapped deadline", fmt.Errorf("http: %w", context.DeadlineExceeded), llm.KindTimeout},
		{"canceled", context.Canceled, llm.KindCanceled},
		{"plain error", errors.New("boom"), llm.KindInternal},
		// The tool error's own kind wins over a context error it wraps.
		{"unavailable wrapping deadline", tool.Unavailable(context.DeadlineExceeded), llm.KindUnavailable},
		// A tool error built by hand without a kind is still classified.
		{"tool error without kind", &tool.Error{Msg: "odd"}, llm.KindInternal},
		{"tool error without kind wrapping deadline", &tool.Error{Err: context.DeadlineExceeded}, llm.KindTimeout},
	}
	for _, tt := range tests {
		if got := tool.KindOf(tt.err); got != tt.want {
			t.Errorf("%s: KindOf(%v) = %q, want %q", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestClassification(t *testing.T) {
	tests := []struct {
		kind                     llm.ErrorKind
		retryable, deterministic bool
	}{
		{llm.KindNotFound, false, true},
		{llm.KindInvalidArguments, false, true},
		{llm.KindNeedsInput, false, true},
		{llm.KindInternal, false, true},
		{llm.KindRateLimited, true, false},
		{llm.KindUnavailable, true, false},
		{llm.KindTimeout, false, false},
		{llm.KindCanceled, false, false},
		{llm.KindPermissionDenied, false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		if got := tool.Retryable(tt.kind); got != tt.retryable {
			t.Errorf("Retryable(%q) = %v, want %v", tt.kind, got, tt.retryable)
		}
		if got := tool.Deterministic(tt.kind); got != tt.deterministic {
			t.Errorf("Deterministic(%q) = %v, want %v", tt.kind, got, tt.deterministic)
		}
		if tool.Retryable(tt.kind) && tool.Deterministic(tt.kind) {
			t.Errorf("%q is both retryable and deterministic", tt.kind)
		}
	}
	// The kinds re-exported by tool are the llm ones.
	if llm.KindNotFound != llm.KindNotFound || llm.KindTimeout != llm.KindTimeout || llm.KindInternal != llm.KindInternal {
		t.Error("tool kinds differ from llm kinds")
	}
}

// Schemas with keywords the inferred schemas do not use (pattern, oneOf,
// ...) are validated alike.
func TestNewRawRichSchema(t *testing.T) {
	tl, err := tool.NewRaw(tool.Definition{
		Name: "lookup",
		InputSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"order_id": {"type": "string", "pattern": "^[A-Z][0-9]+$"},
				"by": {"oneOf": [{"const": "id"}, {"const": "email"}]}
			},
			"required": ["order_id"],
			"additionalProperties": false
		}`),
	}, func(_ context.Context, args json.RawMessage) (json.RawMessage, error) { return args, nil }, nil)
	if err != nil {
		t.Fatalf("NewRaw: %v", err)
	}
	ctx := context.Background()
	if out, err := tl.Call(ctx, json.RawMessage(`{"order_id":"A100","by":"id"}`)); err != nil || string(out) != `{"order_id":"A100","by":"id"}` {
		t.Fatalf("Call = %s, %v", out, err)
	}
	bad := map[string]string{
		`{"order_id":"a100"}`:            "order_id",
		`{"order_id":"A100","by":"sms"}`: "by",
		`{"by":"id"}`:                    "order_id",
		`{"order_id":"A1","x":true}`:     "x",
		`{"order_id":`:                   "not valid JSON",
	}
	for args, want := range bad {
		_, err := tl.Call(ctx, json.RawMessage(args))
		te := toolError(t, err, llm.KindInvalidArguments)
		if !strings.Contains(te.Msg, want) {
			t.Errorf("Call(%s): message %q does not mention %q", args, te.Msg, want)
		}
	}
	a, err1 := tl.Validate(json.RawMessage(`{"order_id":"A1","by":"id"}`))
	b, err2 := tl.Validate(json.RawMessage(` { "by" : "id", "order_id" : "A1" } `))
	if err1 != nil || err2 != nil || a != b {
		t.Errorf("fingerprints %x, %x (%v, %v); want equal", a, b, err1, err2)
	}
	if a != tool.Fingerprint(map[string]any{"order_id": "A1", "by": "id"}) {
		t.Error("Validate's fingerprint differs from Fingerprint of the decoded value")
	}
}

// Whatever validator runs, Validate's fingerprint is Fingerprint of the
// decoded arguments, so the loop's repeat detection agrees with both.
func TestValidateFingerprintMatchesDecoded(t *testing.T) {
	tl, _ := getOrder(t)
	for _, args := range []string{
		`{"order_id":"A1"}`,
		`{"tags":["b","a"],"order_id":"A1","limit":3}`,
		`{"limit":3,"order_id":"A1","tags":[]}`,
		`{"order_id":"\u00e9\n"}`,
		`{"order_id":5}`, // schema-invalid, still fingerprinted by value
	} {
		got, _ := tl.Validate(json.RawMessage(args))
		var v any
		if err := json.Unmarshal([]byte(args), &v); err != nil {
			t.Fatal(err)
		}
		if want := tool.Fingerprint(v); got != want {
			t.Errorf("Validate(%s) fingerprint %x, Fingerprint(decoded) %x", args, got, want)
		}
	}
}
