package mcp

import (
	"errors"
	"fmt"
	"maps"
	"slices"

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
}

// configure applies the configuration of the server's tool t to def:
// Options.AtomicGroup for a write, then t's own ToolConfig.
func (s *Source) configure(t *mcpsdk.Tool, def *tool.Definition) {
	if s.opts.AtomicGroup != "" && def.Effect == tool.Write {
		def.AtomicGroup = s.opts.AtomicGroup
	}
	cfg, ok := s.opts.Tools[t.Name]
	if !ok {
		return
	}
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
func (s *Source) checkConfig(tools map[string]*tool.Tool, server map[string]string, buildErr map[string]error) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(s.opts.Tools)) {
		what := s.describeName(name) + ": configuration"
		local, offered := server[name]
		if !offered {
			errs = append(errs, fmt.Errorf("%s: the server offers no tool of that name (or Options.Filter left it out)", what))
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
