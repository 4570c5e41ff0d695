package loop

import (
	"encoding/json"
	"sync"
	"time"
	"unsafe"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
)

// EventLog is a run's log: its events in order, as All returns them. It
// encodes to JSON as the array of events.
//
// A run without an observer keeps its log compact (a third of the bytes of
// its events) and builds the events the first time All is called: a caller
// that never reads the log does not pay for it, and the runner reuses the
// room the run's events took. The zero EventLog is empty.
type EventLog struct {
	l *eventLog
}

// LogOf returns the log of events, which it keeps: they must not change
// afterwards.
func LogOf(events []Event) EventLog {
	if events == nil {
		return EventLog{}
	}
	return EventLog{&eventLog{events: events}}
}

// All returns the events, in order. They are shared: do not modify them.
// It is safe to call from several goroutines.
func (l EventLog) All() []Event {
	if l.l == nil {
		return nil
	}
	if l.l.compact {
		l.l.once.Do(l.l.build)
	}
	return l.l.events
}

// Len returns the number of events, without building them.
func (l EventLog) Len() int {
	switch {
	case l.l == nil:
		return 0
	case l.l.compact:
		return len(l.l.records)
	}
	return len(l.l.events)
}

// MarshalJSON encodes the log as the array of its events.
func (l EventLog) MarshalJSON() ([]byte, error) {
	return json.Marshal(l.All())
}

// UnmarshalJSON decodes an array of events.
func (l *EventLog) UnmarshalJSON(b []byte) error {
	var events []Event
	if err := json.Unmarshal(b, &events); err != nil {
		return err
	}
	*l = LogOf(events)
	return nil
}

type eventLog struct {
	// events is the log, once built if it was compact.
	events []Event

	// A compact log: one record per event, the one stop's status and
	// detail, and build's guard. They do not change once made.
	compact bool
	records []logRecord
	status  Status
	detail  string
	once    sync.Once
}

// logRecord is an event of a compact log: 72 bytes against an Event's 216.
// Seq is the record's index plus one. An event holds at most one payload,
// which p points at, as what says: its start, response or plan, or the
// first of its n checks, decisions or outcomes. x is its latency or its
// stage, and n its attempts when p holds no slice.
type logRecord struct {
	at    time.Time
	kind  EventKind
	p     unsafe.Pointer
	fail  *Failure
	x     int64
	n     int32
	what  payload
	stage bool // x is the stage, not the latency
	// empty marks a payload slice that is empty but not nil.
	empty bool
}

// payload says what a logRecord's p points at.
type payload uint8

const (
	noPayload payload = iota
	startPayload
	responsePayload
	planPayload
	checksPayload
	decisionsPayload
	outcomesPayload
)

// compactLog returns events as a compact log, or false if an event does
// not fit a logRecord (two payloads, a stage with a latency or attempts, a
// confirmation, or more than one stop), in which case the caller keeps
// the events themselves.
//
// into, if not nil, is room for the log's header.
func compactLog(events []Event, into *eventLog) (EventLog, bool) {
	l := into
	if l == nil {
		l = new(eventLog)
	}
	l.compact, l.records = true, make([]logRecord, len(events))
	stopped := false
	for i := range events {
		ev := &events[i]
		r := &l.records[i]
		if ev.Seq != i+1 || ev.Confirmation != nil {
			return EventLog{}, false
		}
		r.at, r.kind, r.fail = ev.At, ev.Kind, ev.Failure
		payloads := 0
		if ev.Start != nil {
			r.what, r.p = startPayload, unsafe.Pointer(ev.Start)
			payloads++
		}
		if ev.Response != nil {
			r.what, r.p = responsePayload, unsafe.Pointer(ev.Response)
			payloads++
		}
		if ev.Plan != nil {
			r.what, r.p = planPayload, unsafe.Pointer(ev.Plan)
			payloads++
		}
		if ev.Checks != nil {
			r.what = checksPayload
			setSlice(r, ev.Checks)
			payloads++
		}
		if ev.Decisions != nil {
			r.what = decisionsPayload
			setSlice(r, ev.Decisions)
			payloads++
		}
		if ev.Outcomes != nil {
			r.what = outcomesPayload
			setSlice(r, ev.Outcomes)
			payloads++
		}
		inSlice := r.what >= checksPayload
		switch {
		case payloads > 1, int(int32(ev.Attempts)) != ev.Attempts, inSlice && (ev.Attempts != 0 || int(r.n) != r.len(ev)):
			return EventLog{}, false
		case ev.Stage != 0:
			if ev.Latency != 0 || int(int64(ev.Stage)) != ev.Stage {
				return EventLog{}, false
			}
			r.x, r.stage = int64(ev.Stage), true
		default:
			r.x = int64(ev.Latency)
		}
		if !inSlice {
			r.n = int32(ev.Attempts)
		}
		if ev.Status != "" || ev.Detail != "" {
			if stopped {
				return EventLog{}, false
			}
			stopped, l.status, l.detail = true, ev.Status, ev.Detail
			r.what |= stopFlag
		}
	}
	return EventLog{l}, true
}

// stopFlag marks, in a logRecord's what, the event that holds the log's
// status and detail.
const stopFlag payload = 0x80

// len returns the length of ev's payload slice.
func (r *logRecord) len(ev *Event) int {
	switch r.what {
	case checksPayload:
		return len(ev.Checks)
	case decisionsPayload:
		return len(ev.Decisions)
	}
	return len(ev.Outcomes)
}

// setSlice points r at s's elements.
func setSlice[E any](r *logRecord, s []E) {
	r.n = int32(len(s))
	r.p = nil
	if len(s) == 0 {
		// An empty slice's data pointer may point just past its array,
		// which the collector must not see: keep only whether it is nil.
		r.empty = s != nil
		return
	}
	r.p = unsafe.Pointer(unsafe.SliceData(s))
}

// slice returns the n elements r points at.
func slice[E any](r *logRecord) []E {
	if r.p == nil {
		if r.empty {
			return []E{}
		}
		return nil
	}
	return unsafe.Slice((*E)(r.p), r.n)
}

// build makes the events of a compact log.
func (l *eventLog) build() {
	events := make([]Event, len(l.records))
	for i := range l.records {
		r := &l.records[i]
		ev := &events[i]
		ev.Seq, ev.At, ev.Kind, ev.Failure = i+1, r.at, r.kind, r.fail
		if r.stage {
			ev.Stage = int(r.x)
		} else {
			ev.Latency = time.Duration(r.x)
		}
		if r.what&stopFlag != 0 {
			ev.Status, ev.Detail = l.status, l.detail
		}
		switch r.what &^ stopFlag {
		case startPayload:
			ev.Start = (*StartInfo)(r.p)
		case responsePayload:
			ev.Response = (*llm.Response)(r.p)
		case planPayload:
			ev.Plan = (*executor.Plan)(r.p)
		case checksPayload:
			ev.Checks = slice[CallCheck](r)
			continue
		case decisionsPayload:
			ev.Decisions = slice[policy.Decision](r)
			continue
		case outcomesPayload:
			ev.Outcomes = slice[executor.Outcome](r)
			continue
		}
		ev.Attempts = int(r.n)
	}
	l.events = events
}
