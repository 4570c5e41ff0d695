package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
)

// What happened to a run after an answer, in Decision.Resume.
const (
	// ResumeWaiting: other calls of the run still wait for answers.
	ResumeWaiting = "waiting"
	// ResumeDone: the console resumed the run and it has stopped (or
	// paused) again; Decision.Status says how.
	ResumeDone = "resumed"
	// ResumeRunning: the console resumed the run, which goes on in the
	// background.
	ResumeRunning = "running"
	// ResumeGoesOn: the backend carries the run on by itself.
	ResumeGoesOn = "goes_on"
	// ResumeQueued: the console cannot drive the run; it waits for
	// whoever can (Decision.Message says how).
	ResumeQueued = "queued"
	// ResumeFailed: the resume failed; Decision.Message says why.
	ResumeFailed = "failed"
)

// Decision is the answer to an approve or deny: what was recorded, and
// what became of the run.
type Decision struct {
	RunID    string `json:"run_id"`
	CallID   string `json:"call_id"`
	Approved bool   `json:"approved"`
	By       string `json:"by"`
	Note     string `json:"note,omitempty"`
	// StillPending are the run's calls that still wait for an answer.
	StillPending []string `json:"still_pending,omitempty"`
	// Resume is one of the Resume constants.
	Resume string `json:"resume"`
	// Status is the run's status once the resume has stopped it.
	Status string `json:"status,omitempty"`
	// Message says the outcome in a sentence.
	Message string `json:"message"`
}

// httpError is a refused request: its status code and the reason.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

// runEvents reads a run's log: 404 for a run the backend does not have.
func (s *Server) runEvents(ctx context.Context, runID string) ([]loop.Event, error) {
	events, err := s.opts.Backend.Events(ctx, runID)
	if errors.Is(err, store.ErrUnknownRun) {
		return nil, &httpError{http.StatusNotFound, fmt.Sprintf("no run %s", runID)}
	}
	if err != nil {
		return nil, err
	}
	if len(events) == 0 || events[0].Start == nil {
		return nil, &httpError{http.StatusNotFound, fmt.Sprintf("run %s has no events yet", runID)}
	}
	return events, nil
}

// decide records by's answer to a call and, when it was the last one the
// run waited for, resumes the run. The backend checks the answer
// (loop.CheckAnswer); each reason of a refusal gets its own status code
// (answerStatus).
func (s *Server) decide(ctx context.Context, runID, callID string, approve bool, by, note string) (*Decision, error) {
	answer := loop.Confirmation{CallID: callID, Approved: approve, By: by, Note: note}
	if err := s.opts.Backend.Decide(ctx, runID, answer); err != nil {
		if errors.Is(err, store.ErrUnknownRun) {
			return nil, &httpError{http.StatusNotFound, fmt.Sprintf("no run %s", runID)}
		}
		if code := answerStatus(err); code != 0 {
			return nil, &httpError{code, err.Error()}
		}
		return nil, err
	}
	// Another person may have answered another call of the batch
	// meanwhile: what still waits is read from the log as it is now, so
	// that of two answers given at once, the one recorded last resumes
	// the run (from a log read before, each would wait for the other).
	// Only the calls of this answer's pause count: a run that goes on by
	// itself may have paused again since. The answer is recorded: a log
	// that cannot be read now fails nothing (a resume of a run that still
	// waits returns it as it is).
	var still []string
	if events, err := s.runEvents(ctx, runID); err == nil {
		for _, p := range loop.PendingAfter(events, callID) {
			still = append(still, p.CallID)
		}
	}
	d := &Decision{RunID: runID, CallID: callID, Approved: approve, By: by, Note: note, StillPending: still}
	done := "denied"
	if approve {
		done = "approved"
	}
	head := fmt.Sprintf("%s call %s of run %s (by %s)", done, callID, runID, by)
	switch {
	case len(still) > 0:
		d.Resume = ResumeWaiting
		d.Message = fmt.Sprintf("%s; still pending: %s; the run goes on once they are answered", head, strings.Join(still, ", "))
	case s.opts.GoesOn:
		d.Resume = ResumeGoesOn
		d.Message = head + "; the run goes on"
	default:
		s.resumeRun(ctx, d, head)
	}
	return d, nil
}

