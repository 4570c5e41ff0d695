package loop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
)

// A model may keep the requests it is given: each turn has a Request of
// its own, and the loop never changes one once sent. An observer may keep
// the events it is shown: they are immutable once appended.
func TestRequestsAndEventsMayBeKept(t *testing.T) {
	f := newFixture(t)
	script := llmtest.New(
		llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`), call("c2", "query_order", `{"id":"A2"}`)),
		llmtest.Calls(call("c3", "query_order", `{"id":"B3"}`)),
		llmtest.Text("done"))
	type kept struct {
		req  *llm.Request
		snap string
	}
	var reqs []kept
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, kept{req, string(b)})
		return script.Generate(ctx, req)
	})
	var seen []*loop.Event
	var snaps []string
	obs := loop.ObserverFunc(func(_ context.Context, ev *loop.Event) {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		seen, snaps = append(seen, ev), append(snaps, string(b))
	})
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Observer: obs}, user("q"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, k := range reqs {
		b, _ := json.Marshal(k.req)
		if string(b) != k.snap {
			t.Errorf("request %d changed after it was sent:\nthen %s\nnow  %s", i+1, k.snap, b)
		}
		if i > 0 && len(k.req.Messages) <= len(reqs[i-1].req.Messages) {
			t.Errorf("request %d has %d messages, request %d had %d", i+1, len(k.req.Messages), i, len(reqs[i-1].req.Messages))
		}
	}
	if len(seen) != len(res.Events) {
		t.Fatalf("observed %d events, the log has %d", len(seen), len(res.Events))
	}
	for i, ev := range seen {
		b, _ := json.Marshal(ev)
		if string(b) != snaps[i] {
			t.Errorf("event %d changed after it was appended:\nthen %s\nnow  %s", i+1, snaps[i], b)
		}
		if r, _ := json.Marshal(&res.Events[i]); string(r) != snaps[i] {
			t.Errorf("the result's event %d is not the one observed:\n%s\n%s", i+1, r, snaps[i])
		}
	}
}

// A pending call's arguments are the call's JSON, as the model sent them,
// not bytes encoded in base64.
func TestPendingArgumentsAreJSON(t *testing.T) {
	f := newFixture(t)
	model := llmtest.New(llmtest.Calls(call("c1", "refund_order", `{"id":"A1"}`)))
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: f.reg, Policy: policy.ConfirmWrites()}, user("refund"))
	mustStatus(t, res, err, loop.ConfirmationRequired)
	b, err := json.Marshal(res.Pending)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"arguments":{"id":"A1"}`) {
		t.Fatalf("pending calls encode as %s", b)
	}
}
