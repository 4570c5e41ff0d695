package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolloop/toolloop/llm"
)

// Effect says whether a tool changes the world.
type Effect string

// Tool effects. The planner runs writes one at a time, and the default policy
// treats them as high risk.
const (
	ReadOnly Effect = "read_only"
	Write    Effect = "write"
)

// Risk grades how much harm a wrong call could do. The policy engine takes it
// as an input; it is declared by the tool, never by the prompt.
type Risk string

// Risk levels. A tool that declares none gets Low for reads and High for
// writes.
const (
	RiskLow    Risk = "low"
	RiskMedium Risk = "medium"
	RiskHigh   Risk = "high"
)

// TimeoutAction says what a timeout of this tool does to the run.
type TimeoutAction string

// Timeout actions. Stop is the default: a tool that hangs ends the run with
// status tool_timeout. Report sends a timeout error back to the model, for
// reads where another attempt or another tool may help.
const (
	TimeoutStop   TimeoutAction = "stop"
	TimeoutReport TimeoutAction = "report"
)

// Definition is everything the loop knows about a tool besides its handler.
type Definition struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments, as sent to the model.
	InputSchema json.RawMessage
	Effect      Effect
	Risk        Risk
	// Timeout bounds one execution; zero means the executor's default.
	Timeout   time.Duration
	OnTimeout TimeoutAction
	// Sensitive names argument fields that traces must mask.
	Sensitive []string
	// ExclusiveGroup names a shared transaction or strict rate limit: calls
	// in the same group never run at the same time.
	ExclusiveGroup string
	// NeedsConfirmation declares that every call needs a human's
	// confirmation first (policy.ConfirmDeclared enforces it).
	NeedsConfirmation bool
	// HonorsContext declares that the handler returns soon after its
	// context is done, or never blocks at all (see Spec.HonorsContext).
	HonorsContext bool
	// MaxResultBytes caps the size of a result the model is shown: the
	// executor cuts a longer one and records the cut in the call's
	// outcome. Zero means the executor's cap
	// (executor.Options.MaxResultBytes); negative means no cap.
	MaxResultBytes int
	// Compensation, for a write, says how a call of it is undone (see
	// Compensation); nil when it cannot be.
	Compensation *Compensation
	// AtomicGroup names an all-or-nothing group: when a call of the group
	// fails for good, or the run stops without a final answer, after some
	// of the group's writes in the run succeeded, the run compensates
	// them or reports them, by its policy (loop.Config.Compensation).
	AtomicGroup string
	// Trust declares whether the results are trusted and what the tool
	// does with data (see Trust); the zero value is a trusted tool.
	Trust Trust
}

// Spec describes a typed tool for New. Only Name is required.
type Spec[In any] struct {
	Name        string
	Description string
	Effect      Effect // default ReadOnly
	Risk        Risk   // default from Effect
	Timeout     time.Duration
	OnTimeout   TimeoutAction // default TimeoutStop
	// Resources lists what a call touches, e.g. "order:A100", for the
	// planner and the trace. Nil means the call touches nothing shared.
	Resources      func(in In) []string
	Sensitive      []string
	ExclusiveGroup string
	// NeedsConfirmation declares that every call needs a human's
	// confirmation first.
	NeedsConfirmation bool
	// Compensation says how a call of this write is undone: the
	// compensating tool and how its arguments are made (see Compensation,
	// CompensateWith). Nil when the write cannot be undone.
	Compensation *Compensation
	// AtomicGroup names the all-or-nothing group the tool's calls belong
	// to (see Definition.AtomicGroup).
	AtomicGroup string
	// IdempotencyKey derives a write's business key from its arguments,
	// e.g. "refund:" + in.OrderID, so that the same business action asked
	// for again (under any call ID, in any run) is done once. Nil means
	// the runner's default key (run ID + call ID).
	IdempotencyKey func(in In) string
	// Lookup is the write's status look-up: it reports whether a write
	// with these arguments has already happened and, if so, its result.
	// The executor asks it before deciding about a write whose outcome is
	// unknown (a timeout, a crash). Without one, such a write stops the
	// run with tool_outcome_unknown.
	Lookup func(ctx context.Context, in In) (result any, applied bool, err error)
	// HonorsContext declares that the handler returns soon after its
	// context is done (its timeout passed, or the run was canceled), or
	// never blocks at all, as with a look-up in memory. The executor then
	// runs the handler on the calling goroutine instead of a goroutine of
	// its own, which saves a goroutine and a hand-over per call. Timeouts
	// still end calls through their contexts. The price of a false
	// declaration: a handler that ignores its context holds its caller
	// (and so Run) until it returns, and its late outcome counts as a
	// timeout, where an undeclared tool is left behind at its timeout and
	// the run goes on without it.
	HonorsContext bool
	// Trust declares whether the results are trusted and what the tool
	// does with data (see Trust); the zero value is a trusted tool.
	Trust Trust
}

