package loop

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
)

// randomEvent sets a random few of an event's fields, payloads included,
// sometimes more than an event of its kind would hold.
func randomEvent(rng *rand.Rand, seq int) Event {
	kinds := []EventKind{Started, ModelResponded, ModelFailed, CallsValidated, PolicyDecided,
		StagePlanned, StageFinished, Interrupted, Stopped, ConfirmationDecided, Resumed}
	ev := Event{Seq: seq, At: time.Unix(1700000000, rng.Int64N(1e9)), Kind: kinds[rng.IntN(len(kinds))]}
	for range 1 + rng.IntN(3) {
		switch rng.IntN(14) {
		case 0:
			ev.Start = &StartInfo{RunID: "r"}
		case 1:
			ev.Response = &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Text: "hi"}}
		case 2:
			ev.Latency = time.Duration(rng.Int64N(1e9))
		case 3:
			ev.Attempts = rng.IntN(4)
		case 4:
			ev.Failure = &Failure{Kind: FailDeadline, Message: "late"}
		case 5:
			ev.Checks = make([]CallCheck, rng.IntN(3))
			for i := range ev.Checks {
				ev.Checks[i].Key = rng.Uint64()
			}
		case 6:
			ev.Decisions = make([]policy.Decision, rng.IntN(3))
			for i := range ev.Decisions {
				ev.Decisions[i].Rule = "r"
			}
		case 7:
			ev.Plan = &executor.Plan{Stages: [][]int{{0}}}
		case 8:
			ev.Stage = rng.IntN(3)
		case 9:
			ev.Outcomes = make([]executor.Outcome, rng.IntN(3))
			for i := range ev.Outcomes {
				ev.Outcomes[i].Attempts = 1 + i
			}
		case 10:
			ev.Status = Statuses()[rng.IntN(len(Statuses()))]
		case 11:
			ev.Detail = "detail"
		case 12:
			ev.Confirmation = &Confirmation{CallID: "c"}
		case 13:
			// nil and empty slices differ: keep the difference.
			ev.Checks = []CallCheck{}
		}
	}
	return ev
}

// A compact log gives back exactly the events it was made from, or says
// that it cannot: over random logs of random events, never anything else.
func TestCompactLogGivesBackItsEvents(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	compacted := 0
	for round := range 3000 {
		events := make([]Event, rng.IntN(6))
		for i := range events {
			events[i] = randomEvent(rng, i+1)
		}
		if round%7 == 0 && len(events) > 0 {
			events[0].Seq = 5 // out of order: not compactable
		}
		want := make([]Event, len(events))
		copy(want, events)
		l, ok := compactLog(events, nil)
		if !ok {
			continue
		}
		compacted++
		if got := l.All(); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: the compact log gave back\n%+v\nfor\n%+v", round, got, want)
		}
		if l.Len() != len(want) {
			t.Fatalf("round %d: Len %d for %d events", round, l.Len(), len(want))
		}
	}
	if compacted < 300 {
		t.Fatalf("only %d of 3000 random logs were compacted: the test checks too little", compacted)
	}
}

// The logs of real runs are compact, and give back what the run did.
func TestRunLogsAreCompact(t *testing.T) {
	events := []Event{
		{Seq: 1, Kind: Started, Start: &StartInfo{RunID: "r"}},
		{Seq: 2, Kind: ModelResponded, Response: &llm.Response{}, Latency: time.Millisecond, Attempts: 1},
		{Seq: 3, Kind: CallsValidated, Checks: []CallCheck{{Known: true}}},
		{Seq: 4, Kind: PolicyDecided, Decisions: []policy.Decision{{Verdict: policy.Allow}}},
		{Seq: 5, Kind: StagePlanned, Plan: &executor.Plan{Stages: [][]int{{0}}}},
		{Seq: 6, Kind: StageFinished, Outcomes: []executor.Outcome{{Attempts: 1}}, Failure: &Failure{Kind: FailCanceled}},
		{Seq: 7, Kind: StageFinished, Stage: 1, Outcomes: []executor.Outcome{{Attempts: 2}}},
		{Seq: 8, Kind: ModelFailed, Failure: &Failure{Kind: FailModel}, Latency: time.Second, Attempts: 3},
		{Seq: 9, Kind: Interrupted, Failure: &Failure{Kind: FailDeadline}},
		{Seq: 10, Kind: Stopped, Status: DeadlineExceeded, Detail: "late"},
	}
	l, ok := compactLog(events, nil)
	if !ok {
		t.Fatal("a run's log was not compacted")
	}
	if got := l.All(); !reflect.DeepEqual(got, events) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, events)
	}
	// Its JSON is the events' JSON.
	a, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(events)
	if string(a) != string(b) {
		t.Fatalf("log JSON\n%s\nevents JSON\n%s", a, b)
	}
	var back EventLog
	if err := json.Unmarshal(a, &back); err != nil || back.Len() != len(events) {
		t.Fatalf("decoded %d events, %v", back.Len(), err)
	}
	c, _ := json.Marshal(back)
	if string(c) != string(a) {
		t.Fatalf("JSON after a round trip\n%s\nbefore\n%s", c, a)
	}
}

// All may be called from several goroutines at once; they all get the
// same events, built once.
func TestCompactLogAllConcurrently(t *testing.T) {
	events := []Event{{Seq: 1, Kind: Started, Start: &StartInfo{RunID: "r"}}, {Seq: 2, Kind: Stopped, Status: FinalAnswer}}
	l, ok := compactLog(events, nil)
	if !ok {
		t.Fatal("not compacted")
	}
	var wg sync.WaitGroup
	got := make([][]Event, 8)
	for i := range got {
		wg.Go(func() { got[i] = l.All() })
	}
	wg.Wait()
	for i := range got {
		if &got[i][0] != &got[0][0] {
			t.Fatal("All built the events more than once")
		}
	}
	var zero EventLog
	if zero.All() != nil || zero.Len() != 0 {
		t.Fatal("the zero log is not empty")
	}
}
