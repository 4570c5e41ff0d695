package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// firstRun returns the ID of the sandbox run of scenario name in db.
func firstRun(t *testing.T, db, name string) string {
	t.Helper()
	_, out, _ := call("runs", "--db", db)
	for _, l := range lines(out) {
		if id, _, _ := strings.Cut(l, " "); strings.HasPrefix(id, "run-"+name+"-") {
			return id
		}
	}
	t.Fatalf("no run of %s in:\n%s", name, out)
	return ""
}

// TestRunsExportImport: a run exported whole replays from the file with
// no difference and imports into another store, where it is listed and
// replays again; a second import is refused and leaves the run as it was.
func TestRunsExportImport(t *testing.T) {
	db := demoStore(t)
	id := firstRun(t, db, "parallel")
	code, out, errs := call("runs", "export", id, "--db", db)
	if code != exitOK || errs != "" || len(lines(out)) < 8 {
		t.Fatalf("export: exit %d\n%s%s", code, out, errs)
	}
	file := filepath.Join(t.TempDir(), "run.jsonl")
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := call("replay", file); code != exitOK || !strings.Contains(out, "no difference (final_answer)") {
		t.Fatalf("replay of the export: exit %d\n%s%s", code, out, errs)
	}
	other := filepath.Join(t.TempDir(), "other.db")
	code, out, errs = call("runs", "import", file, "--db", other)
	if code != exitOK || out != "imported run "+id+" (10 events) into "+other+"\n" {
		t.Fatalf("import: exit %d\n%s%s", code, out, errs)
	}
	if _, out, _ := call("runs", "--db", other); !strings.Contains(out, id+"  final_answer  2") {
		t.Errorf("the imported run is not listed as it ended:\n%s", out)
	}
	if code, out, errs := call("replay", id, "--db", other); code != exitOK {
		t.Errorf("replay of the imported run: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = call("runs", "import", file, "--db", other)
	if code != exitUsage || !strings.Contains(errs, "already has a run with this ID; it is left as it was") {
		t.Errorf("second import: exit %d: %s", code, errs)
	}
}

// TestRunsExportRedacted: --redact all keeps no argument values and gives
// a log that replay and import refuse; --redact secrets keeps the rest.
func TestRunsExportRedacted(t *testing.T) {
	db := demoStore(t)
	id := firstRun(t, db, "parallel")
	_, all, _ := call("runs", "export", id, "--db", db, "--redact", "all", "--summarize-text")
	if strings.Contains(all, `"order_id":"A100"`) || strings.Contains(all, "Where are my orders") {
		t.Fatalf("--redact all --summarize-text kept an argument or a message:\n%s", all)
	}
	file := filepath.Join(t.TempDir(), "redacted.jsonl")
	os.WriteFile(file, []byte(all), 0o644)
	if code, _, errs := call("replay", file); code != exitFail || !strings.Contains(errs, "the log is redacted") {
		t.Errorf("replay of a redacted export: exit %d: %s", code, errs)
	}
	if code, _, errs := call("runs", "import", file, "--db", filepath.Join(t.TempDir(), "x.db")); code != exitFail || !strings.Contains(errs, "the log is redacted") {
		t.Errorf("import of a redacted export: exit %d: %s", code, errs)
	}
	_, secrets, _ := call("runs", "export", id, "--db", db, "--redact", "secrets")
	if !strings.Contains(secrets, `"order_id":"A100"`) {
		t.Errorf("--redact secrets lost a plain argument:\n%s", secrets)
	}
	if code, _, errs := call("runs", "export", id, "--db", db, "--redact", "some"); code != exitUsage || !strings.Contains(errs, "want none, secrets or all") {
		t.Errorf("bad --redact: exit %d: %s", code, errs)
	}
	if code, _, errs := call("runs", "export", "nope", "--db", db); code != exitUsage || !strings.Contains(errs, "no run nope") {
		t.Errorf("unknown run: exit %d: %s", code, errs)
	}
}
