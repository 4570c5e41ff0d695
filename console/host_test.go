package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/console"
)

// TestHostHeader: a request whose Host is not a loopback name on the
// console's port (a page that rebinds its own name to 127.0.0.1) is
// refused with 421 and a message naming the host; loopback names on the
// right port are served; AllowRemote serves any host.
func TestHostHeader(t *testing.T) {
	e := newEnv(t, nil)
	u, _ := url.Parse(e.ts.URL)
	port := u.Port()
	for _, c := range []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1:" + port, true},
		{"localhost:" + port, true},
		{"LOCALHOST.:" + port, true},
		{"[::1]:" + port, true},
		{"evil.example:" + port, false},
		{"evil.example", false},
		{"localhost.evil.example:" + port, false},
		{"10.0.0.1:" + port, false},
		{"localhost:1", false},
		{"127.0.0.1", false}, // port 80, not the console's
	} {
		for _, path := range []string{"/api/runs", "/runs", "/signin"} {
			resp, body := e.do(req{path: path, token: aliceToken, host: c.host})
			if c.ok {
				if resp.StatusCode != http.StatusOK {
					t.Errorf("GET %s with Host %s: %d %s, want 200", path, c.host, resp.StatusCode, body)
				}
				continue
			}
			if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(body, c.host) {
				t.Errorf("GET %s with Host %s: %d %s, want 421 naming the host", path, c.host, resp.StatusCode, body)
			}
			if strings.Contains(body, "run_id") || strings.Contains(body, "csrf") {
				t.Errorf("GET %s with Host %s answered with the console's content: %s", path, c.host, body)
			}
		}
	}

	remote := newEnv(t, func(o *console.Options) { o.AllowRemote = true })
	if resp, body := remote.do(req{path: "/api/runs", token: aliceToken, host: "console.example.com"}); resp.StatusCode != http.StatusOK {
		t.Errorf("with AllowRemote, Host console.example.com: %d %s, want 200", resp.StatusCode, body)
	}
}
