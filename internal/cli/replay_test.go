package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// demoStore records the sandbox's runs in a new store and returns its
// path.
func demoStore(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "demo.db")
	if code, _, errs := call("demo", "--db", db); code != exitOK {
		t.Fatalf("demo exited %d: %s", code, errs)
	}
	return db
}

// differing returns the scenarios whose runs a replay's report says
// differ.
func differing(out string) []string {
	var names []string
	for _, l := range lines(out) {
		if run, ok := strings.CutPrefix(l, "run run-"); ok && strings.Contains(l, ": differs at ") {
			name, _, _ := strings.Cut(run, ":")
			names = append(names, name[:strings.LastIndex(name, "-")])
		}
	}
	slices.Sort(names)
	return names
}

// TestReplaySandbox is the README's worked example: the sandbox's runs
// replay with no difference as they ran, and an allowlist without the
// writes stops exactly the runs that wrote or asked to, each at the
// call it refuses.
func TestReplaySandbox(t *testing.T) {
	db := demoStore(t)
	code, out, errs := call("replay", "--db", db, "--all")
	if code != exitOK || strings.Count(out, ": no difference (") != 22 || errs != "" {
		t.Fatalf("same configuration: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = call("replay", "--db", db, "--all", "--allow", "query_order,track_shipment,list_orders")
	want := []string{"compensation_failed", "confirmation_required", "parallel", "permission_denied", "refund_retry", "refund_reversed", "refund_twice", "refund_unknown"}
	if got := differing(out); code != exitFail || !slices.Equal(got, want) {
		t.Fatalf("allowlist: exit %d, differing %q, want %q\n%s%s", code, got, want, out, errs)
	}
	if !strings.Contains(out, `call_v1  issue_voucher  allow (none)  not_allowed (allow): tool "issue_voucher" is not on the --allow list`) ||
		!strings.Contains(out, "status: recorded tool_outcome_unknown, new tool_not_allowed") {
		t.Errorf("the refund_unknown report lacks its call side by side or the statuses:\n%s", out)
	}
}

// TestReplayBudgetFlags: a budget flag replaces the recorded budget and
// keeps the others; --json prints one line per run.
func TestReplayBudgetFlags(t *testing.T) {
	db := demoStore(t)
	code, out, errs := call("replay", "--db", db, "--all", "--max-steps", "2", "--json")
	if code != exitFail || len(lines(out)) != 22 {
		t.Fatalf("exit %d, %d line(s)\n%s%s", code, len(lines(out)), out, errs)
	}
	for _, l := range lines(out) {
		// tool_timeout keeps its recorded 50ms tool timeout: its run
		// differs by the step budget at turn 2, not before.
		if strings.Contains(l, `"run_id":"run-tool_timeout-`) &&
			!strings.Contains(l, `"difference":{"aspect":"budget","seq":8,"step":2`) {
			t.Errorf("tool_timeout: %s", l)
		}
		if strings.Contains(l, `"run_id":"run-parallel-`) && strings.Contains(l, `"difference"`) {
			t.Errorf("parallel takes two turns and must not differ: %s", l)
		}
	}
}

// TestReplayFiles: a whole log file replays; a log the trace summarized,
// and one with an event kind this version does not know, are refused,
// naming why, with exit status 1.
func TestReplayFiles(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../replay/testdata/sandbox/normal.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	whole := filepath.Join(dir, "normal.jsonl")
	os.WriteFile(whole, src, 0o644)
	if code, out, errs := call("replay", whole); code != exitOK || out != "run run-normal: no difference (final_answer)\n" {
		t.Fatalf("whole log: exit %d\n%s%s", code, out, errs)
	}
	unknown := filepath.Join(dir, "unknown.jsonl")
	os.WriteFile(unknown, []byte(strings.Replace(string(src), `"kind":"calls_validated"`, `"kind":"compensation_started"`, 1)), 0o644)
	code, _, errs := call("replay", unknown)
	if code != exitFail || !strings.Contains(errs, `cannot replay: event kind "compensation_started" (event 3)`) {
		t.Fatalf("unknown kind: exit %d: %s", code, errs)
	}
	redacted := filepath.Join(dir, "redacted.jsonl")
	os.WriteFile(redacted, []byte(strings.ReplaceAll(string(src), `{"order_id":"A100"}`, `{"order_id":"<string:4>"}`)), 0o644)
	code, _, errs = call("replay", redacted)
	if code != exitFail || !strings.Contains(errs, "the log is redacted") {
		t.Fatalf("redacted: exit %d: %s", code, errs)
	}
}

// TestReplayUsage: bad command lines are usage errors that say what to do.
func TestReplayUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay"}, "name a RUN_ID or a run log FILE"},
		{[]string{"replay", "--all", "r1"}, "give it or RUN_IDs, not both"},
		{[]string{"replay", "--max-steps", "-1", "r1"}, "--max-steps must not be negative"},
		{[]string{"replay", "--output-retries", "1", "r1"}, "--output-retries needs --output-schema"},
	} {
		code, _, errs := call(c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 saying %q", c.args, code, errs, c.want)
		}
	}
	code, out, _ := call("replay", "--help")
	for _, f := range []string{"--db", "--all", "--tools", "--mcp", "--mcp-env", "--mcp-url", "--confirm-writes", "--allow",
		"--identity", "--max-steps", "--deadline", "--tool-timeout", "--max-tool-calls", "--max-tokens", "--max-cost",
		"--max-argument-bytes", "--max-argument-depth", "--output-schema", "--output-retries", "--live-tools", "--json",
		"--live-model", "--provider", "--model", "--base-url", "--model-timeout", "--max-response-bytes", "--max-stream-bytes",
		"--reasoning-effort", "--thinking-budget", "--adaptive-thinking", "--show-reasoning", "--no-prompt-cache", "--cache-ttl",
		"--system", "--prices", "--slow-writes"} {
		if code != exitOK || !strings.Contains(out, f+" ") && !strings.Contains(out, f+",") {
			t.Errorf("toolloop help replay does not name %s", f)
		}
	}
}

