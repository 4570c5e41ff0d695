package console

import (
	"fmt"
	"net"
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
