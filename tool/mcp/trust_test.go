package mcp_test

import (
	"testing"

	"github.com/toolloop/toolloop/tool/mcp"
)

// An MCP server's answers are outside content: untrusted unless the
// configuration trusts the server or the tool.
func TestToolsAreUntrustedUnlessConfigured(t *testing.T) {
	for _, c := range []struct {
		name      string
		opts      *mcp.Options
		untrusted map[string]bool
	}{
		{"default", nil, map[string]bool{"search": true, "delete_file": true, "notes_append": true}},
		{"server trusted", &mcp.Options{TrustResults: true}, map[string]bool{"search": false, "delete_file": false}},
		{"one tool trusted", &mcp.Options{TrustedTools: []string{"notes.append"}}, map[string]bool{"search": true, "notes_append": false}},
	} {
		tools := toolsByName(t, connect(t, newFixture(nil), c.opts))
		for name, want := range c.untrusted {
			if got := tools[name].Trust().Untrusted; got != want {
				t.Errorf("%s: %s Untrusted = %v, want %v", c.name, name, got, want)
			}
		}
	}
	tools := toolsByName(t, connect(t, newFixture(nil), nil))
	if tools["search"].Trust().Outward || !tools["slow"].Trust().Outward {
		t.Errorf("Outward: search (openWorldHint false) %v, slow (no hint) %v; want false, true",
			tools["search"].Trust().Outward, tools["slow"].Trust().Outward)
	}
}