// Tool is an immutable, ready-to-run tool: a definition, its resolved schema
// and a handler. Build one with New or NewRaw.
type Tool struct {
	def    Definition
	schema *sjs.Schema // the compiled InputSchema (schema.go)
	// fastSchema is schema compiled for Validate's fast path
	// (fastvalidate.go), or nil when that path could never be taken.
	fastSchema *fastSchema
	bind       func(args json.RawMessage) (Bound, error)
	encode     func(out any) (json.RawMessage, error)
	resources  func(args json.RawMessage) []string
	// jsonResults says that the handler's results are valid JSON by
	// construction (a typed tool's encoder writes them).
	jsonResults bool
	// destinations are the arguments that say where a call sends
	// something (Tool.Destinations).
	destinations []string
	writeHooks
}

// Providers accept tool names of letters, digits, '_' and '-', 1 to 64 long.
var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// New builds a typed tool from a Go function. The input schema is inferred
// from In (which must be a struct or a map with string keys); the handler
// receives decoded, validated arguments, and its output is encoded as JSON.
func New[In, Out any](spec Spec[In], fn func(ctx context.Context, in In) (Out, error)) (*Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("tool %q: nil handler", spec.Name)
	}
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("tool %q: inferring input schema: %w", spec.Name, err)
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("tool %q: encoding input schema: %w", spec.Name, err)
	}
	def := Definition{
		Name: spec.Name, Description: spec.Description, InputSchema: raw,
		Effect: spec.Effect, Risk: spec.Risk, Timeout: spec.Timeout, OnTimeout: spec.OnTimeout,
		Sensitive: append([]string(nil), spec.Sensitive...), ExclusiveGroup: spec.ExclusiveGroup,
		NeedsConfirmation: spec.NeedsConfirmation, HonorsContext: spec.HonorsContext, Trust: spec.Trust.clone(),
		Compensation: spec.Compensation, AtomicGroup: spec.AtomicGroup,
	}
	bind := func(args json.RawMessage) (Bound, error) {
		in, err := decodeArgs[In](args)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (any, error) { return fn(ctx, in) }, nil
	}
	encode := func(out any) (json.RawMessage, error) {
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encoding result: %w", err)
		}
		return b, nil
	}
	var resources func(json.RawMessage) []string
	if spec.Resources != nil {
		resources = func(args json.RawMessage) []string {
			in, err := decodeArgs[In](args)
			if err != nil {
				return nil
			}
			return spec.Resources(in)
		}
	}
	t, err := build(def, resources)
	if err != nil {
		return nil, err
	}
	t.bind, t.encode = bind, encode
	t.writeHooks = typedWriteHooks(spec)
	t.jsonResults = true
	return t, nil
}

// MustNew is New for tool sets defined at start-up; it panics on error.
func MustNew[In, Out any](spec Spec[In], fn func(ctx context.Context, in In) (Out, error)) *Tool {
	t, err := New(spec, fn)
	if err != nil {
		panic(err)
	}
	return t
}

// RawHandler handles raw JSON arguments, for tools whose schema comes from
// elsewhere (an MCP server, a configuration file).
type RawHandler func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)

// NewRaw builds a tool from a definition whose InputSchema is set and a raw
// handler. Arguments are validated against the schema before fn runs.
// resources may be nil.
func NewRaw(def Definition, fn RawHandler, resources func(args json.RawMessage) []string) (*Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("tool %q: nil handler", def.Name)
	}
	if len(def.InputSchema) == 0 {
		return nil, fmt.Errorf("tool %q: InputSchema is required", def.Name)
	}
	def.InputSchema = append(json.RawMessage(nil), def.InputSchema...)
	def.Sensitive = append([]string(nil), def.Sensitive...)
	def.Trust = def.Trust.clone()
	t, err := build(def, resources)
	if err != nil {
		return nil, err
	}
	t.bind = func(args json.RawMessage) (Bound, error) {
		return func(ctx context.Context) (any, error) {
			out, err := fn(ctx, args)
			if err != nil {
				return nil, err
			}
			return out, nil
		}, nil
	}
	t.encode = func(out any) (json.RawMessage, error) {
		raw, _ := out.(json.RawMessage)
		return raw, nil
	}
	return t, nil
}

