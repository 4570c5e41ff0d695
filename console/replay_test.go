package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/replay"
)

// readsOnly is an allowlist without the order desk's writes.
var readsOnly = policy.Func(func(_ context.Context, req policy.Request) (policy.Decision, error) {
	switch req.Call.Name {
	case orders.QueryOrder, orders.TrackShipment, orders.ListOrders:
		return policy.Decision{Verdict: policy.Allow, Rule: "allowlist"}, nil
	}
	return policy.Decision{Verdict: policy.NotAllowed, Rule: "allowlist", Reason: "not on the allowlist"}, nil
})

// replayReadsOnly replays a sandbox run with the allowlist.
func replayReadsOnly(ctx context.Context, events []loop.Event) (*replay.Report, error) {
	if _, ok := orders.LookupSession(events[0].Start.SessionID); !ok {
		return nil, fmt.Errorf("not a sandbox run: %w", console.ErrNotHere)
	}
	reg, err := orders.Tools(orders.NewBook())
	if err != nil {
		return nil, err
	}
	return replay.Run(ctx, events, replay.Config{Tools: reg, Policy: readsOnly})
}

// TestReplayView: a run's replay page and API show the first decision
// that differs, recorded beside new with the call ID, and how each run
// ended; a run that does not change says so.
func TestReplayView(t *testing.T) {
	e := newEnv(t, func(o *console.Options) { o.Replay = replayReadsOnly })
	parallel, normal := e.scenario("parallel"), e.scenario("normal")

	var doc struct {
		Equal      bool               `json:"equal"`
		NewStatus  string             `json:"new_status"`
		Difference *replay.Difference `json:"difference"`
	}
	e.getJSON("/api/runs/"+parallel+"/replay", &doc)
	if doc.Equal || doc.Difference == nil || doc.Difference.Aspect != replay.Authorization ||
		doc.Difference.Calls[0].CallID != "call_r1" || doc.NewStatus != string(loop.ToolNotAllowed) {
		t.Fatalf("parallel: %+v", doc)
	}
	resp, body := e.do(req{path: "/runs/" + parallel + "/replay", token: aliceToken})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-equal="false"`) ||
		!strings.Contains(body, `<tr data-call-id="call_r1"><td><code>call_r1</code></td><td><code>refund_order</code></td><td>allow (none)</td><td>not_allowed (allowlist): not on the allowlist</td></tr>`) {
		t.Fatalf("parallel page: %d\n%s", resp.StatusCode, body)
	}
	// The run's own page leads to its replay.
	if resp, body := e.do(req{path: "/runs/" + parallel, token: aliceToken}); resp.StatusCode != http.StatusOK ||
		!strings.Contains(body, `<a href="/runs/`+parallel+`/replay" data-testid="replay-link">`) {
		t.Errorf("run page without a link to its replay: %d\n%s", resp.StatusCode, body)
	}
	doc.Difference = nil
	e.getJSON("/api/runs/"+normal+"/replay", &doc)
	if !doc.Equal || doc.Difference != nil {
		t.Errorf("normal: %+v", doc)
	}
	if resp, body := e.do(req{path: "/api/runs/nope/replay", token: aliceToken}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown run: %d %s", resp.StatusCode, body)
	}
}

// TestReplayViewOff: a console without a replay configuration says so.
func TestReplayViewOff(t *testing.T) {
	e := newEnv(t, nil)
	id := e.scenario("normal")
	resp, body := e.do(req{path: "/api/runs/" + id + "/replay", token: aliceToken})
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "without a replay configuration") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
	// Its run pages offer no replay.
	if resp, body := e.do(req{path: "/runs/" + id, token: aliceToken}); resp.StatusCode != http.StatusOK || strings.Contains(body, "replay-link") {
		t.Errorf("run page of a console without replay: %d, link shown: %v", resp.StatusCode, strings.Contains(body, "replay-link"))
	}
}
