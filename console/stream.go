package console

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/toolloop/toolloop/loop"
)

// Default caps on the live streams (see Options).
const (
	DefaultMaxStreamsPerUser = 8
	DefaultMaxStreams        = 256
)

// follower follows one run for all its live viewers: one goroutine reads
// what is new in the log every Options.Poll and hands it to each viewer,
// so that fifty viewers of a run cost one read a poll, not fifty. It
// keeps the run's events as the console shows them (large payloads cut)
// for viewers that join later, and the run's state, replayed one event at
// a time. It stops when its last viewer leaves, or the run ends.
type follower struct {
	runID string
	quit  chan struct{} // closed when the last viewer has left
	ready chan struct{} // closed after the first read

	mu     sync.Mutex
	subs   map[chan liveNews]struct{}
	events []shownEvent
	sum    Summary
	end    bool  // the run has stopped: nothing more will come
	err    error // the log could not be read; the follower has stopped
}

// liveNews is what a follower hands its viewers after a read.
type liveNews struct {
	events []shownEvent // the new events
	sum    Summary
	end    bool
	err    error
}

// startStream counts a live stream of user's, unless that would pass a
// cap; done uncounts it.
func (s *Server) startStream(user string) (done func(), err error) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if n := s.userStreams[user]; n >= s.opts.MaxStreamsPerUser {
		return nil, &httpError{http.StatusTooManyRequests, fmt.Sprintf("%s has %d live views open already, the most one person may (MaxStreamsPerUser): close some of them (browser tabs on run pages) and try again", user, n)}
	}
	if s.streams >= s.opts.MaxStreams {
		return nil, &httpError{http.StatusServiceUnavailable, fmt.Sprintf("the console has %d live views open already, its most (MaxStreams): try again later, or reload the page to see the run as it is", s.streams)}
	}
	s.userStreams[user]++
	s.streams++
	return func() {
		s.liveMu.Lock()
		defer s.liveMu.Unlock()
		s.streams--
		if s.userStreams[user]--; s.userStreams[user] <= 0 {
			delete(s.userStreams, user)
		}
	}, nil
}

// follow adds a viewer to runID's follower, starting one if there is
// none, and returns the follower and the viewer's channel.
func (s *Server) follow(runID string) (*follower, chan liveNews) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	f := s.followers[runID]
	if f == nil {
		f = &follower{runID: runID, quit: make(chan struct{}), ready: make(chan struct{}), subs: map[chan liveNews]struct{}{}}
		s.followers[runID] = f
		s.wg.Add(1)
		go s.poll(f)
	}
	// Room for the news of many polls: a viewer that falls this far
	// behind is dropped (it reconnects, from its last event).
	ch := make(chan liveNews, 64)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	return f, ch
}

// unfollow removes a viewer; the last one to leave stops the follower.
func (s *Server) unfollow(f *follower, ch chan liveNews) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	f.mu.Lock()
	delete(f.subs, ch)
	last := len(f.subs) == 0
	f.mu.Unlock()
	if last && s.followers[f.runID] == f {
		delete(s.followers, f.runID)
		close(f.quit)
	}
}

// poll is a follower's goroutine: it reads the run's new events at once
// and then every Options.Poll, until the run ends, its log cannot be read,
// its last viewer leaves, or the console closes.
func (s *Server) poll(f *follower) {
	defer s.wg.Done()
	s.pollers.Add(1)
	defer s.pollers.Add(-1)
	// A follower that has ended takes no more viewers: a later one starts
	// a follower of its own, which reads the log again.
	defer func() {
		s.liveMu.Lock()
		if s.followers[f.runID] == f {
			delete(s.followers, f.runID)
		}
		s.liveMu.Unlock()
	}()
	tick, stop := s.ticker(s.opts.Poll)
	defer stop()
	var (
		st    loop.State
		after int
		start loop.Event // the run's first event
		first = true
	)
	for {
		news := s.readNews(f.runID, &st, &after, &start)
		f.mu.Lock()
		f.events = append(f.events, news.events...)
		if len(news.events) > 0 {
			f.sum = news.sum
		} else {
			news.sum = f.sum // nothing new: the summary is as it was
		}
		f.end, f.err = news.end, news.err
		if len(news.events) > 0 || news.end || news.err != nil {
			for ch := range f.subs {
				select {
				case ch <- news:
				default:
					// Too far behind: dropped; it reconnects.
					delete(f.subs, ch)
					close(ch)
				}
			}
		}
		f.mu.Unlock()
		if first {
			close(f.ready)
			first = false
		}
		if news.end || news.err != nil {
			return
		}
		select {
		case <-f.quit:
			return
		case <-s.ctx.Done():
			return
		case <-tick:
		}
	}
}

