package loop_test

// The crash campaign: many durable runs with write tools are driven in a
// child process (this test binary, in TestCrashCampaignChild), which is
// killed with SIGKILL at random points — before it has started anything,
// between events, inside a model request, inside a write before or after its
// side effect, inside a ledger write, during an event append — and then
// started again on the same SQLite file, which resumes every unfinished run.
// This repeats until the wanted number of kills is reached; a last child
// then finishes every run, and the parent checks the file:
//
//   - every run has stopped, with a status;
//   - its log is the chain of events the decider asked for (seq 1..n, each
//     event the answer to the previous effect: none lost, none twice), and
//     the summary row agrees with it;
//   - its history gives each call exactly one result (llm.CheckHistory);
//   - a third of the runs also ask, in one turn, for a refund that is all
//     or nothing with a voucher that always fails (group "pair", policy
//     compensate): the refund (table campaign_pair_refunds), if it
//     happened, is reversed exactly once (table campaign_reversals), also
//     when the kill came inside the compensation, and the run's writes
//     say undone (or, for a refund that never happened, not run);
//   - no refund happened twice: the order book (table campaign_refunds, in
//     the same file, a plain table with an autoincrement id so that a
//     second refund shows up as a second row) has at most one row per
//     order, the ledger is done exactly for the orders with a row, and
//     every successful refund result names that row;
//   - after every kill, everything the child was told had been committed
//     (event appends, ledger finishes, refund inserts) is still there, and
//     no stored event ever changed;
//   - a killed child's run leases are taken over once they expire (the
//     next child waits for them), and the children that live release
//     every lease they take.
//
// go test ./loop runs a small campaign (20 kills); .ci/run runs
// -campaign.kills=200; -campaign.long runs 2000 (give it -timeout 0).
// docs/RELIABILITY.md has the figures.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/sqlite"
	"github.com/toolloop/toolloop/tool"
)

var (
	campaignKills = flag.Int("campaign.kills", 20, "crash campaign: how many SIGKILLs (TestCrashCampaign)")
	campaignLong  = flag.Bool("campaign.long", false, "crash campaign: a long campaign (2000 kills unless -campaign.kills is larger)")
	campaignSeed  = flag.Uint64("campaign.seed", 0, "crash campaign: seed for scenarios and kill points (0: from the clock)")
	campaignHot   = flag.Bool("campaign.hot", false, "crash campaign: every refunding run also refunds an order shared by six runs")
)

const (
	campEnvDB    = "TOOLLOOP_CAMPAIGN_DB"
	campEnvSeed  = "TOOLLOOP_CAMPAIGN_SEED"
	campEnvRuns  = "TOOLLOOP_CAMPAIGN_RUNS"
	campEnvChild = "TOOLLOOP_CAMPAIGN_CHILD"
	campEnvHot   = "TOOLLOOP_CAMPAIGN_HOT"

	// campWriteTimeout is refund_order's timeout, and so also how long an
	// in-flight ledger record left by a killed child counts as "may still be
	// running" (write_in_progress) before it may be taken over.
	campWriteTimeout = 400 * time.Millisecond
	// campRetryWait is how long the scripted model waits before asking again
	// for a refund that came back write_in_progress.
	campRetryWait = campWriteTimeout + 100*time.Millisecond

	campNewPerChild = 2  // runs started by each child
	campMaxActive   = 10 // no new runs while this many are unfinished

	// campLeaseTTL is how long a killed child's run leases keep the next
	// child from its runs: short, so that takeovers are frequent and the
	// campaign quick.
	campLeaseTTL = 300 * time.Millisecond
)

const campRefundsTable = `CREATE TABLE IF NOT EXISTS campaign_refunds (
	id       INTEGER PRIMARY KEY AUTOINCREMENT,
	order_id TEXT NOT NULL
)`

// The compensation's tables: refunds of the pair scenario and their
// reversals, plain rows so that a second one shows up.
const (
	campPairTable = `CREATE TABLE IF NOT EXISTS campaign_pair_refunds (
	id       INTEGER PRIMARY KEY AUTOINCREMENT,
	order_id TEXT NOT NULL
)`
	campReversalsTable = `CREATE TABLE IF NOT EXISTS campaign_reversals (
	id        INTEGER PRIMARY KEY AUTOINCREMENT,
	refund_id TEXT NOT NULL
)`
)

