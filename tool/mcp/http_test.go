package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/tool/mcp"
)

func TestStreamableHTTP(t *testing.T) {
	f := newFixture(nil)
	ts := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return f.srv }, nil))
	defer ts.Close()

	// The context of ConnectURL bounds the handshake, not the session.
	connectCtx, cancel := context.WithCancel(context.Background())
	src, err := mcp.ConnectURL(connectCtx, ts.URL, &mcp.Options{Prefix: "web_", HTTPClient: ts.Client()})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx := context.Background()
	tools := toolsByName(t, src)
	search := tools["web_search"]
	if search == nil || search.Effect() != tool.ReadOnly || tools["web_delete_file"].Risk() != tool.RiskHigh {
		t.Fatalf("tools over HTTP: %v", tools)
	}
	out, err := search.Call(ctx, json.RawMessage(`{"query":"http"}`))
	if err != nil || string(out) != `{"hits":["http-1","http-2","http-3"]}` {
		t.Fatalf("search = %s, %v", out, err)
	}
	_, err = tools["web_delete_file"].Call(ctx, json.RawMessage(`{"path":"/etc/hosts"}`))
	if tool.KindOf(err) != llm.KindToolError {
		t.Fatalf("delete = %v, want %s", err, llm.KindToolError)
	}
	if _, err := search.Call(ctx, json.RawMessage(`{"limit":1}`)); tool.KindOf(err) != llm.KindInvalidArguments {
		t.Fatalf("missing query: %v", err)
	}
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("server calls = %d, want 2", n)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	// The server is gone once the session ends.
	ts.Close()
	if _, err := search.Call(ctx, json.RawMessage(`{"query":"late"}`)); tool.KindOf(err) != llm.KindUnavailable {
		t.Fatalf("call after close: %v, want unavailable", err)
	}
}

// dropAfter serves f over streamable HTTP; while drop is set, a tools/call
// request is served in full (the tool runs) and its connection then closed
// without an answer, as when a proxy or the network loses the response.
func dropAfter(t *testing.T, f *fixture, drop *atomic.Bool) *httptest.Server {
	t.Helper()
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return f.srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if drop.Load() && bytes.Contains(body, []byte(`"tools/call"`)) {
			h.ServeHTTP(httptest.NewRecorder(), r)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// A write whose HTTP answer was lost after the server ran it is an
// unknown outcome, and stops a run with tool_outcome_unknown; a read is
// merely unavailable, and a write that never left is a clean failure.
func TestHTTPLostAnswer(t *testing.T) {
	f := newFixture(nil)
	var drop atomic.Bool
	ts := dropAfter(t, f, &drop)
	src, err := mcp.ConnectURL(context.Background(), ts.URL, &mcp.Options{HTTPClient: ts.Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tools := toolsByName(t, src)
	ctx := context.Background()

	drop.Store(true)
	_, err = tools["delete_file"].Call(ctx, json.RawMessage(`{"path":"/tmp/a"}`))
	if tool.KindOf(err) != llm.KindOutcomeUnknown || f.deleted.Load() != 1 {
		t.Fatalf("lost answer of a write: %v (deleted %d), want outcome_unknown", err, f.deleted.Load())
	}
	_, err = tools["search"].Call(ctx, json.RawMessage(`{"query":"q"}`))
	if tool.KindOf(err) != llm.KindUnavailable {
		t.Fatalf("lost answer of a read: %v, want unavailable", err)
	}

	// Through the loop: the run stops, and the model is not asked again.
	reg, err := tool.NewRegistry(tools["delete_file"])
	if err != nil {
		t.Fatal(err)
	}
	model := llmtest.New(llmtest.Calls(llmtest.Call("c1", "delete_file", `{"path":"/tmp/b"}`)), llmtest.Text("deleted"))
	res, _ := loop.Run(ctx, loop.Config{Model: model, Tools: reg}, []llm.Message{llm.UserMessage("delete /tmp/b")})
	if res.Status != loop.ToolOutcomeUnknown || f.deleted.Load() != 2 || len(model.Requests()) != 1 {
		t.Fatalf("run: %s (%s), deleted %d, model asked %d times", res.Status, res.Detail, f.deleted.Load(), len(model.Requests()))
	}

	// A request that never reached the server is a clean failure.
	drop.Store(false)
	ts.Close()
	_, err = tools["delete_file"].Call(ctx, json.RawMessage(`{"path":"/tmp/c"}`))
	if tool.KindOf(err) != llm.KindUnavailable || f.deleted.Load() != 2 {
		t.Fatalf("write to a server that is gone: %v, want unavailable", err)
	}
	// The server never heard the client leave.
	for ss := range f.srv.Sessions() {
		ss.Close()
	}
}
