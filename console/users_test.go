package console_test

import (
	"strings"
	"testing"

	"github.com/toolloop/toolloop/console"
)

// The users file counts a token's characters, not its bytes, refuses
// characters no one can type or see, and refuses a name that another line
// gives in other case, naming both lines.
func TestParseUsersCharactersAndCase(t *testing.T) {
	long := "0123456789abcdef"
	for file, says := range map[string]string{
		"dana 😀😀😀😀😀\n":                                                 "line 1: the token of dana is 5 characters long; want at least 16",
		"dana " + strings.Repeat("é", 15) + "\n":                       "is 15 characters long",
		"dana " + long + "\x00x\n":                                     "line 1: the token of dana has the control or invisible character U+0000 at byte 16",
		"dana " + long[:8] + "\x1b[2J" + long[8:] + "\n":               "U+001B at byte 8",
		"dana " + long + "\u200bx\n":                                   "U+200B",
		"dana " + long + "\xff\n":                                      "is not valid UTF-8",
		"d\x00na " + long + "\n":                                       `line 1: name "d\x00na"`,
		"Dana " + long + "1\n# ops\nDANA " + long + "2\n":              "line 3: name DANA differs only in case from Dana on line 1",
		"erik " + long + "1\nDana " + long + "2\ndana " + long + "3\n": "line 3: name dana differs only in case from Dana on line 2",
	} {
		_, err := console.ParseUsers(strings.NewReader(file))
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("ParseUsers(%q) = %v, want an error saying %q", file, err, says)
		}
	}
	// Sixteen characters are enough, whatever their bytes.
	u, err := console.ParseUsers(strings.NewReader("dana " + strings.Repeat("é", 16) + "\nerik " + strings.Repeat("😀", 16) + "\n"))
	if err != nil || strings.Join(u.Names(), ",") != "dana,erik" {
		t.Fatalf("ParseUsers = %v, %v", u, err)
	}
}
