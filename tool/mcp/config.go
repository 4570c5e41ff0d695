package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolloop/toolloop/tool"
)

// ToolConfig is what a configuration declares about one of a server's
// tools, which the server itself cannot say (docs/DESIGN.md §7.1).
type ToolConfig struct {
	// Compensation says how a call of the tool is undone. Its Tool is the
	// server's name for the compensating tool, another tool of the same
	// server; Options.Prefix is put before it as before every name. Args
	// is the declarative mapping of tool.Compensation (Build is not
	// read from a configuration). Only a write may have one, and the
	// compensating tool must be a write too.
	Compensation *tool.Compensation `json:"compensation,omitempty"`
	// AtomicGroup names the all-or-nothing group of the tool's calls
	// (tool.Definition.AtomicGroup); it overrides Options.AtomicGroup.
	AtomicGroup string `json:"atomic_group,omitempty"`
	// Trust declares what the tool does with data (tool.Trust), which
	// MCP's annotations cannot say; what it leaves unset keeps
	// Options.Trust's word, then the default.
	Trust *TrustConfig `json:"trust,omitempty"`
}

// TrustConfig is a configuration's word on the trust of a server's tools
// (tool.Trust), as Options.Trust for all of them or ToolConfig.Trust for
// one. A nil field leaves what comes before it: for Options.Trust the
// defaults (results untrusted unless Options.TrustResults or TrustedTools
// says otherwise, outward unless openWorldHint is false), for a tool
// Options.Trust's word.
type TrustConfig struct {
	// Trusted says whether the results are trusted as a whole
	// (tool.Trust.Untrusted is its opposite).
	Trusted *bool `json:"trusted,omitempty"`
	// UntrustedFields and TrustedFields name result fields (dotted paths
	// of object keys) that differ from the whole (tool.Trust). Only a
	// tool's configuration has them.
	UntrustedFields []string `json:"untrusted_fields,omitempty"`
	TrustedFields   []string `json:"trusted_fields,omitempty"`
	// Destinations names the arguments (dotted paths) that say where
	// something goes; [] declares that none does. Left out, with no
	// schema format marking one, the tool's destinations are unknown
	// (tool.Trust.DestinationsUnknown). Only a tool's configuration has
	// them.
	Destinations []string `json:"destinations,omitempty"`
	// ReadsPrivate, Outward and Credentials are tool.Trust's.
	ReadsPrivate *bool `json:"reads_private,omitempty"`
	Outward      *bool `json:"outward,omitempty"`
	Credentials  *bool `json:"credentials,omitempty"`
}

// apply sets in tr what c declares.
func (c *TrustConfig) apply(tr *tool.Trust) {
	if c == nil {
		return
	}
	if c.Trusted != nil {
		tr.Untrusted = !*c.Trusted
	}
	if c.UntrustedFields != nil {
		tr.UntrustedFields = slices.Clone(c.UntrustedFields)
	}
	if c.TrustedFields != nil {
		tr.TrustedFields = slices.Clone(c.TrustedFields)
	}
	if c.Destinations != nil {
		tr.Destinations = slices.Clone(c.Destinations)
		tr.DestinationsUnknown = false
	}
	set := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	set(&tr.ReadsPrivate, c.ReadsPrivate)
	set(&tr.Outward, c.Outward)
	set(&tr.Credentials, c.Credentials)
}

// configure applies the configuration of the server's tool t to def:
// Options.AtomicGroup for a write, then t's own ToolConfig.
func (s *Source) configure(t *mcpsdk.Tool, def *tool.Definition) {
	if s.opts.AtomicGroup != "" && def.Effect == tool.Write {
		def.AtomicGroup = s.opts.AtomicGroup
	}
	def.Trust.DestinationsUnknown = true
	if c := s.opts.Trust; c != nil {
		// Destinations and fields are a tool's own: checkConfig
		// refuses them here, and no tool is built with them meanwhile.
		server := *c
		server.Destinations, server.UntrustedFields, server.TrustedFields = nil, nil, nil
		server.apply(&def.Trust)
	}
	cfg, ok := s.opts.Tools[t.Name]
	if !ok {
		return
	}
	cfg.Trust.apply(&def.Trust)
	if cfg.AtomicGroup != "" {
		def.AtomicGroup = cfg.AtomicGroup
	}
	if c := cfg.Compensation; c != nil {
		cc := *c
		cc.Tool = localName(s.opts.Prefix, c.Tool)
		cc.Args = maps.Clone(c.Args)
		def.Compensation = &cc
	}
}

