package cli

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// demo and run refuse another program's SQLite file by name, and leave
// it as it was, without a journal, WAL or shared-memory file beside it.
// (They used to add toolloop's tables and WAL mode to it, and to stop
// half-way on one whose runs table was its own.)
func TestDemoAndRunLeaveAnotherProgramsDatabaseAlone(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--mode", "confirm_refund"},
		{"run", "--provider", "sandbox", "--tools", "orders", "refund A103 please"},
	} {
		t.Run(args[0], func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "tracker.db")
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"CREATE TABLE runs (id INTEGER PRIMARY KEY, km REAL)", "INSERT INTO runs (km) VALUES (10.5)"} {
				if _, err := db.Exec(s); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			code, out, errOut := call(append([]string{args[0], "--db", path}, args[1:]...)...)
			if code == exitOK || !strings.Contains(errOut, path) || !strings.Contains(errOut, "not a toolloop store") {
				t.Fatalf("exit %d, stderr %q; want a refusal naming %s\n%s", code, errOut, path, out)
			}
			after, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(before, after) {
				t.Fatalf("the other program's database changed (%v)", err)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Fatalf("files beside it: %v", names)
			}
		})
	}
}
