package console

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A Host header without a port names the scheme's port, and an IPv6
// loopback address is then written in brackets without one: [::1] on
// port 80 is this machine's console as much as 127.0.0.1 is. It was
// refused, the brackets left on the name.
func TestCheckHostWithoutPort(t *testing.T) {
	local := &net.TCPAddr{IP: net.IPv6loopback, Port: 80}
	for _, c := range []struct {
		host string
		ok   bool
	}{
		{"[::1]", true},
		{"127.0.0.1", true},
		{"localhost", true},
		{"[::1]:80", true},
		{"[::1]:8080", false},
		{"[evil.example]", false},
		{"[::2]", false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/runs", nil)
		r.Host = c.host
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(local)))
		if msg := checkHost(r); (msg == "") != c.ok {
			t.Errorf("Host %s: refusal %q, want served=%v", c.host, msg, c.ok)
		}
	}
}
