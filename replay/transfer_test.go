package replay_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/replay"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/postgres"
	"github.com/toolloop/toolloop/store/postgres/pgtest"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/trace"
)

// TestExportImport: a run exported whole and imported into a SQLite
// file comes back event for event, listed with its status, and replays
// with no difference; importing it again is refused and writes nothing.
func TestExportImport(t *testing.T) {
	ctx := context.Background()
	events := readLog(t, "confirm_refund")
	var buf bytes.Buffer
	if err := replay.Export(&buf, events, nil); err != nil {
		t.Fatal(err)
	}
	read, err := trace.ReadLog(&buf)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "in.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := replay.Import(ctx, st, read); err != nil {
		t.Fatal(err)
	}
	back, err := loop.LoadEvents(ctx, st, "run-confirm_refund")
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(events) {
		t.Fatalf("%d events back, %d exported", len(back), len(events))
	}
	for i := range back {
		if jsonOf(t, back[i]) != jsonOf(t, events[i]) {
			t.Errorf("event %d differs after export and import:\n%s\n%s", i+1, jsonOf(t, back[i]), jsonOf(t, events[i]))
		}
	}
	list, err := st.Runs(ctx, "")
	if err != nil || len(list) != 1 || list[0].Status != string(loop.FinalAnswer) || list[0].Steps != 3 {
		t.Fatalf("listed: %+v, %v", list, err)
	}
	if err := replay.Import(ctx, st, read); !errors.Is(err, replay.ErrRunExists) {
		t.Errorf("second import: err = %v; want ErrRunExists", err)
	}
	if again, _ := st.Events(ctx, "run-confirm_refund"); len(again) != len(events) {
		t.Errorf("the refused import changed the log: %d events", len(again))
	}
}

// TestExportRedacted: an export redacted by the trace's default rules
// keeps no argument values, and is refused by import and replay alike.
func TestExportRedacted(t *testing.T) {
	events := readLog(t, "permission_denied")
	var buf bytes.Buffer
	if err := replay.Export(&buf, events, trace.NewRedactor(nil)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `"reason":"arrived broken"`) {
		t.Errorf("a redacted export holds an argument's value:\n%s", buf.String())
	}
	read, err := trace.ReadLog(&buf)
	if err != nil {
		t.Fatal(err)
	}
	err = replay.Import(context.Background(), store.NewMemory(), read)
	if err == nil || !strings.Contains(err.Error(), "the log is redacted") {
		t.Errorf("import of a redacted export: err = %v", err)
	}
}

// TestImportRefusesUnknownKinds: a log with an event kind this version
// does not know is not imported (its summary would be wrong).
func TestImportRefusesUnknownKinds(t *testing.T) {
	events := readLog(t, "normal")
	events[6].Kind = "compensation_started"
	st := store.NewMemory()
	err := replay.Import(context.Background(), st, events)
	if err == nil || !strings.Contains(err.Error(), `event kind "compensation_started" (event 7)`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := st.Events(context.Background(), "run-normal"); !errors.Is(err, store.ErrUnknownRun) {
		t.Errorf("the refused import wrote the run: %v", err)
	}
}

// jsonOf is an event's JSON line.
func jsonOf(t *testing.T, ev loop.Event) string { return string(encodeLog(t, []loop.Event{ev})) }

// TestImportPostgres: the same import into PostgreSQL, through the same
// store interface (skipped without TOOLLOOP_POSTGRES_URL).
func TestImportPostgres(t *testing.T) {
	conn, _ := pgtest.FreshSchema(t)
	st, err := postgres.Open(context.Background(), conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	events := readLog(t, "refund_twice")
	if err := replay.Import(context.Background(), st, events); err != nil {
		t.Fatal(err)
	}
	back, err := loop.LoadEvents(context.Background(), st, "run-refund_twice")
	if err != nil || len(back) != len(events) {
		t.Fatalf("%d events back of %d: %v", len(back), len(events), err)
	}
	if err := replay.Import(context.Background(), st, events); !errors.Is(err, replay.ErrRunExists) {
		t.Errorf("second import: err = %v; want ErrRunExists", err)
	}
}