// checkConfig checks Options.Tools against what the listing gave: every
// tool it configures was offered and built (tools maps the toolloop names
// to the tools; server the server names to toolloop's, for the tools
// offered, built or not), and every compensating tool is one of the
// server's writes. Each error names the server, the tool and what is
// wrong; a configuration error is never skipped as a tool the server
// described badly would be, since it is the caller's own.
func (s *Source) checkConfig(tools map[string]*tool.Tool, server map[string]string, listed map[string]*mcpsdk.Tool, buildErr map[string]error) error {
	var errs []error
	if c := s.opts.Trust; c != nil && (c.Destinations != nil || c.UntrustedFields != nil || c.TrustedFields != nil) {
		who := "mcp"
		if r := s.session.InitializeResult(); r != nil && r.ServerInfo != nil && r.ServerInfo.Name != "" {
			who = fmt.Sprintf("mcp: server %q", r.ServerInfo.Name)
		}
		errs = append(errs, fmt.Errorf("%s: configuration of the server's trust: destinations and result fields are a tool's own; declare them in the tool's configuration", who))
	}
	for _, name := range slices.Sorted(maps.Keys(s.opts.Tools)) {
		what := s.describeName(name) + ": configuration"
		local, offered := server[name]
		if !offered {
			errs = append(errs, fmt.Errorf("%s: the server offers no tool of that name (or Options.Filter left it out)", what))
			continue
		}
		if problems := checkTrust(s.opts.Tools[name].Trust, listed[name]); len(problems) > 0 {
			// A destination that is not an argument fails the build
			// too; this says it in the configuration's words.
			for _, p := range problems {
				errs = append(errs, fmt.Errorf("%s: trust: %s", what, p))
			}
			continue
		}
		if err := buildErr[name]; err != nil {
			errs = append(errs, err) // it names the server and the tool

			continue
		}
		c := s.opts.Tools[name].Compensation
		if c == nil {
			continue
		}
		u, ok := tools[localName(s.opts.Prefix, c.Tool)]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: its compensation names tool %q, which the server does not offer", what, c.Tool))
		case u.Name() == local:
			errs = append(errs, fmt.Errorf("%s: its compensation names the tool itself", what))
		case u.Definition().Effect != tool.Write:
			errs = append(errs, fmt.Errorf("%s: its compensation names tool %q, which is read-only (the server marks it readOnlyHint); a compensation must be a write", what, c.Tool))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &ConfigError{Err: errors.Join(errs...)}
}

// ConfigError is the error Source.Tools returns when Options.Tools does
// not fit the server's tools: the caller's configuration is wrong, not the
// server. Its message names each tool and what is wrong with it.
type ConfigError struct {
	Err error
}

func (e *ConfigError) Error() string { return e.Err.Error() }

// Unwrap returns the errors about each tool.
func (e *ConfigError) Unwrap() error { return e.Err }

// describeName is describe for a tool known only by its server's name.
func (s *Source) describeName(name string) string {
	return s.describe(&mcpsdk.Tool{Name: name})
}

// checkTrust returns what is wrong with c as the configuration of the
// server's tool t: a destination that is not one of its arguments, a
// result field that is not a dotted path or, when the tool publishes an
// output schema, not one of its fields, a field declared both trusted
// and untrusted, credentials on a read-only tool.
func checkTrust(c *TrustConfig, t *mcpsdk.Tool) []string {
	if c == nil || t == nil {
		return nil
	}
	var problems []string
	in := asSchema(t.InputSchema)
	for _, d := range c.Destinations {
		if why := schemaPath(in, d); why != "" {
			problems = append(problems, fmt.Sprintf("destination %q is not an argument: %s", d, why))
		}
	}
	out := asSchema(t.OutputSchema)
	for _, f := range slices.Concat(c.UntrustedFields, c.TrustedFields) {
		if why := schemaPath(out, f); why != "" {
			problems = append(problems, fmt.Sprintf("result field %q cannot be one: %s", f, why))
		}
	}
	for _, f := range c.UntrustedFields {
		if slices.Contains(c.TrustedFields, f) {
			problems = append(problems, fmt.Sprintf("result field %q is declared both trusted and untrusted", f))
		}
	}
	if c.Credentials != nil && *c.Credentials {
		var def tool.Definition
		hints(t.Annotations).ApplyTo(&def)
		if def.Effect != tool.Write {
			problems = append(problems, "credentials is declared, but the server marks the tool read-only (readOnlyHint), and only a write can change credentials")
		}
	}
	return problems
}

// asSchema decodes a schema the SDK gives as any value into a JSON
// object; nil when there is none or it is not an object.
func asSchema(v any) map[string]any {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// schemaPath says why path (dotted object keys, arrays walked through)
// cannot name a value of schema, or "" when it can. Where schema lists no
// properties nothing can be told, and any key is taken.
func schemaPath(schema map[string]any, path string) string {
	if path == "" {
		return "it is empty"
	}
	keys := strings.Split(path, ".")
	if slices.Contains(keys, "") {
		return "it has an empty key (two dots in a row, or a dot at an end)"
	}
	node := schema
	for i, k := range keys {
		for node != nil {
			items, ok := node["items"].(map[string]any)
			if !ok {
				break
			}
			node = items
		}
		if typ, _ := node["type"].(string); i > 0 && typ != "" && typ != "object" && typ != "array" {
			return fmt.Sprintf("%s is a %s, which has no fields", strings.Join(keys[:i], "."), typ)
		}
		props, ok := node["properties"].(map[string]any)
		if !ok {
			return ""
		}
		sub, ok := props[k]
		if !ok {
			at := "the schema"
			if i > 0 {
				at = strings.Join(keys[:i], ".")
			}
			return fmt.Sprintf("%s has no property %q (it has %s)", at, k, strings.Join(slices.Sorted(maps.Keys(props)), ", "))
		}
		node, _ = sub.(map[string]any)
	}
	return ""
}
