package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSchema writes a JSON Schema file for --output-schema.
func writeSchema(t *testing.T, dir, schema string) string {
	t.Helper()
	p := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(p, []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const cityTempSchema = `{"type":"object","properties":{"city":{"type":"string"},"temp_c":{"type":"number"}},"required":["city","temp_c"]}`

// run --output-schema on a streamed OpenAI-compatible server: a prose
// answer goes back with what was wrong, the JSON one is printed, and the
// run ends with final_answer after two turns.
func TestRunOutputSchema(t *testing.T) {
	dir := t.TempDir()
	srv := newChatServer(t, chatText("It is 12 degrees in Oslo."), chatText(`{"city":"Oslo","temp_c":12}`))
	code, out, errOut := call("run", "--provider", "openai", "--base-url", srv.srv.URL+"/v1", "--model", "any",
		"--output-schema", writeSchema(t, dir, cityTempSchema),
		"--db", filepath.Join(dir, "t.db"), "--log", dir, "Weather in Oslo as JSON?")
	if code != exitOK || !strings.Contains(out, `{"city":"Oslo","temp_c":12}`) || !strings.Contains(out, "status=final_answer steps=2 ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	reqs := srv.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if s, _ := last.Content.(string); last.Role != "user" || !strings.Contains(s, "the answer is not JSON") {
		t.Errorf("second request ends with %+v, want the correction", last)
	}
}

// The sandbox's desk model answers in prose: with --output-schema the run
// stops with invalid_output after the two corrections, exit status 1.
func TestRunOutputSchemaNever(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := call("run", "--provider", "sandbox", "--tools", "orders", "--output-schema", writeSchema(t, dir, cityTempSchema),
		"--db", filepath.Join(dir, "t.db"), "--log", dir, "where is A100")
	if code != exitFail || !strings.Contains(out, "status=invalid_output ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// A schema file that is not a schema, or flags that do not go together,
// are usage errors naming what is wrong, before anything runs.
func TestRunOutputSchemaBad(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--output-schema", writeSchema(t, dir, `{"type":"objekt"}`)}, "--output-schema " + filepath.Join(dir, "schema.json") + ": output schema is not a valid JSON Schema"},
		{[]string{"--output-schema", filepath.Join(dir, "missing.json")}, "--output-schema: open "},
		{[]string{"--output-schema", dir}, "not a regular file"},
		{[]string{"--output-retries", "3"}, "--output-retries needs --output-schema FILE"},
	} {
		args := append([]string{"run", "--provider", "sandbox", "--db", filepath.Join(dir, "t.db"), "--log", dir}, tc.args...)
		code, out, errOut := call(append(args, "where is A100")...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("run %v: exit %d, stdout %q, stderr %q; want exit 2 naming %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
