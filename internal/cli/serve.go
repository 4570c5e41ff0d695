package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/replay"
	"github.com/toolloop/toolloop/store"
)

// serve runs the "serve" subcommand: the web console over the backend,
// until the program is interrupted.
func (c *cli) serve(ctx context.Context, drv Driver, args []string) int {
	fs := flag.NewFlagSet("toolloop serve", flag.ContinueOnError)
	addr := fs.String("addr", defaultServeAddr, "listen on `HOST:PORT`")
	allowRemote := fs.Bool("allow-remote", false, "allow an --addr beyond loopback, and requests for any host name")
	usersFile := fs.String("users", "", "who may sign in: `FILE` with one NAME TOKEN a line")
	secure := fs.Bool("secure-cookies", false, "mark the sign-in cookies Secure (HTTPS only): for a console reached through a proxy that ends TLS")
	open := drv.Flags("serve", fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError("serve", err, nil)
	}
	if len(pos) > 0 {
		fmt.Fprintf(c.stderr, "toolloop serve: unexpected argument %q (run 'toolloop help serve')\n", pos[0])
		return exitUsage
	}
	if *usersFile == "" {
		fmt.Fprintf(c.stderr, "toolloop serve: --users FILE is missing: nobody could sign in; write one NAME TOKEN a line (a token from: openssl rand -hex 16) and pass it\n")
		return exitUsage
	}
	if err := console.CheckAddr(*addr, *allowRemote); err != nil {
		fmt.Fprintf(c.stderr, "toolloop serve: %v\n", err)
		return exitUsage
	}
	users, err := console.LoadUsers(*usersFile)
	if err != nil {
		fmt.Fprintf(c.stderr, "toolloop serve: %v\n", err)
		return exitUsage
	}
	b, err := open(ctx, &Kit{c})
	if err != nil {
		return c.fail("serve", err)
	}
	defer c.closeBackend("serve", b)
	info := b.Info()
	srv, err := console.New(console.Options{
		Backend:       b,
		Users:         users,
		GoesOn:        info.GoesOn,
		SecureCookies: *secure,
		AllowRemote:   *allowRemote,
		ResumeCommand: func(runID string) string {
			return "toolloop resume " + shellQuote(runID) + info.Flags
		},
		// A sandbox run replays with its scenario's configuration: the
		// view says whether this version decides it as it was decided.
		Replay: func(ctx context.Context, events []loop.Event) (*replay.Report, error) {
			cfg, done, err := c.replayConfig(ctx, events[0].Start, &sourceFlags{})
			if done != nil {
				defer done()
			}
			if err != nil {
				return nil, err
			}
			return replay.Run(ctx, events, cfg)
		},
	})
	if err != nil {
		return c.fail("serve", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		srv.Close()
		return c.fail("serve", &usageErr{fmt.Sprintf("cannot listen on %s: %v; pick another --addr", *addr, err)})
	}
	// No ReadTimeout or WriteTimeout: they would end the live streams.
	// The console bounds each request body's reading itself.
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	fmt.Fprintf(c.stdout, "toolloop console on http://%s for %d user(s), runs %s; stop it with Ctrl-C\n",
		ln.Addr(), len(users.Names()), info.Where)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	// The live streams and the resumes end first, so that shutting the
	// server down waits for no stream.
	srv.Close()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if serr := hs.Shutdown(sctx); err == nil && serr != nil {
		err = serr
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return c.fail("serve", err)
	}
	return exitOK
}

// defaultServeAddr is loopback: the console is for this machine unless
// told otherwise (--addr with --allow-remote).
const defaultServeAddr = "127.0.0.1:8080"

// Records implements console.RecordReader for the local store: the
// console reads the stored events themselves, which it decodes with large
// payloads cut and, following a run live, only from where it got to.
func (l *local) Records(ctx context.Context, runID string, after int) ([]store.EventRecord, error) {
	st, err := l.store(false)
	if err != nil {
		return nil, err
	}
	recs, err := st.Events(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	i := 0
	for i < len(recs) && recs[i].Seq <= after {
		i++
	}
	return recs[i:], nil
}

func serveUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: toolloop serve --users FILE [--db PATH] [--addr HOST:PORT] [--allow-remote] [--secure-cookies]

Serves the web console: the runs in the store (filter by status, session,
calls awaiting approval), each run's messages, timeline, plans, policy
decisions, budgets, stop line and diagnosis, live while it runs, and an
approvals inbox where a signed-in person approves or denies a paused call
with a note. The answer is recorded under the person's name, and the run is
resumed in this process (a toolloop run run, whose provider and tools only
its command line knows, waits for 'toolloop resume' with them instead).
A sandbox run's replay view (/runs/RUN_ID/replay) re-decides it with this
version and its scenario's configuration and shows the first decision that
differs, if any (toolloop replay does the same with other configurations).
The pages use a JSON API that scripts can call too (see the README).

Flags:
  --users FILE     who may sign in: one "NAME TOKEN" a line (# comments and
                   blank lines are skipped; tokens at least 16 characters,
                   each person's their own). The API takes
                   "Authorization: Bearer TOKEN"; a browser signs in with the
                   token once. Nothing about runs is served without one.
  --db PATH        the SQLite store (default: toolloop.db in $XDG_DATA_HOME/toolloop
                   or ~/.local/share/toolloop)
  --addr HOST:PORT where to listen (default 127.0.0.1:8080)
  --allow-remote   allow an --addr beyond loopback, and requests for any host
                   name (without it, a request whose Host header is not
                   localhost, 127.0.0.1 or [::1] with the console's port is
                   refused with 421); without TLS in front of it, tokens and
                   cookies then cross the network in clear
  --secure-cookies mark the sign-in cookies Secure (sent over HTTPS only),
                   for a console behind a proxy that ends TLS

Runs until interrupted (Ctrl-C).
`)
}
