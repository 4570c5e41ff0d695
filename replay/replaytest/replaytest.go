// Package replaytest pins recorded runs as Go tests: each recorded run is
// replayed with a configuration (package replay) and must come out as
// pinned.
//
//	func TestRuns(t *testing.T) {
//		replaytest.Dir(t, "testdata/runs", replay.Config{Tools: tools, Policy: pol})
//	}
//
// Equal pins one run: no decision of the replay may differ from the
// recorded ones. Golden pins what a replay reports, differences included,
// in a text file: for a configuration meant to change decisions. Dir,
// DirWith and GoldenDir do the same for every run of a directory.
//
// Run the tests with -update to accept new decisions: Equal then rewrites
// the run's log with the new run's (when the replay reached the end of
// the run), and Golden rewrites the report. The flag is this package's: a
// test package that uses replaytest must not define -update itself.
package replaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/replay"
	"github.com/toolloop/toolloop/trace"
)

var update = flag.Bool("update", false, "replaytest: accept the replays' new decisions (rewrite the runs' logs and the golden reports)")

// Ext is the extension of a recorded run's log, as toolloop writes and
// exports them.
const Ext = ".jsonl"

// GoldenExt is the extension of a golden report.
const GoldenExt = ".replay"

// Equal replays the recorded run in file (JSON Lines, one event a line,
// as `toolloop runs export` writes) with cfg and fails t, showing the
// first difference side by side, when a decision differs or the replay
// cannot follow the run. With -update a run whose replay reached its end
// is rewritten with the new decisions instead.
func Equal(t testing.TB, file string, cfg replay.Config) {
	t.Helper()
	events := Read(t, file)
	rep, err := replay.Run(context.Background(), events, cfg)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if rep.Equal() {
		return
	}
	text := report(rep)
	if !*update {
		t.Errorf("%s: the replay's decisions differ from the recorded ones (accept them with -update):\n%s", file, text)
		return
	}
	if rep.Gap != nil || !loop.Replay(rep.Events).Done {
		t.Fatalf("%s: cannot accept the new decisions: the replay did not reach the run's end:\n%s", file, text)
	}
	Write(t, file, rep.Events)
	t.Logf("%s: accepted the new decisions:\n%s", file, text)
}

// Golden replays the recorded run in file with cfg and compares the
// report (replay.Report.Format) with the golden file; with -update it
// writes the golden file. A failure shows both, line by line.
func Golden(t testing.TB, file, golden string, cfg replay.Config) {
	t.Helper()
	events := Read(t, file)
	rep, err := replay.Run(context.Background(), events, cfg)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	got := report(rep)
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%s: %v (write it with -update)", golden, err)
	}
	if string(want) != got {
		t.Errorf("%s: the replay reports otherwise than pinned (accept it with -update):\n%s", golden, lineDiff(string(want), got))
	}
}

// Dir runs Equal on every run (*.jsonl) in dir, each as a subtest named
// by its file.
func Dir(t *testing.T, dir string, cfg replay.Config) {
	t.Helper()
	DirWith(t, dir, func([]loop.Event) replay.Config { return cfg })
}

// DirWith runs Equal on every run (*.jsonl) in dir, each as a subtest
// named by its file, with the configuration config gives for its log.
func DirWith(t *testing.T, dir string, config func(events []loop.Event) replay.Config) {
	t.Helper()
	each(t, dir, func(t *testing.T, file string) { Equal(t, file, config(Read(t, file))) })
}

// GoldenDir runs Golden on every run (*.jsonl) in dir, each as a subtest
// named by its file, with the configuration config gives for its log; the
// golden report of run NAME.jsonl is goldens/NAME.replay.
func GoldenDir(t *testing.T, dir, goldens string, config func(events []loop.Event) replay.Config) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(goldens, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	each(t, dir, func(t *testing.T, file string) {
		name := strings.TrimSuffix(filepath.Base(file), Ext)
		Golden(t, file, filepath.Join(goldens, name+GoldenExt), config(Read(t, file)))
	})
}

// each runs check on every run of dir as a subtest.
func each(t *testing.T, dir string, check func(t *testing.T, file string)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"+Ext))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no recorded runs (*%s) in %s", Ext, dir)
	}
	slices.Sort(files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), Ext), func(t *testing.T) {
			check(t, f)
		})
	}
}

// Read reads a recorded run's log.
func Read(t testing.TB, file string) []loop.Event {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := trace.ReadLog(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return events
}

// Write writes a run's log to file as JSON Lines, whole.
func Write(t testing.TB, file string, events []loop.Event) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range events {
		if err := enc.Encode(&events[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func report(rep *replay.Report) string {
	var b strings.Builder
	_ = rep.Format(&b)
	return b.String()
}

// lineDiff shows want and got line by line: lines only in want with "-",
// only in got with "+", the same in both with two spaces.
func lineDiff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	// The longest common subsequence of lines, small inputs only.
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out.WriteString("  " + a[i] + "\n")
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			out.WriteString("+ " + b[j] + "\n")
			j++
		default:
			out.WriteString("- " + a[i] + "\n")
			i++
		}
	}
	return out.String()
}
