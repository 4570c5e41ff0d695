package trace

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
)

// LogOptions configure the run log writers. Nil, or the zero value,
// redacts with NewRedactor(nil).
type LogOptions struct {
	Redactor *Redactor
}

func (o *LogOptions) redactor() *Redactor {
	if o == nil || o.Redactor == nil {
		return NewRedactor(nil)
	}
	return o.Redactor
}

// LogWriter is a loop.Observer that writes each event it is told about as
// one line of JSON (JSON Lines), redacted. Lines of concurrent runs never
// mix within a line, but a writer shared by several runs interleaves their
// events; FileObserver keeps one file per run.
type LogWriter struct {
	red *Redactor
	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewLogWriter returns an Observer writing the events it sees to w; opts
// may be nil.
func NewLogWriter(w io.Writer, opts *LogOptions) *LogWriter {
	return &LogWriter{red: opts.redactor(), w: w}
}

// Observe writes ev as one line. A failed write is kept for Err; later
// events are still attempted.
func (l *LogWriter) Observe(_ context.Context, ev *loop.Event) {
	line, err := encodeEvent(l.red, ev)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		_, err = l.w.Write(line)
	}
	if err != nil && l.err == nil {
		l.err = fmt.Errorf("trace: writing event %d (%s): %w", ev.Seq, ev.Kind, err)
	}
}

