package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/toolloop/toolloop/store"
)

// Options configure a Store. The zero value is usable.
type Options struct {
	// Synchronous is SQLite's synchronous setting: "FULL" (the default:
	// a committed record survives a power cut) or "NORMAL" (survives a
	// process crash; a power cut may lose the last commits).
	Synchronous string
	// BusyTimeout is how long a write waits for another process's lock.
	// Default 5s.
	BusyTimeout time.Duration
	// Existing opens only a file that already holds a store: a missing,
	// empty or foreign file is an error, and nothing is created.
	Existing bool
	// ReadOnly opens an existing store (as Existing) for reading only:
	// nothing in the file is created, migrated or written, and every write
	// fails.
	ReadOnly bool
	// Now is the clock run leases expire on; nil means time.Now. Every
	// process sharing a file must read the same clock (on one machine,
	// the system's): a test sets it to move time past an expiry.
	Now func() time.Time
}

// Store is a SQLite-backed store.Ledger, store.EventLog, store.Leaser and
// store.Blobs.
// It is safe for concurrent use, also by several processes on one file.
type Store struct {
	db  *sql.DB
	now func() time.Time
}

var (
	_ store.Ledger        = (*Store)(nil)
	_ store.ClaimReleaser = (*Store)(nil)
	_ store.EventLog      = (*Store)(nil)
	_ store.Leaser        = (*Store)(nil)
	_ store.Blobs         = (*Store)(nil)
)

const schema = `
CREATE TABLE IF NOT EXISTS idempotency_ledger (
	key        TEXT PRIMARY KEY,
	args_hash  TEXT NOT NULL,
	state      TEXT NOT NULL CHECK (state IN ('in_flight', 'done')),
	result     BLOB,
	run_id     TEXT NOT NULL DEFAULT '',
	call_id    TEXT NOT NULL DEFAULT '',
	tool       TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS idempotency_ledger_pruning ON idempotency_ledger (state, updated_at);
CREATE TABLE IF NOT EXISTS runs (
	run_id        TEXT PRIMARY KEY,
	session_id    TEXT NOT NULL DEFAULT '',
	status        TEXT NOT NULL DEFAULT '',
	detail        TEXT NOT NULL DEFAULT '',
	steps         INTEGER NOT NULL DEFAULT 0,
	tool_calls    INTEGER NOT NULL DEFAULT 0,
	input_tokens  INTEGER NOT NULL DEFAULT 0,
	output_tokens INTEGER NOT NULL DEFAULT 0,
	started_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	pending       BLOB
) STRICT;
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, started_at);
CREATE TABLE IF NOT EXISTS run_events (
	run_id TEXT NOT NULL,
	seq    INTEGER NOT NULL,
	kind   TEXT NOT NULL,
	at     INTEGER NOT NULL,
	data   BLOB NOT NULL,
	PRIMARY KEY (run_id, seq)
) STRICT;
CREATE TABLE IF NOT EXISTS run_leases (
	run_id  TEXT PRIMARY KEY,
	owner   TEXT NOT NULL,
	expires INTEGER NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS blobs (
	digest TEXT PRIMARY KEY,
	data   BLOB NOT NULL
) STRICT;
`

// Open opens the store in the file at path, creating it if needed unless
// opts says Existing or ReadOnly.
func Open(path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Existing || o.ReadOnly {
		ro, err := openReadOnly(path, o.BusyTimeout)
		if err != nil {
			return nil, err
		}
		if o.ReadOnly {
			ro.now = o.Now
			return ro, nil
		}
		ro.Close()
	}
	switch o.Synchronous {
	case "":
		o.Synchronous = "FULL"
	case "FULL", "NORMAL":
	default:
		return nil, fmt.Errorf("sqlite store: Synchronous is %q; want FULL or NORMAL", o.Synchronous)
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+o.Synchronous+")")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.BusyTimeout.Milliseconds()))
	// Write transactions take the write lock when they begin, so two
	// writers queue on the busy timeout instead of deadlocking on upgrade.
	q.Add("_txlock", "immediate")
	// The file is checked, and its tables made, before anything else
	// touches it: WAL mode, once set, is written into the file.
	if err := prepare(path, o.BusyTimeout); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	// One writer at a time is all SQLite allows; a small pool keeps lock
	// waits inside SQLite's busy handler rather than piling up connections.
	db.SetMaxOpenConns(4)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	return &Store{db: db, now: o.Now}, nil
}

