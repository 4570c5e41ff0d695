package console

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// MinTokenLen is the shortest token a users file may give: tokens are
// passwords, and short ones are guessed.
const MinTokenLen = 16

// Users are the people who may use the console, each with a secret token.
// The name is what a run's log records as who approved or denied a call.
type Users struct {
	byName map[string][32]byte // name -> SHA-256 of the token
	names  []string            // in file order
}

// Names returns the users' names in the order the file gave them.
func (u *Users) Names() []string { return append([]string(nil), u.names...) }

// LoadUsers reads a users file (see ParseUsers).
func LoadUsers(path string) (*Users, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	defer f.Close()
	u, err := ParseUsers(f)
	if err != nil {
		return nil, fmt.Errorf("users file %s: %w", path, err)
	}
	return u, nil
}

// ParseUsers reads the users, one "NAME TOKEN" a line, separated by spaces
// or tabs. Blank lines and lines starting with # are skipped. A name is
// letters, digits and ".-_@"; a token at least MinTokenLen printable
// characters (not bytes) without spaces. Two lines with one name (also
// when they differ only in case), or one token, are an error: a token must
// say who is acting. Errors name the line.
func ParseUsers(rd io.Reader) (*Users, error) {
	u := &Users{byName: map[string][32]byte{}}
	tokens := map[[32]byte]int{}
	lines := map[string]int{}
	sc := bufio.NewScanner(rd)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want NAME TOKEN, got %d field(s)", n, len(fields))
		}
		name, token := fields[0], fields[1]
		for _, c := range name {
			if !(unicode.IsLetter(c) || unicode.IsDigit(c) || strings.ContainsRune(".-_@", c)) {
				return nil, fmt.Errorf("line %d: name %q: only letters, digits and .-_@ are allowed, not %q", n, name, c)
			}
		}
		if err := checkToken(token); err != nil {
			return nil, fmt.Errorf("line %d: the token of %s %v", n, name, err)
		}
		if first, ok := lines[name]; ok {
			return nil, fmt.Errorf("line %d: name %s is already on line %d; each person once", n, name, first)
		}
		// Dana and DANA would be two people to the console and one to
		// whoever reads a run's log.
		for _, other := range u.names {
			if strings.EqualFold(other, name) {
				return nil, fmt.Errorf("line %d: name %s differs only in case from %s on line %d; each person once, under one spelling",
					n, name, other, lines[other])
			}
		}
		sum := sha256.Sum256([]byte(token))
		if first, ok := tokens[sum]; ok {
			return nil, fmt.Errorf("line %d: the token of %s is already the token on line %d; each person needs a token of their own", n, name, first)
		}
		lines[name], tokens[sum] = n, n
		u.byName[name] = sum
		u.names = append(u.names, name)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	if len(u.names) == 0 {
		return nil, fmt.Errorf("no users: want one NAME TOKEN a line")
	}
	return u, nil
}

// checkToken reports what is wrong with a token, as the end of a sentence
// that begins with its owner ("the token of alice ..."), or nil. A token
// is valid UTF-8 of at least MinTokenLen characters (runes, not bytes: five
// emoji are 20 bytes and a weak password), none of them a control or an
// invisible formatting character, which no one can type or see.
func checkToken(token string) error {
	if !utf8.ValidString(token) {
		return errors.New("is not valid UTF-8")
	}
	for i, r := range token {
		if !unicode.IsGraphic(r) {
			return fmt.Errorf("has the control or invisible character %U at byte %d; want printable characters", r, i)
		}
	}
	if n := utf8.RuneCountInString(token); n < MinTokenLen {
		return fmt.Errorf("is %d characters long; want at least %d (e.g. from: openssl rand -hex 16)", n, MinTokenLen)
	}
	return nil
}

// lookup returns the name whose token is token. It compares the token's
// hash with every user's in constant time, so that neither the time nor
// the order of users tells an attacker anything.
func (u *Users) lookup(token string) (string, bool) {
	if token == "" {
		return "", false
	}
	sum := sha256.Sum256([]byte(token))
	found := ""
	for _, name := range u.names {
		want := u.byName[name]
		if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
			found = name
		}
	}
	return found, found != ""
}

// sessionCookie names the browser's session; signinCookie carries the
// sign-in form's CSRF token until the session exists.
const (
	sessionCookie = "toolloop_session"
	signinCookie  = "toolloop_signin"
	csrfField     = "csrf"
	csrfHeader    = "X-CSRF-Token"
)

// session is one signed-in browser.
type session struct {
	user    string
	csrf    string
	expires time.Time
	flash   string // a message for the next page
}

// sessions are the console's browser sessions, kept in memory: a restart
// signs everyone out.
type sessions struct {
	now func() time.Time
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]*session
}

func newSessions(now func() time.Time, ttl time.Duration) *sessions {
	return &sessions{now: now, ttl: ttl, m: map[string]*session{}}
}

// randomID returns 32 random bytes in hex.
func randomID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// create starts a session for user and returns its ID.
func (ss *sessions) create(user string) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	for id, s := range ss.m {
		if !now.Before(s.expires) {
			delete(ss.m, id)
		}
	}
	id := randomID()
	ss.m[id] = &session{user: user, csrf: randomID(), expires: now.Add(ss.ttl)}
	return id
}

// get returns a copy of the live session id, if any.
func (ss *sessions) get(id string) (session, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	if !ok {
		return session{}, false
	}
	if !ss.now().Before(s.expires) {
		delete(ss.m, id)
		return session{}, false
	}
	return *s, true
}

// setFlash leaves a message for the session's next page.
func (ss *sessions) setFlash(id, msg string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.m[id]; ok {
		s.flash = msg
	}
}

