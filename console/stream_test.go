package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
)

// countingBackend counts the reads of runs' logs, and fails those after
// failAfter of them if it is set. Records sends on read, if not nil,
// after each read.
type countingBackend struct {
	*console.LogBackend
	reads     atomic.Int64
	failAfter int64
	read      chan struct{}
}

func (b *countingBackend) count() error {
	if n := b.reads.Add(1); b.failAfter > 0 && n > b.failAfter {
		return errors.New("the store is unreachable")
	}
	return nil
}

func (b *countingBackend) Events(ctx context.Context, runID string) ([]loop.Event, error) {
	if err := b.count(); err != nil {
		return nil, err
	}
	return b.LogBackend.Events(ctx, runID)
}

func (b *countingBackend) Records(ctx context.Context, runID string, after int) ([]store.EventRecord, error) {
	if b.read != nil {
		defer func() { b.read <- struct{}{} }()
	}
	if err := b.count(); err != nil {
		return nil, err
	}
	return b.LogBackend.Records(ctx, runID, after)
}

// message is one server-sent event.
type message struct{ name, id, data string }

// stream is a live view opened by a client.
type stream struct {
	resp   *http.Response
	body   string // the body of a refused stream
	msgs   chan message
	cancel context.CancelFunc
}

// openStream opens path as token's live view; msgs brings its messages
// and is closed when the stream ends.
func (e *env) openStream(token, path string) *stream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	hr, err := http.NewRequestWithContext(ctx, "GET", e.ts.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.ts.Client().Do(hr)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	s := &stream{resp: resp, msgs: make(chan message, 1024), cancel: cancel}
	e.t.Cleanup(cancel)
	if resp.StatusCode != http.StatusOK {
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		resp.Body.Close()
		s.body = b.String()
		close(s.msgs)
		return s
	}
	go func() {
		defer close(s.msgs)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var m message
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				s.msgs <- m
				m = message{}
			case strings.HasPrefix(line, "event: "):
				m.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				m.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				m.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return s
}

// next returns the stream's next message; ok is false once it has ended.
func (s *stream) next(t *testing.T) (message, bool) {
	t.Helper()
	select {
	case m, ok := <-s.msgs:
		return m, ok
	case <-time.After(10 * time.Second):
		t.Fatal("no message from the stream in 10s")
		return message{}, false
	}
}

// rest returns the stream's messages until it ends.
func (s *stream) rest(t *testing.T) []message {
	t.Helper()
	var out []message
	for {
		m, ok := s.next(t)
		if !ok {
			return out
		}
		out = append(out, m)
	}
}

// eventually waits for cond, failing after 10 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStreamShared: fifty live views of a paused run share one follower:
// the log is read once when the first view opens and once a poll after
// that, however many views there are; each view gets an event appended
// since, and only that event (not the log again); the follower's
// goroutine ends when the last view closes.
func TestStreamShared(t *testing.T) {
	var cb *countingBackend
	tick := make(chan time.Time)
	e := newEnv(t, func(o *console.Options) {
		cb = &countingBackend{LogBackend: o.Backend.(*console.LogBackend), read: make(chan struct{}, 100)}
		o.Backend = cb
		o.MaxStreamsPerUser = 100
	})
	console.SetTick(e.srv, tick)
	run := e.scenario("confirmation_required")
	last := e.events(run)
	after := last[len(last)-1].Seq

	const viewers = 50
	streams := make([]*stream, viewers)
	for i := range streams {
		streams[i] = e.openStream(aliceToken, "/runs/"+run+"/live?after="+itoa(after))
		if streams[i].resp.StatusCode != http.StatusOK {
			t.Fatalf("view %d: %d %s", i, streams[i].resp.StatusCode, streams[i].body)
		}
	}
	<-cb.read
	if n := cb.reads.Load(); n != 1 {
		t.Fatalf("%d views opened with %d reads of the log; want 1", viewers, n)
	}
	if n := console.Pollers(e.srv); n != 1 {
		t.Fatalf("%d followers' goroutines for one run", n)
	}

	if err := loop.Decide(context.Background(), e.mem, run, loop.Confirmation{CallID: "call_r1", Approved: true, By: "carol"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	tick <- time.Now()
	<-cb.read
	for i, s := range streams {
		m, ok := s.next(t)
		var ev loop.Event
		if !ok || m.name != "event" || m.id != itoa(after+1) || json.Unmarshal([]byte(m.data), &ev) != nil || ev.Kind != loop.ConfirmationDecided {
			t.Fatalf("view %d's first message: %+v (ok %v); want event %d, the answer", i, m, ok, after+1)
		}
		if m, _ := s.next(t); m.name != "summary" || !strings.Contains(m.data, `"last_seq":`+itoa(after+1)) {
			t.Fatalf("view %d's second message: %+v; want the summary", i, m)
		}
	}
	if n := cb.reads.Load(); n != 2 {
		t.Errorf("one poll for %d views read the log %d times in all; want 2 (the first read, and the poll's)", viewers, n)
	}
	// A poll with nothing new sends nothing.
	tick <- time.Now()
	<-cb.read
	tick <- time.Now() // taken once the first poll has sent what it had
	<-cb.read
	for i, s := range streams {
		select {
		case m := <-s.msgs:
			t.Fatalf("view %d got %+v from polls that found nothing new", i, m)
		default:
		}
	}

	// A view that joins late gets the log from the follower (no read),
	// from where it asks.
	late := e.openStream(aliceToken, "/runs/"+run+"/live?after=0")
	for want := 1; want <= after+1; want++ {
		m, _ := late.next(t)
		if m.name != "event" || m.id != itoa(want) {
			t.Fatalf("the late view's message %d: %+v", want, m)
		}
	}
	if m, _ := late.next(t); m.name != "summary" || !strings.Contains(m.data, `"last_seq":`+itoa(after+1)) {
		t.Fatalf("the late view's summary, after polls that found nothing new: %+v", m)
	}
	if n := cb.reads.Load(); n != 4 {
		t.Errorf("the log was read %d times; want 4 (the first read, three polls), the late view none", n)
	}

	for _, s := range append(streams, late) {
		s.cancel()
	}
	eventually(t, "the follower's goroutine ends when the last view closes", func() bool { return console.Pollers(e.srv) == 0 })
}

// TestStreamCaps: a person has at most MaxStreamsPerUser live views open
// (429 beyond, saying so), everyone at most MaxStreams (503 beyond); a
// closed view frees its place.
func TestStreamCaps(t *testing.T) {
	e := newEnv(t, func(o *console.Options) {
		o.MaxStreamsPerUser = 2
		o.MaxStreams = 3
	})
	run := e.scenario("confirmation_required")
	path := "/runs/" + run + "/live"
	a1, a2 := e.openStream(aliceToken, path), e.openStream(aliceToken, path)
	if a1.resp.StatusCode != http.StatusOK || a2.resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's two views: %d %s, %d %s", a1.resp.StatusCode, a1.body, a2.resp.StatusCode, a2.body)
	}
	a3 := e.openStream(aliceToken, path)
	if a3.resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(a3.body, "alice has 2 live views open already") {
		t.Fatalf("alice's third view: %d %s; want 429 saying why", a3.resp.StatusCode, a3.body)
	}
	b1 := e.openStream(bobToken, path)
	if b1.resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's view: %d %s", b1.resp.StatusCode, b1.body)
	}
	b2 := e.openStream(bobToken, path)
	if b2.resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(b2.body, "3 live views open already") {
		t.Fatalf("bob's second view, the console's fourth: %d %s; want 503 saying why", b2.resp.StatusCode, b2.body)
	}
	a1.cancel()
	a1.rest(t)
	eventually(t, "alice's closed view frees its place", func() bool {
		s := e.openStream(aliceToken, path)
		defer s.cancel()
		return s.resp.StatusCode == http.StatusOK
	})
}

// TestStreamNonFiniteCost: a price so large that the run's cost is +Inf
// neither empties GET /api/runs/ID (the cost is null, with cost_error)
// nor cuts the live stream short: it ends with its end event.
func TestStreamNonFiniteCost(t *testing.T) {
	e := newEnv(t, nil)
	appendRun(t, e.mem, "dear", started("dear", &loop.Price{InputPerMTok: 1e308, OutputPerMTok: 1e308}),
		loop.Event{Kind: loop.ModelResponded, Response: &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Text: "done"},
			Usage: llm.Usage{InputTokens: 1000, OutputTokens: 1000}, FinishReason: "stop"}},
		loop.Event{Kind: loop.Stopped, Status: loop.FinalAnswer})
	var doc struct {
		Summary map[string]any `json:"summary"`
		Budgets []console.Budget
	}
	e.getJSON("/api/runs/dear", &doc)
	if cost, ok := doc.Summary["cost"]; !ok || cost != nil || !strings.Contains(doc.Summary["cost_error"].(string), "not a finite number") {
		t.Errorf("summary cost %v, cost_error %v; want null and why", doc.Summary["cost"], doc.Summary["cost_error"])
	}
	if resp, page := e.do(req{path: "/runs/dear", token: aliceToken}); resp.StatusCode != http.StatusOK || !strings.Contains(page, "not a finite number") {
		t.Errorf("run page: %d; want 200 saying the cost is not a number", resp.StatusCode)
	}
	msgs := e.openStream(aliceToken, "/api/runs/dear/events?stream=1").rest(t)
	if n := len(msgs); n == 0 || msgs[n-1].name != "end" || !strings.Contains(msgs[n-1].data, `"cost":null`) {
		t.Fatalf("the stream brought %+v; want it to end with the end event", msgs)
	}
}

// TestStreamReadError: a log that cannot be read any more ends the live
// stream with an error event saying why, then the end event, so that the
// browser stops rather than reconnecting for ever.
func TestStreamReadError(t *testing.T) {
	tick := make(chan time.Time)
	e := newEnv(t, func(o *console.Options) {
		o.Backend = &countingBackend{LogBackend: o.Backend.(*console.LogBackend), failAfter: 1}
	})
	console.SetTick(e.srv, tick)
	run := e.scenario("confirmation_required")
	s := e.openStream(aliceToken, "/runs/"+run+"/live")
	var names []string
	for range e.events(run) {
		m, _ := s.next(t)
		names = append(names, m.name)
	}
	tick <- time.Now()
	msgs := s.rest(t)
	if len(msgs) < 3 || msgs[len(msgs)-2].name != "error" || !strings.Contains(msgs[len(msgs)-2].data, "the store is unreachable") ||
		msgs[len(msgs)-1].name != "end" {
		t.Fatalf("after the events (%v) the stream brought %+v; want summary, error, end", names, msgs)
	}
}
