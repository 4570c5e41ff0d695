package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/trace"
)

// localDriver makes the local backend: runs driven in this process and
// kept in a SQLite store (--db PATH, by default toolloop.db in the data
// directory), their logs in a directory of JSON Lines files (--log DIR).
type localDriver struct{}

// Flags implements Driver: --db for every command but trace, which reads
// run logs (--log); for run and resume also the provider and tool flags
// and the flags that record a run as it goes (--log, --exporter,
// --otlp-endpoint).
func (localDriver) Flags(cmd string, fs *flag.FlagSet) Opener {
	b := &local{cmd: cmd}
	switch cmd {
	case "trace":
		fs.StringVar(&b.logDir, "log", "", "run log `DIR`")
		fs.StringVar(&b.db, "db", "", "read the run's log from the SQLite store at `PATH`")
		return b.open
	case "demo":
		fs.StringVar(&b.db, "db", "", "record the runs in the SQLite store at `PATH`")
		return b.open
	case "serve":
		// The console resumes sandbox runs, whose model and tools come
		// from their scenario, with no flags of theirs.
		fs.StringVar(&b.db, "db", "", "the SQLite store at `PATH`")
		b.src, b.tf = &sourceFlags{}, &traceFlags{}
		return b.open
	}
	fs.StringVar(&b.db, "db", "", "the SQLite store at `PATH`")
	if cmd == "run" || cmd == "resume" {
		b.src = addSourceFlags(fs)
		b.tf = addTraceFlags(fs)
	}
	if cmd == "resume" {
		fs.StringVar(&b.pricesFile, "prices", "", "not for resume: a run keeps the price its log recorded")
		fs.BoolVar(&b.stream, "stream", false, "ask the model for each turn as a stream, whatever the run recorded")
		fs.BoolVar(&b.noStream, "no-stream", false, "ask the model for whole turns, whatever the run recorded")
	}
	return b.open
}

// local is the local backend.
type local struct {
	c   *cli
	cmd string
	// The flags.
	db, logDir, pricesFile string
	src                    *sourceFlags
	tf                     *traceFlags
	// stream and noStream are resume's --stream and --no-stream, which
	// override the run's recorded choice.
	stream, noStream bool

	// resuming makes resumes one at a time: a resume keeps what it
	// opens (the order book, observers, closers) in the fields below,
	// and toolloop serve's console resumes runs from many requests.
	resuming sync.Mutex

	path    string // the store's file, once known
	st      *sqlite.Store
	book    *orders.SQLiteBook // the store's order book, once opened
	closers []func() error
}

// open implements Opener: the commands that read runs need the store to
// exist, and open it now; run and demo make it when they first need it.
func (b *local) open(ctx context.Context, k *Kit) (Backend, error) {
	b.c = k.c
	if b.stream && b.noStream {
		return nil, &usageErr{"--stream and --no-stream: give one or the other (neither: as the run did)"}
	}
	switch b.cmd {
	case "run", "demo", "trace":
		return b, nil
	}
	if _, err := b.store(false); err != nil {
		return nil, err
	}
	return b, nil
}

// store opens the store, with create making it if it does not exist.
func (b *local) store(create bool) (*sqlite.Store, error) {
	if b.st != nil {
		return b.st, nil
	}
	path, err := b.c.dbPath(b.db)
	if err != nil {
		return nil, &usageErr{err.Error()}
	}
	b.path = path
	var st *sqlite.Store
	if b.cmd == "runs" || b.cmd == "runs export" || b.cmd == "trace" {
		// Commands that only read open the store read-only: they never
		// create, migrate or write it.
		st, err = openStore(path, storeReadOnly)
	} else if create {
		st, err = openStore(path, storeCreate)
	} else {
		st, err = openStore(path, storeExisting)
	}
	if err != nil {
		return nil, err
	}
	b.st = st
	b.closers = append(b.closers, st.Close)
	return st, nil
}

// orderBook opens the store's order book.
func (b *local) orderBook(ctx context.Context) (*orders.SQLiteBook, error) {
	if b.book != nil {
		return b.book, nil
	}
	st, err := b.store(true)
	if err != nil {
		return nil, err
	}
	if b.book, err = orders.OpenSQLiteBook(ctx, st.DB()); err != nil {
		return nil, err
	}
	return b.book, nil
}

// Info implements Backend.
func (b *local) Info() Info {
	if b.path == "" {
		b.path, _ = b.c.dbPath(b.db)
	}
	return Info{Flags: " --db " + shellQuote(b.path), Where: "in " + b.path}
}

