package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

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
	if tool.KindOf(err) != mcp.KindToolError {
		t.Fatalf("delete = %v, want %s", err, mcp.KindToolError)
	}
	if _, err := search.Call(ctx, json.RawMessage(`{"limit":1}`)); tool.KindOf(err) != tool.KindInvalidArguments {
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
	if _, err := search.Call(ctx, json.RawMessage(`{"query":"late"}`)); tool.KindOf(err) != tool.KindUnavailable {
		t.Fatalf("call after close: %v, want unavailable", err)
	}
}
