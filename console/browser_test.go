package console_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/toolloop/toolloop/console/consoletest"
	"github.com/toolloop/toolloop/loop"
)

// The browser tests drive the console in a real browser: headless
// Chromium (Debian's chromium package; .ci/run installs it and exports
// TOOLLOOP_CHROMIUM). Without one they are skipped, except under CI=true,
// where a missing browser is a failure: CI must run them.
//
// With TOOLLOOP_SCREENSHOTS=DIR they also write PNGs of the main pages
// into DIR (docs/screenshots holds the committed ones); a path relative
// to the repository's root, as docs/screenshots is, works from here too.

// browserTimeout bounds each browser test (and starting the browser).
const browserTimeout = 30 * time.Second

// chromiumPath returns the browser to drive, or skips (fails under CI).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TOOLLOOP_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("TOOLLOOP_CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium for the browser tests: CI must run them (install Debian's chromium package, or set TOOLLOOP_CHROMIUM)")
	}
	t.Skip("no Chromium (set TOOLLOOP_CHROMIUM or put chromium on PATH; on Debian: apt-get install chromium): the browser tests are skipped")
	return ""
}

// startBrowser starts headless Chromium for t and its subtests; it is
// stopped, with every goroutine chromedp started, when t ends.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	var out syncBuffer
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900), chromedp.CombinedOutput(&out))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		// Cancel closes the browser and waits for it, so that goleak sees
		// none of chromedp's goroutines left.
		if err := chromedp.Cancel(bctx); err != nil {
			t.Logf("closing the browser: %v", err)
		}
		cancelBrowser()
		cancelAlloc()
	})
	// The first Run starts the browser and binds it to bctx (not to a
	// context with a deadline); the start is bounded by a timer instead.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(bctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("starting %s: %v\n%s", path, err, out.String())
		}
	case <-time.After(browserTimeout):
		cancelBrowser()
		<-started
		t.Fatalf("%s did not start in %v\n%s", path, browserTimeout, out.String())
	}
	return bctx
}

// syncBuffer is the browser's output, for the message of a failed start.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tab is one browser tab in a browser context of its own (its own
// cookies: a person of their own), bounded by browserTimeout.
type tab struct {
	t   *testing.T
	ctx context.Context
	// base is the console's URL.
	base string

	mu      sync.Mutex
	dialogs []string
}

