package loop_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/loop"
)

// roundTrip encodes a state and decodes it again, as a driver that
// carries it (a Temporal workflow's input) does.
func roundTrip(t *testing.T, s *loop.State) *loop.State {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out loop.State
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func snapshotJSON(t *testing.T, s *loop.State) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSnapshotDecidesAsReplay cuts every transcript after each of its
// events: a state decoded from the state's encoding there (through JSON) must
// call for the same effect at every later event as the state that played
// every event, and reach the same state after each (compared through
// their encodings, which hold the unexported parts too), conversation
// aside. The transcripts cover the spin rules, repeated writes, failed
// calls, pauses and answers, budgets and deadlines.
func TestSnapshotDecidesAsReplay(t *testing.T) {
	for _, tr := range loadTranscripts(t) {
		t.Run(tr.name, func(t *testing.T) {
			events := tr.events
			var full loop.State
			want := make([]loop.Effect, len(events))
			after := make([][]byte, len(events))
			for i := range events {
				want[i] = loop.Next(&full, &events[i])
				after[i] = snapshotJSON(t, &full)
			}
			for k := 0; k <= len(events); k++ {
				s := roundTrip(t, loop.Replay(events[:k]))
				for i := k; i < len(events); i++ {
					got := loop.Next(s, &events[i])
					gb, _ := json.Marshal(got)
					wb, _ := json.Marshal(want[i])
					if !bytes.Equal(gb, wb) {
						t.Fatalf("cut after %d events: event %d (%s) calls for %s; replayed, %s", k, events[i].Seq, events[i].Kind, gb, wb)
					}
					if sj := snapshotJSON(t, s); !bytes.Equal(sj, after[i]) {
						t.Fatalf("cut after %d events: after event %d the state is\n%s\nreplayed, it is\n%s", k, events[i].Seq, sj, after[i])
					}
				}
			}
		})
	}
}

// TestSnapshotKeepsNoMessages checks the documented difference: a
// restored state has an empty conversation, the rest is the same.
func TestSnapshotKeepsNoMessages(t *testing.T) {
	for _, tr := range loadTranscripts(t) {
		if tr.name != "final_answer" {
			continue
		}
		s := loop.Replay(tr.events)
		if len(s.Messages) == 0 {
			t.Fatal("the transcript has no conversation")
		}
		r := roundTrip(t, s)
		if len(r.Messages) != 0 || r.Steps != s.Steps || r.Status != s.Status || r.Done != s.Done {
			t.Fatalf("restored %+v from %+v", r, s)
		}
		return
	}
	t.Fatal("no final_answer transcript")
}

// TestStateRoundTrip cuts every transcript after each of its events and
// compares the whole state decoded from the state's encoding there with
// the state itself, conversation aside, field by field, unexported ones
// included: a piece of the decider's memory that its encoding does not
// carry (a new field forgotten in MarshalJSON) fails it.
func TestStateRoundTrip(t *testing.T) {
	for _, tr := range loadTranscripts(t) {
		t.Run(tr.name, func(t *testing.T) {
			for k := 0; k <= len(tr.events); k++ {
				s := loop.Replay(tr.events[:k])
				got := roundTrip(t, s)
				want := *s
				want.Messages = nil
				if !reflect.DeepEqual(got, &want) {
					t.Fatalf("cut after %d events: decoded\n%#v\nwant\n%#v", k, got, &want)
				}
			}
		})
	}
}

// TestDecodedStateSortsCallIDs: a state's call IDs are kept sorted and
// looked up by bisection, so a decoded state must sort them whatever order
// its JSON lists them in (a hand-written or foreign encoder's), or a call
// that reuses an ID could slip through.
func TestDecodedStateSortsCallIDs(t *testing.T) {
	var tr *transcript
	for _, c := range loadTranscripts(t) {
		if c.name == "protocol_reused_id" {
			tr = &c
		}
	}
	if tr == nil {
		t.Fatal("no transcript protocol_reused_id")
	}
	// The state before the turn that reuses c1, with its call IDs listed
	// out of order and one twice.
	s := loop.Replay(tr.events[:6])
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(snapshotJSON(t, s), &fields); err != nil {
		t.Fatal(err)
	}
	if got := string(fields["call_ids"]); got != `["c1"]` {
		t.Fatalf("call_ids = %s, want [\"c1\"]", got)
	}
	fields["call_ids"] = json.RawMessage(`["zz","c1","a0","zz"]`)
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	var decoded loop.State
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	eff := loop.Next(&decoded, &tr.events[6])
	if eff.Kind != loop.Stop || eff.Status != loop.ProtocolError || !strings.Contains(eff.Detail, "c1 was already used") {
		t.Fatalf("reused ID after decoding: %+v, want a protocol_error stop naming c1", eff)
	}
	if got := string(snapshotJSON(t, &decoded)); !strings.Contains(got, `"call_ids":["a0","c1","zz"]`) {
		t.Errorf("encoded again: %s, want call_ids sorted without repeats", got)
	}
}

// TestDecodedStateSortsSeen: the hashes of the results the model has seen
// are kept sorted and bisected too, so a decoded state must sort them, or
// a turn that repeats a result would count as news and a spin go unseen.
func TestDecodedStateSortsSeen(t *testing.T) {
	var tr *transcript
	for _, c := range loadTranscripts(t) {
		if c.name == "spin_no_new_information" {
			tr = &c
		}
	}
	if tr == nil {
		t.Fatal("no transcript spin_no_new_information")
	}
	// The state before the third turn's results, which repeat the first
	// one, with hashes it has not seen around the one it has.
	s := loop.Replay(tr.events[:15])
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(snapshotJSON(t, s), &fields); err != nil {
		t.Fatal(err)
	}
	var seen []uint64
	if err := json.Unmarshal(fields["seen"], &seen); err != nil || len(seen) != 1 || seen[0] == 0 || seen[0] == 1<<64-1 {
		t.Fatalf("seen = %s (%v), want one hash", fields["seen"], err)
	}
	fields["seen"] = json.RawMessage(fmt.Sprintf("[%d,%d,0,%d]", uint64(1<<64-1), seen[0], uint64(1<<64-1)))
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	var decoded loop.State
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	var last loop.Effect
	for i := 15; i < 18; i++ {
		last = loop.Next(&decoded, &tr.events[i])
	}
	if last.Kind != loop.Stop || last.Status != loop.SpinDetected {
		t.Fatalf("after decoding: %+v, want a spin_detected stop", last)
	}
}
