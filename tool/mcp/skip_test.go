package mcp_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolloop/toolloop/tool/mcp"
)

// sloppyServer is an MCP server named "sloppy" with one good tool, echo,
// and two whose input schemas toolloop refuses: dup_required lists a
// property twice in required (the meta-schema wants unique items), and
// remote_ref names a schema at refURL, which toolloop never fetches.
func sloppyServer(refURL string) *fixture {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "sloppy", Version: "v1"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "echo", Description: "say it back",
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in noteIn) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: in.Text}}}, nil, nil
		})
	never := func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		panic("a tool toolloop refused was called")
	}
	srv.AddTool(&mcpsdk.Tool{Name: "dup_required", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a","a"]}`)}, never)
	srv.AddTool(&mcpsdk.Tool{Name: "remote_ref", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"p":{"$ref":"` + refURL + `"}}}`)}, never)
	return &fixture{srv: srv}
}

// TestUnusableToolsAreSkippedAndReported: with OnSkipped set, a server's
// tools whose schemas cannot be compiled are left out and reported, each
// with the server, its name and why; the good one is built and runs. The
// remote schema is never fetched.
func TestUnusableToolsAreSkippedAndReported(t *testing.T) {
	var fetched atomic.Int32
	ref := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetched.Add(1)
		_, _ = w.Write([]byte(`{"type":"string"}`))
	}))
	defer ref.Close()
	refURL := ref.URL + "/p.json"

	skipped := map[string]error{}
	src := connect(t, sloppyServer(refURL), &mcp.Options{Prefix: "s_", OnSkipped: func(tl *mcpsdk.Tool, err error) {
		if _, dup := skipped[tl.Name]; dup {
			t.Errorf("%s reported twice", tl.Name)
		}
		skipped[tl.Name] = err
	}})
	tools, err := src.Tools(context.Background())
	if err != nil {
		t.Fatalf("Tools: %v, want the usable tools and the others reported", err)
	}
	if len(tools) != 1 || tools[0].Name() != "s_echo" {
		var names []string
		for _, tl := range tools {
			names = append(names, tl.Name())
		}
		t.Fatalf("tools %v, want only s_echo", names)
	}
	out, err := tools[0].Call(context.Background(), json.RawMessage(`{"text":"hello"}`))
	if err != nil || string(out) != `"hello"` {
		t.Fatalf("echo = %s, %v", out, err)
	}

	want := map[string][]string{
		"dup_required": {`server "sloppy"`, `tool "dup_required"`, "/required", "items at 0 and 1 are equal"},
		"remote_ref":   {`server "sloppy"`, `tool "remote_ref"`, refURL},
	}
	if got := slices.Sorted(maps.Keys(skipped)); !slices.Equal(got, []string{"dup_required", "remote_ref"}) {
		t.Fatalf("reported %v, want dup_required and remote_ref", got)
	}
	for name, parts := range want {
		msg := skipped[name].Error()
		for _, p := range parts {
			if !strings.Contains(msg, p) {
				t.Errorf("%s reported as %q; want it to say %q", name, msg, p)
			}
		}
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the remote schema was fetched %d times; a $ref to another document must never be followed", n)
	}
}

// TestUnusableToolsFailTheListingByDefault: without OnSkipped the listing
// is strict: no tools, and an error that names every refused tool and the
// option that would build the rest.
func TestUnusableToolsFailTheListingByDefault(t *testing.T) {
	src := connect(t, sloppyServer("http://schemas.invalid/p.json"), nil)
	tools, err := src.Tools(context.Background())
	if err == nil || tools != nil {
		t.Fatalf("Tools = %d tools, %v; want an error and none", len(tools), err)
	}
	for _, p := range []string{`server "sloppy"`, `tool "dup_required"`, `tool "remote_ref"`, "Options.OnSkipped"} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("err = %q; want it to say %q", err, p)
		}
	}
}

// TestCollidingNameIsSkippedAndReported: with OnSkipped set, the second of
// two server tools that map to one toolloop name is left out and reported
// naming both; the first keeps the name and calls its own server tool.
func TestCollidingNameIsSkippedAndReported(t *testing.T) {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "dups"}, nil)
	for _, name := range []string{"a.b", "a_b"} {
		mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: name}, func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "I am " + name}}}, nil, nil
		})
	}
	var reports []string
	src := connect(t, &fixture{srv: srv}, &mcp.Options{OnSkipped: func(tl *mcpsdk.Tool, err error) {
		reports = append(reports, tl.Name+": "+err.Error())
	}})
	tools, err := src.Tools(context.Background())
	if err != nil || len(tools) != 1 || tools[0].Name() != "a_b" {
		t.Fatalf("Tools = %d tools, %v; want one named a_b", len(tools), err)
	}
	// The SDK lists tools sorted by name: "a.b" comes first and keeps a_b.
	if out, err := tools[0].Call(context.Background(), json.RawMessage(`{}`)); err != nil || string(out) != `"I am a.b"` {
		t.Fatalf("a_b = %s, %v; want the server's a.b", out, err)
	}
	if len(reports) != 1 || !strings.HasPrefix(reports[0], `a_b: mcp: server "dups": tool "a_b": server tools "a.b" and "a_b" are both named "a_b"`) {
		t.Fatalf("reports %q, want a_b's collision with a.b", reports)
	}
}