func newTab(t *testing.T, browser context.Context, base string) *tab {
	t.Helper()
	tctx, cancelTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	// The first Run opens the tab and binds it to tctx; later ones use
	// ctx, which bounds the test.
	if err := chromedp.Do(tctx); err != nil {
		cancelTab()
		t.Fatalf("new tab: %v", err)
	}
	ctx, cancel := context.WithTimeout(tctx, browserTimeout)
	t.Cleanup(func() {
		cancel()
		if err := chromedp.Cancel(tctx); err != nil {
			t.Logf("closing the tab: %v", err)
		}
		cancelTab()
	})
	tb := &tab{t: t, ctx: ctx, base: base}
	// Every page records the Content-Security-Policy violations it meets:
	// a script or element that model output smuggled in would be one. The
	// recorder is the browser's, not the page's, so the CSP does not apply
	// to it.
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.__csp = []; document.addEventListener("securitypolicyviolation", function (e) { window.__csp.push(e.violatedDirective + " " + e.blockedURI); });`,
	})
	if err != nil {
		t.Fatalf("new tab: %v", err)
	}
	// A dialog (alert) is what a script of an XSS payload would open. It
	// is recorded, and dismissed so that the page goes on (a dialog stops
	// its scripts); the listener may not call the browser itself.
	var dismiss sync.WaitGroup
	t.Cleanup(dismiss.Wait)
	err = chromedp.Listen(ctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			tb.mu.Lock()
			tb.dialogs = append(tb.dialogs, string(d.Type)+": "+d.Message)
			tb.mu.Unlock()
			dismiss.Go(func() {
				chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{})
			})
		}
	})
	if err != nil {
		t.Fatalf("new tab: %v", err)
	}
	return tb
}

// do runs actions, failing the test on an error.
func (tb *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// navigating runs actions that load a page and returns its response.
func (tb *tab) navigating(what string, actions ...chromedp.Action[chromedp.Void]) *network.Response {
	tb.t.Helper()
	resp, err := chromedp.RunResponse(tb.ctx, actions...)
	if err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
	return resp
}

// open loads the console's page at path and returns its response.
func (tb *tab) open(path string) *network.Response {
	tb.t.Helper()
	resp, err := chromedp.Run(tb.ctx, chromedp.NavigateResponse(tb.base+path))
	if err != nil {
		tb.t.Fatalf("open %s: %v", path, err)
	}
	return resp
}

// eval evaluates a JavaScript expression into a value of type T.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text returns the visible text of the first element sel matches.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		tb.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// location returns the page's URL, without the console's base.
func (tb *tab) location() string {
	tb.t.Helper()
	loc, err := chromedp.Run(tb.ctx, chromedp.Location())
	if err != nil {
		tb.t.Fatalf("location: %v", err)
	}
	return strings.TrimPrefix(loc, tb.base)
}

// signIn signs in with token through the sign-in form the console sends a
// browser to, from path, and checks that it lands on path again.
func (tb *tab) signIn(path, name, token string) {
	tb.t.Helper()
	tb.open(path)
	if loc := tb.location(); !strings.HasPrefix(loc, "/signin?next=") {
		tb.t.Fatalf("opening %s without a session went to %s, want the sign-in page", path, loc)
	}
	resp := tb.navigating("sign in",
		chromedp.SendKeys(chromedp.CSS(`[data-testid="signin-token"]`), token),
		chromedp.Click(chromedp.CSS(`[data-testid="signin-submit"]`)))
	if resp.Status != http.StatusOK {
		tb.t.Fatalf("sign in: %d %s", resp.Status, resp.URL)
	}
	if loc := tb.location(); loc != path {
		tb.t.Fatalf("signed in at %s, want back to %s", loc, path)
	}
	if who := tb.text(`[data-testid="user"]`); who != name {
		tb.t.Fatalf("signed in as %q, want %s", who, name)
	}
}

// clean checks that no page of the tab met a CSP violation or opened a
// dialog.
func (tb *tab) clean() {
	tb.t.Helper()
	if v := eval[[]string](tb, `window.__csp`); len(v) > 0 {
		tb.t.Errorf("Content-Security-Policy violations on %s: %v", tb.location(), v)
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.dialogs) > 0 {
		tb.t.Errorf("dialogs opened: %v", tb.dialogs)
	}
}

// shots writes screenshots where TOOLLOOP_SCREENSHOTS says, if it does.
type shots struct{ dir string }

func screenshotDir(t *testing.T) shots {
	t.Helper()
	dir := os.Getenv("TOOLLOOP_SCREENSHOTS")
	if dir == "" {
		return shots{}
	}
	if !filepath.IsAbs(dir) {
		// Relative to the repository's root: the tests run in console/.
		dir = filepath.Join("..", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return shots{dir: dir}
}

// take writes the tab's whole page as DIR/name.png.
func (s shots) take(tb *tab, name string) {
	tb.t.Helper()
	if s.dir == "" {
		return
	}
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// rows returns the runs list's rows as run ID -> data-status.
func (tb *tab) rows() map[string]string {
	tb.t.Helper()
	pairs := eval[[][2]string](tb, `Array.from(document.querySelectorAll('[data-testid="run-row"]')).map(function (r) { return [r.dataset.runId, r.dataset.status + "/" + r.dataset.pending]; })`)
	out := map[string]string{}
	for _, p := range pairs {
		out[p[0]] = p[1]
	}
	return out
}

// TestBrowser drives the console in headless Chromium: one browser, each
// case in a browser context (cookies) of its own.
func TestBrowser(t *testing.T) {
	browser := startBrowser(t)
	shots := screenshotDir(t)

	// A person signs in with the form, finds the paused run in the list,
	// approves its call with a note, and sees it finish, under their name.
	t.Run("Approve", func(t *testing.T) {
		e := newEnv(t, nil)
		done := e.scenario("normal")
		paused := e.scenario("confirmation_required")
		tb := newTab(t, browser, e.ts.URL)
		tb.signIn("/runs", "alice", aliceToken)

		rows := tb.rows()
		if rows[done] != "final_answer/0" || rows[paused] != "confirmation_required/1" || len(rows) != 2 {
			t.Fatalf("runs list rows (status/pending): %v; want %s final_answer/0 and %s confirmation_required/1", rows, done, paused)
		}
		tb.navigating("open the paused run", chromedp.Click(chromedp.CSS(`[data-testid="run-row"][data-run-id="`+paused+`"] a`)))
		if loc := tb.location(); loc != "/runs/"+paused {
			t.Fatalf("the row's link went to %s", loc)
		}
		if st := eval[string](tb, `document.querySelector('[data-testid="run-status"]').dataset.status`); st != "confirmation_required" {
			t.Fatalf("the paused run's page says %s", st)
		}
		note := "customer is right <b>really</b>"
		resp := tb.navigating("approve",
			chromedp.SendKeys(chromedp.CSS(`[data-testid="decide-call_r1"] [data-testid="note"]`), note),
			chromedp.Click(chromedp.CSS(`[data-testid="approve-call_r1"]`)))
		if resp.Status != http.StatusOK || tb.location() != "/runs/"+paused {
			t.Fatalf("approve: %d at %s, want 200 at the run's page", resp.Status, tb.location())
		}
		// The console waits for the resume it starts (briefly): the page
		// it shows next says how the run ended. The wait is bounded by
		// the tab's deadline.
		tb.do("the run finishes", chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-status"][data-status="final_answer"]`)))
		if flash := tb.text(`[data-testid="flash"]`); !strings.Contains(flash, "approved call call_r1 of run "+paused+" (by alice)") {
			t.Errorf("the message after approving: %q", flash)
		}
		if calls := tb.text(`[data-testid="calls"]`); !strings.Contains(calls, "approved by alice: "+note) {
			t.Errorf("the policy decisions do not show alice's approval and note:\n%s", calls)
		}
		if n := eval[int](tb, `document.querySelectorAll('[data-testid^="approve-"]').length`); n != 0 {
			t.Errorf("the finished run's page still offers %d approve button(s)", n)
		}
		got := e.confirmations(paused)
		if len(got) != 1 || got[0] != (loop.Confirmation{CallID: "call_r1", Approved: true, By: "alice", Note: note}) {
			t.Errorf("the log records %+v", got)
		}
		evs := e.events(paused)
		if last := evs[len(evs)-1]; last.Kind != loop.Stopped || last.Status != loop.FinalAnswer {
			t.Errorf("the run's log ends with %s %s", last.Kind, last.Status)
		}
		// The runs list says so too.
		tb.open("/runs")
		if rows := tb.rows(); rows[paused] != "final_answer/0" {
			t.Errorf("runs list after approving: %v", rows)
		}
		tb.clean()
	})

	// A model answer (and a customer's message) that is HTML shows as
	// text: written out as it came, no element made of it, no script run.
	t.Run("Escaping", func(t *testing.T) {
		e := newEnv(t, nil)
		answer := `<script>window.__pwned = "script"; alert("pwned")</script><img src=x onerror="window.__pwned='img'; alert(1)">`
		ask := `<b id="injected" onmouseover="alert(2)">hi</b>`
		run, err := consoletest.Answer(context.Background(), e.mem, ask, answer)
		if err != nil {
			t.Fatal(err)
		}
		tb := newTab(t, browser, e.ts.URL)
		tb.signIn("/runs/"+run, "alice", aliceToken)
		texts := eval[[]string](tb, `Array.from(document.querySelectorAll('[data-testid="message"] pre.text')).map(function (p) { return p.textContent; })`)
		if !containsString(texts, answer) || !containsString(texts, ask) {
			t.Errorf("the messages' text is %q; want the answer %q and the ask %q as written", texts, answer, ask)
		}
		// Visible, as text, on the page.
		if body := tb.text(`main`); !strings.Contains(body, answer) {
			t.Errorf("the page's visible text lacks the answer as written")
		}
		if pwned := eval[bool](tb, `window.__pwned !== undefined`); pwned {
			t.Errorf("the payload's script ran: window.__pwned = %s", eval[string](tb, `String(window.__pwned)`))
		}
		for sel, want := range map[string]int{
			"script":                           1, // the console's own
			`script[src="/static/console.js"]`: 1,
			`img`:                              0,
			`#injected`:                        0,
			`[onerror], [onmouseover]`:         0,
		} {
			if n := eval[int](tb, `document.querySelectorAll('`+sel+`').length`); n != want {
				t.Errorf("%d element(s) match %s, want %d", n, sel, want)
			}
		}
		tb.clean()
	})

	// Without a session nothing is shown and nothing can be approved; a
	// form posted from another origin, or one stripped of its CSRF token,
	// is refused even from a signed-in browser. The run stays paused.
	t.Run("Refused", func(t *testing.T) {
		e := newEnv(t, nil)
		run := e.scenario("confirmation_required")
		approve := e.ts.URL + "/runs/" + run + "/calls/call_r1/approve"
		// Another site's page with a form that approves the call.
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><title>cheap watches</title><form method="post" action="%s"><input name="note" value="forged"><button id="go" type="submit">win</button></form>`, approve)
		}))
		t.Cleanup(evil.Close)
		evilURL, _ := url.Parse(evil.URL)
		// The same server by name: another site to the browser as well
		// (localhost, not 127.0.0.1), so SameSite=Strict holds the cookie.
		otherSite := "http://localhost:" + evilURL.Port()

		anon := newTab(t, browser, e.ts.URL)
		resp := anon.open("/runs/" + run)
		if loc := anon.location(); resp.Status != http.StatusOK || loc != "/signin?next="+url.QueryEscape("/runs/"+run) {
			t.Errorf("the run's page without a session: %d at %s, want the sign-in page", resp.Status, loc)
		}
		if n := eval[int](anon, `document.querySelectorAll('[data-testid="pending"], [data-testid^="approve-"]').length`); n != 0 ||
			strings.Contains(anon.text("body"), "refund_order") {
			t.Errorf("the sign-in page shows the run")
		}
		anon.do("open the other site", chromedp.Navigate(evil.URL))
		if resp := anon.navigating("forged approve without a session", chromedp.Click(chromedp.CSS("#go"))); resp.Status != http.StatusUnauthorized {
			t.Errorf("a forged approve without a session: %d, want 401", resp.Status)
		}

		alice := newTab(t, browser, e.ts.URL)
		alice.signIn("/runs/"+run, "alice", aliceToken)
		// Same site, another origin: the cookie goes along, the CSRF
		// token cannot.
		alice.do("open the other origin", chromedp.Navigate(evil.URL))
		if resp := alice.navigating("forged approve from another origin", chromedp.Click(chromedp.CSS("#go"))); resp.Status != http.StatusForbidden {
			t.Errorf("a forged approve from another origin (signed in): %d, want 403", resp.Status)
		}
		// Another site: the browser does not even send the cookie.
		alice.do("open the other site", chromedp.Navigate(otherSite))
		if resp := alice.navigating("forged approve from another site", chromedp.Click(chromedp.CSS("#go"))); resp.Status != http.StatusUnauthorized {
			t.Errorf("a forged approve from another site (signed in): %d, want 401", resp.Status)
		}
		// The console's own form, with its CSRF token taken out.
		alice.open("/runs/" + run)
		alice.do("take the CSRF token out", chromedp.Evaluate[chromedp.Void](
			`document.querySelector('[data-testid="decide-call_r1"] input[name="csrf"]').remove()`))
		resp = alice.navigating("approve without the CSRF token", chromedp.Click(chromedp.CSS(`[data-testid="approve-call_r1"]`)))
		if resp.Status != http.StatusForbidden || !strings.Contains(alice.text("body"), "CSRF token is missing or wrong") {
			t.Errorf("approve without the CSRF token: %d, want 403 saying why", resp.Status)
		}

		if got := e.confirmations(run); len(got) != 0 {
			t.Fatalf("a refused approve was recorded: %+v", got)
		}
		alice.open("/runs/" + run)
		if st := eval[string](alice, `document.querySelector('[data-testid="run-status"]').dataset.status`); st != "confirmation_required" {
			t.Errorf("after the refusals the run is %s, want still confirmation_required", st)
		}
		alice.do("the approve button is still there", chromedp.WaitVisible(chromedp.CSS(`[data-testid="approve-call_r1"]`)))
	})

	// A paused run's page follows it live: an answer recorded elsewhere
	// appears in its events without a reload, then the run goes on and the
	// page shows how it ended.
	t.Run("Live", func(t *testing.T) {
		e := newEnv(t, nil)
		run := e.scenario("confirmation_required")
		tb := newTab(t, browser, e.ts.URL)
		tb.signIn("/runs/"+run, "alice", aliceToken)
		tb.do("the live view is on", chromedp.WaitVisible(chromedp.CSS(`#live`)))
		before := eval[int](tb, `document.querySelectorAll('#events li').length`)
		if before != len(e.events(run)) {
			t.Fatalf("the page lists %d events, the log has %d", before, len(e.events(run)))
		}
		// A mark that a reload would wipe out.
		tb.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__sameDocument = true`))
		// The stream starts after the page's last event (data-after), so
		// an answer recorded before it is open comes all the same.
		if err := loop.Decide(context.Background(), e.mem, run, loop.Confirmation{CallID: "call_r1", Approved: true, By: "carol"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		tb.do("the answer appears", chromedp.Poll[chromedp.Void](
			fmt.Sprintf(`document.querySelectorAll('#events li').length > %d`, before),
			chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(10*time.Second)))
		last := eval[string](tb, `document.querySelector('#events li:last-child').textContent`)
		if !strings.Contains(last, string(loop.ConfirmationDecided)) {
			t.Errorf("the new event reads %q, want %s", last, loop.ConfirmationDecided)
		}
		if !eval[bool](tb, `window.__sameDocument === true`) {
			t.Errorf("the page was reloaded to show the event")
		}
		tb.do("the status follows", chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-status"][data-status="answered"]`)))

		// The run goes on (resumed elsewhere); once it stops the page
		// draws itself again with the end.
		if _, err := consoletest.Backend(e.mem).Resume(context.Background(), run); err != nil {
			t.Fatal(err)
		}
		tb.do("the page shows the end", chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-status"][data-status="final_answer"]`)))
		if calls := tb.text(`[data-testid="calls"]`); !strings.Contains(calls, "approved by carol") {
			t.Errorf("the policy decisions after the run ended: %s", calls)
		}
		tb.clean()
	})

	// A run's token account, as a person sees it: a row per turn and per
	// clearing, the numbers aligned, the turn after a clearing marked.
	t.Run("Tokens", func(t *testing.T) {
		e := newEnv(t, nil)
		run, err := consoletest.Cached(context.Background(), e.mem)
		if err != nil {
			t.Fatal(err)
		}
		turns := 0
		for _, ev := range e.events(run) {
			if ev.Kind == loop.ModelResponded {
				turns++
			}
		}
		tb := newTab(t, browser, e.ts.URL)
		tb.signIn("/runs/"+run, "alice", aliceToken)
		tb.do("the token account", chromedp.WaitVisible(chromedp.CSS(`[data-testid="tokens"]`)))
		if n := eval[int](tb, `document.querySelectorAll('[data-testid="token-row"][data-what="turn"]').length`); n != turns {
			t.Errorf("%d turn rows, want %d", n, turns)
		}
		if n := eval[int](tb, `document.querySelectorAll('[data-testid="token-row"].miss-expected').length`); n == 0 {
			t.Errorf("no turn is marked as a cache miss a clearing explains")
		}
		if align := eval[string](tb, `getComputedStyle(document.querySelector('[data-testid="tokens"] td.n')).textAlign`); align != "right" {
			t.Errorf("the numbers are aligned %q, want right (is the stylesheet loaded?)", align)
		}
		if text := tb.text(`[data-testid="tokens"]`); !strings.Contains(text, "cleared 4 tool result(s)") {
			t.Errorf("the table's text lacks the clearing:\n%s", text)
		}
		shots.take(tb, "tokens")
		tb.clean()
	})

	// The main pages, as a person sees them (written to files when
	// TOOLLOOP_SCREENSHOTS asks).
	t.Run("Pages", func(t *testing.T) {
		e := newEnv(t, nil)
		for _, name := range []string{"normal", "unknown_tool", "spin_detected", "parallel", "refund_retry"} {
			e.scenario(name)
		}
		approved := e.scenario("confirmation_required")
		e.scenario("confirmation_required")
		if code, _, raw := e.decision(bobToken, approved, "call_r1", "approve", `{"note": "within policy"}`); code != http.StatusOK {
			t.Fatalf("approve: %d %s", code, raw)
		}
		tb := newTab(t, browser, e.ts.URL)
		tb.signIn("/runs", "alice", aliceToken)
		if rows := tb.rows(); len(rows) != 7 {
			t.Errorf("the runs list has %d rows, want 7", len(rows))
		}
		shots.take(tb, "runs")

		tb.open("/runs/" + approved)
		for _, hook := range []string{"run-status", "budgets", "message", "calls", "plans", "timeline", "events"} {
			tb.do("the run page's "+hook, chromedp.WaitVisible(chromedp.CSS(`[data-testid="`+hook+`"]`)))
		}
		if n := eval[int](tb, `document.querySelectorAll('[data-testid="timeline"] svg rect').length`); n == 0 {
			t.Errorf("the timeline draws no spans")
		}
		shots.take(tb, "run")

		tb.open("/approvals")
		if n := eval[int](tb, `document.querySelectorAll('[data-testid="pending"]').length`); n != 1 {
			t.Errorf("the approvals inbox lists %d calls, want 1", n)
		}
		shots.take(tb, "approvals")
		tb.clean()
	})
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