// Close implements Backend: it flushes the run's log and spans, and
// closes the tools' servers and the store.
func (b *local) Close() error {
	var errs []error
	for i := len(b.closers) - 1; i >= 0; i-- {
		errs = append(errs, b.closers[i]())
	}
	b.closers = nil
	return errors.Join(errs...)
}

// observe returns the observer the --log, --exporter and --otlp-endpoint
// flags ask for; Close flushes it. A run's log goes to the default
// directory without --log.
func (b *local) observe(ctx context.Context, provider string) (loop.Observer, error) {
	logDir := b.tf.logDir
	if logDir == "" {
		dir, err := b.c.defaultLogDir()
		if err != nil {
			fmt.Fprintf(b.c.stderr, "toolloop %s: writing no run log: %v; pass --log DIR for one\n", b.cmd, err)
		}
		logDir = dir
	}
	obs, shutdown, err := observersFromFlags(b.c.stdout, provider, logDir, b.tf.exporter, b.tf.otlpEndpoint)
	if err != nil {
		return nil, &usageErr{err.Error()}
	}
	b.closers = append(b.closers, func() error { return shutdown(context.WithoutCancel(ctx)) })
	return obs, nil
}

// Start implements Backend: the run goes in this process, recorded in
// the store as it goes, on the model and tools the provider and tool
// flags name.
func (b *local) Start(ctx context.Context, req *Request) (*loop.Result, error) {
	if req.Detach {
		return nil, &usageErr{"--detach needs a backend whose runs outlive this command, such as a Temporal server's (the Temporal build's --temporal HOST:PORT); here the run goes on in this process"}
	}
	src := b.src
	src.model = req.Model
	if src.model == "" && src.provider == providerSandbox {
		src.model = orders.DeskModelName
	}
	if src.model == "" {
		return nil, &usageErr{"--model is missing: name the model, e.g. --model gpt-4.1"}
	}
	sets, err := src.toolSets()
	if err != nil {
		return nil, err
	}
	budgets := req.Budgets
	price, err := req.Price(src.model)
	if err != nil {
		return nil, err
	}
	if price != nil {
		budgets.Prices = loop.Prices{src.model: src.cachePrice(*price)}
	}
	model, provName, err := b.c.modelFor(ctx, src)
	if err != nil {
		return nil, err
	}
	if b.path, err = b.c.dbPath(b.db); err != nil {
		return nil, &usageErr{err.Error()}
	}
	obs, err := b.observe(ctx, provName)
	if err != nil {
		return nil, err
	}
	st, err := b.store(true)
	if err != nil {
		return nil, err
	}
	if req.ID != "" {
		if _, err := st.Events(ctx, req.ID); err == nil {
			return nil, &usageErr{fmt.Sprintf("run ID %s is already in use in %s; pick another --id, or look at that run with: toolloop trace show --db %s %s",
				req.ID, b.path, shellQuote(b.path), shellQuote(req.ID))}
		} else if !errors.Is(err, store.ErrUnknownRun) {
			return nil, err
		}
	}
	box, err := b.c.toolsFor(ctx, src, sqliteBook(st))
	if err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() error { box.close(); return nil })
	if req.Compensation == loop.CompensateWrites && !req.AtomicBatches && !anyAtomicGroup(box.reg) {
		// Compensation undoes the writes of a failed all-or-nothing
		// group; with no group at all it can never undo anything.
		fmt.Fprintf(b.c.stderr, "toolloop %s: warning: --compensate will undo nothing: no tool is in an all-or-nothing group; "+
			"add --atomic-batches, or give tools an atomic_group in --mcp-config\n", b.cmd)
	}
	def := ""
	if len(sets) > 0 {
		def = orders.SystemPrompt
	}
	cfg := runConfig(src, !req.NoStream, model, box.reg, st, obs)
	cfg.Identity = req.Identity
	cfg.Budgets = budgets
	cfg.Context = req.Context
	cfg.Watch = req.Watch
	cfg.OutputSchema, cfg.OutputRetries = req.OutputSchema, req.OutputRetries
	cfg.Compensation, cfg.AtomicBatches = req.Compensation, req.AtomicBatches
	if req.ID != "" {
		id := req.ID
		cfg.NewRunID = func() string { return id }
	}
	runner, err := loop.NewRunner(cfg)
	if err != nil {
		return nil, &usageErr{err.Error()}
	}
	res, err := runner.Run(ctx, req.Messages(def))
	if res == nil {
		return nil, err
	}
	return res, nil
}

