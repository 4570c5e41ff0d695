package loop

import (
	"fmt"
	"strings"
)

// MaxRunIDLen is the longest run ID CheckRunID accepts, in bytes (which
// are characters: the ID is ASCII).
const MaxRunIDLen = 128

// CheckRunID reports why id cannot be a run ID that programs take from
// people (a command line, a URL), or nil. A run ID names the run's log
// file, DIR/RUN_ID.jsonl, and appears in printed commands and lines, so it
// must be safe in all three: 1 to MaxRunIDLen letters, digits, '-', '_'
// and '.', not starting with '.'. That refuses path separators and "..",
// names hidden or special to a shell or a file system (':' names a stream
// on Windows), spaces, newlines and control characters, which could forge
// an output line, and IDs too long for a file name. The error quotes at
// most the ID's first 40 bytes.
//
// The runner itself accepts any ID (Config.NewRunID); the check is for
// the doors through which IDs come in.
func CheckRunID(id string) error {
	const allowed = "1 to 128 letters, digits, '-', '_' and '.', not starting with '.'"
	shown := id
	if len(shown) > 40 {
		shown = shown[:40] + "..."
	}
	switch {
	case id == "":
		return fmt.Errorf("the run ID is empty; want %s", allowed)
	case len(id) > MaxRunIDLen:
		return fmt.Errorf("run ID %q is %d bytes long; want %s", shown, len(id), allowed)
	case id[0] == '.':
		return fmt.Errorf("run ID %q starts with '.'; want %s", shown, allowed)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.", c) >= 0 {
			continue
		}
		what := fmt.Sprintf("%q", c)
		switch {
		case c == '/' || c == '\\':
			what = "a path separator " + what
		case c < ' ' || c == 0x7f:
			what = "a control character " + what
		case c == ' ':
			what = "a space"
		case c >= 0x80:
			what = "a non-ASCII character"
		}
		return fmt.Errorf("run ID %q has %s at byte %d; want %s", shown, what, i, allowed)
	}
	return nil
}
