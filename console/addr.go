package console

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// CheckAddr checks a listen address (HOST:PORT) for the console: a
// loopback host (127.0.0.0/8, ::1, localhost) unless allowRemote, since a
// console reachable from the network shows runs and takes approvals
// there. An empty host means every interface, which is remote too.
func CheckAddr(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: want HOST:PORT, e.g. 127.0.0.1:8080: %v", addr, err)
	}
	if port == "" {
		return fmt.Errorf("--addr %q: the port is missing, e.g. 127.0.0.1:8080", addr)
	}
	if allowRemote || isLoopback(host) {
		return nil
	}
	where := host
	if where == "" {
		where = "every interface"
	}
	return fmt.Errorf("--addr %s listens beyond loopback (%s): anyone who can reach it could try tokens; pass --allow-remote as well if that is meant (and put TLS in front of it), or listen on 127.0.0.1:%s", addr, where, port)
}

// isLoopback reports whether host names this machine only.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkHost refuses a request whose Host header does not name this
// machine's loopback interface on the port the request came in on. A web
// page elsewhere can make a browser send requests to 127.0.0.1 under a
// name it controls (DNS rebinding); the Host header keeps that name, and
// a console for this machine only answers to its own. It returns "" for a
// request to serve, else the reason to refuse it.
func checkHost(r *http.Request) string {
	host, port := r.Host, ""
	if h, p, err := net.SplitHostPort(r.Host); err == nil {
		host, port = h, p
	} else if len(host) > 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1] // an IPv6 address without a port
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "" || !isLoopback(name) {
		return fmt.Sprintf("this console answers to loopback names only (localhost, 127.0.0.1, [::1]), not to host %q: a console meant to be reached by another name needs toolloop serve --allow-remote (Options.AllowRemote)", r.Host)
	}
	// The port the connection came in on, when the server says it: a
	// name of this machine with another port is another service.
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, lport, err := net.SplitHostPort(la.String()); err == nil {
			if port == "" {
				port = "80"
				if r.TLS != nil {
					port = "443"
				}
			}
			if port != lport {
				return fmt.Sprintf("host %q names port %s, but this console listens on port %s", r.Host, port, lport)
			}
		}
	}
	return ""
}
