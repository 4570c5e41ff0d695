package gemini

import "sync"

// maxSignatures bounds the signature table: enough for the calls of many
// concurrent runs; the oldest entries are forgotten first, and a forgotten
// call falls back to the placeholder signature.
const maxSignatures = 4096

// signatures remembers, by call ID, the thought signature Gemini attached
// to each function call this Model returned. It is a bounded FIFO table,
// safe for concurrent use.
type signatures struct {
	mu    sync.Mutex
	max   int
	byID  map[string]signature
	order []string // insertion order, a ring of at most max IDs
	next  int      // where the ring's next insertion goes once it is full
}

type signature struct {
	name string
	sig  []byte
}

func newSignatures(max int) *signatures {
	return &signatures{max: max, byID: make(map[string]signature)}
}

// put records sig for the call id naming tool name.
func (s *signatures) put(id, name string, sig []byte) {
	if id == "" || len(sig) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[id]; !ok {
		if len(s.order) < s.max {
			s.order = append(s.order, id)
		} else {
			delete(s.byID, s.order[s.next])
			s.order[s.next] = id
			s.next = (s.next + 1) % s.max
		}
	}
	s.byID[id] = signature{name: name, sig: append([]byte(nil), sig...)}
}

// get returns the signature recorded for call id, or nil when none was, or
// when the recorded call named another tool (a different call that happens
// to reuse the ID).
func (s *signatures) get(id, name string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok || e.name != name {
		return nil
	}
	return e.sig
}
