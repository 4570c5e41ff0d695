package tool

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/toolloop/toolloop/llm"
)

// Registry maps tool names to tools. It is immutable once built, so a run can
// use it while another registry is being assembled for the next one.
type Registry struct {
	byName  map[string]*Tool
	tools   []*Tool
	defs    []llm.ToolDefinition
	version string
}

// NewRegistry builds a registry. Two tools with the same name are an error.
func NewRegistry(tools ...*Tool) (*Registry, error) {
	r := &Registry{byName: make(map[string]*Tool, len(tools))}
	for i, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("tool registry: tool %d is nil", i)
		}
		if _, dup := r.byName[t.def.Name]; dup {
			return nil, fmt.Errorf("tool registry: two tools are named %q", t.def.Name)
		}
		r.byName[t.def.Name] = t
		r.tools = append(r.tools, t)
	}
	for _, t := range tools {
		// A compensation must name a write of the same set: checked here,
		// when the run's tools are known, rather than when it first fails.
		if c := t.def.Compensation; c != nil {
			u, ok := r.byName[c.Tool]
			switch {
			case !ok:
				return nil, fmt.Errorf("tool registry: tool %q is compensated by %q, which is not in the registry", t.def.Name, c.Tool)
			case u.def.Effect != Write:
				return nil, fmt.Errorf("tool registry: tool %q is compensated by %q, which is not a write", t.def.Name, c.Tool)
			case u == t:
				return nil, fmt.Errorf("tool registry: tool %q cannot compensate itself", t.def.Name)
			}
		}
	}
	for _, t := range r.tools {
		r.defs = append(r.defs, llm.ToolDefinition{
			Name: t.def.Name, Description: t.def.Description, InputSchema: t.def.InputSchema,
		})
	}
	r.version = version(r.tools)
	return r, nil
}

// Lookup returns the tool with the given name.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// Tools returns the tools in registration order.
func (r *Registry) Tools() []*Tool { return append([]*Tool(nil), r.tools...) }

// Names returns the tool names in registration order.
func (r *Registry) Names() []string {
	names := make([]string, len(r.tools))
	for i, t := range r.tools {
		names[i] = t.def.Name
	}
	return names
}

// Definitions returns what the model is told about the tools. The slice is
// shared by every request of every run; callers must not modify it.
func (r *Registry) Definitions() []llm.ToolDefinition { return r.defs }

// Version is a stable hash of the tool names, descriptions, effects and
// schemas, independent of registration order. Traces record it so that a
// run can be matched to the tool set it saw.
func (r *Registry) Version() string { return r.version }

func version(tools []*Tool) string {
	sorted := append([]*Tool(nil), tools...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].def.Name < sorted[j].def.Name })
	h := sha256.New()
	for _, t := range sorted {
		// Length-prefix each field so no two tool sets share an encoding.
		for _, f := range []string{t.def.Name, t.def.Description, string(t.def.Effect), string(t.def.InputSchema)} {
			fmt.Fprintf(h, "%d:%s;", len(f), f)
		}
		// The compensation and the group change what a run does; they
		// count only when set, so that the versions of tool sets without
		// them stay what they were.
		if c := t.def.Compensation; c != nil {
			fmt.Fprintf(h, "undo:%d:%s;", len(c.Tool), c.Tool)
			for _, k := range slices.Sorted(maps.Keys(c.Args)) {
				fmt.Fprintf(h, "%d:%s=%d:%s;", len(k), k, len(c.Args[k]), c.Args[k])
			}
		}
		if g := t.def.AtomicGroup; g != "" {
			fmt.Fprintf(h, "group:%d:%s;", len(g), g)
		}
	}
	return "tools-" + hex.EncodeToString(h.Sum(nil))[:16]
}