func openCampaignStore(path string) (*sqlite.Store, error) {
	// NORMAL: in WAL mode a commit survives the death of the process
	// (SIGKILL); only a power cut may lose the last commits.
	s, err := sqlite.Open(path, &sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		return nil, err
	}
	for _, table := range []string{campRefundsTable, campPairTable, campReversalsTable} {
		if _, err := s.DB().Exec(table); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// campScenario is what one run's scripted model does. It follows from the
// seed and the run's number alone, so every process agrees on it.
type campScenario struct {
	reads   []string // turn 1: query_order calls, in parallel when several
	refunds []string // turn 2: refund_order calls, one at a time (none: answer at turn 2)
	// queryAfter adds a query of refunds[0] to turn 2's batch: it touches
	// the refunded order, so the planner stages it after the write.
	queryAfter bool
	// pair, when set, is an order that turn 2 refunds with refund_pair
	// beside an issue_voucher that fails: all or nothing, so the refund
	// is reversed.
	pair string
}

func campRunID(i int) string { return fmt.Sprintf("run-%04d", i) }

func campScenarioFor(seed uint64, runID string, hot bool) campScenario {
	i, err := strconv.Atoi(strings.TrimPrefix(runID, "run-"))
	if err != nil {
		panic("bad campaign run ID " + runID)
	}
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	own := func(s string) string { return fmt.Sprintf("O%04d%s", i, s) }
	var sc campScenario
	sc.reads = []string{own("a"), own("b"), own("c")}[:1+r.IntN(3)]
	switch p := r.IntN(10); {
	case p == 0:
	case p < 6:
		sc.refunds = []string{own("a")}
	default:
		sc.refunds = []string{own("a"), own("b")}
	}
	switch {
	case len(sc.refunds) == 0:
	case hot:
		// A hot order: six neighbouring runs, often driven at the same
		// time, refund it; one refund for all of them.
		sc.refunds[len(sc.refunds)-1] = fmt.Sprintf("H%03d", i/6)
	case r.IntN(4) == 0:
		// An order shared with the neighbouring runs, which often run at
		// the same time: one refund for all of them.
		sc.refunds[len(sc.refunds)-1] = fmt.Sprintf("S%03d", i/3)
	}
	sc.queryAfter = len(sc.refunds) > 0 && r.IntN(2) == 0
	if r.IntN(3) == 0 {
		sc.pair = own("p")
	}
	return sc
}

// campModel answers by the request's step, so a resumed run gets the turns
// an uninterrupted one would have. Turn 3 looks at turn 2's refund results:
// a refund that did not succeed (write_in_progress, because a killed
// child's attempt may still be running) is asked for once more after the
// in-flight window has passed; then the model answers.
func campModel(runID string, sc campScenario, mark func(string, ...any)) llm.Model {
	return llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		mark("model+", runID, req.Step)
		defer mark("model-", runID, req.Step)
		var calls []llm.ToolCall
		switch req.Step {
		case 1:
			for k, o := range sc.reads {
				calls = append(calls, llmtest.Call(fmt.Sprintf("s1-q%d", k), "query_order", map[string]string{"id": o}))
			}
		case 2:
			for k, o := range sc.refunds {
				calls = append(calls, llmtest.Call(fmt.Sprintf("s2-r%d", k), "refund_order", map[string]string{"order_id": o}))
			}
			if sc.queryAfter {
				// With the refund's details: the same query as turn 1's
				// would be a spin.
				calls = append(calls, llmtest.Call("s2-q", "query_order", map[string]any{"id": sc.refunds[0], "refunds": true}))
			}
			if sc.pair != "" {
				calls = append(calls, llmtest.Call("s2-p", "refund_pair", map[string]string{"order_id": sc.pair}),
					llmtest.Call("s2-v", "issue_voucher", map[string]string{"order_id": sc.pair}))
			}
		case 3:
			for k, o := range sc.refunds {
				if r := campResult(req.Messages, fmt.Sprintf("s2-r%d", k)); r != nil && r.Status != llm.StatusOK {
					calls = append(calls, llmtest.Call(fmt.Sprintf("s3-r%d", k), "refund_order", map[string]string{"order_id": o}))
				}
			}
			if len(calls) > 0 {
				t := time.NewTimer(campRetryWait)
				select {
				case <-ctx.Done():
					t.Stop()
					return nil, ctx.Err()
				case <-t.C:
				}
			}
		}
		if len(calls) == 0 {
			r := *llmtest.Text(fmt.Sprintf("%s: done after %d turn(s)", runID, req.Step)).Response
			return &r, nil
		}
		r := *llmtest.Calls(calls...).Response
		r.Usage = llm.Usage{InputTokens: 10, OutputTokens: 2}
		return &r, nil
	})
}

func campResult(msgs []llm.Message, callID string) *llm.ToolResult {
	for _, m := range msgs {
		if m.Role == llm.RoleTool && m.Result != nil && m.Result.CallID == callID {
			return m.Result
		}
	}
	return nil
}

type campOrderIn struct {
	ID      string `json:"id"`
	Refunds bool   `json:"refunds,omitempty"`
}

type campRefundIn struct {
	OrderID string `json:"order_id"`
}

type campRefundOut struct {
	OrderID  string `json:"order_id"`
	RefundID string `json:"refund_id"`
}