// ApplicationID is the mark of a toolloop store in its file's header
// (PRAGMA application_id): the bytes "TlLp". Other programs that mark
// their files use other numbers, so a file with another mark is never
// taken for a store.
const ApplicationID = 0x546c4c70

// SchemaVersion is the version of the store's tables this package makes
// and reads, kept in the file's user_version. A file with a later version
// was made by a later toolloop and is refused.
const SchemaVersion = 1

// prepare makes path a store, in one transaction, if it is one already, a
// store made before stores were marked (recognised by its tables, and
// marked now), or a new or empty database; anything else is refused with
// an error that names the file and why, and left as it was, byte for byte:
// the check runs in rollback-journal mode, before WAL mode is set.
func prepare(path string, busy time.Duration) error {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return fmt.Errorf("sqlite store %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.Begin()
	if err != nil && strings.Contains(err.Error(), "not a database") {
		return fmt.Errorf("sqlite store %s: not a SQLite database, so toolloop leaves it alone: %w", path, err)
	}
	if err != nil {
		return fmt.Errorf("sqlite store %s: %w", path, err)
	}
	defer tx.Rollback() // after Commit, a no-op
	f, err := inspect(tx)
	if err != nil {
		return fmt.Errorf("sqlite store %s: %w", path, err)
	}
	if err := f.usable(path); err != nil {
		return err
	}
	if f.kind == fileStore && f.version == SchemaVersion && f.complete {
		return nil // nothing to write: the transaction ends unchanged
	}
	if _, err := tx.Exec(schema); err != nil {
		return fmt.Errorf("sqlite store %s: creating tables: %w", path, err)
	}
	// Both pragmas write the file's header, inside the transaction.
	if _, err := tx.Exec(fmt.Sprintf("PRAGMA application_id = %d; PRAGMA user_version = %d", ApplicationID, SchemaVersion)); err != nil {
		return fmt.Errorf("sqlite store %s: marking the file as a store: %w", path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite store %s: creating tables: %w", path, err)
	}
	return nil
}

// fileKind is what a SQLite file holds, as far as a store is concerned.
type fileKind int

const (
	fileForeign  fileKind = iota // another program's database
	fileEmpty                    // no tables, indexes, views or triggers, no mark
	fileStore                    // marked as a store
	fileUnmarked                 // a store made before stores were marked
)

// fileFacts is what inspect found in a file.
type fileFacts struct {
	kind    fileKind
	version int
	// complete says every table of the schema is there.
	complete bool
	// why says, for a foreign file, why it is not a store.
	why string
}

// usable returns nil if a store may use the file, else the error that
// refuses it.
func (f fileFacts) usable(path string) error {
	switch {
	case f.kind == fileForeign:
		return fmt.Errorf("sqlite store %s: a SQLite database, but not a toolloop store (%s); toolloop keeps its runs only in a new file or a store of its own, so it leaves this one alone", path, f.why)
	case f.kind == fileStore && f.version > SchemaVersion:
		return fmt.Errorf("sqlite store %s: made by a later toolloop (schema version %d; this one knows %d): upgrade toolloop to use it", path, f.version, SchemaVersion)
	}
	return nil
}

// storeTables are the columns of each table of the schema. The first three
// make a store; run_leases and blobs came later, and a store made before
// them lacks them.
var storeTables = []struct {
	name    string
	columns string
}{
	{"idempotency_ledger", "key,args_hash,state,result,run_id,call_id,tool,created_at,updated_at"},
	{"runs", "run_id,session_id,status,detail,steps,tool_calls,input_tokens,output_tokens,started_at,updated_at,pending"},
	{"run_events", "run_id,seq,kind,at,data"},
	{"run_leases", "run_id,owner,expires"},
	{"blobs", "digest,data"},
}

// coreTables counts the tables at the head of storeTables that every store
// has.
const coreTables = 3

// inspect says what the database q reads holds: its mark, its version and
// its tables, with their columns. Reading a file that is not a database
// fails here.
func inspect(q interface {
	QueryRow(string, ...any) *sql.Row
	Query(string, ...any) (*sql.Rows, error)
}) (fileFacts, error) {
	var app, version, objects int
	if err := q.QueryRow(`PRAGMA application_id`).Scan(&app); err != nil {
		return fileFacts{}, fmt.Errorf("not a SQLite database: %w", err)
	}
	if err := q.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		return fileFacts{}, fmt.Errorf("not a SQLite database: %w", err)
	}
	if err := q.QueryRow(`SELECT count(*) FROM sqlite_master`).Scan(&objects); err != nil {
		return fileFacts{}, fmt.Errorf("not a SQLite database: %w", err)
	}
	f := fileFacts{version: version, complete: true}
	var missing, differ []string
	for i, t := range storeTables {
		var cols []string
		rows, err := q.Query(`SELECT name FROM pragma_table_info(?) ORDER BY cid`, t.name)
		if err != nil {
			return fileFacts{}, err
		}
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				rows.Close()
				return fileFacts{}, err
			}
			cols = append(cols, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fileFacts{}, err
		}
		switch {
		case len(cols) == 0:
			f.complete = false
			if i < coreTables {
				missing = append(missing, t.name)
			}
		case strings.Join(cols, ",") != t.columns:
			differ = append(differ, fmt.Sprintf("its table %s has the columns (%s), not toolloop's (%s)", t.name, strings.Join(cols, ", "), strings.ReplaceAll(t.columns, ",", ", ")))
		}
	}
	switch {
	case app == ApplicationID:
		f.kind = fileStore
	case app != 0:
		f.why = fmt.Sprintf("its application_id is %#x, another program's mark", uint32(app))
	case objects == 0 && version == 0:
		f.kind = fileEmpty
	case len(differ) > 0:
		f.why = strings.Join(differ, "; ")
	case len(missing) > 0:
		f.why = "it lacks toolloop's tables " + strings.Join(missing, ", ")
	case version != 0:
		f.why = fmt.Sprintf("its user_version is %d, which toolloop never set on an unmarked store", version)
	default:
		f.kind = fileUnmarked
	}
	return f, nil
}