// runConfig is the configuration of a toolloop run run that its flags
// and whether it streams decide; the caller adds identity and budgets.
// The flags are recorded in the run's prompt version (see recordedFlags),
// for resume.
func runConfig(src *sourceFlags, stream bool, model llm.Model, reg *tool.Registry, st *sqlite.Store, obs loop.Observer) loop.Config {
	return loop.Config{
		Stream:        stream,
		Model:         model,
		ModelName:     src.model,
		ModelTimeout:  src.modelTimeout,
		Tools:         reg,
		Policy:        src.policy(),
		Executor:      executor.New(&executor.Options{Ledger: st}),
		SessionID:     runSessionPrefix + src.provider + ":" + src.model,
		PromptVersion: runPromptPrefix + recordedFlags(src, stream),
		Store:         st,
		Observer:      obs,
	}
}

// Runs implements Backend.
func (b *local) Runs(ctx context.Context, f console.Filter) ([]console.Run, error) {
	list, err := b.st.Runs(ctx, f.Status)
	if err != nil {
		return nil, err
	}
	if f.Limit > 0 && len(list) > f.Limit {
		list = list[:f.Limit]
	}
	return console.SummaryRuns(list)
}

// Events implements Backend: the run's log in the store.
func (b *local) Events(ctx context.Context, runID string) ([]loop.Event, error) {
	st, err := b.store(false)
	if err != nil {
		return nil, err
	}
	return loadRun(ctx, st, runID)
}

// Decide implements Backend.
func (b *local) Decide(ctx context.Context, runID string, answer loop.Confirmation) error {
	return loop.Decide(ctx, b.st, runID, answer, time.Now())
}

// Resume implements Backend. A toolloop run run goes on with the same
// provider and tool flags, the budgets, identity and price its log
// recorded, and its API key read again; a sandbox run with its scenario
// (see resumeScenario).
func (b *local) Resume(ctx context.Context, runID string) (*loop.Result, error) {
	b.resuming.Lock()
	defer b.resuming.Unlock()
	events, err := b.Events(ctx, runID)
	if err != nil {
		return nil, err
	}
	start := events[0].Start
	if s, ok := orders.LookupSession(start.SessionID); ok {
		res, _, err := b.resumeScenario(ctx, s, runID)
		return res, err
	}
	if !strings.HasPrefix(start.SessionID, runSessionPrefix) {
		return nil, &usageErr{fmt.Sprintf("run %s has session %q: toolloop can resume the runs of toolloop demo and toolloop run, whose configuration it knows how to rebuild; resume others from the program that started them", runID, start.SessionID)}
	}
	recorded := resumeFlagsOf(start)
	sourceRecorded, streamed := splitRecorded(recorded)
	if s := loop.Replay(events); s.Done {
		// Ended, or still waiting for answers: nothing to drive, so no
		// provider is needed. Its log file may lag behind the store (its
		// writer was killed between a commit and the line): mend it.
		b.mendLog(events)
		return loop.Replay(events).Result(events), nil
	}
	src := b.src
	if !src.given() {
		return nil, &usageErr{fmt.Sprintf("run %s was started by toolloop run; resume it with the flags it ran with: toolloop resume %s --db %s%s",
			runID, shellQuote(runID), shellQuote(b.path), recorded)}
	}
	if got := src.canonical(); got != sourceRecorded {
		return nil, &usageErr{fmt.Sprintf("run %s ran with%s, not%s; resume it with: toolloop resume %s --db %s%s",
			runID, sourceRecorded, got, shellQuote(runID), shellQuote(b.path), recorded)}
	}
	if p := start.Price; p != nil && src.cachePrice(*p).CacheWriteInputPerMTok > p.CacheWriteInputPerMTok {
		// The run's cost is counted at the price its log recorded, which
		// the hour-long cache's writes would exceed: the budgets would
		// count less than the bill. --cache-ttl is not among the recorded
		// flags, so it can differ from the start's.
		write := p.CacheWriteInputPerMTok
		if write == 0 { // loop.Price's zero: the input rate
			write = p.InputPerMTok
		}
		return nil, &usageErr{fmt.Sprintf("run %s is priced for the five-minute cache (writes at $%g per million tokens); --cache-ttl 1h bills writes at $%g, more than its budgets count: resume it without --cache-ttl 1h",
			runID, write, src.cachePrice(*p).CacheWriteInputPerMTok)}
	}
	// The run streams as it did, unless told otherwise: a server that
	// answers only streamed requests then serves the resumed part too.
	stream := streamed
	switch {
	case b.stream:
		stream = true
	case b.noStream:
		stream = false
	}
	if b.pricesFile != "" {
		return nil, &usageErr{"--prices does not apply to resume: a run keeps the price its log recorded"}
	}
	model, provName, err := b.c.modelFor(ctx, src)
	if err != nil {
		return nil, err
	}
	box, err := b.c.toolsFor(ctx, src, sqliteBook(b.st))
	if err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() error { box.close(); return nil })
	if v := box.reg.Version(); v != start.ToolsVersion {
		return nil, &usageErr{fmt.Sprintf("run %s: its tools have changed since it started (tools version %s, now %s): an MCP server offers other tools, or other flags were given; the run cannot go on safely",
			runID, start.ToolsVersion, v)}
	}
	obs, err := b.observe(ctx, provName)
	if err != nil {
		return nil, err
	}
	cfg := runConfig(src, stream, model, box.reg, b.st, obs)
	cfg.Identity = start.Identity
	cfg.Budgets = start.Budgets
	if start.Price != nil {
		cfg.Budgets.Prices = loop.Prices{start.Model: *start.Price}
	}
	runner, err := loop.NewRunner(cfg)
	if err != nil {
		return nil, err
	}
	res, err := runner.Resume(ctx, runID)
	if res == nil {
		return nil, err
	}
	return res, nil
}

