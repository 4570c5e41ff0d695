package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/tool/mcp"
)

func TestMain(m *testing.M) {
	if serveChild() {
		return // not reached: serveChild exits the process
	}
	goleak.VerifyTestMain(m)
}

type searchIn struct {
	Query string `json:"query" jsonschema:"what to look for"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many hits"`
}

type searchOut struct {
	Hits []string `json:"hits"`
}

type pathIn struct {
	Path string `json:"path"`
}

type noteIn struct {
	Text string `json:"text"`
}

// fixture is an MCP server built with the SDK, with counters so tests can
// assert what reached it.
type fixture struct {
	srv *mcpsdk.Server
	// calls counts tools/call requests the server received, before the
	// SDK's own validation: a request toolloop refused never arrives.
	calls   atomic.Int32
	deleted atomic.Int32
	// slowStarted is closed when the slow tool starts; slowCanceled when
	// its context ends.
	slowStarted, slowCanceled chan struct{}
}

func ptr[T any](v T) *T { return &v }

func newFixture(opts *mcpsdk.ServerOptions) *fixture {
	f := &fixture{slowStarted: make(chan struct{}), slowCanceled: make(chan struct{})}
	f.srv = mcpsdk.NewServer(&mcpsdk.Implementation{Name: "fixture", Version: "v1"}, opts)
	f.srv.AddReceivingMiddleware(func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			if method == "tools/call" {
				f.calls.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	mcpsdk.AddTool(f.srv, &mcpsdk.Tool{
		Name: "search", Description: "search the documents",
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, func(_ context.Context, _ *mcpsdk.CallToolRequest, in searchIn) (*mcpsdk.CallToolResult, searchOut, error) {
		if in.Query == "boom" {
			return nil, searchOut{}, errors.New("the index is being rebuilt, try again later")
		}
		hits := []string{in.Query + "-1", in.Query + "-2", in.Query + "-3"}
		if in.Limit > 0 && in.Limit < len(hits) {
			hits = hits[:in.Limit]
		}
		return nil, searchOut{Hits: hits}, nil
	})
	mcpsdk.AddTool(f.srv, &mcpsdk.Tool{
		Name: "delete_file", Description: "delete a file",
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true)},
	}, func(_ context.Context, _ *mcpsdk.CallToolRequest, in pathIn) (*mcpsdk.CallToolResult, any, error) {
		if !strings.HasPrefix(in.Path, "/tmp/") {
			return nil, nil, fmt.Errorf("permission denied: %s", in.Path)
		}
		f.deleted.Add(1)
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "deleted " + in.Path}}}, nil, nil
	})
	mcpsdk.AddTool(f.srv, &mcpsdk.Tool{
		Name: "notes.append", Title: "Append a note",
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true},
	}, func(_ context.Context, _ *mcpsdk.CallToolRequest, in noteIn) (*mcpsdk.CallToolResult, any, error) {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{}}, nil, nil
	})
	mcpsdk.AddTool(f.srv, &mcpsdk.Tool{Name: "snapshot", Description: "take a screenshot"},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
				&mcpsdk.TextContent{Text: "the screen"},
				&mcpsdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 1024)},
				&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///a.bin", MIMEType: "application/octet-stream", Blob: []byte{1, 2, 3}}},
				&mcpsdk.ResourceLink{URI: "file:///b.txt", Name: "b.txt"},
			}}, nil, nil
		})
	mcpsdk.AddTool(f.srv, &mcpsdk.Tool{Name: "slow", Description: "wait until canceled",
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
			close(f.slowStarted)
			<-ctx.Done()
			close(f.slowCanceled)
			return nil, nil, ctx.Err()
		})
	return f
}

// connect serves f over in-memory transports and returns a Source on the
// client end; both ends are closed when the test ends.
func connect(t *testing.T, f *fixture, opts *mcp.Options) *mcp.Source {
	t.Helper()
	ctx := context.Background()
	ct, st := mcpsdk.NewInMemoryTransports()
	ss, err := f.srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := mcp.Connect(ctx, ct, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := src.Close(); err != nil {
			t.Errorf("closing the source: %v", err)
		}
		_ = ss.Wait()
	})
	return src
}