// build checks a definition, fills in its defaults and compiles its
// InputSchema.
func build(def Definition, resources func(json.RawMessage) []string) (*Tool, error) {
	if !validName.MatchString(def.Name) {
		return nil, fmt.Errorf("tool name %q: want 1 to 64 letters, digits, '_' or '-'", def.Name)
	}
	doc, err := sjs.UnmarshalJSON(bytes.NewReader(def.InputSchema))
	if err != nil {
		return nil, fmt.Errorf("tool %q: input schema is not a JSON Schema: %w", def.Name, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("tool %q: input schema is not a JSON Schema: want a JSON object, got %.40s", def.Name, def.InputSchema)
	}
	if typ, _ := obj["type"].(string); typ != "object" {
		return nil, fmt.Errorf("tool %q: input schema must describe a JSON object, not %q", def.Name, typ)
	}
	switch def.Effect {
	case "":
		def.Effect = ReadOnly
	case ReadOnly, Write:
	default:
		return nil, fmt.Errorf("tool %q: unknown effect %q (want %q or %q)", def.Name, def.Effect, ReadOnly, Write)
	}
	switch def.Risk {
	case "":
		def.Risk = RiskLow
		if def.Effect == Write {
			def.Risk = RiskHigh
		}
	case RiskLow, RiskMedium, RiskHigh:
	default:
		return nil, fmt.Errorf("tool %q: unknown risk %q", def.Name, def.Risk)
	}
	switch def.OnTimeout {
	case "":
		def.OnTimeout = TimeoutStop
	case TimeoutStop, TimeoutReport:
	default:
		return nil, fmt.Errorf("tool %q: unknown timeout action %q", def.Name, def.OnTimeout)
	}
	if def.Timeout < 0 {
		return nil, fmt.Errorf("tool %q: negative timeout %v", def.Name, def.Timeout)
	}
	if def.Compensation != nil && def.Effect != Write {
		return nil, fmt.Errorf("tool %q: only a write can declare a compensation", def.Name)
	}
	if err := def.Compensation.check(def.Name); err != nil {
		return nil, err
	}
	if c := def.Compensation; c != nil {
		// A copy: the caller's declaration may change after New.
		cc := *c
		cc.Args = maps.Clone(c.Args)
		def.Compensation = &cc
	}
	if def.AtomicGroup != "" && !validName.MatchString(def.AtomicGroup) {
		return nil, fmt.Errorf("tool %q: atomic group %q: want 1 to 64 letters, digits, '_' or '-'", def.Name, def.AtomicGroup)
	}
	schema, err := compileSchemaDoc(doc)
	if err != nil {
		return nil, fmt.Errorf("tool %q: resolving input schema: %s", def.Name, clipMessage(err.Error()))
	}
	dests, err := destinations(obj, def.Trust.Destinations)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", def.Name, err)
	}
	return &Tool{def: def, schema: schema, fastSchema: compileFastRoot(schema), resources: resources, destinations: dests}, nil
}

// Name returns the tool's name.
func (t *Tool) Name() string { return t.def.Name }

// Definition returns a copy of the tool's definition.
func (t *Tool) Definition() Definition {
	d := t.def
	d.InputSchema = append(json.RawMessage(nil), d.InputSchema...)
	d.Sensitive = append([]string(nil), d.Sensitive...)
	d.Trust = d.Trust.clone()
	return d
}

// Effect returns whether the tool reads or writes.
func (t *Tool) Effect() Effect { return t.def.Effect }

// Timeout returns the tool's own timeout; zero means "use the default".
func (t *Tool) Timeout() time.Duration { return t.def.Timeout }

// OnTimeout returns what a timeout of this tool does to the run.
func (t *Tool) OnTimeout() TimeoutAction { return t.def.OnTimeout }

