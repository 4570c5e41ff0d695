package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolloop/toolloop/loop"
)

// Backend is where runs are kept and carried on: list them, read one's
// log, record an answer, carry a paused run on. It is the one interface of
// both front ends, the console and toolloop's commands (whose backends add
// starting runs to it); its methods are called from many requests at once
// and must be safe for that.
type Backend interface {
	// Runs lists the runs f selects, newest first where the backend
	// knows the order.
	Runs(ctx context.Context, f Filter) ([]Run, error)
	// Events returns a run's log, as far as it goes; a run the backend
	// does not have is an error wrapping store.ErrUnknownRun.
	Events(ctx context.Context, runID string) ([]loop.Event, error)
	// Decide records a person's answer to a call the run waits on, as
	// loop.Decide does: an answer that cannot be recorded is a
	// *loop.AnswerError, whose reason (loop.ErrNotPaused, ...) errors.Is
	// finds; a run the backend does not have wraps store.ErrUnknownRun.
	Decide(ctx context.Context, runID string, answer loop.Confirmation) error
	// Resume carries a run on once all its pending calls are answered,
	// and returns its result when it stops or pauses again; a run that
	// has ended, or still waits for an answer, is returned as it is. A
	// run this process cannot drive is an error wrapping ErrNotHere whose
	// text says how to carry it on (the command to run).
	Resume(ctx context.Context, runID string) (*loop.Result, error)
}

// Filter selects the runs Backend.Runs lists.
type Filter struct {
	// Status, if not "", is the status of the runs to list: one of
	// loop.ListStatuses (a loop.Status, loop.RunningStatus for the runs
	// that have not stopped, loop.AnsweredStatus for those answered and
	// waiting to be resumed).
	Status string
	// Limit, if positive, is how many runs to list at most.
	Limit int
}

// ErrNotHere says that the console's process cannot carry a run on (it
// lacks the run's model or tools): the answer is recorded and the run
// waits for whoever can resume it.
var ErrNotHere = errors.New("the run cannot be resumed by the console")

// Run is one run as the runs list shows it.
type Run struct {
	RunID string `json:"run_id"`
	// Status is a loop.Status, loop.RunningStatus, loop.AnsweredStatus,
	// or the backend's word for a run that ended without one.
	Status string `json:"status"`
	// Counted reports whether Steps, ToolCalls and Tokens are known.
	Counted   bool      `json:"counted"`
	Steps     int       `json:"steps"`
	ToolCalls int       `json:"tool_calls"`
	Tokens    int64     `json:"tokens"`
	StartedAt time.Time `json:"started_at"`
	SessionID string    `json:"session_id,omitempty"`
	// Pending are the calls the run paused for, answered or not: while
	// it waits for answers, and once answered (status
	// loop.AnsweredStatus) until it is resumed.
	Pending []loop.Pending `json:"pending,omitempty"`
}

// Waiting returns the pending calls nobody has answered yet.
func (r *Run) Waiting() []loop.Pending {
	var out []loop.Pending
	for _, p := range r.Pending {
		if p.Confirmation == nil {
			out = append(out, p)
		}
	}
	return out
}

// Options configure the console. Backend and Users are required.
type Options struct {
	// Backend is where the runs are.
	Backend Backend
	// Users are the people who may sign in (see ParseUsers).
	Users *Users
	// Now is the clock for sessions and answers; nil means time.Now.
	Now func() time.Time
	// SessionTTL is how long a browser session lasts; default 12 hours.
	SessionTTL time.Duration
	// SecureCookies marks the session cookies Secure (sent over HTTPS
	// only) whatever the request came over: set it when the console is
	// reached through a proxy that ends TLS, where every request reaches
	// the console over plain HTTP. Without it they are Secure only on a
	// request that came over TLS.
	SecureCookies bool
	// Poll is how often the live views of a run look for new events (one
	// reader per run, for all its viewers); default 500ms.
	Poll time.Duration
	// StreamFor bounds one live stream; the browser reconnects after it.
	// Default 10 minutes.
	StreamFor time.Duration
	// MaxStreamsPerUser caps the live streams one person has open at
	// once (a run page each); beyond it a stream is refused with 429.
	// Default DefaultMaxStreamsPerUser.
	MaxStreamsPerUser int
	// MaxStreams caps the live streams of everyone at once; beyond it a
	// stream is refused with 503. Default DefaultMaxStreams.
	MaxStreams int
	// MaxReads caps the reads of whole run logs for pages and the API
	// served at once; more wait their turn (or their request's end). A
	// store hands a run's events over whole (store.EventLog has no read
	// that skips or cuts a large one), so a view of a run holding a 64 MiB
	// partial turn costs its store about twice that while it reads and
	// decodes: the cap bounds what many such views at once cost together.
	// Default DefaultMaxReads.
	MaxReads int
	// ResumeWait is how long an approval waits for the resumed run to stop
	// before it answers that the run goes on in the background; default
	// 5 seconds.
	ResumeWait time.Duration
	// ResumeCommand, if set, returns the command line that resumes a run
	// from a shell, for the messages about runs the console cannot resume.
	ResumeCommand func(runID string) string
	// GoesOn says that the backend's paused runs go on by themselves once
	// every call is answered (a Temporal server), so the console never
	// calls Resume.
	GoesOn bool
	// AllowRemote serves requests whatever host their Host header names.
	// Without it the console answers only to the loopback names
	// (localhost, 127.0.0.1, [::1]) on the port it listens on, and refuses
	// other hosts with 421 Misdirected Request: a page elsewhere that
	// rebinds its own name to 127.0.0.1 gets nothing. Set it for a
	// console reached by another name (behind a proxy, --allow-remote).
	AllowRemote bool
	// Replay, when set, re-decides a run from its log for the run's
	// replay view (/runs/{id}/replay, /api/runs/{id}/replay): the first
	// decision that differs, recorded beside new.
	Replay ReplayFunc
}