// RunScenario implements ScenarioRunner: in this process, recorded in the
// store with --db. An interactive scenario's run always is, and goes on
// the store's book and ledger: it pauses there until a person answers. The
// other scenarios keep their fresh book and private ledger, so that their
// outcomes never depend on what the file holds.
func (b *local) RunScenario(ctx context.Context, s orders.Scenario, obs loop.Observer) (*loop.Result, orders.OrderBook, error) {
	opts := orders.RunOptions{Observer: obs}
	if b.db != "" || s.Interactive {
		st, err := b.store(true)
		if err != nil {
			return nil, nil, err
		}
		opts.Store = st
	}
	if s.Interactive {
		book, err := b.orderBook(ctx)
		if err != nil {
			return nil, nil, err
		}
		opts.Book, opts.Ledger = book, b.st
	}
	return s.RunWith(ctx, opts)
}

// resumeScenario resumes a sandbox run. An interactive scenario's run goes
// on over the store's book and ledger; the others get a fresh book, as
// every run of theirs does.
func (b *local) resumeScenario(ctx context.Context, s orders.Scenario, runID string) (*loop.Result, orders.OrderBook, error) {
	if b.src.given() || b.pricesFile != "" || b.stream || b.noStream {
		return nil, nil, &usageErr{fmt.Sprintf("run %s is a sandbox run (%s): its model and tools come from the scenario; drop the provider and tool flags", runID, s.SessionID())}
	}
	opts := orders.RunOptions{Store: b.st}
	if s.Interactive {
		book, err := b.orderBook(ctx)
		if err != nil {
			return nil, nil, err
		}
		opts.Book, opts.Ledger = book, b.st
	}
	// Only the flags that record the run apply: its log goes where --log
	// says, and nowhere without it.
	obs, shutdown, err := observersFromFlags(b.c.stdout, scriptedProvider, b.tf.logDir, b.tf.exporter, b.tf.otlpEndpoint)
	if err != nil {
		return nil, nil, &usageErr{err.Error()}
	}
	b.closers = append(b.closers, func() error { return shutdown(context.WithoutCancel(ctx)) })
	opts.Observer = obs
	res, book, err := s.Resume(ctx, runID, opts)
	if res != nil && b.tf.logDir != "" {
		// An ended run is not driven, so nothing rewrites its log: mend
		// it if its writer died before the last lines.
		b.c.mendRunLog(b.cmd, b.tf.logDir, res.Events)
	}
	return res, book, err
}

// mendLog mends the log file of a run that is not driven now, in the
// --log directory or the default one, from events, its log in the store.
func (b *local) mendLog(events []loop.Event) {
	dir := b.tf.logDir
	if dir == "" {
		dir, _ = b.c.defaultLogDir()
	}
	b.c.mendRunLog(b.cmd, dir, events)
}

