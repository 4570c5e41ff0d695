package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/sqlite"
)

// appendRun writes events to log as run runID's, numbered from 1, with a
// summary that says how the run stopped.
func appendRun(tb testing.TB, log store.EventLog, runID string, events ...loop.Event) {
	tb.Helper()
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	recs := make([]store.EventRecord, len(events))
	sum := store.RunSummary{RunID: runID, Status: loop.RunningStatus, StartedAt: at, UpdatedAt: at}
	for i := range events {
		ev := events[i]
		ev.Seq, ev.At = i+1, at.Add(time.Duration(i)*time.Millisecond)
		data, err := json.Marshal(ev)
		if err != nil {
			tb.Fatal(err)
		}
		recs[i] = store.EventRecord{Seq: ev.Seq, Kind: string(ev.Kind), At: ev.At, Data: data}
		if ev.Kind == loop.Stopped {
			sum.Status = string(ev.Status)
		}
	}
	if err := log.Append(context.Background(), runID, recs, sum); err != nil {
		tb.Fatal(err)
	}
}

// started opens a run.
func started(runID string, price *loop.Price) loop.Event {
	return loop.Event{Kind: loop.Started, Start: &loop.StartInfo{RunID: runID, Model: "m", ToolsVersion: "v1",
		Price: price, Messages: []llm.Message{llm.UserMessage("go")}}}
}

// partialTurnRun records a run whose model stream broke after size bytes
// of text: a partial turn the log keeps (ModelFailed), as a run with a
// long-winded model leaves it.
func partialTurnRun(tb testing.TB, log store.EventLog, runID string, size int) {
	text := strings.Repeat("All work and no play. ", size/22+1)[:size]
	appendRun(tb, log, runID, started(runID, nil),
		loop.Event{Kind: loop.ModelFailed, Response: &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Text: text}},
			Failure: &loop.Failure{Kind: loop.FailModel, Message: "the stream ended before the turn finished"}},
		loop.Event{Kind: loop.Stopped, Status: loop.ModelError, Detail: "the stream ended before the turn finished"})
}

// viewBytes returns the bytes the heap allocated for one GET of path.
func viewBytes(tb testing.TB, srv http.Handler, path string) (uint64, *httptest.ResponseRecorder) {
	tb.Helper()
	r := httptest.NewRequest("GET", path, nil)
	r.Host = "127.0.0.1:8080"
	r.Header.Set("Authorization", "Bearer "+aliceToken)
	w := httptest.NewRecorder()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	srv.ServeHTTP(w, r)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, w
}

// TestLargeEventCut: a run whose log holds a 64 MiB partial turn is shown
// with that text cut short, its size and a link to the whole event; a
// page view allocates a bounded amount (the store here hands over its
// records without copying them, so what is measured is the console's
// own), and the link serves the event whole.
func TestLargeEventCut(t *testing.T) {
	e := newEnv(t, nil)
	partialTurnRun(t, e.mem, "big", 64<<20)
	for _, path := range []string{"/runs/big", "/api/runs/big", "/api/runs/big/events"} {
		n, w := viewBytes(t, e.srv, path)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body.String()[:min(w.Body.Len(), 500)])
		}
		if n > 8<<20 {
			t.Errorf("GET %s allocated %d MiB for a run with a 64 MiB event; want at most 8 MiB", path, n>>20)
		}
		if w.Body.Len() > 1<<20 {
			t.Errorf("GET %s answered %d bytes; want the large event cut", path, w.Body.Len())
		}
	}
	_, page := e.do(req{path: "/runs/big", token: aliceToken})
	for _, want := range []string{`data-testid="cut"`, "64.0 MiB", `href="/api/runs/big/events/2"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page lacks %s", want)
		}
	}
	var doc struct {
		Events []struct {
			Seq      int           `json:"seq"`
			Response *llm.Response `json:"response"`
			Cut      *struct {
				Bytes int    `json:"bytes"`
				Whole string `json:"whole"`
			} `json:"cut"`
		} `json:"events"`
	}
	e.getJSON("/api/runs/big", &doc)
	ev := doc.Events[1]
	if ev.Cut == nil || ev.Cut.Bytes < 64<<20 || ev.Cut.Whole != "/api/runs/big/events/2" || ev.Response == nil ||
		len(ev.Response.Message.Text) > 16<<10 || !strings.Contains(ev.Response.Message.Text, "cut by the console") ||
		!strings.HasPrefix(ev.Response.Message.Text, "All work and no play. ") {
		t.Fatalf("the API's event 2: cut %+v, text of %d bytes", ev.Cut, len(ev.Response.Message.Text))
	}
	resp, body := e.do(req{path: ev.Cut.Whole, token: aliceToken})
	var whole loop.Event
	if err := json.Unmarshal([]byte(body), &whole); resp.StatusCode != http.StatusOK || err != nil || whole.Seq != 2 ||
		whole.Response == nil || len(whole.Response.Message.Text) != 64<<20 {
		t.Fatalf("GET %s: %d, %v", ev.Cut.Whole, resp.StatusCode, err)
	}
	for path, code := range map[string]int{"/api/runs/big/events/4": 404, "/api/runs/big/events/0": 400, "/api/runs/nope/events/1": 404} {
		if resp, body := e.do(req{path: path, token: aliceToken}); resp.StatusCode != code || !strings.Contains(body, `"error"`) {
			t.Errorf("GET %s: %d %s, want %d", path, resp.StatusCode, body, code)
		}
	}
}

// BenchmarkRunPageLargeEvent: the bytes one view of a run's page (and of
// its JSON) allocates when the run's log holds a 64 MiB partial turn.
//
//	go test ./console -run '^$' -bench RunPageLargeEvent -benchtime 5x
//
// With store.Memory, which hands its records over without copying them,
// what is measured is the console's own; with SQLite, the store's copy of
// the event read from the file comes on top.
func BenchmarkRunPageLargeEvent(b *testing.B) {
	db, err := sqlite.Open(filepath.Join(b.TempDir(), "big.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, st := range []struct {
		name string
		log  store.EventLog
	}{{"memory", store.NewMemory()}, {"sqlite", db}} {
		partialTurnRun(b, st.log, "big", 64<<20)
		users, err := console.ParseUsers(strings.NewReader("alice " + aliceToken + "\n"))
		if err != nil {
			b.Fatal(err)
		}
		srv, err := console.New(console.Options{Backend: &console.LogBackend{Log: st.log}, Users: users})
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Close()
		for _, path := range []string{"/runs/big", "/api/runs/big"} {
			b.Run(st.name+strings.ReplaceAll(path, "/", "_"), func(b *testing.B) {
				var total uint64
				for b.Loop() {
					n, w := viewBytes(b, srv, path)
					if w.Code != http.StatusOK {
						b.Fatalf("GET %s: %d", path, w.Code)
					}
					total += n
				}
				b.ReportMetric(float64(total)/float64(b.N)/(1<<20), "MiB/view")
			})
		}
	}
}