// readNews reads the events of runID after *after, replays them into st
// (the first one is kept in *start), and says what is new.
func (s *Server) readNews(runID string, st *loop.State, after *int, start *loop.Event) liveNews {
	events, err := s.readShown(s.ctx, runID, *after)
	if err == nil && *after == 0 && (len(events) == 0 || events[0].Start == nil) {
		err = &httpError{http.StatusNotFound, fmt.Sprintf("run %s has no events yet", runID)}
	}
	if err != nil {
		return liveNews{err: err}
	}
	if len(events) == 0 {
		return liveNews{}
	}
	for i := range events {
		loop.Next(st, &events[i].Event)
	}
	if *after == 0 {
		*start = events[0].Event
	}
	*after = events[len(events)-1].Seq
	sum := summary(st, start, &events[len(events)-1].Event)
	return liveNews{events: events, sum: sum, end: st.Done && st.Status != loop.ConfirmationRequired}
}

// stream sends a run's events as server-sent events as they are appended
// ("event" events, each with its seq as the event ID, and a "summary"
// after each lot; large events cut as on the pages), from the run's
// follower (one reader of the log for all its viewers). It ends with an
// "end" event once the run has stopped (a run paused for answers nobody
// has given is followed on, since an answer from elsewhere carries it on,
// and so is one whose answers are in but that has not been resumed yet),
// or when the log cannot be read or an event cannot be sent (an "error"
// event first, saying why); and otherwise when the client goes, the
// console closes, or after Options.StreamFor (the browser then
// reconnects, from the last event ID). A person has at most
// Options.MaxStreamsPerUser streams open (429 beyond), the console
// Options.MaxStreams (503 beyond).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, u *who) {
	after, err := afterSeq(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	done, err := s.startStream(u.name)
	if err != nil {
		apiFail(w, r, err)
		return
	}
	defer done()
	f, ch := s.follow(r.PathValue("id"))
	defer s.unfollow(f, ch)
	select {
	case <-f.ready:
	case <-r.Context().Done():
		return
	case <-s.ctx.Done():
		writeError(w, http.StatusServiceUnavailable, "the console is shutting down")
		return
	}
	f.mu.Lock()
	var backlog []shownEvent
	for i := range f.events {
		if f.events[i].Seq > after {
			backlog = f.events[i:]
			break
		}
	}
	news := liveNews{events: backlog, sum: f.sum, end: f.end, err: f.err}
	read := len(f.events)
	f.mu.Unlock()
	if news.err != nil && read == 0 {
		// The run is not there (or its log cannot be read at all): an
		// answer with a status, not a stream.
		apiFail(w, r, news.err)
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	limit := time.NewTimer(s.opts.StreamFor)
	defer limit.Stop()
	sent := after
	for {
		if !s.sendNews(w, news, &sent) {
			rc.Flush()
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		var ok bool
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		case <-limit.C:
			return
		case news, ok = <-ch:
			if !ok {
				return // dropped for falling behind: the browser reconnects
			}
		}
	}
}

// sendNews writes news's events after *sent, its summary, and its end; it
// reports whether the stream goes on. A write that fails ends it; an
// event that cannot be encoded ends it with an error event and the end
// event, so that the browser stops rather than reconnects for ever.
func (s *Server) sendNews(w io.Writer, news liveNews, sent *int) bool {
	fail := func(err error) bool {
		sendEnd(w, news.sum, err)
		return false
	}
	wrote := false
	for i := range news.events {
		ev := &news.events[i]
		if ev.Seq <= *sent {
			continue
		}
		if err := sendEvent(w, strconv.Itoa(ev.Seq), "event", ev); err != nil {
			return fail(fmt.Errorf("event %d: %w", ev.Seq, err))
		}
		*sent, wrote = ev.Seq, true
	}
	if wrote {
		if err := sendEvent(w, "", "summary", news.sum); err != nil {
			return fail(fmt.Errorf("the run's summary: %w", err))
		}
	}
	if news.err != nil {
		return fail(news.err)
	}
	if news.end {
		sendEnd(w, news.sum, nil)
		return false
	}
	return true
}

// sendEnd ends a stream: an "error" event first if err is not nil, then
// the "end" event with the run's summary (or, should that not encode, the
// error).
func sendEnd(w io.Writer, sum Summary, err error) {
	if err != nil {
		io.WriteString(w, "event: error\ndata: "+jsonString(map[string]string{"error": err.Error()})+"\n\n")
	}
	if e := sendEvent(w, "", "end", sum); e != nil {
		io.WriteString(w, "event: end\ndata: "+jsonString(map[string]string{"error": e.Error()})+"\n\n")
	}
}

// sendEvent writes one server-sent event with v as its JSON data; a v
// that does not encode writes nothing and is the error.
func sendEvent(w io.Writer, id, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	msg := ""
	if id != "" {
		msg = "id: " + id + "\n"
	}
	_, err = io.WriteString(w, msg+"event: "+name+"\ndata: "+string(data)+"\n\n")
	return err
}

// jsonString encodes v, which must encode (strings and maps of them).
func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// ticker returns the channel a follower polls on, and how to stop it.
func (s *Server) ticker(d time.Duration) (<-chan time.Time, func()) {
	if s.tick != nil {
		return s.tick, func() {}
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}
