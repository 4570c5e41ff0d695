package openai

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmhttp"
)

// GeneratedIDPrefix starts every tool call ID the adapters make up for a
// call the provider returned without one.
const GeneratedIDPrefix = "toolloop_call_"

// generatedID derives a stable ID for the index-th call of a reply that came
// without one. The history length and the step keep it unique within a run
// (and across runs that continue a history); name and arguments tie it to
// the call itself.
func generatedID(req *llm.Request, index int, name string, args []byte) string {
	h := sha256.New()
	var n [8]byte
	for _, v := range []int{len(req.Messages), req.Step, index} {
		binary.BigEndian.PutUint64(n[:], uint64(v))
		h.Write(n[:])
	}
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(args)
	return GeneratedIDPrefix + hex.EncodeToString(h.Sum(nil)[:12])
}

// runCacheKey returns the prompt_cache_key of req for an adapter with
// CacheKeyPerRun: req.CacheKey when set, else a hash of what the run's
// every request begins with (the model, the tools, and the messages up to
// and including the first user message), so that every turn of a run
// carries the same key without the adapter keeping anything between
// requests. Runs that begin alike share a key, as they share a prefix.
func runCacheKey(req *llm.Request, model string) string {
	if req.CacheKey != "" {
		return req.CacheKey
	}
	h := sha256.New()
	field := func(s []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write(s)
	}
	field([]byte(model))
	for _, d := range req.Tools {
		field([]byte(d.Name))
		field([]byte(d.Description))
		field(d.InputSchema)
	}
	for _, m := range req.Messages {
		field([]byte(m.Role))
		field([]byte(m.Text))
		if m.Role == llm.RoleUser {
			break
		}
	}
	return CacheKeyPrefix + hex.EncodeToString(h.Sum(nil)[:16])
}

// CacheKeyPrefix starts every prompt_cache_key the adapters derive (see
// ChatOptions.CacheKeyPerRun).
const CacheKeyPrefix = "toolloop-"

// rawArguments returns a call's arguments as the model sent them. field is
// the SDK's record of the raw JSON value and decoded its string form. A JSON
// string (OpenAI's format) yields its contents unchanged, valid JSON or not;
// an object or array (sent by some compatible servers) is kept as it came;
// an empty or missing value becomes "{}", the arguments of a call that has
// none.
func rawArguments(field respjson.Field, decoded string) json.RawMessage {
	raw := strings.TrimSpace(field.Raw())
	if raw != "" && (raw[0] == '{' || raw[0] == '[') {
		return json.RawMessage(raw)
	}
	if strings.TrimSpace(decoded) == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(decoded)
}

// resultContent renders a tool result as the output string the provider
// expects. Content is JSON already and goes verbatim; a result without
// content gets a small object saying how the call ended, so the model never
// reads an empty output.
func resultContent(r *llm.ToolResult) string {
	if len(bytes.TrimSpace(r.Content)) > 0 {
		return string(r.Content)
	}
	switch r.Status {
	case llm.StatusOK, "":
		return "{}"
	}
	kind := r.ErrorKind
	if kind == "" {
		kind = llm.KindInternal
	}
	return string(llm.ErrorContent(kind, "the call ended with status "+string(r.Status)))
}

// callArguments renders a call's arguments for the history sent back: as
// the model sent them, or "{}" when there are none.
func callArguments(c llm.ToolCall) string {
	if len(bytes.TrimSpace(c.Arguments)) == 0 {
		return "{}"
	}
	return string(c.Arguments)
}

// schemaMap turns a tool's input schema into the map the SDK sends as
// parameters. Values stay json.RawMessage, so the schema goes out with its
// numbers and nesting exactly as given. An empty schema is an object with
// no properties.
func schemaMap(def llm.ToolDefinition) (map[string]any, error) {
	if len(bytes.TrimSpace(def.InputSchema)) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(def.InputSchema, &fields); err != nil {
		return nil, badRequest(fmt.Errorf("openai: tool %q: the input schema is not a JSON object: %w", def.Name, err))
	}
	m := make(map[string]any, len(fields))
	for k, v := range fields {
		m[k] = v
	}
	return m, nil
}

// modelName picks the request's model, else the adapter's default.
func modelName(req *llm.Request, def string) (string, error) {
	if req.Model != "" {
		return req.Model, nil
	}
	if def != "" {
		return def, nil
	}
	return "", badRequest(errors.New("openai: no model: set the request's Model (loop.Config.ModelName) or the adapter's default Model"))
}

// clone copies an optional setting, so that options are immutable once an
// adapter holds them.
func clone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func badRequest(err error) *llm.Error {
	return &llm.Error{Kind: llm.KindBadRequest, Err: err}
}