// Server is the console's handler. Close it to stop the runs it resumes
// in the background and end its live streams.
type Server struct {
	opts     Options
	mux      *http.ServeMux
	pages    map[string]*template.Template
	static   http.Handler
	sessions *sessions

	// ctx ends with Close; background resumes and streams use it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	resumes map[string]*resumeState // by run ID

	// The live streams: one follower per followed run, and the open
	// streams counted, in all and per person.
	liveMu      sync.Mutex
	followers   map[string]*follower // by run ID
	userStreams map[string]int       // by user name
	streams     int
	pollers     atomic.Int64 // followers' goroutines running, for tests
	// reads holds a token for each whole-log read in progress
	// (Options.MaxReads).
	reads chan struct{}
	// tick, if not nil, replaces the followers' tickers (tests).
	tick <-chan time.Time
}

// resumeState is what the console knows about a resume it started.
type resumeState struct {
	done chan struct{}
	err  error
}

// New returns the console over opts.Backend for opts.Users.
func New(opts Options) (*Server, error) {
	if opts.Backend == nil {
		return nil, errors.New("console: Options.Backend is nil")
	}
	if opts.Users == nil || len(opts.Users.byName) == 0 {
		return nil, errors.New("console: no users: give at least one NAME TOKEN (see ParseUsers)")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Poll <= 0 {
		opts.Poll = 500 * time.Millisecond
	}
	if opts.StreamFor <= 0 {
		opts.StreamFor = 10 * time.Minute
	}
	if opts.MaxStreamsPerUser <= 0 {
		opts.MaxStreamsPerUser = DefaultMaxStreamsPerUser
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.MaxReads <= 0 {
		opts.MaxReads = DefaultMaxReads
	}
	if opts.ResumeWait <= 0 {
		opts.ResumeWait = 5 * time.Second
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:     opts,
		mux:      http.NewServeMux(),
		pages:    pages,
		static:   http.StripPrefix("/static/", http.FileServerFS(static)),
		sessions: newSessions(opts.Now, opts.SessionTTL),
		ctx:      ctx,
		cancel:   cancel,
		resumes:  map[string]*resumeState{},

		followers:   map[string]*follower{},
		userStreams: map[string]int{},
		reads:       make(chan struct{}, opts.MaxReads),
	}
	s.routes()
	return s, nil
}

// Close ends the live streams and the resumes the console started, and
// waits for them. A resume cut short stays in the log as it got; the run
// can be resumed again.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// ServeHTTP implements http.Handler, with the headers every answer gets.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	if !s.opts.AllowRemote {
		if msg := checkHost(r); msg != "" {
			if strings.HasPrefix(r.URL.Path, "/api/") {
				writeError(w, http.StatusMisdirectedRequest, msg)
			} else {
				http.Error(w, msg, http.StatusMisdirectedRequest)
			}
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	m := s.mux
	m.Handle("GET /static/", s.static)
	m.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/static/favicon.svg", http.StatusMovedPermanently)
	})
	m.HandleFunc("GET /signin", s.signinPage)
	m.HandleFunc("POST /signin", s.signin)
	m.HandleFunc("POST /signout", s.page(s.signout))
	m.HandleFunc("GET /{$}", s.page(func(w http.ResponseWriter, r *http.Request, _ *who) {
		http.Redirect(w, r, "/runs", http.StatusSeeOther)
	}))
	m.HandleFunc("GET /runs", s.page(s.runsPage))
	m.HandleFunc("GET /runs/{id}", s.page(s.runPage))
	m.HandleFunc("GET /runs/{id}/live", s.api(s.stream))
	m.HandleFunc("GET /runs/{id}/replay", s.page(s.replayPage))
	m.HandleFunc("GET /approvals", s.page(s.approvalsPage))
	m.HandleFunc("POST /runs/{id}/calls/{call}/{verb}", s.page(s.decidePage))

	m.HandleFunc("GET /api/runs", s.api(s.apiRuns))
	m.HandleFunc("GET /api/runs/{id}", s.api(s.apiRun))
	m.HandleFunc("GET /api/runs/{id}/events", s.api(s.apiEvents))
	m.HandleFunc("GET /api/runs/{id}/replay", s.api(s.apiReplay))
	m.HandleFunc("GET /api/runs/{id}/events/{seq}", s.api(s.apiEvent))
	m.HandleFunc("POST /api/runs/{id}/calls/{call}/{verb}", s.api(s.apiDecide))
}

// DefaultMaxReads is Options.MaxReads' default.
const DefaultMaxReads = 4

// readSlot waits for one of the Options.MaxReads slots for a whole-log
// read and returns its release, or the error of ctx if it ends first.
func (s *Server) readSlot(ctx context.Context) (release func(), err error) {
	select {
	case s.reads <- struct{}{}:
		return func() { <-s.reads }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