// TestReplayLiveModel: --live-model asks the model the provider flags
// name (here the sandbox's rule-based desk, no network) for every turn,
// answers its calls from the recorded ones, and prints one line per run.
func TestReplayLiveModel(t *testing.T) {
	db := demoStore(t)
	id := firstRun(t, db, "normal")
	code, out, errs := call("replay", id, "--db", db, "--live-model", "--provider", "sandbox")
	if code != exitFail || errs != "" {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	l := lines(out)
	if len(l) != 2 || !strings.HasPrefix(l[0], "RUN_ID ") ||
		!strings.Contains(strings.Join(strings.Fields(l[1]), " "), id+" final_answer final_answer same 2 -> 1, differ 0 -> ") {
		t.Fatalf("table:\n%s", out)
	}
	// A call the desk makes that the scripted run never made stops the
	// replay, and says so below the table.
	id = firstRun(t, db, "refund_retry")
	code, out, _ = call("replay", id, "--db", db, "--live-model", "--provider", "sandbox", "--json")
	if code != exitFail || !strings.Contains(out, `"live":{"same_status":false`) || !strings.Contains(out, "it is a write, which a replay never runs") {
		t.Fatalf("refund_retry: exit %d\n%s", code, out)
	}
	if code, _, errs := call("replay", id, "--db", db, "--provider", "sandbox"); code != exitUsage || !strings.Contains(errs, "add --live-model") {
		t.Errorf("--provider without --live-model: exit %d: %s", code, errs)
	}
	if code, _, errs := call("replay", id, "--db", db, "--live-model"); code != exitUsage || !strings.Contains(errs, "--live-model needs the model") {
		t.Errorf("--live-model without a provider: exit %d: %s", code, errs)
	}
}
