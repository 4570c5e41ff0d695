package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/tool/mcp"
)

func Example() {
	ctx := context.Background()

	// An MCP server; in real use it runs elsewhere (ConnectCommand,
	// ConnectURL).
	type greetIn struct {
		Name string `json:"name"`
	}
	server := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "greeter"}, nil)
	mcpsdk.AddTool(server, &mcpsdk.Tool{Name: "greet", Description: "say hello",
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in greetIn) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "hello, " + in.Name}}}, nil, nil
		})
	clientEnd, serverEnd := mcpsdk.NewInMemoryTransports()
	session, err := server.Connect(ctx, serverEnd, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Wait()

	src, err := mcp.Connect(ctx, clientEnd, &mcp.Options{Prefix: "hello_"})
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	tools, err := src.Tools(ctx)
	if err != nil {
		log.Fatal(err)
	}
	reg, err := tool.NewRegistry(tools...)
	if err != nil {
		log.Fatal(err)
	}

	greet, _ := reg.Lookup("hello_greet")
	fmt.Println(greet.Name(), greet.Effect(), greet.Risk())
	out, err := greet.Call(ctx, json.RawMessage(`{"name":"Ada"}`))
	fmt.Println(string(out), err)
	_, err = greet.Call(ctx, json.RawMessage(`{"name":7}`))
	fmt.Println(tool.KindOf(err))
	// Output:
	// hello_greet read_only medium
	// "hello, Ada" <nil>
	// invalid_arguments
}

// A server that publishes one tool with a schema toolloop cannot use: with
// OnSkipped set, that tool is reported and left out, and the rest load.
func ExampleOptions_onSkipped() {
	ctx := context.Background()
	server := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "mixed"}, nil)
	mcpsdk.AddTool(server, &mcpsdk.Tool{Name: "ping"},
		func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "pong"}}}, nil, nil
		})
	// "required" lists a property twice, which its meta-schema forbids.
	server.AddTool(&mcpsdk.Tool{Name: "sloppy", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a","a"]}`)},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{}, nil
		})
	clientEnd, serverEnd := mcpsdk.NewInMemoryTransports()
	session, err := server.Connect(ctx, serverEnd, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Wait()

	src, err := mcp.Connect(ctx, clientEnd, &mcp.Options{OnSkipped: func(t *mcpsdk.Tool, err error) {
		// A program would log err, which names the server, the tool
		// and what is wrong with its schema.
		fmt.Println("left out:", t.Name)
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	tools, err := src.Tools(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tools {
		fmt.Println("built:", t.Name())
	}
	// Output:
	// left out: sloppy
	// built: ping
}
