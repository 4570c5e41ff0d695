// Package tool is the tool-registry boundary: tool definitions, typed
// tools built from Go functions, and the Registry that maps a tool's name
// to its definition and handler.
//
// New (or MustNew) takes a Spec and a func(ctx, In) (Out, error): the input
// schema is inferred from In, and each call's arguments are validated
// against it before the handler runs. NewRaw takes a schema from elsewhere
// (an MCP server, a file) with a handler on raw JSON. Besides its name and
// schema, a Definition declares what the policy engine and the planner
// need: the tool's Effect (read-only or write) and Risk, its timeout and
// what a timeout does (stop the run or go back to the model), the
// resources a call touches, an exclusive group, fields traces must mask,
// whether every call needs confirmation, and for writes an idempotency key
// and a status look-up. The application declares these; the model cannot.
//
// Validate checks a call's arguments against the input schema (JSON Schema
// draft 2020-12 unless the schema's $schema names another draft; $ref
// within the schema; nothing loaded from elsewhere) and returns a
// fingerprint of them that ignores key order and white space (CallKey
// turns it into the key by which the loop spots repeated calls). Invalid
// arguments are a recoverable failure: an *Error of kind
// invalid_arguments, naming the path of each value at fault, that the
// loop sends back to the model as a result it can correct. Limits bound
// the arguments' size and depth before anything parses them. Handlers classify their own
// failures with NotFound, NeedsInput, RateLimited and Unavailable; any
// other error counts as internal. Deterministic and Retryable say which
// kinds another attempt cannot change and which it may.
//
// A Registry is immutable once built and safe to share between runs; its
// Version hashes the tool set, so a run's log records which tools it saw.
// The package never calls a model and never decides whether a call is
// allowed or when it runs: that is the policy engine's (package policy)
// and the executor's. It depends only on llm and two JSON Schema
// libraries: github.com/google/jsonschema-go infers typed tools' schemas,
// github.com/santhosh-tekuri/jsonschema/v6 compiles and checks them.
// Start with Spec, New and Registry; tool/mcp builds tools from an MCP
// server's.
package tool