// openReadOnly opens an existing store without writing to its file, and
// checks that the file is a store.
func openReadOnly(path string, busy time.Duration) (*Store, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	case fi.Size() == 0:
		return nil, fmt.Errorf("sqlite store %s: the file is empty, not a store", path)
	}
	if busy <= 0 {
		busy = 5 * time.Second
	}
	// A file: URI, so that SQLite takes mode=ro; the path's own '%', '?'
	// and '#' are escaped to stay part of it.
	uri := "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path) +
		fmt.Sprintf("?mode=ro&_pragma=busy_timeout(%d)", busy.Milliseconds())
	db, err := sql.Open("sqlite", uri)
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	f, err := inspect(db)
	if err == nil && f.kind == fileEmpty {
		f.kind, f.why = fileForeign, "it has no tables"
	}
	if err == nil {
		err = f.usable(path)
	} else {
		err = fmt.Errorf("sqlite store %s: %w", path, err)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Store{db: db, now: time.Now}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// DB returns the underlying database, for stores that share the file.
func (s *Store) DB() *sql.DB { return s.db }

// Claim implements store.Ledger.
func (s *Store) Claim(ctx context.Context, rec store.Record) (store.Record, bool, error) {
	updated := rec.UpdatedAt
	if updated.IsZero() {
		updated = rec.CreatedAt
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO idempotency_ledger
		(key, args_hash, state, result, run_id, call_id, tool, created_at, updated_at)
		VALUES (?, ?, 'in_flight', NULL, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`,
		rec.Key, rec.ArgsHash, rec.RunID, rec.CallID, rec.Tool, rec.CreatedAt.UnixNano(), updated.UnixNano())
	if err != nil {
		return store.Record{}, false, fmt.Errorf("claiming idempotency key %q: %w", rec.Key, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return store.Record{}, false, fmt.Errorf("claiming idempotency key %q: %w", rec.Key, err)
	} else if n == 1 {
		return store.Record{}, true, nil
	}
	old, ok, err := s.Lookup(ctx, rec.Key)
	if err != nil {
		return store.Record{}, false, err
	}
	if !ok {
		// Released between our insert and our look-up: the key is free
		// again, so try the claim once more (a bounded number of times).
		if retries, _ := ctx.Value(claimRetriesKey{}).(int); retries < 3 {
			return s.Claim(context.WithValue(ctx, claimRetriesKey{}, retries+1), rec)
		}
		return store.Record{}, false, fmt.Errorf("claiming idempotency key %q: the record kept vanishing during the claim", rec.Key)
	}
	return old, false, nil
}

// claimRetriesKey counts Claim's retries in its context.
type claimRetriesKey struct{}

// Finish implements store.Ledger.
func (s *Store) Finish(ctx context.Context, key string, result json.RawMessage, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE idempotency_ledger SET state = 'done', result = ?, updated_at = ?
		WHERE key = ? AND state = 'in_flight'`, []byte(result), at.UnixNano(), key)
	return oneRow(res, err, key, "finishing")
}

// Release implements store.Ledger.
func (s *Store) Release(ctx context.Context, key string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM idempotency_ledger WHERE key = ? AND state = 'in_flight'`, key)
	return oneRow(res, err, key, "releasing")
}

func oneRow(res sql.Result, err error, key, what string) error {
	if err != nil {
		return fmt.Errorf("%s idempotency key %q: %w", what, key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s idempotency key %q: %w", what, key, err)
	}
	if n == 0 {
		return store.ErrNotInFlight
	}
	return nil
}

// ReleaseClaim implements store.ClaimReleaser.
func (s *Store) ReleaseClaim(ctx context.Context, claim store.Record) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM idempotency_ledger WHERE key = ? AND state = 'in_flight'
		AND run_id = ? AND call_id = ? AND created_at = ?`, claim.Key, claim.RunID, claim.CallID, claim.CreatedAt.UnixNano())
	return oneRow(res, err, claim.Key, "releasing")
}

// Lookup implements store.Ledger.
func (s *Store) Lookup(ctx context.Context, key string) (store.Record, bool, error) {
	var (
		rec              store.Record
		state            string
		result           []byte
		created, updated int64
	)
	err := s.db.QueryRowContext(ctx, `SELECT key, args_hash, state, result, run_id, call_id, tool, created_at, updated_at
		FROM idempotency_ledger WHERE key = ?`, key).
		Scan(&rec.Key, &rec.ArgsHash, &state, &result, &rec.RunID, &rec.CallID, &rec.Tool, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Record{}, false, nil
	}
	if err != nil {
		return store.Record{}, false, fmt.Errorf("looking up idempotency key %q: %w", key, err)
	}
	rec.State = store.WriteState(state)
	if len(result) > 0 {
		rec.Result = json.RawMessage(result)
	}
	rec.CreatedAt, rec.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	return rec, true, nil
}

// Prune implements store.Ledger.
func (s *Store) Prune(ctx context.Context, cutoff time.Time) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM idempotency_ledger WHERE state = 'done' AND updated_at < ?`, cutoff.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("pruning the idempotency ledger: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// Append implements store.EventLog: the new events and the summary in one
// transaction, so one commit (one fsync) per call.
func (s *Store) Append(ctx context.Context, runID string, events []store.EventRecord, sum store.RunSummary) error {
	return s.append(ctx, runID, "", events, sum)
}

// AppendLeased implements store.Leaser: Append, with the lease checked in
// the same transaction.
func (s *Store) AppendLeased(ctx context.Context, lease store.Lease, events []store.EventRecord, sum store.RunSummary) error {
	if lease.Owner == "" {
		return errors.New("sqlite store: AppendLeased needs the lease's owner")
	}
	return s.append(ctx, lease.RunID, lease.Owner, events, sum)
}

// append appends in one transaction; with an owner, only while that owner
// holds the run's lease. The transaction takes the write lock when it
// begins, so the lease cannot change hands between the check and the
// commit.
func (s *Store) append(ctx context.Context, runID, owner string, events []store.EventRecord, sum store.RunSummary) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("appending to run %s: %w", runID, err)
	}
	defer tx.Rollback() // after Commit, a no-op
	if owner != "" {
		holder, expires, err := leaseHolder(ctx, tx, runID)
		if err != nil {
			return fmt.Errorf("appending to run %s: %w", runID, err)
		}
		if holder != owner {
			return store.LeaseLost(runID, owner, holder, expires)
		}
	}
	var last int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE run_id = ?`, runID).Scan(&last); err != nil {
		return fmt.Errorf("appending to run %s: %w", runID, err)
	}
	for i, ev := range events {
		if ev.Seq != last+i+1 {
			return store.ErrSeqConflict
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_events (run_id, seq, kind, at, data) VALUES (?, ?, ?, ?, ?)`,
			runID, ev.Seq, ev.Kind, ev.At.UnixNano(), []byte(ev.Data)); err != nil {
			return fmt.Errorf("appending event %d to run %s: %w", ev.Seq, runID, err)
		}
	}
	var pending []byte
	if len(sum.Pending) > 0 {
		pending = sum.Pending
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO runs (run_id, session_id, status, detail, steps, tool_calls,
		input_tokens, output_tokens, started_at, updated_at, pending) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id) DO UPDATE SET session_id = excluded.session_id, status = excluded.status,
		detail = excluded.detail, steps = excluded.steps, tool_calls = excluded.tool_calls,
		input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
		updated_at = excluded.updated_at, pending = excluded.pending`,
		runID, sum.SessionID, sum.Status, sum.Detail, sum.Steps, sum.ToolCalls, sum.InputTokens, sum.OutputTokens,
		sum.StartedAt.UnixNano(), sum.UpdatedAt.UnixNano(), pending); err != nil {
		return fmt.Errorf("updating run %s: %w", runID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing to run %s: %w", runID, err)
	}
	return nil
}

// AcquireLease implements store.Leaser in one transaction: an upsert that
// changes the row only if it is owner's or has expired, then, if it did
// not, a look at who holds it.
func (s *Store) AcquireLease(ctx context.Context, runID, owner string, ttl time.Duration) (store.Lease, error) {
	if err := store.CheckLeaseArgs(runID, owner, ttl); err != nil {
		return store.Lease{}, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Lease{}, fmt.Errorf("taking the lease of run %s: %w", runID, err)
	}
	defer tx.Rollback() // after Commit, a no-op
	now := s.now()
	expires := now.Add(ttl)
	res, err := tx.ExecContext(ctx, `INSERT INTO run_leases (run_id, owner, expires) VALUES (?, ?, ?)
		ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, expires = excluded.expires
		WHERE run_leases.owner = excluded.owner OR run_leases.expires <= ?`,
		runID, owner, expires.UnixNano(), now.UnixNano())
	if err != nil {
		return store.Lease{}, fmt.Errorf("taking the lease of run %s: %w", runID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return store.Lease{}, fmt.Errorf("taking the lease of run %s: %w", runID, err)
	}
	if n == 0 {
		holder, until, err := leaseHolder(ctx, tx, runID)
		if err != nil {
			return store.Lease{}, fmt.Errorf("taking the lease of run %s: %w", runID, err)
		}
		return store.Lease{}, &store.LeaseHeldError{RunID: runID, Owner: holder, Expires: until}
	}
	if err := tx.Commit(); err != nil {
		return store.Lease{}, fmt.Errorf("taking the lease of run %s: %w", runID, err)
	}
	return store.Lease{RunID: runID, Owner: owner, Expires: time.Unix(0, expires.UnixNano()).UTC()}, nil
}

// RenewLease implements store.Leaser.
func (s *Store) RenewLease(ctx context.Context, runID, owner string, ttl time.Duration) (store.Lease, error) {
	if err := store.CheckLeaseArgs(runID, owner, ttl); err != nil {
		return store.Lease{}, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Lease{}, fmt.Errorf("renewing the lease of run %s: %w", runID, err)
	}
	defer tx.Rollback() // after Commit, a no-op
	expires := s.now().Add(ttl)
	res, err := tx.ExecContext(ctx, `UPDATE run_leases SET expires = ? WHERE run_id = ? AND owner = ?`,
		expires.UnixNano(), runID, owner)
	if err != nil {
		return store.Lease{}, fmt.Errorf("renewing the lease of run %s: %w", runID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return store.Lease{}, fmt.Errorf("renewing the lease of run %s: %w", runID, err)
	}
	if n == 0 {
		holder, until, err := leaseHolder(ctx, tx, runID)
		if err != nil {
			return store.Lease{}, fmt.Errorf("renewing the lease of run %s: %w", runID, err)
		}
		return store.Lease{}, store.LeaseLost(runID, owner, holder, until)
	}
	if err := tx.Commit(); err != nil {
		return store.Lease{}, fmt.Errorf("renewing the lease of run %s: %w", runID, err)
	}
	return store.Lease{RunID: runID, Owner: owner, Expires: time.Unix(0, expires.UnixNano()).UTC()}, nil
}

// ReleaseLease implements store.Leaser.
func (s *Store) ReleaseLease(ctx context.Context, runID, owner string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM run_leases WHERE run_id = ? AND owner = ?`, runID, owner); err != nil {
		return fmt.Errorf("releasing the lease of run %s: %w", runID, err)
	}
	return nil
}

// leaseHolder returns who holds runID's lease and until when; "" if no
// one does.
func leaseHolder(ctx context.Context, tx *sql.Tx, runID string) (string, time.Time, error) {
	var (
		owner   string
		expires int64
	)
	err := tx.QueryRowContext(ctx, `SELECT owner, expires FROM run_leases WHERE run_id = ?`, runID).Scan(&owner, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, err
	}
	return owner, time.Unix(0, expires).UTC(), nil
}

// Events implements store.EventLog.
func (s *Store) Events(ctx context.Context, runID string) ([]store.EventRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, kind, at, data FROM run_events WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("reading run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []store.EventRecord
	for rows.Next() {
		var (
			ev   store.EventRecord
			at   int64
			data []byte
		)
		if err := rows.Scan(&ev.Seq, &ev.Kind, &at, &data); err != nil {
			return nil, fmt.Errorf("reading run %s: %w", runID, err)
		}
		ev.At, ev.Data = time.Unix(0, at).UTC(), data
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading run %s: %w", runID, err)
	}
	if len(out) == 0 {
		return nil, store.ErrUnknownRun
	}
	return out, nil
}

// Runs implements store.EventLog.
func (s *Store) Runs(ctx context.Context, status string) ([]store.RunSummary, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT run_id, session_id, status, detail, steps, tool_calls, input_tokens,
		output_tokens, started_at, updated_at, pending FROM runs WHERE ? = '' OR status = ?
		ORDER BY started_at DESC, run_id`, status, status)
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	defer rows.Close()
	var out []store.RunSummary
	for rows.Next() {
		var (
			r                store.RunSummary
			started, updated int64
			pending          []byte
		)
		if err := rows.Scan(&r.RunID, &r.SessionID, &r.Status, &r.Detail, &r.Steps, &r.ToolCalls, &r.InputTokens,
			&r.OutputTokens, &started, &updated, &pending); err != nil {
			return nil, fmt.Errorf("listing runs: %w", err)
		}
		r.StartedAt, r.UpdatedAt = time.Unix(0, started).UTC(), time.Unix(0, updated).UTC()
		if len(pending) > 0 {
			r.Pending = pending
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// PutBlob implements store.Blobs. A blob already stored is left as it
// is: its digest names the same bytes.
func (s *Store) PutBlob(ctx context.Context, data []byte) (string, error) {
	d := store.BlobDigest(data)
	if data == nil {
		data = []byte{} // a NULL would break the column's NOT NULL
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO blobs (digest, data) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING`,
		d, data); err != nil {
		return "", fmt.Errorf("storing blob %s: %w", d, err)
	}
	return d, nil
}

// Blob implements store.Blobs.
func (s *Store) Blob(ctx context.Context, digest string) ([]byte, error) {
	var data []byte
	err := s.db.QueryRowContext(ctx, `SELECT data FROM blobs WHERE digest = ?`, digest).Scan(&data)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("%w %s", store.ErrUnknownBlob, digest)
	case err != nil && strings.Contains(err.Error(), "no such table"):
		// A read-only store made before blobs existed holds none.
		return nil, fmt.Errorf("%w %s", store.ErrUnknownBlob, digest)
	case err != nil:
		return nil, fmt.Errorf("reading blob %s: %w", digest, err)
	}
	if data == nil {
		data = []byte{}
	}
	if err := store.CheckBlob(digest, data); err != nil {
		return nil, err
	}
	return data, nil
}