func refusal(text string) *llm.Error {
	if strings.TrimSpace(text) == "" {
		text = "the model refused to answer"
	}
	return &llm.Error{Kind: llm.KindRefusal, Err: fmt.Errorf("openai: %s", text)}
}

// requestOptions are the options of one request: the caller's, then the
// response guard (the innermost middleware, so that it checks the body
// before any other middleware reads it) and the capture of the HTTP
// response into resp. The caller's slice is never appended to.
func requestOptions(caller []option.RequestOption, maxBytes, maxStreamBytes int64, resp **http.Response) []option.RequestOption {
	guard := llmhttp.ResponseGuard{Provider: "openai", MaxBytes: maxBytes, MaxStreamBytes: maxStreamBytes}
	ro := make([]option.RequestOption, 0, len(caller)+2)
	ro = append(ro, caller...)
	return append(ro,
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			res, err := next(req)
			res = guard.Check(res)
			watchSentinel(res)
			return res, err
		}),
		option.WithResponseInto(resp))
}

// classify turns a failed SDK call into an *llm.Error where it can. resp is
// the last HTTP response, captured with option.WithResponseInto: it lets a
// failure be classified by its status even when the SDK could not decode
// the error body. A failure caused by ctx is returned as it is.
func classify(ctx context.Context, err error, resp *http.Response, now time.Time) error {
	if ctx.Err() != nil {
		return err
	}
	var le *llm.Error
	if errors.As(err, &le) {
		// The response guard's verdict on the body: it says all there is.
		return le
	}
	var ae *sdk.Error
	isAPI := errors.As(err, &ae)
	if isAPI && ae.Response != nil {
		resp = ae.Response
	}
	status := 0
	switch {
	case isAPI:
		status = ae.StatusCode
	case resp != nil && resp.StatusCode >= 400:
		status = resp.StatusCode
	}
	if status == 0 {
		var ue *url.Error
		var ne net.Error
		if errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
			return &llm.Error{Kind: llm.KindUnavailable, Retryable: true, Err: err}
		}
		return err
	}
	var header http.Header
	var body string
	if resp != nil {
		header, body = resp.Header, peekBody(resp)
	}
	if body == "" && isAPI {
		body = ae.RawJSON()
	}
	code, typ, msg := errorDetail(body)
	var cause error
	if isAPI {
		// The SDK's error text is the status alone; add the provider's
		// code and message.
		if ae.Code != "" {
			code = ae.Code
		}
		if ae.Type != "" {
			typ = ae.Type
		}
		if ae.Message != "" {
			msg = ae.Message
		}
		cause = ae
	} else {
		// The SDK failed to decode the body; its decoding error says
		// nothing about the failure, so it is left out.
		cause = fmt.Errorf("openai: HTTP %d %s", status, http.StatusText(status))
	}
	var detail []string
	if code != "" && strings.Trim(code, "0123456789") != "" {
		detail = append(detail, "code "+code)
	}
	if msg != "" && status != http.StatusUnauthorized && status != http.StatusForbidden {
		detail = append(detail, msg)
	}
	if len(detail) > 0 {
		cause = fmt.Errorf("%w: %s", cause, strings.Join(detail, ": "))
	}
	e := llmhttp.HTTPError(status, header, body, cause, now)
	contextLength(e, code+" "+typ+" "+body)
	return e
}

// errorDetail reads the code, type and message from an error body in any
// of the shapes servers use: OpenAI's {"error": {"code", "type",
// "message"}}, {"error": "message"}, or the fields at the top level.
func errorDetail(body string) (code, typ, msg string) {
	var top map[string]any
	if json.Unmarshal([]byte(body), &top) != nil {
		return "", "", ""
	}
	fields := top
	switch e := top["error"].(type) {
	case string:
		return "", "", e
	case map[string]any:
		fields = e
	}
	str := func(v any) string {
		switch v := v.(type) {
		case string:
			return v
		case float64:
			return fmt.Sprint(v)
		}
		return ""
	}
	return str(fields["code"]), str(fields["type"]), str(fields["message"])
}

// contextLength reclassifies e when text names a context-window overflow in
// words llmhttp.HTTPError does not look for (OpenAI's code is covered there; these
// are compatible servers').
func contextLength(e *llm.Error, text string) {
	if e.Retryable || e.Kind == llm.KindAuthentication {
		return
	}
	lower := strings.ToLower(text)
	for _, s := range []string{"context_length_exceeded", "exceed_context_size", "context size", "maximum context length"} {
		if strings.Contains(lower, s) {
			e.Kind = llm.KindContextLengthExceeded
			return
		}
	}
}

// peekBody reads up to 64 KiB of an error response's body and puts it back.
func peekBody(resp *http.Response) string {
	if resp.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), resp.Body))
	return string(b)
}