// campTools are a read over the order book and a refund that inserts a row
// into it, with a status look-up that reads the rows.
func campTools(db *sql.DB, mark func(string, ...any), delay func(upTo time.Duration) time.Duration) (*tool.Registry, error) {
	query := tool.MustNew(tool.Spec[campOrderIn]{Name: "query_order", Description: "look an order up",
		Resources: func(in campOrderIn) []string { return []string{"order:" + in.ID} }},
		func(ctx context.Context, in campOrderIn) (map[string]any, error) {
			if err := sleep(ctx, delay(3*time.Millisecond)); err != nil {
				return nil, err
			}
			var n int
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM campaign_refunds WHERE order_id = ?`, in.ID).Scan(&n); err != nil {
				return nil, tool.Unavailable(err)
			}
			if !in.Refunds {
				return map[string]any{"id": in.ID, "status": "shipped"}, nil
			}
			return map[string]any{"id": in.ID, "status": "shipped", "refunds": n}, nil
		})
	refund := tool.MustNew(tool.Spec[campRefundIn]{Name: "refund_order", Description: "refund an order", Effect: tool.Write,
		Timeout:        campWriteTimeout,
		Resources:      func(in campRefundIn) []string { return []string{"order:" + in.OrderID} },
		IdempotencyKey: func(in campRefundIn) string { return "refund:" + in.OrderID },
		Lookup: func(ctx context.Context, in campRefundIn) (any, bool, error) {
			var id int64
			err := db.QueryRowContext(ctx, `SELECT id FROM campaign_refunds WHERE order_id = ? ORDER BY id LIMIT 1`, in.OrderID).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				mark("lookup", in.OrderID, "none")
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			mark("lookup", in.OrderID, "applied")
			return campRefundOut{OrderID: in.OrderID, RefundID: fmt.Sprintf("R%d", id)}, true, nil
		},
	}, func(ctx context.Context, in campRefundIn) (out campRefundOut, err error) {
		effect := 0
		mark("write+", in.OrderID)
		defer func() { mark("write-", in.OrderID, effect) }()
		if err := sleep(ctx, delay(15*time.Millisecond)); err != nil {
			return out, err
		}
		res, err := db.ExecContext(ctx, `INSERT INTO campaign_refunds (order_id) VALUES (?)`, in.OrderID)
		if err != nil {
			return out, tool.Unavailable(err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return out, err
		}
		effect = 1
		mark("effect", in.OrderID, id)
		// The refund is made; the answer takes a little longer (without
		// looking at the context: the work is done).
		time.Sleep(delay(15 * time.Millisecond))
		return campRefundOut{OrderID: in.OrderID, RefundID: fmt.Sprintf("R%d", id)}, nil
	})
	pair, voucher, reverse := campPairTools(db, mark, delay)
	return tool.NewRegistry(query, refund, pair, voucher, reverse)
}

type campReverseIn struct {
	RefundID string `json:"refund_id"`
}

// campPairTools are the compensation scenario's tools: refund_pair, a
// refund in the all-or-nothing group "pair" whose compensation is
// reverse_refund (with the refund's ID from its result); issue_voucher, in
// the same group, which always fails; and reverse_refund, which inserts a
// reversal row, with a status look-up. Their markers are pwrite+, peffect,
// pwrite-, undo+, uneffect, undo- and ulookup.
func campPairTools(db *sql.DB, mark func(string, ...any), delay func(upTo time.Duration) time.Duration) (pair, voucher, reverse *tool.Tool) {
	pair = tool.MustNew(tool.Spec[campRefundIn]{Name: "refund_pair", Description: "refund an order, all or nothing with its voucher",
		Effect: tool.Write, Timeout: campWriteTimeout, AtomicGroup: "pair",
		Resources:      func(in campRefundIn) []string { return []string{"order:" + in.OrderID} },
		IdempotencyKey: func(in campRefundIn) string { return "pair:" + in.OrderID },
		Compensation:   &tool.Compensation{Tool: "reverse_refund", Args: map[string]string{"refund_id": "result.refund_id"}},
		Lookup: func(ctx context.Context, in campRefundIn) (any, bool, error) {
			var id int64
			err := db.QueryRowContext(ctx, `SELECT id FROM campaign_pair_refunds WHERE order_id = ? ORDER BY id LIMIT 1`, in.OrderID).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			return campRefundOut{OrderID: in.OrderID, RefundID: fmt.Sprintf("P%d", id)}, true, nil
		},
	}, func(ctx context.Context, in campRefundIn) (out campRefundOut, err error) {
		mark("pwrite+", in.OrderID)
		defer mark("pwrite-", in.OrderID)
		if err := sleep(ctx, delay(15*time.Millisecond)); err != nil {
			return out, err
		}
		res, err := db.ExecContext(ctx, `INSERT INTO campaign_pair_refunds (order_id) VALUES (?)`, in.OrderID)
		if err != nil {
			return out, tool.Unavailable(err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return out, err
		}
		mark("peffect", in.OrderID, id)
		time.Sleep(delay(15 * time.Millisecond))
		return campRefundOut{OrderID: in.OrderID, RefundID: fmt.Sprintf("P%d", id)}, nil
	})
	voucher = tool.MustNew(tool.Spec[campRefundIn]{Name: "issue_voucher", Description: "issue a voucher (always refused)",
		Effect: tool.Write, AtomicGroup: "pair", Timeout: campWriteTimeout,
		// It never writes, and its look-up says so: a voucher whose
		// claim a killed child left in flight is settled, not left.
		Lookup: func(context.Context, campRefundIn) (any, bool, error) { return nil, false, nil }},
		func(context.Context, campRefundIn) (map[string]string, error) {
			return nil, &tool.Error{Kind: llm.KindInvalidArguments, Msg: "no voucher for this order"}
		})
	reverse = tool.MustNew(tool.Spec[campReverseIn]{Name: "reverse_refund", Description: "take a refund back",
		Effect: tool.Write, Timeout: campWriteTimeout,
		Lookup: func(ctx context.Context, in campReverseIn) (any, bool, error) {
			var id int64
			err := db.QueryRowContext(ctx, `SELECT id FROM campaign_reversals WHERE refund_id = ? ORDER BY id LIMIT 1`, in.RefundID).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				mark("ulookup", in.RefundID, "none")
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			mark("ulookup", in.RefundID, "applied")
			return map[string]any{"reversal": id}, true, nil
		},
	}, func(ctx context.Context, in campReverseIn) (map[string]any, error) {
		mark("undo+", in.RefundID)
		defer mark("undo-", in.RefundID)
		if err := sleep(ctx, delay(15*time.Millisecond)); err != nil {
			return nil, err
		}
		res, err := db.ExecContext(ctx, `INSERT INTO campaign_reversals (refund_id) VALUES (?)`, in.RefundID)
		if err != nil {
			return nil, tool.Unavailable(err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return nil, err
		}
		mark("uneffect", in.RefundID, id)
		time.Sleep(delay(15 * time.Millisecond))
		return map[string]any{"reversal": id}, nil
	})
	return pair, voucher, reverse
}

// campMarked wraps the store so that the child reports, on stdout, every
// event append and ledger write as it begins and ends: the parent learns
// what was in progress when it killed the child, and what had been
// committed.
type campMarked struct {
	*sqlite.Store
	mark func(string, ...any)
}

func (m campMarked) Append(ctx context.Context, runID string, evs []store.EventRecord, sum store.RunSummary) error {
	last := 0
	if len(evs) > 0 {
		last = evs[len(evs)-1].Seq
	}
	m.mark("append+", runID, last)
	err := m.Store.Append(ctx, runID, evs, sum)
	m.mark("append-", runID, last, campOK(err))
	return err
}

// AppendLeased is what the runner calls on a store with leases; without
// this method the embedded store's would be promoted, and the appends
// would go unmarked.
func (m campMarked) AppendLeased(ctx context.Context, lease store.Lease, evs []store.EventRecord, sum store.RunSummary) error {
	last := 0
	if len(evs) > 0 {
		last = evs[len(evs)-1].Seq
	}
	m.mark("append+", lease.RunID, last)
	err := m.Store.AppendLeased(ctx, lease, evs, sum)
	m.mark("append-", lease.RunID, last, campOK(err))
	return err
}

func (m campMarked) Claim(ctx context.Context, rec store.Record) (store.Record, bool, error) {
	m.mark("ledger+", "claim", rec.Key)
	old, claimed, err := m.Store.Claim(ctx, rec)
	m.mark("ledger-", "claim", rec.Key, campOK(err))
	return old, claimed, err
}

func (m campMarked) Finish(ctx context.Context, key string, result json.RawMessage, at time.Time) error {
	m.mark("ledger+", "finish", key)
	err := m.Store.Finish(ctx, key, result, at)
	m.mark("ledger-", "finish", key, campOK(err))
	return err
}

func (m campMarked) Release(ctx context.Context, key string) error {
	m.mark("ledger+", "release", key)
	err := m.Store.Release(ctx, key)
	m.mark("ledger-", "release", key, campOK(err))
	return err
}

func campOK(err error) string {
	if err == nil {
		return "ok"
	}
	return "err:" + strings.ReplaceAll(err.Error(), " ", "_")
}

// TestCrashCampaignChild is the child process's side; it does nothing
// unless TestCrashCampaign started it. It starts or resumes every run it
// is given, all at once, and exits when all have stopped (or when killed).
func TestCrashCampaignChild(t *testing.T) {
	path := os.Getenv(campEnvDB)
	if path == "" {
		t.Skip("runs only as TestCrashCampaign's child process")
	}
	seed, err := strconv.ParseUint(os.Getenv(campEnvSeed), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.ParseUint(os.Getenv(campEnvChild), 10, 64)
	runs := strings.Split(os.Getenv(campEnvRuns), ",")
	hot := os.Getenv(campEnvHot) == "1"
	mark := func(kind string, args ...any) {
		var b strings.Builder
		b.WriteString("M ")
		b.WriteString(kind)
		for _, a := range args {
			fmt.Fprintf(&b, " %v", a)
		}
		b.WriteByte('\n')
		os.Stdout.WriteString(b.String()) // one write: lines never interleave
	}
	mark("open")
	st, err := openCampaignStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, child<<32|0xC4117D))
	delay := func(upTo time.Duration) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return time.Duration(rng.Int64N(int64(upTo) + 1))
	}
	marked := campMarked{Store: st, mark: mark}
	reg, err := campTools(st.DB(), mark, delay)
	if err != nil {
		t.Fatal(err)
	}
	ex := executor.New(&executor.Options{Ledger: marked})
	mark("ready")
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, len(runs))
	for _, id := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runner, err := loop.NewRunner(loop.Config{
				Model: campModel(id, campScenarioFor(seed, id, hot), mark), ModelName: "scripted", Tools: reg,
				Executor: ex, Store: marked, NewRunID: func() string { return id }, Compensation: loop.CompensateWrites,
				LeaseOwner: fmt.Sprintf("child%d", child), LeaseTTL: campLeaseTTL,
			})
			if err != nil {
				errs <- err
				return
			}
			var res *loop.Result
			for {
				recs, err := st.Events(ctx, id)
				switch {
				case errors.Is(err, store.ErrUnknownRun):
					mark("start", id)
					res, err = runner.Run(ctx, []llm.Message{llm.UserMessage("campaign " + id + ": refund what needs refunding")})
				case err != nil:
					errs <- err
					return
				default:
					mark("resume", id, len(recs))
					res, err = runner.Resume(ctx, id)
				}
				// A killed child's lease: wait for it to expire, then
				// take the run over.
				var held *store.LeaseHeldError
				if !errors.As(err, &held) {
					break
				}
				mark("leased", id, held.Owner)
				time.Sleep(time.Until(held.Expires) + 5*time.Millisecond)
			}
			if res == nil {
				errs <- fmt.Errorf("run %s: %w", id, err)
				return
			}
			mark("done", id, res.Status)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mark("exit")
}

// campKillPlan says when the parent kills a child.
type campKillPlan struct {
	kind   string // "spawn" (delay after start), "ready" (delay after ready), "marker", "none"
	delay  time.Duration
	marker string
	nth    int
}

func (p campKillPlan) String() string {
	switch p.kind {
	case "marker":
		return "on " + p.marker
	case "none":
		return "none"
	}
	return "timed after " + p.kind
}

var campMarkers = []string{"start", "model+", "append+", "ledger+", "write+", "effect", "write-", "lookup",
	"pwrite+", "peffect", "undo+", "uneffect", "undo-", "ulookup"}

func campPlan(r *rand.Rand) campKillPlan {
	switch p := r.IntN(20); {
	case p < 3:
		return campKillPlan{kind: "spawn", delay: time.Duration(r.IntN(60)) * time.Millisecond}
	case p < 6:
		return campKillPlan{kind: "ready", delay: time.Duration(r.IntN(150)) * time.Millisecond}
	default:
		return campKillPlan{kind: "marker", marker: campMarkers[r.IntN(len(campMarkers))], nth: 1 + r.IntN(6)}
	}
}

type campChild struct {
	lines    [][]string // the child's markers, split into fields
	other    []string   // the rest of its stdout
	stderr   string
	killed   bool
	killedBy string
	err      error
	took     time.Duration
}

// campaign is the parent's bookkeeping.
type campaign struct {
	t    *testing.T
	path string
	seed uint64
	hot  bool
	st   *sqlite.Store
	rng  *rand.Rand

	runs      []string       // every run handed out, in order
	handedOut map[string]int // children a run was given to
	children  int
	kills     int
	killed    map[int]bool // the children killed, by number
	clean     int          // children that finished before their kill

	// Figures.
	killClass   map[string]int // the most telling thing in progress at each kill
	killAny     map[string]int // kills at which each thing was in progress
	killBy      map[string]int
	starts      int // fresh Run calls
	restarts    int // fresh Run calls for a run whose first events had been lost with its child
	resumes     int
	leaseWaits  int // times a child waited for a killed child's lease to expire
	writes      int // refund handler invocations
	effects     int // refunds inserted
	lookups     map[string]int
	childTime   time.Duration
	checkTime   time.Duration
	eventHashes map[string][32]byte // run/seq -> hash of the stored event
	refundIDs   map[string]int64    // order -> the id the child reported for its insert
	pairRefunds int                 // refund_pair inserts
	undoWrites  int                 // reverse_refund handler invocations
	reversals   int                 // reversals inserted
	counts      map[string]int      // run -> events stored after the last child
	final       campFinal
}

func TestCrashCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills child processes")
	}
	if os.Getenv(campEnvDB) != "" {
		t.Skip("inside a campaign child")
	}
	kills := *campaignKills
	if *campaignLong && kills < 2000 {
		kills = 2000
	}
	seed := *campaignSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("crash campaign: %d kills, seed %d (-campaign.seed=%d reproduces the scenarios and kill plans), hot orders %v",
		kills, seed, seed, *campaignHot)
	path := filepath.Join(t.TempDir(), "campaign.db")
	st, err := openCampaignStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := &campaign{
		t: t, path: path, seed: seed, hot: *campaignHot, st: st, rng: rand.New(rand.NewPCG(seed, 0x9A7E47)),
		handedOut: map[string]int{}, killClass: map[string]int{}, killAny: map[string]int{}, killBy: map[string]int{},
		lookups: map[string]int{}, eventHashes: map[string][32]byte{}, refundIDs: map[string]int64{},
		counts: map[string]int{}, killed: map[int]bool{},
	}
	start := time.Now()
	for c.kills < kills {
		active := c.unfinished()
		if len(active) < campMaxActive {
			for range campNewPerChild {
				id := campRunID(len(c.runs))
				c.runs = append(c.runs, id)
				active = append(active, id)
			}
		}
		c.child(active, campPlan(c.rng))
		if t.Failed() {
			t.Fatalf("stopped after %d kills, %d children, %d runs (seed %d)", c.kills, c.children, len(c.runs), seed)
		}
	}
	// The last children are not killed: every run must now finish.
	for attempt := 0; ; attempt++ {
		active := c.unfinished()
		if len(active) == 0 {
			break
		}
		if attempt == 3 {
			t.Fatalf("runs still unfinished after %d unkilled children: %v", attempt, active)
		}
		c.child(active, campKillPlan{kind: "none"})
		if t.Failed() {
			t.FailNow()
		}
	}
	c.checkFinal()
	c.checkLeases()
	c.report(time.Since(start))
}

// checkLeases checks that the only run leases left are those of killed
// children (one killed after its run's last append, before it released
// the lease): every child that lived released every lease it took.
func (c *campaign) checkLeases() {
	rows, err := c.st.DB().Query(`SELECT run_id, owner FROM run_leases`)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, owner string
		if err := rows.Scan(&id, &owner); err != nil {
			c.t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimPrefix(strings.SplitN(owner, ":", 2)[0], "child"))
		if err != nil || !c.killed[n] {
			c.t.Errorf("run %s: its lease is still held by %s, a child that was not killed", id, owner)
		}
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
}

// unfinished lists the runs handed out that have not stopped.
func (c *campaign) unfinished() []string {
	status := map[string]string{}
	rows, err := c.st.DB().Query(`SELECT run_id, status FROM runs`)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, s string
		if err := rows.Scan(&id, &s); err != nil {
			c.t.Fatal(err)
		}
		status[id] = s
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, id := range c.runs {
		if s, ok := status[id]; !ok || s == loop.RunningStatus {
			out = append(out, id)
		}
	}
	return out
}

// child runs one child process on the given runs and kills it as planned.
func (c *campaign) child(runs []string, plan campKillPlan) {
	t := c.t
	c.children++
	for _, id := range runs {
		c.handedOut[id]++
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashCampaignChild$", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), campEnvDB+"="+c.path, campEnvSeed+"="+strconv.FormatUint(c.seed, 10),
		campEnvRuns+"="+strings.Join(runs, ","), campEnvChild+"="+strconv.Itoa(c.children), campEnvHot+"="+strconv.Itoa(campBit(c.hot)),
		// A race-enabled child would otherwise sleep a second before exiting.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var out campChild
	kill := func(by string) {
		if out.killedBy == "" && cmd.Process.Kill() == nil { // SIGKILL on Unix
			out.killedBy = by
		}
	}
	var timer <-chan time.Time
	if plan.kind == "spawn" {
		timer = time.After(plan.delay)
	}
	// A child that never reaches its kill point is killed anyway; one that
	// is not to be killed must finish well within this.
	limit := 5 * time.Second
	if plan.kind == "none" {
		limit = 2 * time.Minute
	}
	fallback := time.NewTimer(limit)
	defer fallback.Stop()
	seen := 0
read:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break read
			}
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "M" {
				out.other = append(out.other, line)
				continue
			}
			out.lines = append(out.lines, f[1:])
			switch {
			case plan.kind == "ready" && f[1] == "ready":
				timer = time.After(plan.delay)
			case plan.kind == "marker" && f[1] == plan.marker:
				if seen++; seen == plan.nth {
					kill("marker")
				}
			}
		case <-timer:
			timer = nil
			kill("timer")
		case <-fallback.C:
			kill("fallback")
		}
	}
	out.err = cmd.Wait()
	out.took = time.Since(began)
	out.stderr = stderr.String()
	c.childTime += out.took
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		out.killed = true
	}
	if strings.Contains(out.stderr, "DATA RACE") || strings.Contains(strings.Join(out.other, "\n"), "DATA RACE") {
		t.Fatalf("child %d reported a data race:\n%s\n%s", c.children, strings.Join(out.other, "\n"), out.stderr)
	}
	switch {
	case out.killed && plan.kind == "none":
		t.Fatalf("child %d, which was to finish every run, was killed (%s) after %v", c.children, out.killedBy, out.took)
	case out.killed:
		c.kills++
		c.killed[c.children] = true
		c.killBy[plan.String()]++
	case out.err != nil:
		t.Fatalf("child %d failed: %v\nstdout:\n%s\nstderr:\n%s", c.children, out.err, strings.Join(out.other, "\n"), out.stderr)
	default:
		c.clean++
	}
	c0 := time.Now()
	c.afterChild(runs, &out)
	c.checkTime += time.Since(c0)
}

// afterChild tallies what the child did, classifies the kill point, and
// checks that everything the child saw committed survived it.
func (c *campaign) afterChild(runs []string, out *campChild) {
	t := c.t
	var (
		ready       bool
		appends     = map[string]int{} // run -> appends begun, not ended
		ledgerOpen  int
		modelOpen   int
		writeBefore int
		writeAfter  int
		unrecorded  = map[string]bool{} // order -> refunded, ledger not yet told
		acked       = map[string]int{}  // run -> highest seq a successful append reported
		finished    = map[string]bool{} // keys a successful ledger finish reported
		undoOpen    int
	)
	// A start or resume refused for a killed child's lease is tried
	// again: it counts once.
	began := map[string]string{} // run -> "start" or "resume", the last one begun
	for _, f := range out.lines {
		switch f[0] {
		case "ready":
			ready = true
		case "start":
			began[f[1]] = "start"
			c.starts++
			if c.handedOut[f[1]] > 1 {
				c.restarts++
			}
		case "resume":
			began[f[1]] = "resume"
			c.resumes++
		case "leased":
			c.leaseWaits++
			if began[f[1]] == "resume" {
				c.resumes--
			} else {
				c.starts--
				if c.handedOut[f[1]] > 1 {
					c.restarts--
				}
			}
		case "append+":
			appends[f[1]]++
		case "append-":
			appends[f[1]]--
			if f[3] == "ok" {
				seq, _ := strconv.Atoi(f[2])
				acked[f[1]] = max(acked[f[1]], seq)
			}
		case "ledger+":
			ledgerOpen++
		case "ledger-":
			ledgerOpen--
			if f[1] == "finish" && f[3] == "ok" {
				finished[f[2]] = true
				delete(unrecorded, strings.TrimPrefix(f[2], "refund:"))
			}
		case "model+":
			modelOpen++
		case "model-":
			modelOpen--
		case "write+":
			c.writes++
			writeBefore++
		case "effect":
			c.effects++
			writeBefore--
			writeAfter++
			unrecorded[f[1]] = true
			id, _ := strconv.ParseInt(f[2], 10, 64)
			if prev, ok := c.refundIDs[f[1]]; ok {
				t.Errorf("child %d (kill %d): order %s refunded twice: rows %d and %d; what the child did with it:\n%s",
					c.children, c.kills, f[1], prev, id, campLinesAbout(out.lines, f[1]))
			}
			c.refundIDs[f[1]] = id
		case "write-":
			if f[2] == "1" {
				writeAfter--
			} else {
				writeBefore--
			}
		case "lookup":
			c.lookups[f[2]]++
		case "peffect":
			c.pairRefunds++
		case "undo+":
			undoOpen++
			c.undoWrites++
		case "uneffect":
			c.reversals++
		case "undo-":
			undoOpen--
		}
	}
	if out.killed {
		open := func(m map[string]int) bool {
			for _, n := range m {
				if n > 0 {
					return true
				}
			}
			return false
		}
		var labels []string
		add := func(cond bool, label string) {
			if cond {
				labels = append(labels, label)
				c.killAny[label]++
			}
		}
		add(!ready, "before the child was ready (process start, opening the store)")
		add(open(appends), "inside an event append (store transaction)")
		add(ledgerOpen > 0, "inside a ledger write (claim, finish, release)")
		add(writeBefore > 0, "inside a write, before its side effect")
		add(writeAfter > 0, "inside a write, after its side effect")
		add(len(unrecorded) > 0, "a write done but not yet recorded in the ledger")
		add(modelOpen > 0, "during a model request")
		add(undoOpen > 0, "inside a compensating write (reverse_refund)")
		primary := "between events (validation, policy, planning, reads)"
		if len(labels) > 0 {
			primary = labels[0]
		}
		c.killClass[primary]++
	}
	// Everything the child saw committed is still there.
	for id, seq := range acked {
		var n int
		if err := c.st.DB().QueryRow(`SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE run_id = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n < seq {
			t.Errorf("child %d: run %s had events up to %d committed, the store has %d", c.children, id, seq, n)
		}
	}
	for key := range finished {
		rec, ok, err := c.st.Lookup(context.Background(), key)
		if err != nil || !ok || rec.State != store.Done {
			t.Errorf("child %d: key %s was finished, the ledger has %+v (found %v, %v)", c.children, key, rec, ok, err)
		}
	}
	book := map[string]int64{}
	rows, err := c.st.DB().Query(`SELECT id, order_id FROM campaign_refunds`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			id    int64
			order string
		)
		if err := rows.Scan(&id, &order); err != nil {
			t.Fatal(err)
		}
		book[order] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	for order, id := range c.refundIDs {
		if book[order] != id {
			t.Errorf("child %d: refund row %d of order %s is gone", c.children, id, order)
		}
	}
	// No stored event of the runs this child drove ever changes or
	// disappears, and their logs have no gaps; (runs it was not given can
	// only have grown, which the counts below would show).
	handed := map[string]bool{}
	for _, id := range runs {
		handed[id] = true
	}
	rows, err = c.st.DB().Query(`SELECT run_id, seq, data FROM run_events WHERE run_id IN (SELECT value FROM json_each(?)) ORDER BY run_id, seq`,
		campJSON(runs))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for rows.Next() {
		var (
			id   string
			seq  int
			data []byte
		)
		if err := rows.Scan(&id, &seq, &data); err != nil {
			t.Fatal(err)
		}
		if seq != seen[id]+1 {
			t.Errorf("child %d: run %s jumps from event %d to %d", c.children, id, seen[id], seq)
		}
		seen[id] = seq
		k := id + "/" + strconv.Itoa(seq)
		h := sha256.Sum256(data)
		if old, ok := c.eventHashes[k]; ok && old != h {
			t.Errorf("child %d: event %s changed", c.children, k)
		}
		c.eventHashes[k] = h
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	rows, err = c.st.DB().Query(`SELECT run_id, COUNT(*), MAX(seq) FROM run_events GROUP BY run_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	total := 0
	for rows.Next() {
		var (
			id     string
			n, top int
		)
		if err := rows.Scan(&id, &n, &top); err != nil {
			t.Fatal(err)
		}
		total += n
		if n != top || n < c.counts[id] || (!handed[id] && n != c.counts[id]) {
			t.Errorf("child %d: run %s has %d events up to seq %d (%d before)", c.children, id, n, top, c.counts[id])
		}
		c.counts[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if total != len(c.eventHashes) {
		t.Errorf("child %d: %d events stored, %d seen before: events disappeared", c.children, total, len(c.eventHashes))
	}
}

// campLinesAbout returns the markers that mention an order, one a line.
func campLinesAbout(lines [][]string, order string) string {
	var b strings.Builder
	for _, f := range lines {
		if l := strings.Join(f, " "); strings.Contains(l, order) {
			b.WriteString("\t" + l + "\n")
		}
	}
	return b.String()
}

func campBit(b bool) int {
	if b {
		return 1
	}
	return 0
}

func campJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// campFinal is what the final check learns about the runs.
type campFinal struct {
	statuses        map[loop.Status]int
	events          int
	refundResults   map[string]int // outcome kind of refund_order calls in the logs
	okRefunds       int
	undone          int // final answers with a refund never made (write_in_progress twice)
	retried         int // runs whose model asked for a refund again
	maxEvents       int
	ordersRefunded  int
	ordersUntouched int
	pairRuns        int            // runs with the compensation scenario
	pairWrites      map[string]int // what their refund_pair writes ended as
	compensations   map[string]int // states of the compensations in the logs
	pairReversed    int            // pair orders refunded and reversed once
}

// checkFinal checks the file once every run has stopped.
func (c *campaign) checkFinal() campFinal {
	t := c.t
	ctx := context.Background()
	fin := campFinal{statuses: map[loop.Status]int{}, refundResults: map[string]int{}, pairWrites: map[string]int{}, compensations: map[string]int{}}
	pairs := map[string]bool{}            // orders a run refunded all or nothing
	okIDs := map[string]map[string]bool{} // order -> refund IDs in successful results
	wanted := map[string]bool{}           // orders some run asked to refund
	sums, err := c.st.Runs(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	summary := map[string]store.RunSummary{}
	for _, s := range sums {
		summary[s.RunID] = s
	}
	for _, id := range c.runs {
		events, err := loop.LoadEvents(ctx, c.st, id)
		if err != nil {
			t.Errorf("run %s: %v", id, err)
			continue
		}
		fin.events += len(events)
		fin.maxEvents = max(fin.maxEvents, len(events))
		s, err := campCheckChain(events)
		if err != nil {
			t.Errorf("run %s: %v", id, err)
			continue
		}
		fin.statuses[s.Status]++
		if s.Status != loop.FinalAnswer {
			t.Errorf("run %s stopped with %s: %s", id, s.Status, s.Detail)
		}
		if sum := summary[id]; sum.Status != string(s.Status) || sum.Steps != s.Steps || sum.ToolCalls != s.ToolCalls {
			t.Errorf("run %s: summary %+v does not match its log (status %s, %d steps, %d calls)", id, sum, s.Status, s.Steps, s.ToolCalls)
		}
		h := s.History()
		if err := llm.CheckHistory(h); err != nil {
			t.Errorf("run %s: history: %v", id, err)
		}
		sc := campScenarioFor(c.seed, id, c.hot)
		for _, o := range sc.refunds {
			wanted[o] = true
		}
		if sc.pair != "" {
			fin.pairRuns++
			pairs[sc.pair] = true
			// The voucher always fails, so the refund never stays.
			for _, w := range s.Writes {
				if w.Tool != "refund_pair" {
					continue
				}
				fin.pairWrites[string(w.State)]++
				if w.State != loop.WriteUndone && w.State != loop.WriteNotRun && w.State != loop.WriteFailed {
					t.Errorf("run %s: refund_pair %s ended %s (%s); want undone, or never done", id, w.CallID, w.State, w.Note)
				}
			}
			for _, ev := range events {
				for _, o := range ev.Compensations {
					fin.compensations[string(o.State)]++
				}
			}
		}
		retried := false
		for _, m := range h {
			if m.Role == llm.RoleAssistant {
				for _, call := range m.ToolCalls {
					retried = retried || strings.HasPrefix(call.ID, "s3-")
				}
			}
			if m.Role != llm.RoleTool || m.Result.Name != "refund_order" {
				continue
			}
			r := m.Result
			if r.Status != llm.StatusOK {
				fin.refundResults[string(r.ErrorKind)]++
				switch r.ErrorKind {
				case llm.KindWriteInProgress:
					// A killed child's attempt may, for all this process
					// knows, still be running: recoverable, and expected.
				case llm.KindUnavailable:
					// Recoverable too; the ledger's claim can fail
					// spuriously under contention (see docs/RELIABILITY.md).
					t.Logf("run %s: refund %s: %s", id, r.CallID, r.Content)
				default:
					t.Errorf("run %s: refund %s failed with %s: %s", id, r.CallID, r.ErrorKind, r.Content)
				}
				continue
			}
			fin.okRefunds++
			var out campRefundOut
			if err := json.Unmarshal(r.Content, &out); err != nil || out.RefundID == "" {
				t.Errorf("run %s: refund result %s", id, r.Content)
				continue
			}
			if okIDs[out.OrderID] == nil {
				okIDs[out.OrderID] = map[string]bool{}
			}
			okIDs[out.OrderID][out.RefundID] = true
		}
		if retried {
			fin.retried++
		}
		for _, o := range sc.refunds {
			done := false
			for _, m := range h {
				if m.Role == llm.RoleTool && m.Result.Name == "refund_order" && m.Result.Status == llm.StatusOK &&
					strings.Contains(string(m.Result.Content), `"`+o+`"`) {
					done = true
				}
			}
			if !done {
				fin.undone++
				var got []string
				for _, m := range h {
					if m.Role == llm.RoleTool && m.Result.Name == "refund_order" {
						got = append(got, m.Result.CallID+"="+string(m.Result.Content))
					}
				}
				t.Logf("run %s: no successful refund of %s: %v", id, o, got)
			}
		}
		// How each write was settled, from the logged outcomes.
		for _, ev := range events {
			for _, o := range ev.Outcomes {
				if o.Result.Name != "refund_order" {
					continue
				}
				switch {
				case o.Replayed:
					fin.refundResults["replayed from the ledger"]++
				case o.Reconciled:
					fin.refundResults["reconciled by the status look-up"]++
				case o.Result.Status == llm.StatusOK:
					fin.refundResults["executed"]++
				}
			}
		}
	}
	// The order book: at most one refund per order, the ledger agrees, and
	// every successful result names the one row.
	rows, err := c.st.DB().Query(`SELECT order_id, COUNT(*), MIN(id) FROM campaign_refunds GROUP BY order_id`)
	if err != nil {
		t.Fatal(err)
	}
	book := map[string]int64{}
	for rows.Next() {
		var (
			order string
			n     int
			id    int64
		)
		if err := rows.Scan(&order, &n, &id); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("order %s was refunded %d times", order, n)
		}
		book[order] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	for o := range wanted {
		id, refunded := book[o]
		rec, found, err := c.st.Lookup(ctx, "refund:"+o)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case refunded:
			fin.ordersRefunded++
			if !found || rec.State != store.Done {
				t.Errorf("order %s is refunded (row %d) but its ledger record is %+v (found %v)", o, id, rec, found)
			}
			if len(okIDs[o]) == 0 {
				t.Errorf("order %s is refunded (row %d) but no run was told so", o, id)
			}
		default:
			fin.ordersUntouched++
			if found && rec.State == store.Done {
				t.Errorf("order %s has no refund but its ledger record is done: %s", o, rec.Result)
			}
			if len(okIDs[o]) > 0 {
				t.Errorf("order %s has no refund but runs were told %v", o, okIDs[o])
			}
		}
		for rid := range okIDs[o] {
			if rid != fmt.Sprintf("R%d", id) {
				t.Errorf("order %s: a run was told refund %s, the book has row %d", o, rid, id)
			}
		}
	}
	for o := range book {
		if !wanted[o] {
			t.Errorf("order %s was refunded, but no run asked for it", o)
		}
	}
	// The compensation: every pair refund that happened was reversed
	// exactly once, and nothing else was.
	refundsOf, reversalsOf := map[string][]string{}, map[string]int{}
	rows, err = c.st.DB().Query(`SELECT id, order_id FROM campaign_pair_refunds`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			id    int64
			order string
		)
		if err := rows.Scan(&id, &order); err != nil {
			t.Fatal(err)
		}
		refundsOf[order] = append(refundsOf[order], fmt.Sprintf("P%d", id))
	}
	rows.Close()
	rows, err = c.st.DB().Query(`SELECT refund_id FROM campaign_reversals`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var rid string
		if err := rows.Scan(&rid); err != nil {
			t.Fatal(err)
		}
		reversalsOf[rid]++
	}
	rows.Close()
	reversed := map[string]bool{}
	for o, rids := range refundsOf {
		if !pairs[o] {
			t.Errorf("order %s has a pair refund, but no run asked for it", o)
		}
		if len(rids) != 1 {
			t.Errorf("order %s was refunded %d times: %v", o, len(rids), rids)
		}
		for _, rid := range rids {
			reversed[rid] = true
			if reversalsOf[rid] != 1 {
				t.Errorf("order %s: refund %s was reversed %d times, want exactly once", o, rid, reversalsOf[rid])
			}
		}
		if len(rids) == 1 && reversalsOf[rids[0]] == 1 {
			fin.pairReversed++
		}
	}
	for rid, n := range reversalsOf {
		if !reversed[rid] {
			t.Errorf("refund %s was reversed %d times but never made", rid, n)
		}
	}
	c.final = fin
	return fin
}

// campCheckChain replays a log and checks that each event is the answer to
// the effect before it (so none is missing or repeated), that each stage's
// outcomes are for that stage's calls, and that the run has stopped.
func campCheckChain(events []loop.Event) (*loop.State, error) {
	var (
		s   loop.State
		eff loop.Effect
	)
	for i := range events {
		ev := &events[i]
		if ev.Seq != i+1 {
			return nil, fmt.Errorf("event %d has seq %d", i+1, ev.Seq)
		}
		if i == 0 {
			if ev.Kind != loop.Started {
				return nil, fmt.Errorf("event 1 is %s, want started", ev.Kind)
			}
		} else if ev.Kind != loop.Resumed { // a resumption changes nothing: the effect due is still due
			var want []loop.EventKind
			switch eff.Kind {
			case loop.RequestModel:
				want = []loop.EventKind{loop.ModelResponded, loop.ModelFailed}
			case loop.ValidateCalls:
				want = []loop.EventKind{loop.CallsValidated}
			case loop.AuthorizeCalls:
				want = []loop.EventKind{loop.PolicyDecided}
			case loop.PlanBatch:
				want = []loop.EventKind{loop.StagePlanned}
			case loop.ExecuteStage:
				want = []loop.EventKind{loop.StageFinished}
			case loop.Compensate:
				want = []loop.EventKind{loop.Compensated}
			case loop.Stop:
				want = []loop.EventKind{loop.Stopped}
			}
			if eff.Kind != loop.Stop && eff.Kind != loop.Compensate {
				want = append(want, loop.Interrupted)
			}
			if !slices.Contains(want, ev.Kind) {
				return nil, fmt.Errorf("event %d is %s after effect %s (want one of %v)", ev.Seq, ev.Kind, eff.Kind, want)
			}
			if ev.Kind == loop.StageFinished {
				if ev.Stage != eff.Stage || len(ev.Outcomes) != len(eff.Calls) {
					return nil, fmt.Errorf("event %d finishes stage %d with %d outcomes; stage %d of %d calls was asked for",
						ev.Seq, ev.Stage, len(ev.Outcomes), eff.Stage, len(eff.Calls))
				}
				for j, o := range ev.Outcomes {
					if want := s.Batch.Calls[eff.Calls[j]].ID; o.Result.CallID != want {
						return nil, fmt.Errorf("event %d: outcome %d is for call %s, want %s", ev.Seq, j, o.Result.CallID, want)
					}
				}
			}
		}
		eff = loop.Next(&s, ev)
	}
	if !s.Done || eff.Kind != loop.None {
		return nil, fmt.Errorf("the run has not stopped: %d events, last %s, next effect %s", len(events), events[len(events)-1].Kind, eff.Kind)
	}
	return &s, nil
}

func (c *campaign) report(took time.Duration) {
	t := c.t
	f := c.final
	t.Logf("%d kills in %d children (%d finished before their kill) in %v (children %v, checks %v)",
		c.kills, c.children, c.clean, took.Round(time.Millisecond), c.childTime.Round(time.Millisecond), c.checkTime.Round(time.Millisecond))
	t.Logf("%d runs: %d fresh starts (%d of them again, the first start's events lost with its child), %d resumes (%d refused while a killed child's lease lasted); %d events (max %d in a run)",
		len(c.runs), c.starts, c.restarts, c.resumes, c.leaseWaits, f.events, f.maxEvents)
	t.Logf("statuses: %v", f.statuses)
	t.Logf("refund handler invoked %d times, %d refunds made; status look-ups: %v", c.writes, c.effects, c.lookups)
	t.Logf("refund results in the logs: %d ok; %v", f.okRefunds, f.refundResults)
	t.Logf("orders: %d refunded exactly once, %d never refunded; %d runs asked again for a refund, %d times a run answered without a successful refund of an order it wanted",
		f.ordersRefunded, f.ordersUntouched, f.retried, f.undone)
	t.Logf("compensation: %d runs refunded all or nothing; refund_pair made %d refunds, reverse_refund invoked %d times, %d reversals made; %d orders refunded and reversed exactly once; their writes ended %v; compensations in the logs %v",
		f.pairRuns, c.pairRefunds, c.undoWrites, c.reversals, f.pairReversed, f.pairWrites, f.compensations)
	t.Logf("kill plans: %v", campSorted(c.killBy))
	t.Logf("kill points (most telling): %v", campSorted(c.killClass))
	t.Logf("kill points (any in progress): %v", campSorted(c.killAny))
}

func campSorted(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n\t%5d  %s", m[k], k)
	}
	return b.String()
}