func toolsByName(t *testing.T, src *mcp.Source) map[string]*tool.Tool {
	t.Helper()
	tools, err := src.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*tool.Tool{}
	for _, tt := range tools {
		m[tt.Name()] = tt
	}
	return m
}

func TestToolsCarrySchemasEffectsAndRisks(t *testing.T) {
	f := newFixture(nil)
	src := connect(t, f, &mcp.Options{Prefix: "fx_", Timeout: 7 * time.Second})
	tools := toolsByName(t, src)

	want := map[string]struct {
		effect tool.Effect
		risk   tool.Risk
		desc   string
	}{
		"fx_search":       {tool.ReadOnly, tool.RiskLow, "search the documents"},
		"fx_delete_file":  {tool.Write, tool.RiskHigh, "delete a file"},
		"fx_notes_append": {tool.Write, tool.RiskLow, "Append a note"}, // '.' mapped; title as description
		"fx_snapshot":     {tool.Write, tool.RiskHigh, "take a screenshot"},
		"fx_slow":         {tool.ReadOnly, tool.RiskMedium, "wait until canceled"}, // open world unless it says not
	}
	if len(tools) != len(want) {
		t.Fatalf("got tools %v, want %d", slices.Sorted(maps.Keys(tools)), len(want))
	}
	for name, w := range want {
		tt, ok := tools[name]
		if !ok {
			t.Fatalf("no tool %q", name)
		}
		def := tt.Definition()
		if def.Effect != w.effect || def.Risk != w.risk || def.Description != w.desc || def.Timeout != 7*time.Second {
			t.Errorf("%s: effect %s risk %s desc %q timeout %v; want %s %s %q 7s",
				name, def.Effect, def.Risk, def.Description, def.Timeout, w.effect, w.risk, w.desc)
		}
	}

	var schema struct {
		Type       string                     `json:"type"`
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(tools["fx_search"].Definition().InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || !slices.Equal(schema.Required, []string{"query"}) ||
		!strings.Contains(string(schema.Properties["query"]), "what to look for") || schema.Properties["limit"] == nil {
		t.Fatalf("search schema = %s", tools["fx_search"].Definition().InputSchema)
	}
}

func TestToolsFollowPagination(t *testing.T) {
	f := newFixture(&mcpsdk.ServerOptions{PageSize: 2})
	var seen []string
	src := connect(t, f, &mcp.Options{Filter: func(t *mcpsdk.Tool) bool {
		seen = append(seen, t.Name)
		return t.Name != "slow"
	}})
	tools := toolsByName(t, src)
	if len(seen) != 5 || len(tools) != 4 || tools["slow"] != nil {
		t.Fatalf("filter saw %v; built %d tools", seen, len(tools))
	}
}

func TestAdjustHasTheLastWord(t *testing.T) {
	f := newFixture(nil)
	src := connect(t, f, &mcp.Options{Adjust: func(t *mcpsdk.Tool, def *tool.Definition) {
		// An untrusted server: no hint is believed.
		def.Effect, def.Risk = tool.Write, tool.RiskHigh
		if t.Name == "delete_file" {
			def.NeedsConfirmation = true
		}
	}})
	tools := toolsByName(t, src)
	if s := tools["search"]; s.Effect() != tool.Write || s.Risk() != tool.RiskHigh {
		t.Fatalf("search: %s %s", s.Effect(), s.Risk())
	}
	if !tools["delete_file"].NeedsConfirmation() {
		t.Fatal("delete_file does not need confirmation")
	}
}

func TestNameCollisionsAfterMappingAreErrors(t *testing.T) {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "dups"}, nil)
	for _, name := range []string{"a.b", "a_b"} {
		mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: name}, func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			return nil, nil, nil
		})
	}
	src := connect(t, &fixture{srv: srv}, nil)
	_, err := src.Tools(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"a_b"`) {
		t.Fatalf("err = %v, want a collision on a_b", err)
	}
}

func TestResultsAsTheModelSeesThem(t *testing.T) {
	f := newFixture(nil)
	tools := toolsByName(t, connect(t, f, nil))
	ctx := context.Background()
	for _, c := range []struct{ tool, args, want string }{
		// Structured content, exactly as the server's output.
		{"search", `{"query":"go","limit":2}`, `{"hits":["go-1","go-2"]}`},
		// One text block: a JSON string.
		{"delete_file", `{"path":"/tmp/x"}`, `"deleted /tmp/x"`},
		// No content at all.
		{"notes_append", `{"text":"hi"}`, `[]`},
		// Several blocks: text kept, binary summarized and never copied.
		{"snapshot", `{}`, `["the screen",{"type":"image","mime_type":"image/png","bytes":1024},` +
			`{"type":"resource","uri":"file:///a.bin","mime_type":"application/octet-stream","bytes":3},` +
			`{"type":"resource_link","uri":"file:///b.txt","name":"b.txt"}]`},
	} {
		out, err := tools[c.tool].Call(ctx, json.RawMessage(c.args))
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if string(out) != c.want {
			t.Errorf("%s = %s\nwant %s", c.tool, out, c.want)
		}
	}
}

func TestInvalidArgumentsNeverReachTheServer(t *testing.T) {
	f := newFixture(nil)
	search := toolsByName(t, connect(t, f, nil))["search"]
	for _, args := range []string{`{}`, `{"query":42}`, `{"query":"go","limit":"many"}`, `{"query":`} {
		_, err := search.Call(context.Background(), json.RawMessage(args))
		if tool.KindOf(err) != llm.KindInvalidArguments {
			t.Errorf("args %s: err = %v, want invalid_arguments", args, err)
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("the server received %d calls; invalid arguments must never reach it", n)
	}
	if _, err := search.Call(context.Background(), json.RawMessage(`{"query":"go"}`)); err != nil {
		t.Fatal(err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("the server received %d calls, want 1", n)
	}
}

func TestIsErrorIsARecoverableToolError(t *testing.T) {
	f := newFixture(nil)
	tools := toolsByName(t, connect(t, f, nil))
	_, err := tools["search"].Call(context.Background(), json.RawMessage(`{"query":"boom"}`))
	var te *tool.Error
	if !errors.As(err, &te) || te.Kind != llm.KindToolError || !strings.Contains(te.Msg, "index is being rebuilt") {
		t.Fatalf("err = %#v", err)
	}
	if tool.Deterministic(te.Kind) || tool.Retryable(te.Kind) {
		t.Fatalf("%s must be neither deterministic nor retryable", te.Kind)
	}

	// A server's errors can be classified more sharply.
	src := connect(t, f, &mcp.Options{ErrorKind: func(name string, res *mcpsdk.CallToolResult) llm.ErrorKind {
		if name == "delete_file" {
			return llm.KindNotFound
		}
		return ""
	}})
	tools = toolsByName(t, src)
	_, err = tools["delete_file"].Call(context.Background(), json.RawMessage(`{"path":"/etc/passwd"}`))
	if tool.KindOf(err) != llm.KindNotFound || !strings.Contains(err.Error(), "permission denied: /etc/passwd") {
		t.Fatalf("err = %v", err)
	}
	_, err = tools["search"].Call(context.Background(), json.RawMessage(`{"query":"boom"}`))
	if tool.KindOf(err) != llm.KindToolError {
		t.Fatalf("err = %v, want the default kind", err)
	}
}

func TestToolGoneFromTheServerIsInvalidArguments(t *testing.T) {
	f := newFixture(nil)
	search := toolsByName(t, connect(t, f, nil))["search"]
	f.srv.RemoveTools("search")
	_, err := search.Call(context.Background(), json.RawMessage(`{"query":"go"}`))
	if tool.KindOf(err) != llm.KindInvalidArguments || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("err = %v", err)
	}
}

func TestClosedSessionIsUnavailable(t *testing.T) {
	f := newFixture(nil)
	ctx := context.Background()
	ct, st := mcpsdk.NewInMemoryTransports()
	ss, err := f.srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := mcp.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	search := toolsByName(t, src)["search"]

	// The server goes away.
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
	_ = src.Session().Wait()
	_, err = search.Call(ctx, json.RawMessage(`{"query":"go"}`))
	if tool.KindOf(err) != llm.KindUnavailable || !tool.Retryable(tool.KindOf(err)) {
		t.Fatalf("err = %v, want unavailable", err)
	}
	if !errors.Is(err, mcpsdk.ErrConnectionClosed) {
		t.Fatalf("err = %v does not keep its cause", err)
	}
}

func TestCancellationReachesTheServer(t *testing.T) {
	f := newFixture(nil)
	slow := toolsByName(t, connect(t, f, nil))["slow"]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := slow.Call(ctx, json.RawMessage(`{}`))
		done <- err
	}()
	<-f.slowStarted
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || tool.KindOf(err) != llm.KindCanceled {
		t.Fatalf("err = %v, want canceled", err)
	}
	select {
	case <-f.slowCanceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the server's handler was not canceled")
	}
}

func TestLoopRunOverMCPTools(t *testing.T) {
	f := newFixture(nil)
	src := connect(t, f, &mcp.Options{Prefix: "docs_"})
	tools, err := src.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(tools...)
	if err != nil {
		t.Fatal(err)
	}
	model := llmtest.New(
		llmtest.Calls(
			llmtest.Call("c1", "docs_search", `{"query":"refunds","limit":1}`),
			llmtest.Call("c2", "docs_search", `{"query":7}`),
			llmtest.Call("c3", "docs_search", `{"query":"boom"}`),
		),
		llmtest.Calls(llmtest.Call("c4", "docs_delete_file", `{"path":"/tmp/old"}`)),
		llmtest.Text("found refunds-1 and deleted /tmp/old"),
	)
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: reg}, []llm.Message{llm.UserMessage("clean up")})
	if err != nil {
		t.Fatalf("run: %v (%s)", err, res.Detail)
	}
	if res.Status != loop.FinalAnswer || res.Answer() != "found refunds-1 and deleted /tmp/old" {
		t.Fatalf("status %s answer %q", res.Status, res.Answer())
	}
	if err := llm.CheckHistory(res.Messages); err != nil {
		t.Fatal(err)
	}
	results := map[string]llm.ToolResult{}
	for _, m := range res.Messages {
		if m.Role == llm.RoleTool {
			results[m.Result.CallID] = *m.Result
		}
	}
	check := func(id string, status llm.ResultStatus, kind llm.ErrorKind, content string) {
		t.Helper()
		r, ok := results[id]
		if !ok {
			t.Fatalf("no result for call %s", id)
		}
		if r.Status != status || r.ErrorKind != kind || !strings.Contains(string(r.Content), content) {
			t.Fatalf("result %s = %+v %s", id, r, r.Content)
		}
	}
	check("c1", llm.StatusOK, "", `{"hits":["refunds-1"]}`)
	check("c2", llm.StatusError, llm.KindInvalidArguments, "query")
	check("c3", llm.StatusError, llm.KindToolError, "index is being rebuilt")
	check("c4", llm.StatusOK, "", `"deleted /tmp/old"`)
	// The model's second request carried the first turn's results.
	if second := model.Requests()[1].Messages; !slices.ContainsFunc(second, func(m llm.Message) bool {
		return m.Role == llm.RoleTool && m.Result.CallID == "c1" && strings.Contains(string(m.Result.Content), "refunds-1")
	}) {
		t.Fatal("the second model request lacks c1's result")
	}
	// c2 never reached the server: c1, c3 and c4 did.
	if n := f.calls.Load(); n != 3 || f.deleted.Load() != 1 {
		t.Fatalf("server calls %d, deletions %d; want 3 and 1", n, f.deleted.Load())
	}
}

func TestUnusableSchemaIsAnErrorUnlessFiltered(t *testing.T) {
	f := newFixture(nil)
	// A draft-04 schema (boolean exclusiveMinimum), which toolloop's
	// 2020-12 validator cannot read.
	f.srv.AddTool(&mcpsdk.Tool{Name: "legacy", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"exclusiveMinimum":true}}}`)},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{}, nil
		})
	_, err := connect(t, f, nil).Tools(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"legacy"`) {
		t.Fatalf("err = %v, want one naming the legacy tool", err)
	}
	src := connect(t, f, &mcp.Options{Filter: func(t *mcpsdk.Tool) bool { return t.Name != "legacy" }})
	if tools := toolsByName(t, src); len(tools) != 5 {
		t.Fatalf("%d tools, want the 5 usable ones", len(tools))
	}
}

// The client announces no roots (nor anything else) it cannot give.
func TestNoCapabilitiesAnnounced(t *testing.T) {
	f := newFixture(nil)
	ct, st := mcpsdk.NewInMemoryTransports()
	ss, err := f.srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := mcp.Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { src.Close(); _ = ss.Wait() }()
	// (The SDK decodes the wire's "roots" into RootsV2.)
	caps := ss.InitializeParams().Capabilities
	if caps.RootsV2 != nil || caps.Sampling != nil || caps.Elicitation != nil {
		t.Fatalf("capabilities announced: roots %v sampling %v elicitation %v", caps.RootsV2, caps.Sampling, caps.Elicitation)
	}
}

// Arguments the server's own validation refuses, reported as a failed
// result the way SDKs do, are invalid_arguments, as when toolloop refuses
// them.
func TestServerValidationFailureIsInvalidArguments(t *testing.T) {
	f := newFixture(nil)
	src := connect(t, f, &mcp.Options{Adjust: func(_ *mcpsdk.Tool, def *tool.Definition) {
		def.InputSchema = json.RawMessage(`{"type":"object"}`) // toolloop lets anything through
	}})
	_, err := toolsByName(t, src)["search"].Call(context.Background(), json.RawMessage(`{"query":42}`))
	if tool.KindOf(err) != llm.KindInvalidArguments || f.calls.Load() != 1 {
		t.Fatalf("err = %v (server calls %d), want invalid_arguments from the server", err, f.calls.Load())
	}
}

// Binary data in structured content is summarised like a binary block,
// and a source's cap on results reaches the executor, which cuts a long
// result and records the cut.
func TestStructuredBinaryAndResultCap(t *testing.T) {
	f := newFixture(nil)
	f.srv.AddTool(&mcpsdk.Tool{Name: "read_media", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			data := make([]byte, 300_000)
			img := &mcpsdk.ImageContent{MIMEType: "image/png", Data: data}
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{img},
				StructuredContent: map[string]any{"content": []any{img}, "name": "a.png"}}, nil
		})
	f.srv.AddTool(&mcpsdk.Tool{Name: "read_text", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: strings.Repeat("line\n", 1000)}}}, nil
		})
	src := connect(t, f, &mcp.Options{MaxResultBytes: 1000})
	tools := toolsByName(t, src)
	out, err := tools["read_media"].Call(context.Background(), json.RawMessage(`{}`))
	want := `{"content":[{"type":"image","mime_type":"image/png","bytes":300000}],"name":"a.png"}`
	if err != nil || string(out) != want {
		t.Fatalf("read_media = %s, %v\nwant %s", out, err, want)
	}
	if n := tools["read_text"].Definition().MaxResultBytes; n != 1000 {
		t.Fatalf("MaxResultBytes = %d", n)
	}
	reg, err := tool.NewRegistry(tools["read_text"])
	if err != nil {
		t.Fatal(err)
	}
	res, err := loop.Run(context.Background(), loop.Config{Model: llmtest.New(
		llmtest.Calls(llmtest.Call("c1", "read_text", `{}`)), llmtest.Text("read")), Tools: reg},
		[]llm.Message{llm.UserMessage("read it")})
	if err != nil {
		t.Fatal(err)
	}
	var cut int
	for _, ev := range res.Events {
		for _, o := range ev.Outcomes {
			cut += o.CutBytes
		}
	}
	if cut < 4000 {
		t.Fatalf("cut %d bytes, want over 4000 of about 5000", cut)
	}
	for _, m := range res.Messages {
		if m.Role == llm.RoleTool && len(m.Result.Content) > 1000 {
			t.Fatalf("the model was shown %d bytes", len(m.Result.Content))
		}
	}
}