// readLog reads a run's log for toolloop trace: with --db (and no --log)
// from the store, else from a log file. ref is a log file, a run ID in the
// --log directory (by default the runs directory in the data directory),
// or the beginning of exactly one. The second result names where the log
// came from.
func (b *local) readLog(ctx context.Context, ref string) ([]loop.Event, string, error) {
	if b.db != "" && b.logDir == "" && !looksLikeFile(ref) {
		evs, err := b.Events(ctx, ref)
		return evs, "run " + ref + " in " + b.path, err
	}
	dir := b.logDir
	if dir == "" {
		var err error
		if dir, err = b.c.defaultLogDir(); err != nil && !looksLikeFile(ref) {
			return nil, "", &usageErr{fmt.Sprintf("%v; pass --log DIR", err)}
		}
	}
	events, path, err := trace.Open(ref, dir)
	if errors.Is(err, trace.ErrNoLog) {
		return nil, "", &usageErr{err.Error()}
	}
	if mended := b.mendFromStore(ctx, path, events); mended != nil {
		return mended, path, nil
	}
	return events, path, err
}

// mendFromStore mends the log file at path, whose events are read, when
// the store (--db, else the default one if there is one) holds more of
// the run's log, and returns the file's events then; nil when it did not
// mend it. The store is opened read-only; the file is written only when
// it is a prefix of the store's log.
func (b *local) mendFromStore(ctx context.Context, path string, read []loop.Event) []loop.Event {
	if len(read) == 0 || read[0].Start == nil || read[0].Start.RunID == "" {
		return nil
	}
	if last := read[len(read)-1]; last.Kind == loop.Stopped && last.Status != loop.ConfirmationRequired {
		// A whole run: nothing can be missing. A pause is not an end:
		// the answers that approve and deny record, and what a resume
		// did, come after it.
		return nil
	}
	dbPath, err := b.c.dbPath(b.db)
	if err != nil {
		return nil
	}
	if _, err := os.Stat(dbPath); err != nil {
		return nil // no store to mend from
	}
	st, err := b.store(false)
	if err != nil {
		return nil
	}
	stored, err := loop.LoadEvents(ctx, st, read[0].Start.RunID)
	if err != nil || len(stored) <= len(read) {
		return nil
	}
	n, err := mendLog(path, stored)
	if err != nil {
		fmt.Fprintf(b.c.stderr, "toolloop %s: note: %s lags behind the store %s and was left as it is: %v\n", b.cmd, path, dbPath, err)
		return nil
	}
	if n == 0 {
		return nil
	}
	fmt.Fprintf(b.c.stderr, "toolloop %s: note: %s lacked the last %d events of the run's log in %s (its writer died); they were added\n", b.cmd, path, n, dbPath)
	return stored
}

// openStore opens the SQLite store at path. With create, a missing file
// (and its directory) is made; without, a missing file is an error that
// says where runs come from.
func openStore(path string, mode storeMode) (*sqlite.Store, error) {
	if mode == storeCreate {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
		return sqlite.Open(path, nil)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, &usageErr{fmt.Sprintf("no store at %s (toolloop demo --mode confirm_refund and toolloop run record runs); pass --db PATH of the store the run is in", path)}
	}
	st, err := sqlite.Open(path, &sqlite.Options{Existing: true, ReadOnly: mode == storeReadOnly})
	if err != nil {
		return nil, &usageErr{fmt.Sprintf("%v; pass --db PATH of a toolloop store", err)}
	}
	return st, nil
}

// storeMode says how a command opens the store.
type storeMode int

const (
	// storeCreate makes the store if there is none (run, demo).
	storeCreate storeMode = iota
	// storeExisting opens a store that is there, to write to it
	// (approve, deny, resume).
	storeExisting
	// storeReadOnly opens a store that is there and writes nothing (runs,
	// trace).
	storeReadOnly
)

// loadRun reads a run's log from the store; an unknown run's error wraps
// store.ErrUnknownRun.
func loadRun(ctx context.Context, st store.EventLog, runID string) ([]loop.Event, error) {
	if _, err := st.Events(ctx, runID); err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	events, err := loop.LoadEvents(ctx, st, runID)
	if err != nil {
		return nil, err
	}
	if len(events) == 0 || events[0].Start == nil {
		return nil, fmt.Errorf("run %s: its log does not begin with its started event", runID)
	}
	return events, nil
}

// anyAtomicGroup reports whether a tool of reg belongs to an all-or-nothing
// group.
func anyAtomicGroup(reg *tool.Registry) bool {
	if reg == nil {
		return false
	}
	for _, t := range reg.Tools() {
		if t.AtomicGroup() != "" {
			return true
		}
	}
	return false
}
