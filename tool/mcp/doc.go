// Package mcp turns the tools of a Model Context Protocol server into
// toolloop tools, through the official MCP Go SDK.
//
// A Source is one client session with one server. Connect starts it over
// any SDK transport; ConnectCommand runs a local server as a child process
// and talks to it over stdio; ConnectURL reaches a remote server over
// streamable HTTP. Source.Tools lists the server's tools and builds each
// with tool.NewRaw, so that toolloop validates the model's arguments
// against the server's input schema before anything is sent, and the
// loop's policy, planner and executor treat MCP tools like any other:
//
//	src, err := mcp.ConnectCommand(ctx, exec.Command("my-mcp-server"), &mcp.Options{Prefix: "fs_"})
//	if err != nil { ... }
//	defer src.Close()
//	tools, err := src.Tools(ctx)
//	if err != nil { ... }
//	reg, err := tool.NewRegistry(tools...)
//
// A tool whose input schema toolloop cannot compile fails the listing,
// naming the server and the tool, unless Options.OnSkipped is set: then it
// is left out and reported there, and the server's other tools are built.
//
// The server's annotations decide each tool's effect and risk
// (tool.Annotations.ApplyTo): a tool is read-only only when it says so.
// Annotations are hints from the server; for a server you do not trust,
// override them with Options.Adjust.
//
// Failures are classified for the loop. A result with IsError set (the
// tool ran and failed) goes back to the model as a recoverable error of
// kind llm.KindToolError, unless its text says the server's own validation
// refused the arguments, which is invalid_arguments, as is a JSON-RPC
// invalid-params error. A call that got no answer is classified by
// whether its request may have reached the server: one that never left
// (a refused connection, a closed session) is unavailable, which the
// executor retries a bounded number of times; one that left and lost its
// answer (the connection dropped, the server died mid-call) is
// unavailable for a read-only tool but outcome_unknown for a write, which
// the executor never repeats and which stops the run with
// tool_outcome_unknown unless the tool's status look-up settles it. A
// canceled or expired context is reported as such, and the SDK tells the
// server to stop the request.
//
// What the model sees is bounded: binary content (images, audio, blobs,
// in content blocks or in structured content) is summarised by type, MIME
// type and size, and Options.MaxResultBytes caps each result (the
// executor cuts it and records the cut).
//
// A server run by ConnectCommand gets a minimal environment plus the
// variables Options.Env names; when it dies, errors carry its exit
// status and the end of its standard error; Close ends it and the
// processes it started.
//
// The Go SDK (v1.8) has no notion of tasks: a tool that a server offers
// only as a task (execution.taskSupport "required") cannot be told apart
// and is built like any other; leave it out with Options.Filter.
//
// The package is an adapter on the tool-registry boundary of docs/DESIGN.md §1:
// what it gives are ordinary *tool.Tool values, so an MCP tool goes through
// the same validation, policy, plan, timeouts and idempotency as a Go one.
// It never calls the model and never decides whether a call is allowed.
// Start with ConnectCommand or ConnectURL, Source.Tools and Options.
package mcp