// Err returns the first error met writing the log.
func (l *LogWriter) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func encodeEvent(red *Redactor, ev *loop.Event) ([]byte, error) {
	r := RedactEvent(red, ev)
	var v any = &r
	if hasState(ev) {
		v = withStateSummaries(&r, ev)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep summaries such as "<string:4>" readable
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil // Encode ends the line
}

// RedactEvent returns a copy of ev holding only what red allows to be
// recorded: tool arguments and results summarized or masked, text,
// reasoning and error messages with value patterns masked, and provider
// state reduced to whose it is (its Data is nil: opaque bytes, often the
// model's encrypted reasoning, are never recorded). ev is not modified.
func RedactEvent(red *Redactor, ev *loop.Event) loop.Event {
	r := *ev
	if ev.Start != nil {
		s := *ev.Start
		s.Messages = redactMessages(red, s.Messages)
		r.Start = &s
	}
	if ev.Response != nil {
		resp := *ev.Response
		resp.Message = redactMessage(red, resp.Message)
		r.Response = &resp
	}
	if ev.Failure != nil {
		f := *ev.Failure
		f.Message = red.Diagnostic(f.Message)
		r.Failure = &f
	}
	if ev.Checks != nil {
		r.Checks = slices.Clone(ev.Checks)
		for i := range r.Checks {
			r.Checks[i].Problem = red.Diagnostic(r.Checks[i].Problem)
		}
	}
	if ev.Decisions != nil {
		r.Decisions = make([]policy.Decision, len(ev.Decisions))
		for i, d := range ev.Decisions {
			d.Reason = red.Diagnostic(d.Reason)
			r.Decisions[i] = d
		}
	}
	if ev.Plan != nil {
		p := executor.Plan{Stages: ev.Plan.Stages, Table: make([]executor.Row, len(ev.Plan.Table))}
		for i, row := range ev.Plan.Table {
			if row.Resources != nil {
				res := make([]string, len(row.Resources))
				for j, s := range row.Resources {
					res[j] = red.Diagnostic(s)
				}
				row.Resources = res
			}
			p.Table[i] = row
		}
		r.Plan = &p
	}
	if ev.Outcomes != nil {
		r.Outcomes = make([]executor.Outcome, len(ev.Outcomes))
		for i, o := range ev.Outcomes {
			o.Result = redactResult(red, o.Result)
			o.Err = red.Diagnostic(o.Err)
			r.Outcomes[i] = o
		}
	}
	if ev.Confirmation != nil {
		c := *ev.Confirmation
		c.Note = red.Diagnostic(c.Note)
		r.Confirmation = &c
	}
	r.Detail = red.Diagnostic(ev.Detail)
	return r
}

func redactMessages(red *Redactor, msgs []llm.Message) []llm.Message {
	if msgs == nil {
		return nil
	}
	out := make([]llm.Message, len(msgs))
	for i, m := range msgs {
		out[i] = redactMessage(red, m)
	}
	return out
}

func redactMessage(red *Redactor, m llm.Message) llm.Message {
	m.Text = red.Text(m.Text)
	if m.Reasoning != nil {
		rs := make([]llm.Reasoning, len(m.Reasoning))
		for i, r := range m.Reasoning {
			r.Text = red.Text(r.Text)
			rs[i] = r
		}
		m.Reasoning = rs
	}
	m.State = stateOwner(m.State)
	if m.ToolCalls != nil {
		calls := make([]llm.ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			c.Arguments = red.Arguments(c.Name, c.Arguments)
			c.State = stateOwner(c.State)
			calls[i] = c
		}
		m.ToolCalls = calls
	}
	if m.Result != nil {
		r := redactResult(red, *m.Result)
		m.Result = &r
	}
	return m
}

// stateOwner keeps whose state s is, not its data.
func stateOwner(s *llm.ProviderState) *llm.ProviderState {
	if s == nil {
		return nil
	}
	return &llm.ProviderState{Provider: s.Provider}
}

// hasState reports whether any message of ev carries provider state.
func hasState(ev *loop.Event) bool {
	has := func(m *llm.Message) bool {
		if m.State != nil {
			return true
		}
		for i := range m.ToolCalls {
			if m.ToolCalls[i].State != nil {
				return true
			}
		}
		return false
	}
	if ev.Response != nil && has(&ev.Response.Message) {
		return true
	}
	if ev.Start != nil {
		for i := range ev.Start.Messages {
			if has(&ev.Start.Messages[i]) {
				return true
			}
		}
	}
	return false
}

// The run log records provider state as a stateSummary: whose it is and
// how many bytes it has, never the bytes (the store keeps them). ReadLog
// reads a summary back as an llm.ProviderState with the provider and no
// data. The types below encode an event that way: each embeds the type
// it stands for and shadows the fields that lead to state, so the rest of
// the event is encoded as usual. Events without state are encoded
// directly, as they always were.
type stateSummary struct {
	Provider string `json:"provider"`
	Bytes    int    `json:"bytes"`
}

func summarizeState(s *llm.ProviderState) *stateSummary {
	if s == nil {
		return nil
	}
	return &stateSummary{Provider: s.Provider, Bytes: len(s.Data)}
}

type logEvent struct {
	loop.Event
	Start    *logStart    `json:"start,omitempty"`
	Response *logResponse `json:"response,omitempty"`
}

type logStart struct {
	loop.StartInfo
	Messages []logMessage `json:"messages"`
}

type logResponse struct {
	llm.Response
	Message logMessage `json:"message"`
}

type logMessage struct {
	llm.Message
	ToolCalls []logCall     `json:"tool_calls,omitempty"`
	State     *stateSummary `json:"state,omitempty"`
}

// logCall is a tool call whose state is a summary. llm.ToolCall has its
// own encoding, which embedding would take over, so logCall adds the
// summary to that encoding.
type logCall struct {
	call  llm.ToolCall
	state *stateSummary
}

// MarshalJSON implements json.Marshaler.
func (c logCall) MarshalJSON() ([]byte, error) {
	c.call.State = nil
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c.call); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if c.state == nil {
		return b, nil
	}
	// b is an object: add the summary as its last member.
	sum, err := json.Marshal(c.state)
	if err != nil {
		return nil, err
	}
	b = append(b[:len(b)-1], `,"state":`...)
	b = append(b, sum...)
	return append(b, '}'), nil
}

// withStateSummaries returns r (ev redacted) for encoding with ev's state
// as summaries.
func withStateSummaries(r, ev *loop.Event) *logEvent {
	msg := func(red, orig *llm.Message) logMessage {
		m := logMessage{Message: *red, State: summarizeState(orig.State)}
		if red.ToolCalls != nil {
			m.ToolCalls = make([]logCall, len(red.ToolCalls))
			for i := range red.ToolCalls {
				m.ToolCalls[i] = logCall{call: red.ToolCalls[i], state: summarizeState(orig.ToolCalls[i].State)}
			}
		}
		return m
	}
	out := &logEvent{Event: *r}
	if r.Start != nil {
		out.Start = &logStart{StartInfo: *r.Start}
		if r.Start.Messages != nil {
			out.Start.Messages = make([]logMessage, len(r.Start.Messages))
			for i := range r.Start.Messages {
				out.Start.Messages[i] = msg(&r.Start.Messages[i], &ev.Start.Messages[i])
			}
		}
	}
	if r.Response != nil {
		out.Response = &logResponse{Response: *r.Response, Message: msg(&r.Response.Message, &ev.Response.Message)}
	}
	return out
}