// takeFlash returns and clears the session's message.
func (ss *sessions) takeFlash(id string) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	if !ok {
		return ""
	}
	msg := s.flash
	s.flash = ""
	return msg
}

func (ss *sessions) end(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

// who is the person behind a request, and how they proved it.
type who struct {
	name string
	// session is the session ID when the request came with the cookie;
	// "" for a bearer token.
	session string
	csrf    string
}

// authenticate returns the request's person: a bearer token first, else
// the session cookie.
func (s *Server) authenticate(r *http.Request) (*who, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		// The scheme's name is case-insensitive (RFC 9110, 11.1).
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return nil, false
		}
		name, ok := s.opts.Users.lookup(strings.TrimSpace(token))
		if !ok {
			return nil, false
		}
		return &who{name: name}, true
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, false
	}
	sess, ok := s.sessions.get(c.Value)
	if !ok {
		return nil, false
	}
	return &who{name: sess.user, session: c.Value, csrf: sess.csrf}, true
}

// csrfOK reports whether a request the cookie authenticated carries the
// session's CSRF token, in the form or in the X-CSRF-Token header. A
// bearer request needs none: a browser never adds that header by itself.
func csrfOK(r *http.Request, u *who) bool {
	if u.session == "" {
		return true
	}
	got := r.Header.Get(csrfHeader)
	if got == "" {
		got = r.PostFormValue(csrfField)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(u.csrf)) == 1
}

// page wraps a page's handler: a request nobody signed for goes to the
// sign-in page (back here after), and a POST needs the CSRF token.
func (s *Server) page(h func(http.ResponseWriter, *http.Request, *who)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, ok := s.authenticate(r)
		if !ok {
			if r.Method != http.MethodGet {
				http.Error(w, "sign in first: the token is missing or wrong", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/signin?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			limitBody(w, r)
			if !csrfOK(r, u) {
				http.Error(w, "the form's CSRF token is missing or wrong: reload the page and try again", http.StatusForbidden)
				return
			}
		}
		h(w, r, u)
	}
}

// api wraps an API handler: 401 in JSON without a token, and a POST made
// with the session cookie needs the CSRF token in X-CSRF-Token.
func (s *Server) api(h func(http.ResponseWriter, *http.Request, *who)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, ok := s.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolloop"`)
			writeError(w, http.StatusUnauthorized, "unauthorized: send Authorization: Bearer TOKEN with a token from the users file")
			return
		}
		if r.Method == http.MethodPost {
			limitBody(w, r)
			if u.session != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(u.csrf)) != 1 {
				writeError(w, http.StatusForbidden, "a request signed in with the session cookie needs the session's CSRF token in "+csrfHeader)
				return
			}
		}
		h(w, r, u)
	}
}

// maxBody bounds the body of a POST.
const maxBody = 64 << 10

// signinPage shows the sign-in form, with a fresh CSRF token in a cookie
// and the form (the session does not exist yet).
func (s *Server) signinPage(w http.ResponseWriter, r *http.Request) {
	s.renderSignin(w, r, "", http.StatusOK)
}

func (s *Server) renderSignin(w http.ResponseWriter, r *http.Request, msg string, code int) {
	token := randomID()
	http.SetCookie(w, &http.Cookie{Name: signinCookie, Value: token, Path: "/signin", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || s.opts.SecureCookies, MaxAge: 600})
	s.render(w, code, "signin", map[string]any{"CSRF": token, "Next": safeNext(r.FormValue("next")), "Error": msg})
}

// signin checks the token from the form and starts a session.
func (s *Server) signin(w http.ResponseWriter, r *http.Request) {
	limitBody(w, r)
	c, err := r.Cookie(signinCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostFormValue(csrfField))) != 1 {
		s.renderSignin(w, r, "The sign-in form expired or was not sent by this site; try again.", http.StatusForbidden)
		return
	}
	name, ok := s.opts.Users.lookup(strings.TrimSpace(r.PostFormValue("token")))
	if !ok {
		s.renderSignin(w, r, "That token is not in the users file.", http.StatusUnauthorized)
		return
	}
	id := s.sessions.create(name)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || s.opts.SecureCookies, MaxAge: int(s.opts.SessionTTL / time.Second)})
	http.SetCookie(w, &http.Cookie{Name: signinCookie, Value: "", Path: "/signin", MaxAge: -1})
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

func (s *Server) signout(w http.ResponseWriter, r *http.Request, u *who) {
	if u.session != "" {
		s.sessions.end(u.session)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1})
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// safeNext keeps a sign-in's destination on this site: a path, never
// another host. Browsers read "//evil", "/\\evil" and "/<TAB>/evil" as
// another host, and http.Redirect cleans the path ("/a/../\\evil" becomes
// "/\\evil"), so a backslash or a control character anywhere is refused.
func safeNext(next string) string {
	const home = "/runs"
	if next == "" || next[0] != '/' || strings.ContainsFunc(next, func(r rune) bool {
		return r == '\\' || r < 0x20 || r == 0x7f
	}) {
		return home
	}
	if strings.HasPrefix(next, "//") {
		return home
	}
	return next
}

// bodyReadTimeout bounds how long a client may take to send a form or an
// answer's body.
const bodyReadTimeout = 30 * time.Second

// limitBody bounds r's body in size (maxBody) and in time
// (bodyReadTimeout), so that a client sending it slowly cannot hold the
// connection and its goroutine. The server sets no ReadTimeout: that
// would also end the live streams, whose requests have no body.
func limitBody(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	// A ResponseWriter that cannot set deadlines (a test's recorder) is
	// left without one.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
}
