package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// toolloop serve refuses a users file whose token is short in characters
// (however many bytes), holds a control character, or whose names differ
// only in case: exit 2, one line naming the file's line.
func TestServeRefusesAmbiguousUsers(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.db")
	if code, _, errOut := call("demo", "--db", db, "--mode", "normal"); code != exitOK {
		t.Fatalf("demo: %d %s", code, errOut)
	}
	long := "0123456789abcdef"
	for body, says := range map[string]string{
		"dana 😀😀😀😀😀\n":                             "line 1: the token of dana is 5 characters long",
		"dana " + long + "\x00\n":                  "line 1: the token of dana has the control or invisible character U+0000",
		"Dana " + long + "1\nDANA " + long + "2\n": "line 2: name DANA differs only in case from Dana on line 1",
	} {
		users := filepath.Join(dir, "users")
		if err := os.WriteFile(users, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		// Were the file taken, serve would serve until the context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var stdout, stderr bytes.Buffer
		code := Main(ctx, []string{"serve", "--db", db, "--users", users, "--addr", "127.0.0.1:0"}, &stdout, &stderr, nil, nil)
		cancel()
		out, errOut := stdout.String(), stderr.String()
		if code != exitUsage || out != "" || len(lines(errOut)) != 1 || !strings.Contains(errOut, says) {
			t.Errorf("users %q: exit %d, stdout %q, stderr %q; want exit 2 saying %q", body, code, out, errOut, says)
		}
	}
}
