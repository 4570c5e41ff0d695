package postgres_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/postgres/pgtest"
	"github.com/toolloop/toolloop/tool"
)

// freezeProxy forwards TCP connections on loopback to a server, and on
// freeze stops forwarding without closing anything, as a stopped server
// or a partition that drops packets would look to a client: its
// connections stay open and nothing comes back. A proxy rather than
// SIGSTOP, so that a server other tests share is never stopped.
type freezeProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	frozen bool
	thawed *sync.Cond
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{ln: ln, target: target}
	p.thawed = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *freezeProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// pipe copies from src to dst, holding what it read while frozen.
func (p *freezeProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen {
				p.thawed.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *freezeProxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

func (p *freezeProxy) thaw() {
	p.mu.Lock()
	p.frozen = false
	p.thawed.Broadcast()
	p.mu.Unlock()
}

func (p *freezeProxy) close() {
	p.ln.Close()
	p.thaw()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// viaProxy returns connString (a URL) with its host and port replaced by
// the proxy's, and the server's address.
func viaProxy(t *testing.T, connString string) (server string, rewrite func(addr string) string) {
	t.Helper()
	u, err := url.Parse(connString)
	if err != nil || u.Host == "" {
		t.Skipf("TOOLLOOP_POSTGRES_URL must be a postgres:// URL with a host for this test: %v", err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5432")
	}
	return host, func(addr string) string {
		v := *u
		v.Host = addr
		return v.String()
	}
}

// A Postgres server that stops answering (the proxy between it and the
// run freezes, as SIGSTOP or a partition without a reset would) while a
// run records its end holds the run no longer than its deadline plus
// store.DeadlineGrace: the run ends interrupted, with the usual message,
// and resumes once the server answers again. (The last append, and the
// lease's release, used to wait for the server for good.)
func TestFrozenServerInterruptsTheRun(t *testing.T) {
	u, _ := pgtest.FreshSchema(t)
	server, rewrite := viaProxy(t, u)
	p := newFreezeProxy(t, server)
	st := open(t, rewrite(p.ln.Addr().String()), nil)

	const deadline = 500 * time.Millisecond
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		if req.Step == 1 {
			p.freeze() // the server stops answering while the model thinks
		}
		return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Text: "done"}, FinishReason: "stop"}, nil
	})
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	cfg := loop.Config{
		Model: model, Tools: reg, Store: st, Executor: executor.New(&executor.Options{Ledger: st}),
		Budgets: loop.Budgets{Deadline: deadline}, LeaseTTL: time.Second,
		NewRunID: func() string { return "frozen-pg" },
	}
	start := time.Now()
	type ran struct {
		res *loop.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := loop.Run(context.Background(), cfg, []llm.Message{llm.UserMessage("hi")})
		done <- ran{res, err}
	}()
	var got ran
	select {
	case got = <-done:
	case <-time.After(deadline + store.DeadlineGrace + 10*time.Second):
		p.thaw()
		<-done
		t.Fatalf("the run was still going %v after it started, with its server frozen", time.Since(start).Round(time.Millisecond))
	}
	if took, within := time.Since(start), deadline+store.DeadlineGrace+time.Second; took > within {
		t.Errorf("the run took %v with its server frozen, want at most %v", took.Round(time.Millisecond), within)
	}
	var ie *loop.InterruptedError
	if got.res != nil || !errors.As(got.err, &ie) || !errors.Is(got.err, context.DeadlineExceeded) {
		t.Fatalf("frozen server: result %v, err = %v; want an *InterruptedError from a store call that timed out", got.res != nil, got.err)
	}
	if msg := got.err.Error(); !strings.Contains(msg, "run frozen-pg interrupted") || !strings.Contains(msg, "resume it once the store is back") {
		t.Errorf("message %q is not the usual interrupted one", msg)
	}

	// The server answers again: the run resumes from what it recorded
	// (its lease, which could not be released, expires first: its holder
	// is this process, which runs), and stops, its time spent.
	p.thaw()
	r, err := loop.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := r.Resume(ctx, "frozen-pg")
	for end := time.Now().Add(10 * time.Second); res == nil && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		res, err = r.Resume(ctx, "frozen-pg")
	}
	if res == nil || res.Status != loop.DeadlineExceeded {
		t.Fatalf("resumed: %+v, %v; want the run stopped with deadline_exceeded", res, err)
	}
}
