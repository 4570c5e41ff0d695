package loop_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/toolloop/toolloop/loop"
)

// The decider's transcripts live in testdata/decider: one txtar archive per
// behaviour. Its comment says what the transcript shows; its files are
//
//	events   the run's log, one JSON loop.Event per line, as a store keeps it
//	effects  per event, the effect loop.Next returned for it
//	state    the final State's exported fields, as indented JSON
//
// The events are written by hand. The other two files are what the decider
// does with them: -update rewrites them, and a reviewer reads the diff.
var update = flag.Bool("update", false, "rewrite the effects and state files of testdata/decider/*.txtar")

// transcript is one archive, read and with its events decoded.
type transcript struct {
	name    string
	path    string
	archive *txtar.Archive
	events  []loop.Event
}

func loadTranscripts(t *testing.T) []transcript {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "decider", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no transcripts in testdata/decider")
	}
	var out []transcript
	for _, p := range paths {
		a, err := txtar.ParseFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tr := transcript{name: strings.TrimSuffix(filepath.Base(p), ".txtar"), path: p, archive: a}
		data, ok := file(a, "events")
		if !ok {
			t.Fatalf("%s: no events file", p)
		}
		tr.events, err = decodeEvents(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, tr)
	}
	return out
}

// decodeEvents reads one JSON event per line; blank lines are skipped.
func decodeEvents(data []byte) ([]loop.Event, error) {
	var events []loop.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev loop.Event
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil {
			return nil, fmt.Errorf("events line %d: %v", n, err)
		}
		events = append(events, ev)
	}
	return events, sc.Err()
}

func file(a *txtar.Archive, name string) ([]byte, bool) {
	for _, f := range a.Files {
		if f.Name == name {
			return f.Data, true
		}
	}
	return nil, false
}

func setFile(a *txtar.Archive, name string, data []byte) {
	for i := range a.Files {
		if a.Files[i].Name == name {
			a.Files[i].Data = data
			return
		}
	}
	a.Files = append(a.Files, txtar.File{Name: name, Data: data})
}

// formatEffect renders an effect on one line, fields that are unset left
// out.
func formatEffect(e loop.Effect) string {
	var b strings.Builder
	b.WriteString(string(e.Kind))
	if e.Kind == loop.ExecuteStage {
		fmt.Fprintf(&b, " stage=%d", e.Stage)
	}
	if e.Calls != nil {
		fmt.Fprintf(&b, " calls=%v", e.Calls)
	}
	if e.Status != "" {
		fmt.Fprintf(&b, " status=%s", e.Status)
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, " detail=%q", e.Detail)
	}
	if e.Edit != nil {
		fmt.Fprintf(&b, " edit=%q", e.Edit.String())
	}
	if r := e.Summary; r != nil {
		fmt.Fprintf(&b, " summarize=[%d,%d) tokens=%d kept=%d", r.From, r.Through, r.TokensBefore, r.KeptTokens)
	}
	for _, c := range e.Compensations {
		fmt.Fprintf(&b, " undo=%s:%s", c.CallID, c.Undo)
		if c.Unknown {
			b.WriteString("(unknown)")
		}
	}
	return b.String()
}

// play feeds the events through the decider, as Replay does, and renders
// the effects and the final state. It also checks the hand-written log:
// a stopped event must record the stop the decider last called for, and a
// context_edited event the edit, as a driver's would.
func play(t *testing.T, events []loop.Event) (effects, state []byte) {
	t.Helper()
	var s loop.State
	var eb bytes.Buffer
	var stop, last loop.Effect
	for i := range events {
		ev := &events[i]
		if ev.Kind == loop.ContextEdited && (last.Edit == nil || ev.Edit == nil || ev.Edit.String() != last.Edit.String()) {
			t.Errorf("event %d records edit %v; the decider called for %v", ev.Seq, ev.Edit, last.Edit)
		}
		if ev.Kind == loop.ContextSummarized && ev.Failure == nil {
			var want *loop.ContextEdit
			if last.Summary != nil {
				want = loop.SummaryEvent(loop.Event{Kind: loop.ModelResponded, Response: ev.Response}, last.Summary).Edit
			}
			if want == nil || ev.Edit == nil || !reflect.DeepEqual(want, ev.Edit) {
				t.Errorf("event %d records compaction %+v; the decider's request and the summary make %+v", ev.Seq, ev.Edit, want)
			}
		}
		if ev.Kind == loop.Stopped && (ev.Status != stop.Status || ev.Detail != stop.Detail) {
			t.Errorf("event %d records stop %s %q; the decider called for %s %q",
				ev.Seq, ev.Status, ev.Detail, stop.Status, stop.Detail)
		}
		eff := loop.Next(&s, ev)
		if eff.Kind == loop.Stop {
			stop = eff
		}
		last = eff
		fmt.Fprintf(&eb, "%d %s -> %s\n", ev.Seq, ev.Kind, formatEffect(eff))
	}
	sb, err := json.MarshalIndent((*fields)(&s), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return eb.Bytes(), append(sb, '\n')
}

// fields is State without its methods: its JSON holds the exported
// fields, the conversation included, as the transcripts' state files do
// (State's own encoding is the decider's memory, see TestStateRoundTrip).
type fields loop.State

func TestTranscripts(t *testing.T) {
	for _, tr := range loadTranscripts(t) {
		t.Run(tr.name, func(t *testing.T) {
			effects, state := play(t, tr.events)
			if *update {
				setFile(tr.archive, "effects", effects)
				setFile(tr.archive, "state", state)
				if err := os.WriteFile(tr.path, txtar.Format(tr.archive), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, f := range []struct {
				name string
				got  []byte
			}{{"effects", effects}, {"state", state}} {
				want, ok := file(tr.archive, f.name)
				if !ok {
					t.Errorf("no %s file (run with -update to write it)", f.name)
					continue
				}
				if !bytes.Equal(f.got, want) {
					t.Errorf("%s differ (run with -update and read the diff):\n--- got\n%s--- want\n%s", f.name, f.got, want)
				}
			}
			// Replay is the same walk: it must reach the same state.
			replayed, err := json.MarshalIndent((*fields)(loop.Replay(tr.events)), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(append(replayed, '\n'), state) {
				t.Errorf("Replay reached another state:\n%s", replayed)
			}
		})
	}
}

// TestTranscriptEventsImmutable checks that the decider never writes into
// an event it was given: each event is encoded before Next sees it, and
// again once the whole transcript has been played (the state keeps
// pointers into the events, so a later write would show there).
func TestTranscriptEventsImmutable(t *testing.T) {
	for _, tr := range loadTranscripts(t) {
		t.Run(tr.name, func(t *testing.T) {
			events := tr.events
			before := make([][]byte, len(events))
			var s loop.State
			for i := range events {
				b, err := json.Marshal(&events[i])
				if err != nil {
					t.Fatal(err)
				}
				before[i] = b
				loop.Next(&s, &events[i])
			}
			// Reading the history builds placeholders; it must not write
			// either.
			_ = s.History()
			for i := range events {
				after, err := json.Marshal(&events[i])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(before[i], after) {
					t.Errorf("event %d (%s) changed while the decider ran:\nbefore %s\nafter  %s",
						events[i].Seq, events[i].Kind, before[i], after)
				}
			}
		})
	}
}
