package console

import (
	"context"
	"errors"
	"net/http"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/replay"
)

// ReplayFunc re-decides a run from its log (replay.Run with the
// configuration the console is given). An error that wraps ErrNotHere
// says that this run's configuration is not known here, and is shown as
// 409 Conflict with its message; a replay.CannotReplayError as 422.
type ReplayFunc func(ctx context.Context, events []loop.Event) (*replay.Report, error)

// replayReport replays the run of the request with Options.Replay.
func (s *Server) replayReport(r *http.Request) (*replay.Report, error) {
	if s.opts.Replay == nil {
		return nil, &httpError{http.StatusNotFound, "this console replays no runs: it was started without a replay configuration"}
	}
	release, err := s.readSlot(r.Context())
	if err != nil {
		return nil, err
	}
	events, err := s.runEvents(r.Context(), r.PathValue("id"))
	release()
	if err != nil {
		return nil, err
	}
	rep, err := s.opts.Replay(r.Context(), events)
	var ce *replay.CannotReplayError
	switch {
	case errors.As(err, &ce):
		return nil, &httpError{http.StatusUnprocessableEntity, err.Error()}
	case errors.Is(err, ErrNotHere):
		return nil, &httpError{http.StatusConflict, err.Error()}
	}
	return rep, err
}

// replayPage shows a run's replay: the first decision that differs,
// recorded beside new with the call IDs, and how each run ended.
func (s *Server) replayPage(w http.ResponseWriter, r *http.Request, u *who) {
	rep, err := s.replayReport(r)
	if err != nil {
		s.pageFail(w, r, u, err)
		return
	}
	d := s.common(u, "Replay of "+rep.RunID)
	d["Report"] = rep
	s.render(w, http.StatusOK, "replay", d)
}

// apiReplay is GET /api/runs/{id}/replay: the replay's report as JSON.
func (s *Server) apiReplay(w http.ResponseWriter, r *http.Request, _ *who) {
	rep, err := s.replayReport(r)
	if err != nil {
		apiFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		*replay.Report
		Equal bool `json:"equal"`
	}{rep, rep.Equal()})
}
