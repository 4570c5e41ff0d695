package mcp

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

// sendTrace records, for one tool call over HTTP, whether its request went
// out and what status the server answered with. A failure before the
// request left is safe to report as such; one after it, for a write, is
// an unknown outcome: the server may have run the tool and lost only the
// answer.
type sendTrace struct {
	wrote  atomic.Bool  // the request's headers were written to a connection
	status atomic.Int32 // the response's status code; 0 when none came
}

type sendTraceKey struct{}

func withSendTrace(ctx context.Context, t *sendTrace) context.Context {
	return context.WithValue(ctx, sendTraceKey{}, t)
}

// traceSends returns a copy of hc whose transport fills in the sendTrace
// of a request's context, if it has one. The SDK makes a tool call's HTTP
// request with the call's context, values included.
func traceSends(hc *http.Client) *http.Client {
	c := *hc
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = sendTracer{base}
	return &c
}

type sendTracer struct{ base http.RoundTripper }

func (s sendTracer) RoundTrip(req *http.Request) (*http.Response, error) {
	t, _ := req.Context().Value(sendTraceKey{}).(*sendTrace)
	if t == nil {
		return s.base.RoundTrip(req)
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteHeaders: func() { t.wrote.Store(true) },
	}))
	resp, err := s.base.RoundTrip(req)
	if resp != nil {
		t.status.Store(int32(resp.StatusCode))
	}
	return resp, err
}

// mayHaveRun reports whether a request that failed without a JSON-RPC
// answer may have reached the server and run: it was written, and no
// status came back that says it was refused (4xx, or 503 for a server
// shedding load).
func (t *sendTrace) mayHaveRun() bool {
	if !t.wrote.Load() {
		return false
	}
	st := t.status.Load()
	return !(st >= 400 && st < 500 || st == http.StatusServiceUnavailable)
}
