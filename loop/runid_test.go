package loop

import (
	"strings"
	"testing"
)

func TestCheckRunID(t *testing.T) {
	for _, ok := range []string{"a", "run-normal-1", "toolloop-0123abcd", "A_b.c-9", "x..y", strings.Repeat("z", MaxRunIDLen)} {
		if err := CheckRunID(ok); err != nil {
			t.Errorf("CheckRunID(%q) = %v, want nil", ok, err)
		}
	}
	for id, want := range map[string]string{
		"":                                 "empty",
		".":                                "starts with '.'",
		"..":                               "starts with '.'",
		".hidden":                          "starts with '.'",
		"../../x":                          "starts with '.'",
		"a/b":                              "a path separator '/' at byte 1",
		`a\b`:                              `a path separator '\\' at byte 1`,
		"a b":                              "a space at byte 1",
		"a\nstatus=final_answer":           `a control character '\n' at byte 1`,
		"a\x00":                            `a control character '\x00' at byte 1`,
		"a\x1b[2J":                         `a control character '\x1b'`,
		"c:d":                              "':' at byte 1",
		"é":                                "a non-ASCII character at byte 0",
		strings.Repeat("x", MaxRunIDLen+1): "129 bytes long",
		strings.Repeat("y", 5000):          "5000 bytes long",
	} {
		err := CheckRunID(id)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckRunID(%.50q) = %v, want an error with %q", id, err, want)
			continue
		}
		if len(err.Error()) > 300 {
			t.Errorf("CheckRunID(%.50q): a %d-byte error", id, len(err.Error()))
		}
	}
}
