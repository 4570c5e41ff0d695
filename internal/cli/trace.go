package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/trace"
	traceotel "github.com/toolloop/toolloop/trace/otel"
)

// traceCmd runs the "trace" subcommand: show or diagnose a run log.
func (c *cli) traceCmd(ctx context.Context, drv Driver, args []string) int {
	if len(args) == 0 {
		traceUsage(c.stderr)
		return exitUsage
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "show", "diagnose":
		return c.traceRun(ctx, drv, sub, rest)
	case "help", "-h", "-help", "--help":
		traceUsage(c.stdout)
		return exitOK
	default:
		fmt.Fprintf(c.stderr, "toolloop trace: unknown command %q; commands: show, diagnose (run 'toolloop trace --help')\n", sub)
		return exitUsage
	}
}

func traceUsage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  toolloop trace show FILE|RUN_ID [--log DIR | --db PATH] [--width N]
  toolloop trace diagnose FILE|RUN_ID [--log DIR | --db PATH] [--json]

A run log is a JSON Lines file, one event per line, written per run as
DIR/RUN_ID.jsonl (toolloop demo --log DIR, toolloop run). FILE|RUN_ID names a
log file, a run ID in DIR, or the beginning of exactly one run ID in DIR.

show      renders the run for a person: its configuration, the message chain
          with each result beside its call ID, the calls with their policy
          decisions, stages, attempts and latencies, the planner's decision
          tables, a timeline of spans with durations and bars (the calls of a
          parallel stage side by side), the budget checks and the stop line.
diagnose  walks the run and names what looks wrong, the first suspicious
          point first: the same call repeated, a result the model did not
          see, results not matched to their calls by ID, a write retried
          without an idempotency key, results lost to another call's failure,
          cost rising turn after turn, a budget running out.

Flags:
  --log DIR   where run logs are (default: the runs directory in
              $XDG_DATA_HOME/toolloop, or ~/.local/share/toolloop)
  --db PATH   read the run's log from the SQLite store at PATH instead
              (RUN_ID only): every run recorded there, logged or not; with
              --log, the store a log file that lags behind it (its writer
              was killed) is completed from (default: the default store)
  --width N   show: width of the timeline's bars (default 40)
  --json      diagnose: print the findings as JSON, one per line
  -h, --help  show this help

