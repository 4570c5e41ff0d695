package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserCompensation: in a real browser, the page of the sandbox's
// refund_reversed run shows its writes (undone) and its compensation, the
// refund undone by reverse_refund; the stop line says the writes.
func TestBrowserCompensation(t *testing.T) {
	browser := startBrowser(t)
	shots := screenshotDir(t)
	e := newEnv(t, nil)
	run := e.scenario("refund_reversed")
	tb := newTab(t, browser, e.ts.URL)
	tb.signIn("/runs/"+run, "alice", aliceToken)
	for _, hook := range []string{"writes", "compensations", "undo", "timeline"} {
		tb.do("the run page's "+hook, chromedp.WaitVisible(chromedp.CSS(`[data-testid="`+hook+`"]`)))
	}
	if got := eval[string](tb, `document.querySelector('[data-testid="writes"]').dataset.outcome`); got != "undone" {
		t.Errorf("writes outcome %q, want undone", got)
	}
	states := eval[[]string](tb, `Array.from(document.querySelectorAll('[data-testid="undo"]')).map(function (r) { return r.dataset.callId + " " + r.dataset.state + " " + r.cells[2].textContent; })`)
	if len(states) != 1 || states[0] != "call_r1 undone reverse_refund" {
		t.Errorf("compensating calls %q, want call_r1 undone by reverse_refund", states)
	}
	if stop := eval[string](tb, `document.querySelector('[data-testid="run-status"]').textContent`); !strings.Contains(stop, `writes="undone: undone refund_order call_r1`) {
		t.Errorf("stop line %q", stop)
	}
	if n := eval[int](tb, `Array.from(document.querySelectorAll('[data-testid="timeline"] text')).filter(function (t) { return t.textContent === "compensate"; }).length`); n != 1 {
		t.Errorf("the timeline has %d compensate spans, want 1", n)
	}
	shots.take(tb, "compensation")
	tb.clean()
}
