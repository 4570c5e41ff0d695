package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/console/consoletest"
	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-9876543210ab"
)

// env is a console over a memory store, served by httptest.
type env struct {
	t   *testing.T
	mem *store.Memory
	srv *console.Server
	ts  *httptest.Server
}

func newEnv(t *testing.T, edit func(*console.Options)) *env {
	t.Helper()
	mem := store.NewMemory()
	users, err := console.ParseUsers(strings.NewReader("# people\nalice " + aliceToken + "\nbob\t" + bobToken + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	opts := console.Options{Backend: consoletest.Backend(mem), Users: users, Poll: 10 * time.Millisecond}
	if edit != nil {
		edit(&opts)
	}
	srv, err := console.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	return &env{t: t, mem: mem, srv: srv, ts: ts}
}

// scenario records a sandbox run and returns its ID.
func (e *env) scenario(name string) string {
	e.t.Helper()
	id, err := consoletest.Scenario(context.Background(), e.mem, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// req is one request: a bearer token or a cookie, headers, a body.
type req struct {
	method, path string
	token        string
	host         string // the Host header, if not the server's address
	cookies      []*http.Cookie
	header       map[string]string
	form         url.Values
	body         string
}

// do sends r without following redirects and returns the response and its
// body.
func (e *env) do(r req) (*http.Response, string) {
	e.t.Helper()
	var body io.Reader
	switch {
	case r.form != nil:
		body = strings.NewReader(r.form.Encode())
	case r.body != "":
		body = strings.NewReader(r.body)
	}
	if r.method == "" {
		r.method = http.MethodGet
	}
	hr, err := http.NewRequest(r.method, e.ts.URL+r.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if r.host != "" {
		hr.Host = r.host
	}
	if r.form != nil {
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	for _, c := range r.cookies {
		hr.AddCookie(c)
	}
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(hr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, string(b)
}

// getJSON GETs path with alice's token into v, wanting 200.
func (e *env) getJSON(path string, v any) {
	e.t.Helper()
	resp, body := e.do(req{path: path, token: aliceToken})
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		e.t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

func (e *env) events(runID string) []loop.Event {
	e.t.Helper()
	evs, err := loop.LoadEvents(context.Background(), e.mem, runID)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn signs in with token through the sign-in form, and returns the
// session cookie and the session's CSRF token (from a page's form).
func (e *env) signIn(token string) (*http.Cookie, string) {
	e.t.Helper()
	resp, page := e.do(req{path: "/signin?next=/approvals"})
	m := csrfRE.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		e.t.Fatalf("sign-in page: %d %s", resp.StatusCode, page)
	}
	resp, body := e.do(req{method: "POST", path: "/signin", cookies: resp.Cookies(),
		form: url.Values{"csrf": {m[1]}, "token": {token}, "next": {"/approvals"}}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/approvals" {
		e.t.Fatalf("sign in: %d %s %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	var sess *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "toolloop_session" {
			sess = c
		}
	}
	if sess == nil {
		e.t.Fatalf("sign in set no session cookie: %v", resp.Header["Set-Cookie"])
	}
	if !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode {
		e.t.Errorf("session cookie HttpOnly=%v SameSite=%v, want HttpOnly and Strict", sess.HttpOnly, sess.SameSite)
	}
	resp, page = e.do(req{path: "/runs", cookies: []*http.Cookie{sess}})
	m = csrfRE.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		e.t.Fatalf("runs page after sign-in: %d %s", resp.StatusCode, page)
	}
	return sess, m[1]
}

// TestUnauthorized: nothing about runs without a token; pages send a
// browser to the sign-in page, the API answers 401 in JSON.
func TestUnauthorized(t *testing.T) {
	e := newEnv(t, nil)
	run := e.scenario("confirmation_required")
	api := []req{
		{path: "/api/runs"},
		{path: "/api/runs/" + run},
		{path: "/api/runs/" + run + "/events"},
		{path: "/api/runs/" + run + "/events?stream=1"},
		{path: "/runs/" + run + "/live"},
		{method: "POST", path: "/api/runs/" + run + "/calls/call_r1/approve", body: `{"note":"x"}`},
		{method: "POST", path: "/api/runs/" + run + "/calls/call_r1/deny", body: `{}`},
		{path: "/api/runs", token: "not-a-token-of-anyone"},
		{path: "/api/runs", header: map[string]string{"Authorization": "Basic " + aliceToken}},
		{path: "/api/runs", cookies: []*http.Cookie{{Name: "toolloop_session", Value: "forged"}}},
	}
	for _, r := range api {
		resp, body := e.do(r)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("Content-Type"), "json") ||
			!strings.Contains(body, `"error"`) {
			t.Errorf("%s %s: %d %s %s, want 401 JSON", r.method, r.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if strings.Contains(body, run) {
			t.Errorf("%s %s: the refusal shows the run: %s", r.method, r.path, body)
		}
	}
	for _, path := range []string{"/", "/runs", "/runs/" + run, "/approvals", "/runs?status=final_answer"} {
		resp, body := e.do(req{path: path})
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/signin?next=") {
			t.Errorf("GET %s: %d to %q, want 303 to the sign-in page", path, resp.StatusCode, loc)
		}
		if next, _ := url.QueryUnescape(strings.TrimPrefix(loc, "/signin?next=")); next != path {
			t.Errorf("GET %s: sign-in goes back to %q", path, next)
		}
		if strings.Contains(body, "refund_order") {
			t.Errorf("GET %s: the redirect shows the run", path)
		}
	}
	for _, verb := range []string{"approve", "deny"} {
		resp, _ := e.do(req{method: "POST", path: "/runs/" + run + "/calls/call_r1/" + verb, form: url.Values{"note": {"x"}}})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("form %s without signing in: %d, want 401", verb, resp.StatusCode)
		}
	}
	if evs := e.events(run); evs[len(evs)-1].Kind != loop.Stopped {
		t.Errorf("a refused request recorded %s", evs[len(evs)-1].Kind)
	}
	// The sign-in page and the assets need no token.
	for _, path := range []string{"/signin", "/static/console.css", "/static/console.js"} {
		if resp, _ := e.do(req{path: path}); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, resp.StatusCode)
		}
	}
}

// TestSignIn: a bearer token works on pages and the API; the sign-in form
// turns a token into a session cookie the pages and the API take; a wrong
// token, or a form not from the sign-in page, starts no session; signing
// out ends it.
func TestSignIn(t *testing.T) {
	e := newEnv(t, nil)
	run := e.scenario("normal")
	resp, body := e.do(req{path: "/runs", token: bobToken})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="user">bob<`) || !strings.Contains(body, run) {
		t.Fatalf("runs page with bob's bearer token: %d\n%s", resp.StatusCode, body)
	}
	sess, csrf := e.signIn(aliceToken)
	resp, body = e.do(req{path: "/runs/" + run, cookies: []*http.Cookie{sess}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="user">alice<`) {
		t.Fatalf("run page with the session cookie: %d", resp.StatusCode)
	}
	if resp, _ := e.do(req{path: "/api/runs/" + run, cookies: []*http.Cookie{sess}}); resp.StatusCode != http.StatusOK {
		t.Errorf("API GET with the session cookie: %d, want 200", resp.StatusCode)
	}

	// A wrong token.
	resp, page := e.do(req{path: "/signin"})
	m := csrfRE.FindStringSubmatch(page)
	resp, body = e.do(req{method: "POST", path: "/signin", cookies: resp.Cookies(),
		form: url.Values{"csrf": {m[1]}, "token": {aliceToken + "x"}}})
	if resp.StatusCode != http.StatusUnauthorized || len(sessionCookies(resp)) > 0 {
		t.Errorf("sign in with a wrong token: %d, cookies %v", resp.StatusCode, resp.Header["Set-Cookie"])
	}
	// A sign-in form posted from elsewhere: no sign-in cookie to match.
	resp, _ = e.do(req{method: "POST", path: "/signin", form: url.Values{"csrf": {m[1]}, "token": {aliceToken}}})
	if resp.StatusCode != http.StatusForbidden || len(sessionCookies(resp)) > 0 {
		t.Errorf("sign in without the form's cookie: %d, cookies %v", resp.StatusCode, resp.Header["Set-Cookie"])
	}
	// A destination off the site is not followed, however it is spelled
	// (browsers take a backslash or a tab for a slash); one on it is.
	for next, want := range map[string]string{
		"//evil.example/":       "/runs",
		"/\\evil.example":       "/runs",
		"/a/../\\evil.example":  "/runs",
		"/\t/evil.example":      "/runs",
		"https://evil.example/": "/runs",
		"/approvals":            "/approvals",
		"/runs?status=running":  "/runs?status=running",
	} {
		resp, page = e.do(req{path: "/signin"})
		m = csrfRE.FindStringSubmatch(page)
		resp, _ = e.do(req{method: "POST", path: "/signin", cookies: resp.Cookies(),
			form: url.Values{"csrf": {m[1]}, "token": {aliceToken}, "next": {next}}})
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != want {
			t.Errorf("sign in with next=%q: %d to %q, want %s", next, resp.StatusCode, loc, want)
		}
	}
	// The bearer scheme's name in any case.
	if resp, _ := e.do(req{path: "/api/runs", header: map[string]string{"Authorization": "bearer " + aliceToken}}); resp.StatusCode != http.StatusOK {
		t.Errorf("Authorization: bearer (lower case): %d, want 200", resp.StatusCode)
	}

	// Signing out ends the session.
	resp, _ = e.do(req{method: "POST", path: "/signout", cookies: []*http.Cookie{sess}, form: url.Values{"csrf": {csrf}}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	if resp, _ := e.do(req{path: "/api/runs", cookies: []*http.Cookie{sess}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the session after signing out: %d, want 401", resp.StatusCode)
	}
}

// TestSessionExpires: a session ends after Options.SessionTTL on the
// console's clock.
func TestSessionExpires(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	e := newEnv(t, func(o *console.Options) { o.Now, o.SessionTTL = clock, time.Hour })
	sess, _ := e.signIn(aliceToken)
	now = now.Add(59 * time.Minute)
	if resp, _ := e.do(req{path: "/api/runs", cookies: []*http.Cookie{sess}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("a session within its hour: %d", resp.StatusCode)
	}
	now = now.Add(time.Minute)
	if resp, _ := e.do(req{path: "/api/runs", cookies: []*http.Cookie{sess}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a session after its hour: %d, want 401", resp.StatusCode)
	}
}

func sessionCookies(resp *http.Response) []*http.Cookie {
	var out []*http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "toolloop_session" && c.Value != "" {
			out = append(out, c)
		}
	}
	return out
}

// TestCSRF: a POST the session cookie authenticates needs the session's
// CSRF token (the form's field, or the API's header); without it, or with
// another, nothing is recorded. A bearer request needs none.
func TestCSRF(t *testing.T) {
	e := newEnv(t, nil)
	run := e.scenario("confirmation_required")
	sess, csrf := e.signIn(aliceToken)
	_, other := e.signIn(bobToken)
	path := "/runs/" + run + "/calls/call_r1/approve"
	for name, form := range map[string]url.Values{
		"no token":           {"note": {"x"}},
		"another's token":    {"note": {"x"}, "csrf": {other}},
		"an empty token":     {"note": {"x"}, "csrf": {""}},
		"a token's prefix":   {"note": {"x"}, "csrf": {csrf[:10]}},
		"the token, altered": {"note": {"x"}, "csrf": {csrf[:len(csrf)-1] + "0"}},
	} {
		if form.Get("csrf") == csrf {
			continue
		}
		resp, _ := e.do(req{method: "POST", path: path, cookies: []*http.Cookie{sess}, form: form})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("form with %s: %d, want 403", name, resp.StatusCode)
		}
	}
	for name, h := range map[string]map[string]string{"no header": nil, "another's token": {"X-CSRF-Token": other}} {
		resp, body := e.do(req{method: "POST", path: "/api" + path, cookies: []*http.Cookie{sess}, header: h, body: `{}`})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("API POST with the cookie and %s: %d %s, want 403", name, resp.StatusCode, body)
		}
	}
	if resp, _ := e.do(req{method: "POST", path: "/signout", cookies: []*http.Cookie{sess}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign out without the CSRF token: %d, want 403", resp.StatusCode)
	}
	for _, ev := range e.events(run) {
		if ev.Kind == loop.ConfirmationDecided {
			t.Fatalf("a refused POST recorded an answer: %+v", ev.Confirmation)
		}
	}
	resp, _ := e.do(req{method: "POST", path: path, cookies: []*http.Cookie{sess}, form: url.Values{"note": {"fine"}, "csrf": {csrf}}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/runs/"+run {
		t.Fatalf("form with the token: %d to %q, want 303 to the run", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, page := e.do(req{path: "/runs/" + run, cookies: []*http.Cookie{sess}})
	if !strings.Contains(page, `data-testid="flash"`) || !strings.Contains(page, "approved call call_r1") {
		t.Errorf("the run page after approving shows no message:\n%s", page)
	}
	if !strings.Contains(page, `data-testid="run-status" data-status="final_answer"`) {
		t.Errorf("the run page after approving does not show the run finished")
	}
}

// decision posts an approve or deny to the API.
func (e *env) decision(token, run, call, verb, body string) (int, console.Decision, string) {
	e.t.Helper()
	resp, raw := e.do(req{method: "POST", path: "/api/runs/" + run + "/calls/" + call + "/" + verb, token: token, body: body})
	var d console.Decision
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal([]byte(raw), &d); err != nil {
			e.t.Fatalf("%s: %v", raw, err)
		}
	}
	return resp.StatusCode, d, raw
}

// confirmations returns the answers a run's log records.
func (e *env) confirmations(run string) []loop.Confirmation {
	var out []loop.Confirmation
	for _, ev := range e.events(run) {
		if ev.Kind == loop.ConfirmationDecided {
			out = append(out, *ev.Confirmation)
		}
	}
	return out
}

// TestDecideAPI: approve and deny through the API record the signed-in
// person's name and the note, and the console resumes the run; a second
// answer to the call is a 409 naming who answered first.
func TestDecideAPI(t *testing.T) {
	e := newEnv(t, nil)
	approved, denied := e.scenario("confirmation_required"), e.scenario("confirmation_required")

	code, d, raw := e.decision(aliceToken, approved, "call_r1", "approve", `{"note": "customer is right"}`)
	if code != http.StatusOK || !d.Approved || d.By != "alice" || d.Note != "customer is right" ||
		d.Resume != console.ResumeDone || d.Status != string(loop.FinalAnswer) {
		t.Fatalf("approve: %d %s", code, raw)
	}
	got := e.confirmations(approved)
	if len(got) != 1 || got[0] != (loop.Confirmation{CallID: "call_r1", Approved: true, By: "alice", Note: "customer is right"}) {
		t.Errorf("the log records %+v", got)
	}
	var doc struct {
		Summary  console.Summary `json:"summary"`
		Messages []llm.Message   `json:"messages"`
	}
	e.getJSON("/api/runs/"+approved, &doc)
	if doc.Summary.Status != string(loop.FinalAnswer) || !resultOK(doc.Messages, "call_r1") {
		t.Errorf("after approving: status %s, messages %+v", doc.Summary.Status, doc.Messages)
	}

	code, _, raw = e.decision(bobToken, approved, "call_r1", "approve", `{"note": "me too"}`)
	if code != http.StatusConflict || !strings.Contains(raw, "already approved by alice") {
		t.Errorf("second approve: %d %s, want 409 naming alice", code, raw)
	}
	code, _, raw = e.decision(bobToken, approved, "call_r1", "deny", ``)
	if code != http.StatusConflict || !strings.Contains(raw, "already approved by alice") {
		t.Errorf("deny after approve: %d %s, want 409", code, raw)
	}
	if n := len(e.confirmations(approved)); n != 1 {
		t.Errorf("%d answers in the log after the refused ones, want 1", n)
	}

	code, d, raw = e.decision(bobToken, denied, "call_r1", "deny", `{"note": "over the limit"}`)
	if code != http.StatusOK || d.Approved || d.By != "bob" || d.Resume != console.ResumeDone {
		t.Fatalf("deny: %d %s", code, raw)
	}
	got = e.confirmations(denied)
	if len(got) != 1 || got[0] != (loop.Confirmation{CallID: "call_r1", Approved: false, By: "bob", Note: "over the limit"}) {
		t.Errorf("the log records %+v", got)
	}
	e.getJSON("/api/runs/"+denied, &doc)
	if resultOK(doc.Messages, "call_r1") {
		t.Errorf("a denied call has an ok result: %+v", doc.Messages)
	}
	code, _, raw = e.decision(aliceToken, denied, "call_r1", "approve", `{}`)
	if code != http.StatusConflict || !strings.Contains(raw, "already denied by bob") {
		t.Errorf("approve after deny: %d %s, want 409 naming bob", code, raw)
	}

	// Bodies that are not {"note": ...}.
	third := e.scenario("confirmation_required")
	for _, body := range []string{`{"note": 1}`, `{"nope": "x"}`, `not json`} {
		if code, _, raw := e.decision(aliceToken, third, "call_r1", "approve", body); code != http.StatusBadRequest {
			t.Errorf("body %s: %d %s, want 400", body, code, raw)
		}
	}
	if n := len(e.confirmations(third)); n != 0 {
		t.Errorf("bad bodies recorded %d answers", n)
	}
}

// resultOK reports whether the call's result in msgs is ok.
func resultOK(msgs []llm.Message, call string) bool {
	for _, m := range msgs {
		if m.Result != nil && m.Result.CallID == call {
			return m.Result.Status == llm.StatusOK
		}
	}
	return false
}

// TestDecideNotFound: a run, call or action that is not there is a 404; a
// run that does not wait for an answer a 409.
func TestDecideNotFound(t *testing.T) {
	e := newEnv(t, nil)
	paused, done := e.scenario("confirmation_required"), e.scenario("normal")
	for _, c := range []struct {
		run, call, verb string
		code            int
		says            string
	}{
		{"no-such-run", "call_r1", "approve", http.StatusNotFound, "no run no-such-run"},
		{paused, "call_zz", "approve", http.StatusNotFound, "call call_zz is not pending"},
		{paused, "call_q1", "deny", http.StatusNotFound, "pending: call_r1"},
		{paused, "call_r1", "maybe", http.StatusNotFound, "want approve or deny"},
		{done, "call_1", "approve", http.StatusConflict, "not waiting for confirmation (status final_answer)"},
	} {
		code, _, raw := e.decision(aliceToken, c.run, c.call, c.verb, `{}`)
		if code != c.code || !strings.Contains(raw, c.says) {
			t.Errorf("%s %s %s: %d %s, want %d saying %q", c.verb, c.run, c.call, code, raw, c.code, c.says)
		}
	}
	for _, path := range []string{"/api/runs/no-such-run", "/api/runs/no-such-run/events", "/api/runs/no-such-run/events?stream=1"} {
		if resp, body := e.do(req{path: path, token: aliceToken}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", path, resp.StatusCode, body)
		}
	}
	resp, page := e.do(req{path: "/runs/no-such-run", token: aliceToken})
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(page, "no run no-such-run") {
		t.Errorf("run page of an unknown run: %d", resp.StatusCode)
	}
}

// TestQueued: a run the backend cannot resume keeps the answer and says
// how to carry it on; on a backend whose runs go on by themselves the
// console does not resume at all.
func TestQueued(t *testing.T) {
	e := newEnv(t, func(o *console.Options) {
		b := o.Backend.(*console.LogBackend)
		b.ResumeFunc = nil
		o.ResumeCommand = func(id string) string { return "toolloop resume " + id + " --db x.db" }
	})
	run := e.scenario("confirmation_required")
	code, d, raw := e.decision(aliceToken, run, "call_r1", "approve", `{}`)
	if code != http.StatusOK || d.Resume != console.ResumeQueued || !strings.Contains(d.Message, "toolloop resume "+run+" --db x.db") {
		t.Fatalf("approve: %d %s, want queued with the resume command", code, raw)
	}
	if got := e.confirmations(run); len(got) != 1 || got[0].By != "alice" {
		t.Errorf("the answer was not recorded: %+v", got)
	}

	g := newEnv(t, func(o *console.Options) {
		b := o.Backend.(*console.LogBackend)
		b.ResumeFunc = func(context.Context, string) (*loop.Result, error) {
			t.Error("Resume called on a backend that goes on")
			return nil, nil
		}
		o.GoesOn = true
	})
	run = g.scenario("confirmation_required")
	if code, d, raw := g.decision(bobToken, run, "call_r1", "deny", `{"note":"no"}`); code != http.StatusOK || d.Resume != console.ResumeGoesOn {
		t.Errorf("deny: %d %s, want goes_on", code, raw)
	}
}

// TestEscaping: model output (and the user's message) that looks like HTML
// is shown as text on the run page, never as markup.
func TestEscaping(t *testing.T) {
	e := newEnv(t, nil)
	answer := `<script>alert("pwned")</script><img src=x onerror=alert(1)>`
	run, err := consoletest.Answer(context.Background(), e.mem, `<b onmouseover=alert(2)>hi</b>`, answer)
	if err != nil {
		t.Fatal(err)
	}
	resp, page := e.do(req{path: "/runs/" + run, token: aliceToken})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("run page: %d", resp.StatusCode)
	}
	for _, bad := range []string{"<script>alert", "<img src=x", "<b onmouseover"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q unescaped", bad)
		}
	}
	for _, good := range []string{"&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;", "&lt;b onmouseover=alert(2)&gt;"} {
		if !strings.Contains(page, good) {
			t.Errorf("the page does not show %q as text", good)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy %q does not keep scripts to the site's own", csp)
	}
	// The only script the page loads is the console's own file.
	if n := strings.Count(page, "<script"); n != 1 || !strings.Contains(page, `<script src="/static/console.js"></script>`) {
		t.Errorf("%d script tags in the page", n)
	}
}

// TestRunsList: the list filters by status, session and pending approvals,
// and pages; bad filters are refused with what was wrong.
func TestRunsList(t *testing.T) {
	e := newEnv(t, nil)
	var normal []string
	for range 3 {
		normal = append(normal, e.scenario("normal"))
	}
	paused := e.scenario("confirmation_required")
	e.scenario("unknown_tool")
	type list struct {
		Runs          []console.Run `json:"runs"`
		Page, PerPage int
		Total, Pages  int
	}
	var l list
	e.getJSON("/api/runs", &l)
	if l.Total != 5 || len(l.Runs) != 5 || l.Pages != 1 {
		t.Fatalf("all runs: %+v", l)
	}
	e.getJSON("/api/runs?per_page=2", &l)
	if l.Total != 5 || len(l.Runs) != 2 || l.Pages != 3 {
		t.Errorf("per_page=2: %d runs of %d on %d pages", len(l.Runs), l.Total, l.Pages)
	}
	seen := map[string]bool{}
	for page := 1; page <= 3; page++ {
		e.getJSON("/api/runs?per_page=2&page="+string(rune('0'+page)), &l)
		for _, r := range l.Runs {
			if seen[r.RunID] {
				t.Errorf("run %s on two pages", r.RunID)
			}
			seen[r.RunID] = true
		}
	}
	if len(seen) != 5 {
		t.Errorf("the pages hold %d runs, want 5", len(seen))
	}
	e.getJSON("/api/runs?per_page=2&page=9", &l)
	if len(l.Runs) != 0 || l.Total != 5 {
		t.Errorf("a page past the end: %+v", l)
	}
	// A page number whose offset would overflow an int.
	e.getJSON("/api/runs?per_page=200&page=368934881474191034", &l)
	if len(l.Runs) != 0 || l.Total != 5 {
		t.Errorf("a page far past the end: %+v", l)
	}
	e.getJSON("/api/runs?status=final_answer", &l)
	if l.Total != 3 {
		t.Errorf("status=final_answer: %d runs, want 3", l.Total)
	}
	for _, r := range l.Runs {
		if r.Status != "final_answer" {
			t.Errorf("status=final_answer lists a %s run", r.Status)
		}
	}
	e.getJSON("/api/runs?pending=1", &l)
	if l.Total != 1 || l.Runs[0].RunID != paused || len(l.Runs[0].Waiting()) != 1 {
		t.Errorf("pending=1: %+v", l.Runs)
	}
	e.getJSON("/api/runs?session=demo:normal", &l)
	if l.Total != 3 {
		t.Errorf("session=demo:normal: %d runs, want 3", l.Total)
	}
	e.getJSON("/api/runs?session=demo:normal&status=tool_not_allowed", &l)
	if l.Total != 0 {
		t.Errorf("two filters that exclude each other: %d runs", l.Total)
	}
	for q, says := range map[string]string{
		"status=happy":  `unknown status \"happy\"`,
		"page=0":        "page=",
		"per_page=1000": "from 1 to 200",
		"pending=maybe": "want 1 or 0",
		"per_page=two":  "per_page=",
	} {
		resp, body := e.do(req{path: "/api/runs?" + q, token: aliceToken})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, says) {
			t.Errorf("?%s: %d %s, want 400 saying %s", q, resp.StatusCode, body, says)
		}
	}

	// The page: rows with their hooks, filters and paging links.
	resp, page := e.do(req{path: "/runs?per_page=2&session=demo:normal", token: aliceToken})
	if resp.StatusCode != http.StatusOK || strings.Count(page, `data-testid="run-row"`) != 2 {
		t.Fatalf("runs page: %d, %d rows", resp.StatusCode, strings.Count(page, `data-testid="run-row"`))
	}
	if !strings.Contains(page, `data-testid="next-page"`) || !strings.Contains(page, "page=2") || strings.Contains(page, `data-testid="prev-page"`) {
		t.Errorf("page 1 of 2 has no link to page 2, or one back")
	}
	_, page = e.do(req{path: "/runs?pending=1", token: aliceToken})
	if !strings.Contains(page, `data-testid="run-row" data-run-id="`+paused+`" data-status="confirmation_required" data-pending="1"`) ||
		strings.Count(page, `data-testid="run-row"`) != 1 {
		t.Errorf("runs page with pending=1 does not list just the paused run:\n%s", page)
	}
	resp, page = e.do(req{path: "/runs?status=happy", token: aliceToken})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "unknown status") {
		t.Errorf("runs page with a bad status: %d", resp.StatusCode)
	}
	_, page = e.do(req{path: "/approvals", token: aliceToken})
	if !strings.Contains(page, `data-testid="pending" data-run-id="`+paused+`" data-call-id="call_r1"`) ||
		!strings.Contains(page, `data-testid="approve-call_r1"`) || !strings.Contains(page, `data-testid="deny-call_r1"`) {
		t.Errorf("the approvals inbox does not offer call_r1 of %s:\n%s", paused, page)
	}
	_ = normal
}

// TestRunPage: a run's page has its parts, with their hooks, and
// diagnose's findings first when there are some.
func TestRunPage(t *testing.T) {
	e := newEnv(t, nil)
	run := e.scenario("parallel")
	_, page := e.do(req{path: "/runs/" + run, token: aliceToken})
	for _, hook := range []string{`data-testid="run-status" data-status="final_answer"`, `data-testid="message"`,
		`data-testid="result" data-call-id="`, `data-testid="timeline"`, `data-testid="plans"`, `data-testid="calls"`,
		`data-testid="budgets"`, `data-testid="events"`, "<svg", "execute_tool"} {
		if !strings.Contains(page, hook) {
			t.Errorf("the run page lacks %s", hook)
		}
	}
	if strings.Contains(page, `id="live"`) {
		t.Errorf("a stopped run's page follows it live")
	}
	spin := e.scenario("spin_detected")
	_, page = e.do(req{path: "/runs/" + spin, token: aliceToken})
	diag, status := strings.Index(page, `data-testid="diagnose"`), strings.Index(page, `data-testid="run-status"`)
	if diag < 0 || diag > status || !strings.Contains(page, `data-testid="finding"`) {
		t.Errorf("spin_detected's page: diagnose at %d, status at %d; want the findings first", diag, status)
	}
	paused := e.scenario("confirmation_required")
	_, page = e.do(req{path: "/runs/" + paused, token: aliceToken})
	for _, hook := range []string{`data-testid="decide-call_r1"`, `data-testid="approve-call_r1"`, `data-testid="deny-call_r1"`,
		`data-testid="note"`, `id="live"`} {
		if !strings.Contains(page, hook) {
			t.Errorf("the paused run's page lacks %s", hook)
		}
	}
}

// TestStream: the live view sends an event appended after it began, then
// the rest of the run, and ends once the run has stopped.
func TestStream(t *testing.T) {
	e := newEnv(t, nil)
	run := e.scenario("confirmation_required")
	last := e.events(run)
	after := last[len(last)-1].Seq
	hr, err := http.NewRequest("GET", e.ts.URL+"/api/runs/"+run+"/events?stream=1&after="+itoa(after), nil)
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, ct)
	}
	// The answer is recorded by someone else (loop.Decide on the store):
	// the stream must bring it.
	if err := loop.Decide(context.Background(), e.mem, run, loop.Confirmation{CallID: "call_r1", Approved: true, By: "carol"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	next := func() (name, id, data string) {
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				return name, id, data
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			}
		}
		t.Fatalf("the stream ended: %v", sc.Err())
		return
	}
	name, id, data := next()
	var ev loop.Event
	if err := json.Unmarshal([]byte(data), &ev); name != "event" || err != nil || ev.Kind != loop.ConfirmationDecided ||
		ev.Confirmation.By != "carol" || id != itoa(after+1) {
		t.Fatalf("first message %s id %s: %s", name, id, data)
	}
	// Its only call answered, the run waits to be resumed: answered.
	if name, _, data = next(); name != "summary" || !strings.Contains(data, `"status":"answered"`) {
		t.Fatalf("after the event: %s %s", name, data)
	}
	// The run goes on (resumed from the store here); the stream follows
	// it to its end.
	if _, err := consoletest.Backend(e.mem).Resume(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	var kinds []loop.EventKind
	for {
		name, _, data = next()
		if name == "end" {
			break
		}
		if name == "event" {
			var ev loop.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatal(err)
			}
			kinds = append(kinds, ev.Kind)
		}
	}
	if !strings.Contains(data, `"status":"final_answer"`) || len(kinds) == 0 || kinds[0] != loop.Resumed || kinds[len(kinds)-1] != loop.Stopped {
		t.Errorf("the stream brought %v and ended with %s", kinds, data)
	}
}

// TestStreamEndsWithConsole: Close ends the live streams (no goroutine or
// connection is left behind).
func TestStreamEndsWithConsole(t *testing.T) {
	e := newEnv(t, func(o *console.Options) { o.Poll = time.Hour })
	run := e.scenario("confirmation_required")
	hr, _ := http.NewRequest("GET", e.ts.URL+"/runs/"+run+"/live", nil)
	hr.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); done <- err }()
	e.srv.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end when the console closed")
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestCheckAddr: loopback by default; anything else needs allowRemote.
func TestCheckAddr(t *testing.T) {
	for _, c := range []struct {
		addr   string
		remote bool
		ok     bool
	}{
		{"127.0.0.1:8080", false, true},
		{"127.9.9.9:0", false, true},
		{"[::1]:8080", false, true},
		{"localhost:8080", false, true},
		{"0.0.0.0:8080", false, false},
		{":8080", false, false},
		{"[::]:8080", false, false},
		{"192.168.1.10:8080", false, false},
		{"example.com:80", false, false},
		{"0.0.0.0:8080", true, true},
		{":8080", true, true},
		{"127.0.0.1", false, false},
		{"127.0.0.1:", false, false},
	} {
		err := console.CheckAddr(c.addr, c.remote)
		if (err == nil) != c.ok {
			t.Errorf("CheckAddr(%q, %v) = %v, want ok=%v", c.addr, c.remote, err, c.ok)
		}
		if err != nil && !c.remote && strings.Contains(c.addr, "0.0.0.0") && !strings.Contains(err.Error(), "--allow-remote") {
			t.Errorf("CheckAddr(%q): %v does not name --allow-remote", c.addr, err)
		}
	}
}

// TestParseUsers: the users file's errors name the line and what is wrong.
func TestParseUsers(t *testing.T) {
	long := "0123456789abcdef"
	u, err := console.ParseUsers(strings.NewReader("# who\n\n  alice " + long + "a  \nbob\t" + long + "b\n"))
	if err != nil || strings.Join(u.Names(), ",") != "alice,bob" {
		t.Fatalf("ParseUsers = %v, %v", u, err)
	}
	for file, says := range map[string]string{
		"alice " + long + "\nalice " + long + "x\n": "line 2: name alice is already on line 1",
		"alice " + long + "\nbob " + long + "\n":    "line 2: the token of bob is already the token on line 1",
		"alice\n":                                   "line 1: want NAME TOKEN, got 1 field(s)",
		"# x\nalice " + long + " extra\n":           "line 2: want NAME TOKEN, got 3 field(s)",
		"alice short\n":                             "line 1: the token of alice is 5 characters long; want at least 16",
		"al<ce " + long + "\n":                      `line 1: name "al<ce"`,
		"# nobody\n":                                "no users",
	} {
		_, err := console.ParseUsers(strings.NewReader(file))
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("ParseUsers(%q) = %v, want an error saying %q", file, err, says)
		}
	}
	if _, err := console.LoadUsers("/no/such/users/file"); err == nil {
		t.Error("LoadUsers of a missing file: no error")
	}
}

// TestNewChecks: New refuses a console nobody could use.
func TestNewChecks(t *testing.T) {
	users, _ := console.ParseUsers(strings.NewReader("alice " + aliceToken))
	if _, err := console.New(console.Options{Users: users}); err == nil {
		t.Error("New without a backend: no error")
	}
	if _, err := console.New(console.Options{Backend: consoletest.Backend(store.NewMemory())}); err == nil {
		t.Error("New without users: no error")
	}
}

// slowDecide makes each answer take a moment to record, as a busy store
// would.
type slowDecide struct{ console.Backend }

func (b slowDecide) Decide(ctx context.Context, runID string, a loop.Confirmation) error {
	time.Sleep(100 * time.Millisecond)
	return b.Backend.Decide(ctx, runID, a)
}

// Two people answer the two calls of one batch at the same moment: the
// answer recorded last sees the batch complete and carries the run on;
// neither is left waiting for the other.
func TestConcurrentAnswersResume(t *testing.T) {
	e := newEnv(t, func(o *console.Options) {
		o.Backend = slowDecide{o.Backend}
	})
	s := orders.Scenario{Name: "two_refunds", Want: loop.ConfirmationRequired, Ask: "Refund A101 and A103, please.",
		Policy: policy.ConfirmWrites(),
		Script: func(context.CancelFunc) []llmtest.Turn {
			return []llmtest.Turn{
				llmtest.Calls(llmtest.Call("c1", orders.RefundOrder, map[string]string{"order_id": "A101", "reason": "late"}),
					llmtest.Call("c2", orders.RefundOrder, map[string]string{"order_id": "A103", "reason": "broken"})),
				llmtest.Text("Both refunded."),
			}
		}}
	res, _, err := s.RunWith(context.Background(), orders.RunOptions{Store: e.mem, Ledger: e.mem})
	if err != nil || res.Status != loop.ConfirmationRequired || len(res.Pending) != 2 {
		t.Fatalf("the run: %v, %+v; want it paused on two calls", err, res)
	}
	var wg sync.WaitGroup
	ds := make([]console.Decision, 2)
	for i, who := range []string{aliceToken, bobToken} {
		wg.Go(func() {
			code, d, raw := e.decision(who, res.RunID, fmt.Sprintf("c%d", i+1), "approve", `{}`)
			if code != http.StatusOK {
				t.Errorf("approve c%d: %d %s", i+1, code, raw)
			}
			ds[i] = d
		})
	}
	wg.Wait()
	if ds[0].Resume == console.ResumeWaiting && ds[1].Resume == console.ResumeWaiting {
		t.Fatalf("both answers wait for the other: %+v; the run would stay paused", ds)
	}
}

// A call the model named ".." (call IDs are the model's) can be answered
// from its run's page: the form's address escapes the dots, which a
// browser would otherwise resolve away.
func TestDotCallID(t *testing.T) {
	e := newEnv(t, func(o *console.Options) { o.GoesOn = true })
	s := orders.Scenario{Name: "dot_call", Want: loop.ConfirmationRequired, Ask: "Refund A101, please.",
		Policy: policy.ConfirmWrites(),
		Script: func(context.CancelFunc) []llmtest.Turn {
			return []llmtest.Turn{llmtest.Calls(llmtest.Call("..", orders.RefundOrder, map[string]string{"order_id": "A101", "reason": "late"}))}
		}}
	res, _, err := s.RunWith(context.Background(), orders.RunOptions{Store: e.mem, Ledger: e.mem})
	if err != nil || res.Status != loop.ConfirmationRequired {
		t.Fatalf("the run: %v, %+v; want it paused", err, res)
	}
	sess, csrf := e.signIn(aliceToken)
	_, page := e.do(req{path: "/runs/" + res.RunID, cookies: []*http.Cookie{sess}})
	action := "/runs/" + res.RunID + "/calls/%2E%2E/approve"
	if !strings.Contains(page, `action="`+action+`"`) {
		t.Fatalf("the run page has no form posting to %s:\n%s", action, page)
	}
	resp, body := e.do(req{method: "POST", path: action, cookies: []*http.Cookie{sess}, form: url.Values{"csrf": {csrf}}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve from the page: %d %s", resp.StatusCode, body)
	}
	if got := e.confirmations(res.RunID); len(got) != 1 || got[0].CallID != ".." || got[0].By != "alice" {
		t.Errorf("answers recorded: %+v; want alice's to call ..", got)
	}
}

// With SecureCookies (a console behind a proxy that ends TLS) the
// sign-in's cookies are Secure though the request came over plain HTTP;
// without it they are not (TestSignIn's console).
func TestSecureCookies(t *testing.T) {
	e := newEnv(t, func(o *console.Options) { o.SecureCookies = true })
	resp, _ := e.do(req{path: "/signin"})
	for _, c := range resp.Cookies() {
		if !c.Secure {
			t.Errorf("sign-in page cookie %s is not Secure", c.Name)
		}
	}
	sess, _ := e.signIn(aliceToken)
	if !sess.Secure {
		t.Errorf("the session cookie is not Secure")
	}
	plain := newEnv(t, nil)
	if sess, _ := plain.signIn(aliceToken); sess.Secure {
		t.Errorf("the session cookie is Secure on plain HTTP without SecureCookies")
	}
}