Exit status: 0 on success (diagnose: nothing suspicious), 1 when diagnose
reports findings or the log cannot be read, 2 for a usage error or a log
that cannot be found.
`)
}

// logReader is a backend whose runs may leave logs of their own, which
// trace reads rather than Backend.Events: the local backend's JSON Lines
// files.
type logReader interface {
	// readLog reads the log ref names (a file, a run ID, the beginning of
	// one) and says where it came from.
	readLog(ctx context.Context, ref string) (events []loop.Event, source string, err error)
}

func (c *cli) traceRun(ctx context.Context, drv Driver, sub string, args []string) int {
	cmd := "trace " + sub
	fs := flag.NewFlagSet("toolloop "+cmd, flag.ContinueOnError)
	width := fs.Int("width", 40, "bar width")
	asJSON := fs.Bool("json", false, "findings as JSON lines")
	open := drv.Flags("trace", fs)
	// Flags may come before or after the run.
	refs, err := parseFlags(fs, args)
	if err != nil {
		return c.usageError(cmd, err, traceUsage)
	}
	if len(refs) != 1 {
		fmt.Fprintf(c.stderr, "toolloop %s: want one RUN_ID (or a run log FILE), got %d\n", cmd, len(refs))
		return exitUsage
	}
	if ref := refs[0]; !looksLikeFile(ref) && !isFile(ref) && c.badRunID(cmd, "RUN_ID", ref) {
		return exitUsage
	}
	if *width < 10 || *width > 400 {
		fmt.Fprintf(c.stderr, "toolloop %s: --width %d: want 10 to 400\n", cmd, *width)
		return exitUsage
	}
	b, err := open(ctx, &Kit{c})
	if err != nil {
		return c.fail(cmd, err)
	}
	defer c.closeBackend(cmd, b)
	var (
		evs    []loop.Event
		source string
	)
	if lr, ok := b.(logReader); ok {
		evs, source, err = lr.readLog(ctx, refs[0])
	} else {
		evs, err = b.Events(ctx, refs[0])
		source = "run " + refs[0] + " " + b.Info().Where
	}
	if errors.Is(err, store.ErrUnknownRun) {
		err = unknownRun(b, refs[0])
	}
	// A log whose last line was cut off (its writer died mid-line) is
	// shown up to there, with a note on stderr.
	var cut *trace.TruncatedError
	if errors.As(err, &cut) && len(evs) > 0 {
		fmt.Fprintf(c.stderr, "toolloop %s: note: %s ends in a line that was cut off (line %d, %d bytes); showing the %d events before it\n",
			cmd, source, cut.Line, cut.Bytes, len(evs))
		err = nil
	}
	if err != nil {
		return c.fail(cmd, err)
	}
	if len(evs) == 0 {
		fmt.Fprintf(c.stderr, "toolloop %s: %s holds no events\n", cmd, source)
		return exitFail
	}
	if sub == "show" {
		return c.show(evs, source, *width, b.Info())
	}
	return diagnose(evs, source, *asJSON, c.stdout, c.stderr)
}

// show renders a run's events; source names where they came from. A run
// answered and waiting to be resumed ends with the command that resumes
// it on info's backend.
func (c *cli) show(events []loop.Event, source string, width int, info Info) int {
	if err := trace.Show(c.stdout, events, &trace.ShowOptions{Width: width}); err != nil {
		fmt.Fprintf(c.stderr, "toolloop trace show: %s: %v\n", source, err)
		return exitFail
	}
	if loop.ListStatus(loop.Replay(events), events) == loop.AnsweredStatus && !info.GoesOn && events[0].Start != nil {
		fmt.Fprintf(c.stdout, "resume it with: %s\n", resumeCommand(events[0].Start.RunID, info, events))
	}
	return exitOK
}

func diagnose(events []loop.Event, path string, asJSON bool, stdout, stderr io.Writer) int {
	findings := trace.Diagnose(events)
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, f := range findings {
			if err := enc.Encode(f); err != nil {
				fmt.Fprintf(stderr, "toolloop trace diagnose: %v\n", err)
				return exitFail
			}
		}
	} else {
		run := strings.TrimSuffix(filepath.Base(path), trace.LogExt)
		if ev := events[0]; ev.Start != nil {
			run = ev.Start.RunID
		}
		status := "not stopped"
		if last := events[len(events)-1]; last.Kind == loop.Stopped {
			status = "status=" + string(last.Status)
		} else if loop.ListStatus(loop.Replay(events), events) == loop.AnsweredStatus {
			status = "status=" + loop.AnsweredStatus + ", waiting to be resumed"
		}
		if len(findings) == 0 {
			fmt.Fprintf(stdout, "run %s (%s): nothing suspicious in %d events\n", run, status, len(events))
			return exitOK
		}
		fmt.Fprintf(stdout, "run %s (%s): %d finding(s), the first suspicious point first\n", run, status, len(findings))
		for i, f := range findings {
			ids := ""
			if len(f.CallIDs) > 0 {
				ids = " calls " + strings.Join(f.CallIDs, ", ")
			}
			fmt.Fprintf(stdout, "%d. seq %d step %d %s%s\n   %s\n", i+1, f.Seq, f.Step, f.Kind, ids, f.Message)
		}
	}
	if len(findings) > 0 {
		return exitFail
	}
	return exitOK
}

// isFile reports whether path is a file that is there.
func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// looksLikeFile reports whether ref names a file rather than a run ID.
func looksLikeFile(ref string) bool {
	return strings.ContainsAny(ref, `/\`) || strings.HasSuffix(ref, trace.LogExt)
}

// Exporters selectable from the command line.
const (
	exporterNone   = "none"
	exporterStdout = "stdout"
	exporterOTLP   = "otlp"
)

// traceConfig says where a command's runs are recorded.
type traceConfig struct {
	// LogDir, if set, gets one JSON Lines log per run.
	LogDir string
	// Exporter is none (or ""), stdout or otlp.
	Exporter string
	// OTLPEndpoint is the OTLP/HTTP endpoint: a URL, or host:port for
	// http; without a path, /v1/traces. Empty means the exporter's default
	// (OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318).
	OTLPEndpoint string
	// Provider is gen_ai.provider.name.
	Provider string
	// Stdout receives the stdout exporter's spans.
	Stdout io.Writer
}

// observersFromFlags returns the observer the --log, --exporter and
// --otlp-endpoint flags ask for (nil when they ask for nothing), and a
// function that flushes and closes what it opened; call it once the runs
// are done. The stdout exporter writes its spans to stdout; provider is
// gen_ai.provider.name ("toolloop.scripted" for the sandbox's model).
func observersFromFlags(stdout io.Writer, provider, logDir, exporter, otlpEndpoint string) (loop.Observer, func(context.Context) error, error) {
	return newObservers(traceConfig{LogDir: logDir, Exporter: exporter, OTLPEndpoint: otlpEndpoint,
		Provider: provider, Stdout: stdout})
}

// traceFlags are the flags of the commands that drive runs and record them
// as they go: --log, --exporter, --otlp-endpoint.
type traceFlags struct {
	logDir, exporter, otlpEndpoint string
}

func addTraceFlags(fs *flag.FlagSet) *traceFlags {
	t := &traceFlags{}
	fs.StringVar(&t.logDir, "log", "", "write one JSON Lines log per run to `DIR`")
	fs.StringVar(&t.exporter, "exporter", exporterNone, "export spans: none, stdout or otlp")
	fs.StringVar(&t.otlpEndpoint, "otlp-endpoint", "", "OTLP/HTTP endpoint `URL` for --exporter otlp")
	return t
}

// newObservers builds the observers cfg asks for.
func newObservers(cfg traceConfig) (loop.Observer, func(context.Context) error, error) {
	var obs []loop.Observer
	var closers []func(context.Context) error
	shutdown := func(ctx context.Context) error {
		var errs []error
		for _, c := range closers {
			errs = append(errs, c(ctx))
		}
		return errors.Join(errs...)
	}
	if cfg.LogDir != "" {
		fl := trace.FileObserver(cfg.LogDir, nil)
		obs = append(obs, fl)
		closers = append(closers, func(context.Context) error { return fl.Close() })
	}
	var (
		exp    sdktrace.SpanExporter
		batch  bool
		closer func()
		err    error
	)
	switch cfg.Exporter {
	case "", exporterNone:
	case exporterStdout:
		w := cfg.Stdout
		if w == nil {
			w = os.Stdout
		}
		exp, err = stdouttrace.New(stdouttrace.WithWriter(w))
	case exporterOTLP:
		// A client of our own, so that shutting down closes its
		// connections.
		transport := http.DefaultTransport.(*http.Transport).Clone()
		opts := []otlptracehttp.Option{otlptracehttp.WithHTTPClient(&http.Client{Transport: transport, Timeout: 10 * time.Second})}
		if cfg.OTLPEndpoint != "" {
			u, uerr := otlpURL(cfg.OTLPEndpoint)
			if uerr != nil {
				return nil, nil, uerr
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u))
		}
		exp, err = otlptracehttp.New(context.Background(), opts...)
		batch, closer = true, transport.CloseIdleConnections
	default:
		return nil, nil, fmt.Errorf("unknown exporter %q; want %s, %s or %s", cfg.Exporter, exporterNone, exporterStdout, exporterOTLP)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("exporter %s: %w", cfg.Exporter, err)
	}
	if exp != nil {
		res := resource.NewSchemaless(attribute.String("service.name", "toolloop"))
		process := sdktrace.WithSyncer(exp) // stdout: spans print as runs go
		if batch {
			process = sdktrace.WithBatcher(exp)
		}
		tp := sdktrace.NewTracerProvider(process, sdktrace.WithResource(res))
		obs = append(obs, traceotel.NewObserver(tp, &traceotel.Options{ProviderName: cfg.Provider}))
		closers = append(closers, func(ctx context.Context) error {
			err := tp.Shutdown(ctx)
			if closer != nil {
				closer()
			}
			if err != nil {
				return fmt.Errorf("exporter %s: %w", cfg.Exporter, err)
			}
			return nil
		})
	}
	switch len(obs) {
	case 0:
		return nil, shutdown, nil
	case 1:
		return obs[0], shutdown, nil
	}
	return loop.Observers(obs...), shutdown, nil
}

// otlpURL makes an OTLP/HTTP traces URL of an endpoint: http:// when no
// scheme is given, /v1/traces when no path is.
func otlpURL(endpoint string) (string, error) {
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("--otlp-endpoint %q: want a URL such as http://localhost:4318, or host:port", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}