// resumeRun carries the run of d on in the background and waits a little
// for it, to say how it ended when it ends quickly.
func (s *Server) resumeRun(ctx context.Context, d *Decision, head string) {
	rs, err := s.startResume(d.RunID)
	if err != nil {
		d.Resume, d.Message = ResumeFailed, head+"; "+err.Error()
		return
	}
	wait := time.NewTimer(s.opts.ResumeWait)
	defer wait.Stop()
	select {
	case <-rs.done:
	case <-wait.C:
		d.Resume, d.Message = ResumeRunning, head+"; the run goes on in the background"
		return
	case <-ctx.Done():
		d.Resume, d.Message = ResumeRunning, head+"; the run goes on in the background"
		return
	}
	switch {
	case errors.Is(rs.err, ErrNotHere):
		d.Resume, d.Message = ResumeQueued, head+"; queued: "+rs.err.Error()
		if s.opts.ResumeCommand != nil && !strings.Contains(rs.err.Error(), "toolloop resume") {
			d.Message += "; resume it with: " + s.opts.ResumeCommand(d.RunID)
		}
	case rs.err != nil:
		d.Resume, d.Message = ResumeFailed, head+"; the run was not resumed: "+rs.err.Error()
		if s.opts.ResumeCommand != nil {
			d.Message += "; resume it with: " + s.opts.ResumeCommand(d.RunID)
		}
	default:
		d.Resume, d.Message = ResumeDone, head+"; the run was resumed"
		if events, err := s.runEvents(ctx, d.RunID); err == nil {
			sum, _ := summarize(events)
			d.Status = sum.Status
			d.Message += " and " + sum.StopLine
		}
	}
}

// answerStatus is the HTTP status of an answer the backend refused, by
// its reason: 400 for an answer wrong in itself, 404 for a call the run
// does not wait on, 409 for a run that does not take it (it does not
// wait, or the call has its answer); 0 for an error that is no refusal.
func answerStatus(err error) int {
	switch {
	case errors.Is(err, loop.ErrNoAnswerer), errors.Is(err, loop.ErrNoteTooLong):
		return http.StatusBadRequest
	case errors.Is(err, loop.ErrUnknownCall):
		return http.StatusNotFound
	case errors.Is(err, loop.ErrNotPaused), errors.Is(err, loop.ErrAlreadyAnswered):
		return http.StatusConflict
	}
	return 0
}

// startResume starts carrying runID on, unless a resume of it is under
// way already, and returns that resume.
func (s *Server) startResume(runID string) (*resumeState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("the console is shutting down; resume the run later")
	}
	if rs, ok := s.resumes[runID]; ok {
		select {
		case <-rs.done:
		default:
			return rs, nil
		}
	}
	rs := &resumeState{done: make(chan struct{})}
	s.resumes[runID] = rs
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_, rs.err = s.opts.Backend.Resume(s.ctx, runID)
		close(rs.done)
	}()
	return rs, nil
}

// resumingNote is what a run's page says while the console resumes it.
const resumingNote = "The console is resuming this run."

// lastResume returns what became of the console's last resume of runID,
// for the run's page: "" when there was none, or it went well.
func (s *Server) lastResume(runID string) string {
	s.mu.Lock()
	rs, ok := s.resumes[runID]
	s.mu.Unlock()
	if !ok {
		return ""
	}
	select {
	case <-rs.done:
		if rs.err != nil {
			return "The console's resume of this run did not go on: " + rs.err.Error()
		}
		return ""
	default:
		return resumingNote
	}
}
