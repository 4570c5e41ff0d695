package llmhttptest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// FloodServer is an HTTP server that answers every request with 200 and a
// JSON body of a given size, streamed without a Content-Length, and counts
// the bytes it managed to send. An adapter's cap on a response's size
// (llmhttp.ResponseGuard) is tested against it: with the cap in force the
// server sends little more than the cap before the client hangs up.
//
// Its sockets have small buffers (Client sets the client's), so that what
// the count says was sent is close to what the client read.
type FloodServer struct {
	*httptest.Server
	t       testing.TB
	written atomic.Int64
}

// floodChunk is how much the handler writes at a time, and the socket
// buffer size of both ends.
const floodChunk = 32 << 10

// NewFloodServer starts a FloodServer whose replies are size bytes long;
// it is closed when the test ends.
func NewFloodServer(t testing.TB, size int64) *FloodServer {
	f := &FloodServer{t: t}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		// A JSON object of size bytes: its head, padding, and "} at the
		// end, so that a client without a cap decodes it all.
		flusher, _ := w.(http.Flusher)
		chunk := []byte(`{"id":"flood","padding":"` + strings.Repeat("a", floodChunk))
		for sent := int64(0); sent < size; chunk = chunk[len(chunk)-floodChunk:] {
			part := chunk[:min(int64(len(chunk)), size-2-sent)]
			if int64(len(part)) == size-2-sent {
				part = append(part[:len(part):len(part)], `"}`...)
			}
			n, err := w.Write(part)
			sent += int64(n)
			f.written.Add(int64(n))
			if err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}))
	f.Server.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if tc, ok := c.(*net.TCPConn); ok && s == http.StateNew {
			_ = tc.SetWriteBuffer(floodChunk)
		}
	}
	f.Start()
	t.Cleanup(f.Close)
	return f
}

// Client returns an HTTP client for the server whose connections have a
// small receive buffer. Its idle connections are closed when the test
// ends.
func (f *FloodServer) Client() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(floodChunk)
		}
		return c, err
	}}
	f.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// Written closes the server, which waits for its handlers to return, and
// reports how many body bytes they sent in all.
func (f *FloodServer) Written() int64 {
	f.Close()
	return f.written.Load()
}