func redactResult(red *Redactor, r llm.ToolResult) llm.ToolResult {
	if r.Status == llm.StatusOK {
		r.Content = red.Result(r.Name, r.Content)
		return r
	}
	// Errors are the runtime's {"error": message, "kind": kind}: keep the
	// message (a diagnostic, value patterns masked) when it has that form.
	var e struct {
		Error string        `json:"error"`
		Kind  llm.ErrorKind `json:"kind"`
	}
	if err := json.Unmarshal(r.Content, &e); err == nil && e.Error != "" {
		r.Content = llm.ErrorContent(e.Kind, red.Diagnostic(e.Error))
		return r
	}
	r.Content = red.Result(r.Name, r.Content)
	return r
}

// ReadLog reads a run log written by NewLogWriter or FileObserver: one
// JSON event per line; blank lines are skipped. A last line that was cut
// off (no line end, not whole JSON: the writer died or the disk filled
// mid-line) does not hide the rest: ReadLog returns the events before it
// with a *TruncatedError. Any other bad line is an error naming it.
func ReadLog(r io.Reader) ([]loop.Event, error) {
	br := bufio.NewReader(r)
	var events []loop.Event
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var ev loop.Event
			if uerr := json.Unmarshal(line, &ev); uerr != nil {
				if errors.Is(err, io.EOF) {
					return events, &TruncatedError{Line: n, Bytes: len(line), Err: uerr}
				}
				return events, fmt.Errorf("trace: line %d: %w", n, uerr)
			}
			events = append(events, ev)
		}
		if errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil {
			return events, fmt.Errorf("trace: line %d: %w", n, err)
		}
	}
}

// TruncatedError says that a run log's last line was cut off: the events
// before it were read.
type TruncatedError struct {
	Line  int   // the cut line's number
	Bytes int   // how much of it there is
	Err   error // why it does not decode
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("trace: the log's last line (line %d, %d bytes) was cut off: %v", e.Line, e.Bytes, e.Err)
}

// Unwrap returns the decoding error.
func (e *TruncatedError) Unwrap() error { return e.Err }

// LogExt is the extension of a run log file: <dir>/<run-id>.jsonl.
const LogExt = ".jsonl"

// FileLog is a loop.Observer that writes each run's events to a file of
// its own, <dir>/<run-id>.jsonl, opened on the Started event (replacing a
// file of the same run ID) and closed on the Stopped event. It may watch
// concurrent runs, each with its own context: the runner passes every
// event of a run with the run's context, which is how events are matched
// to runs. When a run is resumed (loop.Runner.Resume or Continue), the
// file is rewritten from the run's stored log and the resumed part is
// appended to it.
type FileLog struct {
	dir string
	red *Redactor

	mu   sync.Mutex
	runs map[context.Context]*fileRun
	err  error
}

// fileRun is one run's open log file. Lines go straight to the file, one
// write each, without a buffer in this process: a killed process leaves
// every line it was told about, whole, in the file.
type fileRun struct {
	path string
	f    *os.File
}

// FileObserver returns a FileLog writing to dir, which is created when the
// first run starts; opts may be nil.
func FileObserver(dir string, opts *LogOptions) *FileLog {
	return &FileLog{dir: dir, red: opts.redactor(), runs: map[context.Context]*fileRun{}}
}

// Path returns the log file of a run.
func (l *FileLog) Path(runID string) string { return filepath.Join(l.dir, runID+LogExt) }

// Observe writes ev to its run's file.
func (l *FileLog) Observe(ctx context.Context, ev *loop.Event) {
	line, err := encodeEvent(l.red, ev)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.fail(fmt.Errorf("trace: encoding event %d (%s): %w", ev.Seq, ev.Kind, err))
		return
	}
	run := l.runs[ctx]
	if ev.Kind == loop.Started && ev.Start != nil {
		if run != nil {
			l.fail(run.close())
		}
		run, err = l.open(ev.Start.RunID)
		if err != nil {
			l.fail(err)
			delete(l.runs, ctx)
			return
		}
		l.runs[ctx] = run
	}
	if run == nil {
		return // a run that started before this observer, or failed to open
	}
	if _, err := run.f.Write(line); err != nil {
		l.fail(fmt.Errorf("trace: writing %s: %w", run.path, err))
	}
	if ev.Kind == loop.Stopped {
		l.fail(run.close())
		delete(l.runs, ctx)
	}
}

