package console

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/toolloop/toolloop/loop"
)

// stream sends a run's events as server-sent events as they are appended
// ("event" events, each with its seq as the event ID, and a "summary"
// after each lot), looking at the log every Options.Poll. It ends with an
// "end" event once the run has stopped (a run paused for answers nobody
// has given is followed on, since an answer from elsewhere carries it
// on, and so is one whose answers are in but that has not been resumed
// yet), and otherwise when the client goes, the console closes, or after
// Options.StreamFor (the browser then reconnects, from the last event ID).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, _ *who) {
	after, err := afterSeq(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	runID := r.PathValue("id")
	events, err := s.runEvents(r.Context(), runID)
	if err != nil {
		apiFail(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	limit := time.NewTimer(s.opts.StreamFor)
	defer limit.Stop()
	tick := time.NewTicker(s.opts.Poll)
	defer tick.Stop()
	for {
		sent := false
		for i := range events {
			if ev := &events[i]; ev.Seq > after {
				if err := sendEvent(w, fmt.Sprint(ev.Seq), "event", ev); err != nil {
					return
				}
				after, sent = ev.Seq, true
			}
		}
		sum, st := summarize(events)
		if sent {
			if err := sendEvent(w, "", "summary", sum); err != nil {
				return
			}
		}
		end := st.Done && st.Status != loop.ConfirmationRequired
		if end {
			if err := sendEvent(w, "", "end", sum); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil || end {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		case <-limit.C:
			return
		case <-tick.C:
		}
		if events, err = s.runEvents(r.Context(), runID); err != nil {
			io.WriteString(w, "event: error\ndata: "+jsonString(err.Error())+"\n\n")
			return
		}
	}
}

// sendEvent writes one server-sent event with v as its JSON data.
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

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