// MaxResultBytes returns the tool's own cap on the size of its results;
// zero means "use the executor's", negative means none.
func (t *Tool) MaxResultBytes() int { return t.def.MaxResultBytes }

// Validate checks args against the input schema. It returns a fingerprint
// of the arguments that is equal for argument objects differing only in
// key order or white space (the loop uses it to spot a model that repeats
// itself), and an *Error of kind invalid_arguments when they do not conform.
//
// The message of the *Error names each violation by the path of the value
// at fault, a JSON pointer without its leading slash: `argument
// "items/2/qty": got number, want integer`, `missing required argument
// "order_id"`, `unexpected argument "orderId"`. Arguments that repeat a
// key in an object are refused too ("duplicate argument"), since decoding
// would silently keep only the last value.
func (t *Tool) Validate(args json.RawMessage) (uint64, error) {
	return validateArgs(t.schema, t.fastSchema, args)
}

// Invoke runs the handler on arguments that Validate accepted. It does not
// validate again; use Call for arguments of unknown provenance.
func (t *Tool) Invoke(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	call, err := t.Bind(args)
	if err != nil {
		return nil, err
	}
	out, err := call(ctx)
	if err != nil {
		return nil, err
	}
	return t.Encode(out)
}

// Bound is a call of a tool's handler on arguments Bind has decoded. Its
// result, when there is no error, is for Encode. It may be called more
// than once, and from any goroutine.
type Bound func(ctx context.Context) (any, error)

// Bind prepares a call of the handler on args: a typed tool decodes them
// now, on the calling goroutine. Invoke is Bind, the call, then Encode. The
// executor binds and encodes on the goroutine that drives the call and
// runs only the handler on another: decoding and encoding are the deepest
// parts of a call, and a goroutine that never grows its stack costs least.
func (t *Tool) Bind(args json.RawMessage) (Bound, error) {
	if len(args) == 0 {
		args = emptyObject()
	}
	return t.bind(args)
}

// Encode encodes the result of a Bound call as JSON: a typed tool's output
// with encoding/json, a raw tool's as the handler wrote it.
func (t *Tool) Encode(out any) (json.RawMessage, error) { return t.encode(out) }

// JSONResults reports whether the handler's results are always valid JSON,
// written by an encoder rather than by the handler itself (true of typed
// tools, made by New), so that a caller need not check them.
func (t *Tool) JSONResults() bool { return t.jsonResults }

// Call validates args and, if they conform, runs the handler.
func (t *Tool) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	if _, err := t.Validate(args); err != nil {
		return nil, err
	}
	return t.Invoke(ctx, args)
}

// Resources returns what a call with these arguments touches.
func (t *Tool) Resources(args json.RawMessage) []string {
	if t.resources == nil {
		return nil
	}
	if len(args) == 0 {
		args = emptyObject() // as in Validate and Invoke
	}
	return t.resources(args)
}

// emptyObject is what missing arguments mean. A fresh slice each time, so a
// handler that edits its arguments cannot change what the next call sees.
func emptyObject() json.RawMessage { return json.RawMessage("{}") }

// decodeArgs decodes args into a zero In with encoding/json, and says
// what is wrong as an invalid-arguments *Error.
func decodeArgs[In any](args json.RawMessage) (In, error) {
	var in In
	if err := json.Unmarshal(args, &in); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return *new(In), &Error{Kind: llm.KindInvalidArguments, Msg: fmt.Sprintf("argument %s: cannot use a JSON %s as %s", quoteClipped(ute.Field), clip(ute.Value), ute.Type)}
		}
		return *new(In), &Error{Kind: llm.KindInvalidArguments, Msg: "arguments: " + clipMessage(err.Error())}
	}
	return in, nil
}

// HonorsContext reports whether the tool declares that its handler returns
// soon after its context is done (see Spec.HonorsContext).
func (t *Tool) HonorsContext() bool { return t.def.HonorsContext }

// NeedsConfirmation reports whether the tool declares that its calls need
// a human's confirmation.
func (t *Tool) NeedsConfirmation() bool { return t.def.NeedsConfirmation }

// ExclusiveGroup returns the tool's exclusive group, or "".
func (t *Tool) ExclusiveGroup() string { return t.def.ExclusiveGroup }

// Risk returns the tool's declared (or defaulted) risk.
func (t *Tool) Risk() Risk { return t.def.Risk }
