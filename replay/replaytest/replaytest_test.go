package replaytest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/replay"
)

// recorder is a testing.TB that keeps what a check reports.
type recorder struct {
	testing.TB
	failed bool
	out    strings.Builder
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	fmt.Fprintf(&r.out, format+"\n", args...)
}
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); panic(r) }

// check runs f on a recorder and returns it, a Fatalf included.
func check(t *testing.T, f func(tb testing.TB)) (r *recorder) {
	r = &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != any(r) {
			panic(p)
		}
	}()
	f(r)
	return r
}

const normal = "../testdata/sandbox/normal.jsonl"

func config(t *testing.T, steps int) replay.Config {
	reg, err := orders.Tools(orders.NewBook())
	if err != nil {
		t.Fatal(err)
	}
	cfg := replay.Config{Tools: reg}
	if steps > 0 {
		cfg.Budgets = &loop.Budgets{MaxSteps: steps}
	}
	return cfg
}

// TestEqual: the same configuration passes; a lower budget fails with the
// difference side by side.
func TestEqual(t *testing.T) {
	if r := check(t, func(tb testing.TB) { Equal(tb, normal, config(t, 0)) }); r.failed {
		t.Fatalf("same configuration failed:\n%s", r.out.String())
	}
	r := check(t, func(tb testing.TB) { Equal(tb, normal, config(t, 2)) })
	if !r.failed || !strings.Contains(r.out.String(), "differs at event 8, turn 2: budget") ||
		!strings.Contains(r.out.String(), "recorded:  validated") {
		t.Fatalf("lower budget: failed %v, said:\n%s", r.failed, r.out.String())
	}
}

// TestGolden: a golden report that no longer matches fails with a line
// diff of pinned and new.
func TestGolden(t *testing.T) {
	golden := filepath.Join(t.TempDir(), "normal.replay")
	if err := os.WriteFile(golden, []byte("run run-normal: no difference (final_answer)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := check(t, func(tb testing.TB) { Golden(tb, normal, golden, config(t, 0)) }); r.failed {
		t.Fatalf("pinned report failed:\n%s", r.out.String())
	}
	r := check(t, func(tb testing.TB) { Golden(tb, normal, golden, config(t, 2)) })
	out := r.out.String()
	if !r.failed || !strings.Contains(out, "- run run-normal: no difference (final_answer)") ||
		!strings.Contains(out, "+ run run-normal: differs at event 8") {
		t.Fatalf("changed report: failed %v, said:\n%s", r.failed, out)
	}
}

func TestLineDiff(t *testing.T) {
	got := lineDiff("a\nb\nc", "a\nx\nc")
	if want := "  a\n+ x\n- b\n  c\n"; got != want {
		t.Errorf("lineDiff = %q, want %q", got, want)
	}
}

// TestUpdate: with -update, Equal accepts the new decisions of a run the
// replay took to its end (the file then replays with no difference), and
// refuses to accept a replay that stopped at a gap; Golden writes the
// report.
func TestUpdate(t *testing.T) {
	*update = true
	defer func() { *update = false }()
	dir := t.TempDir()
	run := filepath.Join(dir, "normal.jsonl")
	src, err := os.ReadFile(normal)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(run, src, 0o644)
	if r := check(t, func(tb testing.TB) { Equal(tb, run, config(t, 2)) }); r.failed {
		t.Fatalf("accepting MaxSteps 2 failed:\n%s", r.out.String())
	}
	events := Read(t, run)
	if st := loop.Replay(events); st.Status != loop.MaxStepsExceeded || len(events) != 8 {
		t.Fatalf("rewritten run: %s after %d events", st.Status, len(events))
	}
	*update = false
	if r := check(t, func(tb testing.TB) { Equal(tb, run, config(t, 2)) }); r.failed {
		t.Fatalf("the accepted run does not replay as accepted:\n%s", r.out.String())
	}
	// A stricter output schema sends the answer back to a model turn the
	// log does not have: nothing to accept.
	*update = true
	os.WriteFile(run, src, 0o644)
	cfg := config(t, 0)
	cfg.OutputSchema = orders.OrderStatusSchema
	r := check(t, func(tb testing.TB) { Equal(tb, run, cfg) })
	if !r.failed || !strings.Contains(r.out.String(), "cannot accept the new decisions: the replay did not reach the run's end") {
		t.Fatalf("a replay with a gap: failed %v:\n%s", r.failed, r.out.String())
	}
	if got, _ := os.ReadFile(run); string(got) != string(src) {
		t.Error("a refused update changed the run's file")
	}
	golden := filepath.Join(dir, "normal.replay")
	if r := check(t, func(tb testing.TB) { Golden(tb, run, golden, config(t, 2)) }); r.failed {
		t.Fatal(r.out.String())
	}
	if got, _ := os.ReadFile(golden); !strings.HasPrefix(string(got), "run run-normal: differs at event 8, turn 2: budget\n") {
		t.Errorf("golden written:\n%s", got)
	}
}