// ObserveResume implements loop.ResumeObserver: the run's file is written
// anew from its log as stored, which drops any events a crashed process
// wrote but never stored and adds answers recorded by other processes,
// and the file stays open for the resumed part.
func (l *FileLog) ObserveResume(ctx context.Context, history []loop.Event) {
	if len(history) == 0 || history[0].Start == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.runs[ctx]; old != nil {
		l.fail(old.close())
	}
	run, err := l.open(history[0].Start.RunID)
	if err != nil {
		l.fail(err)
		delete(l.runs, ctx)
		return
	}
	// The history goes out in one write: the file is either what the
	// store holds or (after a crash mid-write) a prefix of it.
	var buf []byte
	for i := range history {
		line, err := encodeEvent(l.red, &history[i])
		if err != nil {
			l.fail(fmt.Errorf("trace: encoding event %d (%s): %w", history[i].Seq, history[i].Kind, err))
			continue
		}
		buf = append(buf, line...)
	}
	if _, err := run.f.Write(buf); err != nil {
		l.fail(fmt.Errorf("trace: writing %s: %w", run.path, err))
	}
	l.runs[ctx] = run
}

func (l *FileLog) open(runID string) (*fileRun, error) {
	if runID == "" || runID != filepath.Base(runID) || runID == "." || runID == ".." || strings.ContainsAny(runID, `/\`) {
		return nil, fmt.Errorf("trace: run ID %q cannot name a log file", runID)
	}
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	path := l.Path(runID)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	return &fileRun{path: path, f: f}, nil
}

func (r *fileRun) close() error {
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("trace: closing %s: %w", r.path, err)
	}
	return nil
}

func (l *FileLog) fail(err error) {
	if err != nil {
		l.err = errors.Join(l.err, err)
	}
}

// Close closes the files of runs that have not stopped, and returns every
// error met so far.
func (l *FileLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ctx, run := range l.runs {
		l.fail(run.close())
		delete(l.runs, ctx)
	}
	return l.err
}

// Err returns the errors met so far.
func (l *FileLog) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// ErrNoLog says that a run log could not be found.
var ErrNoLog = errors.New("no such run log")

// Resolve finds the run log that ref names: a file, or a run ID whose log
// is <dir>/<run-id>.jsonl, or a prefix of exactly one run ID in dir. The
// error wraps ErrNoLog and names every place that was looked at.
func Resolve(ref, dir string) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("%w: empty reference", ErrNoLog)
	}
	if st, err := os.Stat(ref); err == nil && !st.IsDir() {
		return ref, nil
	}
	looked := []string{fmt.Sprintf("file %s", ref)}
	if dir != "" && !strings.ContainsAny(ref, `/\`) {
		id := strings.TrimSuffix(ref, LogExt)
		path := filepath.Join(dir, id+LogExt)
		if st, err := os.Stat(path); err == nil && !st.IsDir() {
			return path, nil
		}
		looked = append(looked, fmt.Sprintf("run ID %s (%s)", id, path))
		matches, _ := filepath.Glob(filepath.Join(dir, globEscape(id)+"*"+LogExt))
		switch len(matches) {
		case 1:
			return matches[0], nil
		case 0:
		default:
			names := make([]string, len(matches))
			for i, m := range matches {
				names[i] = strings.TrimSuffix(filepath.Base(m), LogExt)
			}
			return "", fmt.Errorf("%w: %q is the prefix of several run IDs in %s: %s",
				ErrNoLog, ref, dir, strings.Join(names, ", "))
		}
	}
	return "", fmt.Errorf("%w: looked for %s", ErrNoLog, strings.Join(looked, " and "))
}

func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Open resolves ref as Resolve does and reads the log. It returns the
// events and the file read.
func Open(ref, dir string) ([]loop.Event, string, error) {
	path, err := Resolve(ref, dir)
	if err != nil {
		return nil, "", err
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, path, fmt.Errorf("%w: %v", ErrNoLog, err)
		}
		return nil, path, err
	}
	defer f.Close()
	events, err := ReadLog(f)
	if err != nil {
		// The events come back with a *TruncatedError: the caller may
		// show them with a note.
		return events, path, fmt.Errorf("%s: %w", path, err)
	}
	return events, path, nil
}
