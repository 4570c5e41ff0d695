package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/replay"
	"github.com/toolloop/toolloop/replay/replaytest"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/trace"
)

// record re-records the sandbox's runs into testdata/sandbox: go test
// ./replay -run TestRecordSandbox -record.
var record = flag.Bool("record", false, "record the sandbox's runs into testdata/sandbox")

const sandboxDir = "testdata/sandbox"

// TestRecordSandbox records every sandbox scenario's run, the interactive
// one approved and resumed, as the logs the other tests replay. It runs
// only with -record: the recorded files are the tests' fixtures.
func TestRecordSandbox(t *testing.T) {
	if !*record {
		t.Skip("records only with -record")
	}
	ctx := context.Background()
	for _, s := range orders.Scenarios() {
		var res *loop.Result
		if s.Interactive {
			st := store.NewMemory()
			book := orders.NewBook()
			opts := orders.RunOptions{Store: st, Book: book, Ledger: st, RunID: "run-" + s.Name}
			first, _, err := s.RunWith(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			answer := loop.Confirmation{CallID: first.Pending[0].CallID, Approved: true, By: "ops-1", Note: "checked the photo"}
			if err := loop.Decide(ctx, st, first.RunID, answer, time.Now()); err != nil {
				t.Fatal(err)
			}
			if res, _, err = s.Resume(ctx, first.RunID, opts); err != nil {
				t.Fatal(err)
			}
		} else {
			var err error
			if res, _, err = s.Run(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(sandboxDir, s.Name+".jsonl"), encodeLog(t, res.Events), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// encodeLog is a log as JSON Lines, whole (not redacted).
func encodeLog(t testing.TB, events []loop.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range events {
		if err := enc.Encode(&events[i]); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// readLog reads a recorded sandbox run.
func readLog(t testing.TB, name string) []loop.Event {
	t.Helper()
	f, err := os.Open(filepath.Join(sandboxDir, name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := trace.ReadLog(f)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// sandboxTools are the order desk's tools over a fresh book, which a
// replay never touches.
func sandboxTools(t testing.TB) *tool.Registry {
	t.Helper()
	reg, err := orders.Tools(orders.NewBook())
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// sameConfig is the configuration scenario s ran with.
func sameConfig(t testing.TB, s orders.Scenario) replay.Config {
	return replay.Config{Tools: sandboxTools(t), Policy: s.Policy}
}

// TestSandboxSameConfig replays every sandbox scenario's recorded run
// with the configuration it ran with: no difference, and the new run
// ends as the recorded one did, with the same log but for its stamps.
func TestSandboxSameConfig(t *testing.T) {
	reached := map[loop.Status]bool{}
	t.Cleanup(func() {
		for _, st := range loop.Statuses() {
			if !reached[st] {
				t.Errorf("no recorded sandbox run ends with %s", st)
			}
		}
	})
	for _, s := range orders.Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			events := readLog(t, s.Name)
			rep, err := replay.Run(context.Background(), events, sameConfig(t, s))
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			rep.Format(&out)
			if !rep.Equal() || rep.Gap != nil {
				t.Fatalf("replay with the same configuration differs:\n%s", out.String())
			}
			want := s.Want
			if s.Interactive {
				want = loop.FinalAnswer // recorded approved and resumed
			}
			reached[rep.NewStatus] = true
			if rep.NewStatus != want || rep.RecordedStatus != want {
				t.Errorf("status: recorded %s, new %s; want %s", rep.RecordedStatus, rep.NewStatus, want)
			}
			if want := withoutResumes(events); len(rep.Events) != len(want) {
				t.Errorf("new log has %d events, recorded %d (resumes aside)", len(rep.Events), len(want))
			}
			for i := range rep.Events {
				if i < len(events) && rep.Events[i].Kind != withoutResumes(events)[i].Kind {
					t.Errorf("event %d: new %s, recorded %s", i+1, rep.Events[i].Kind, events[i].Kind)
				}
			}
		})
	}
}

// withoutResumes is a log without the resumes that only mark where a
// driver picked it up (a replay keeps those that follow a pause).
func withoutResumes(events []loop.Event) []loop.Event {
	var out []loop.Event
	for i, ev := range events {
		if ev.Kind == loop.Resumed && (i == 0 || events[i-1].Kind != loop.ConfirmationDecided) {
			continue
		}
		out = append(out, ev)
	}
	return out
}

// scenarioOf is the sandbox scenario a recorded run played.
func scenarioOf(t testing.TB, events []loop.Event) orders.Scenario {
	t.Helper()
	s, ok := orders.LookupSession(events[0].Start.SessionID)
	if !ok {
		t.Fatalf("run %s is not a sandbox run (session %q)", events[0].Start.RunID, events[0].Start.SessionID)
	}
	return s
}

// TestSandboxPinned pins the sandbox's recorded runs with replaytest:
// each replayed with the configuration it ran with reports no difference.
func TestSandboxPinned(t *testing.T) {
	replaytest.DirWith(t, sandboxDir, func(events []loop.Event) replay.Config {
		return sameConfig(t, scenarioOf(t, events))
	})
}

// readsOnly allows the order desk's reads and refuses every other tool:
// an allowlist without the writes.
var readsOnly = policy.Func(func(_ context.Context, req policy.Request) (policy.Decision, error) {
	switch req.Call.Name {
	case orders.QueryOrder, orders.TrackShipment, orders.ListOrders:
		return policy.Decision{Verdict: policy.Allow, Rule: "allowlist", Reason: "on the allowlist"}, nil
	}
	return policy.Decision{Verdict: policy.NotAllowed, Rule: "allowlist", Reason: "tool " + req.Call.Name + " is not on the allowlist"}, nil
})

// changes are the changed configurations the sandbox's runs are replayed
// with, and the runs each must change: those, and only those, report a
// difference, pinned in testdata/changed/NAME.
var changes = []struct {
	name    string
	config  func(t testing.TB, s orders.Scenario, start *loop.StartInfo) replay.Config
	changed []string
}{
	{
		name: "allowlist",
		config: func(t testing.TB, s orders.Scenario, _ *loop.StartInfo) replay.Config {
			cfg := sameConfig(t, s)
			if s.Policy != nil {
				cfg.Policy = policy.Chain(readsOnly, s.Policy)
			} else {
				cfg.Policy = readsOnly
			}
			return cfg
		},
		changed: []string{"compensation_failed", "confirm_refund", "confirmation_required", "parallel", "permission_denied",
			"refund_retry", "refund_reversed", "refund_twice", "refund_unknown"},
	},
	{
		name: "max_steps_2",
		config: func(t testing.TB, s orders.Scenario, start *loop.StartInfo) replay.Config {
			cfg := sameConfig(t, s)
			b := start.Budgets
			b.MaxSteps = 2
			cfg.Budgets = &b
			return cfg
		},
		changed: []string{"canceled", "confirm_refund", "confirmation_required", "cost_budget_exceeded", "invalid_output",
			"loop_forever", "normal", "permission_denied", "refund_twice", "spin_detected", "tool_timeout"},
	},
	{
		name: "order_schema",
		config: func(t testing.TB, s orders.Scenario, _ *loop.StartInfo) replay.Config {
			cfg := sameConfig(t, s)
			cfg.OutputSchema = orders.OrderStatusSchema
			return cfg
		},
		changed: []string{"confirm_refund", "normal", "not_found", "parallel", "refund_retry", "refund_reversed", "refund_twice"},
	},
}

// TestSandboxChanged replays the sandbox's runs with a changed allowlist,
// a lower budget and a stricter output schema: the runs that change
// report their first differing decision, as pinned, and only those.
func TestSandboxChanged(t *testing.T) {
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			config := func(events []loop.Event) replay.Config {
				return c.config(t, scenarioOf(t, events), events[0].Start)
			}
			replaytest.GoldenDir(t, sandboxDir, filepath.Join("testdata/changed", c.name), config)
			var changed []string
			for _, s := range orders.Scenarios() {
				events := readLog(t, s.Name)
				rep, err := replay.Run(context.Background(), events, config(events))
				if err != nil {
					t.Fatal(err)
				}
				if !rep.Equal() {
					changed = append(changed, s.Name)
				}
			}
			slices.Sort(changed)
			if !slices.Equal(changed, c.changed) {
				t.Errorf("runs that differ: %q\nwant %q", changed, c.changed)
			}
		})
	}
}

// TestCompensationDiffers replays refund_reversed, whose refund was
// undone by reverse_refund when the voucher failed, with a refund_order
// that declares no compensation: the replay reports the difference, where
// the refund is validated, as one of compensation, naming the recorded
// undo and its absence, and goes on to the new run's end, where the refund
// is left for a person (compensation_failed) without anything run.
func TestCompensationDiffers(t *testing.T) {
	events := readLog(t, "refund_reversed")
	var keep []*tool.Tool
	for _, tl := range sandboxTools(t).Tools() {
		if tl.Name() != orders.RefundOrder {
			keep = append(keep, tl)
		}
	}
	type refundRef struct {
		OrderID string `json:"order_id"`
		Reason  string `json:"reason,omitempty"`
	}
	bare, err := tool.New(tool.Spec[refundRef]{Name: orders.RefundOrder, Description: "Refund an order.", Effect: tool.Write,
		IdempotencyKey: func(in refundRef) string { return "refund:" + in.OrderID }},
		func(context.Context, refundRef) (string, error) {
			t.Error("the replay ran refund_order")
			return "", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(append(keep, bare)...)
	if err != nil {
		t.Fatal(err)
	}
	var s orders.Scenario
	for _, sc := range orders.Scenarios() {
		if sc.Name == "refund_reversed" {
			s = sc
		}
	}
	rep, err := replay.Run(context.Background(), events, replay.Config{Tools: reg, Policy: s.Policy})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Format(&out)
	if rep.Diff == nil || rep.Diff.Aspect != replay.Compensation || len(rep.Diff.Calls) != 1 ||
		!strings.Contains(rep.Diff.Calls[0].Recorded, "undone by reverse_refund") ||
		!strings.Contains(rep.Diff.Calls[0].New, "no compensation") {
		t.Fatalf("want a compensation difference, reverse_refund recorded, none new:\n%s", out.String())
	}
	if rep.Gap != nil || rep.NewStatus != loop.CompensationFailed {
		t.Errorf("want the new run to end compensation_failed with no gap:\n%s", out.String())
	}
}
