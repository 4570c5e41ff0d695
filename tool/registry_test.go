package tool_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/tool"
)

type noIn struct{}

func noop(context.Context, noIn) (bool, error) { return true, nil }

func mk(t *testing.T, name, desc string, effect tool.Effect) *tool.Tool {
	t.Helper()
	tl, err := tool.New(tool.Spec[noIn]{Name: name, Description: desc, Effect: effect}, noop)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func raw(t *testing.T, name, schema string) *tool.Tool {
	t.Helper()
	tl, err := tool.NewRaw(tool.Definition{Name: name, InputSchema: json.RawMessage(schema)},
		func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func mustRegistry(t *testing.T, tools ...*tool.Tool) *tool.Registry {
	t.Helper()
	r, err := tool.NewRegistry(tools...)
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	return r
}

func TestRegistryLookupAndOrder(t *testing.T) {
	a := mk(t, "get_order", "Look up an order", tool.ReadOnly)
	b := mk(t, "cancel_order", "Cancel an order", tool.Write)
	c := mk(t, "list_orders", "", tool.ReadOnly)
	r := mustRegistry(t, a, b, c)

	for _, want := range []*tool.Tool{a, b, c} {
		got, ok := r.Lookup(want.Name())
		if !ok || got != want {
			t.Errorf("Lookup(%q) = %v, %v", want.Name(), got, ok)
		}
	}
	for _, name := range []string{"delete_order", "", "GET_ORDER"} {
		if got, ok := r.Lookup(name); ok || got != nil {
			t.Errorf("Lookup(%q) = %v, %v; want nil, false", name, got, ok)
		}
	}

	wantNames := []string{"get_order", "cancel_order", "list_orders"}
	if got := r.Names(); !slices.Equal(got, wantNames) {
		t.Errorf("Names = %v, want %v", got, wantNames)
	}
	if got := r.Tools(); !slices.Equal(got, []*tool.Tool{a, b, c}) {
		t.Errorf("Tools = %v", got)
	}
	defs := r.Definitions()
	if len(defs) != 3 {
		t.Fatalf("Definitions has %d entries", len(defs))
	}
	for i, d := range defs {
		tl := []*tool.Tool{a, b, c}[i]
		td := tl.Definition()
		if d.Name != td.Name || d.Description != td.Description || string(d.InputSchema) != string(td.InputSchema) {
			t.Errorf("Definitions[%d] = %+v, want the definition of %s", i, d, tl.Name())
		}
	}

	// Tools and Names return fresh slices.
	r.Tools()[0] = nil
	r.Names()[0] = "x"
	if r.Tools()[0] != a || r.Names()[0] != "get_order" {
		t.Error("Tools or Names exposes the registry's own slice")
	}
}

func TestRegistryDuplicateName(t *testing.T) {
	_, err := tool.NewRegistry(mk(t, "get_order", "one", tool.ReadOnly), mk(t, "x", "", tool.ReadOnly), mk(t, "get_order", "two", tool.Write))
	if err == nil {
		t.Fatal("NewRegistry accepted two tools named get_order")
	}
	if !strings.Contains(err.Error(), `"get_order"`) {
		t.Errorf("error %q does not name the duplicate", err)
	}
	// The same tool twice is a duplicate too.
	tl := mk(t, "a", "", tool.ReadOnly)
	if _, err := tool.NewRegistry(tl, tl); err == nil {
		t.Error("NewRegistry accepted the same tool twice")
	}
}

func TestRegistryNilTool(t *testing.T) {
	_, err := tool.NewRegistry(mk(t, "a", "", tool.ReadOnly), nil)
	if err == nil || !strings.Contains(err.Error(), "nil") || !strings.Contains(err.Error(), "1") {
		t.Errorf("NewRegistry with a nil tool = %v, want an error naming index 1", err)
	}
}

func TestRegistryEmpty(t *testing.T) {
	r := mustRegistry(t)
	if len(r.Definitions()) != 0 || len(r.Names()) != 0 || len(r.Tools()) != 0 {
		t.Error("empty registry is not empty")
	}
	if _, ok := r.Lookup("x"); ok {
		t.Error("empty registry found a tool")
	}
	if r.Version() != mustRegistry(t).Version() {
		t.Error("empty registry version is not stable")
	}
	if r.Version() == mustRegistry(t, mk(t, "a", "", tool.ReadOnly)).Version() {
		t.Error("empty and non-empty registries share a version")
	}
}

func TestRegistryVersion(t *testing.T) {
	a := func() *tool.Tool { return mk(t, "get_order", "Look up an order", tool.ReadOnly) }
	b := func() *tool.Tool { return mk(t, "cancel_order", "Cancel an order", tool.Write) }
	base := mustRegistry(t, a(), b()).Version()

	if !regexp.MustCompile(`^tools-[0-9a-f]{16}$`).MatchString(base) {
		t.Errorf("Version = %q, want tools- and 16 hex digits", base)
	}
	if v := mustRegistry(t, a(), b()).Version(); v != base {
		t.Errorf("same tools, new registry: version %q != %q", v, base)
	}
	if v := mustRegistry(t, b(), a()).Version(); v != base {
		t.Errorf("registration order changed the version: %q != %q", v, base)
	}

	changed := map[string]*tool.Registry{
		"description": mustRegistry(t, mk(t, "get_order", "Look up one order", tool.ReadOnly), b()),
		"effect":      mustRegistry(t, mk(t, "get_order", "Look up an order", tool.Write), b()),
		"name":        mustRegistry(t, mk(t, "get_orders", "Look up an order", tool.ReadOnly), b()),
		"tool added":  mustRegistry(t, a(), b(), mk(t, "x", "", tool.ReadOnly)),
		"tool gone":   mustRegistry(t, a()),
		"schema": mustRegistry(t, b(), func() *tool.Tool {
			tl, err := tool.New(tool.Spec[optionalIn]{Name: "get_order", Description: "Look up an order"},
				func(context.Context, optionalIn) (bool, error) { return true, nil })
			if err != nil {
				t.Fatal(err)
			}
			return tl
		}()),
	}
	seen := map[string]string{base: "base"}
	for what, r := range changed {
		v := r.Version()
		if prev, dup := seen[v]; dup {
			t.Errorf("changing the %s gives the same version as %s: %q", what, prev, v)
		}
		seen[v] = what
	}
}

func TestRegistryVersionSchemaChange(t *testing.T) {
	v1 := mustRegistry(t, raw(t, "t", `{"type":"object","properties":{"a":{"type":"string"}}}`)).Version()
	v2 := mustRegistry(t, raw(t, "t", `{"type":"object","properties":{"a":{"type":"integer"}}}`)).Version()
	if v1 == v2 {
		t.Error("a schema change did not change the version")
	}
}

// Field boundaries are unambiguous: moving text from a name into a
// description changes the version.
func TestRegistryVersionFieldBoundaries(t *testing.T) {
	v1 := mustRegistry(t, mk(t, "ab", "c", tool.ReadOnly)).Version()
	v2 := mustRegistry(t, mk(t, "a", "bc", tool.ReadOnly)).Version()
	if v1 == v2 {
		t.Error("(ab, c) and (a, bc) share a version")
	}
}
