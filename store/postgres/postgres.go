package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolloop/toolloop/store"
)

// Options configure a Store. The zero value is usable.
type Options struct {
	// Existing opens only a schema that already holds a store: a schema
	// without its tables is an error, and nothing is created in it (a
	// store from before run leases or blobs gets those tables added).
	Existing bool
	// ReadOnly opens an existing store (as Existing) for reading only:
	// nothing is created or migrated, and the server refuses every write
	// (the connections' transactions are read-only).
	ReadOnly bool
	// Now is for tests only: it replaces the database server's clock,
	// now(), by the caller's for run leases, so that a test can move time
	// past an expiry instead of sleeping through it. Its reading is sent
	// with each lease statement in place of now(); nothing else changes.
	// Leave it nil in production: workers on several machines must all
	// take leases on the one clock they share, the server's, and a store
	// with Now set agrees only with stores reading the same clock.
	Now func() time.Time
}

// Store is a PostgreSQL-backed store.Ledger, store.EventLog, store.Leaser
// and store.Blobs. It is safe for concurrent use, also by processes on
// several machines sharing one database and schema.
type Store struct {
	pool *pgxpool.Pool
	// now is Options.Now: nil means the server's clock.
	now func() time.Time
}

var (
	_ store.Ledger        = (*Store)(nil)
	_ store.ClaimReleaser = (*Store)(nil)
	_ store.EventLog      = (*Store)(nil)
	_ store.Leaser        = (*Store)(nil)
	_ store.Blobs         = (*Store)(nil)
)

// schema creates the store's tables where they are missing. Times are
// Unix nanoseconds (bigint), as in store/sqlite: timestamptz keeps only
// microseconds, and a claim is released by its exact claim time.
const schema = `
CREATE TABLE IF NOT EXISTS idempotency_ledger (
	key        text PRIMARY KEY,
	args_hash  text NOT NULL,
	state      text NOT NULL CHECK (state IN ('in_flight', 'done')),
	result     bytea,
	run_id     text NOT NULL DEFAULT '',
	call_id    text NOT NULL DEFAULT '',
	tool       text NOT NULL DEFAULT '',
	created_at bigint NOT NULL,
	updated_at bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS idempotency_ledger_pruning ON idempotency_ledger (state, updated_at);
CREATE TABLE IF NOT EXISTS runs (
	run_id        text PRIMARY KEY,
	session_id    text NOT NULL DEFAULT '',
	status        text NOT NULL DEFAULT '',
	detail        text NOT NULL DEFAULT '',
	steps         bigint NOT NULL DEFAULT 0,
	tool_calls    bigint NOT NULL DEFAULT 0,
	input_tokens  bigint NOT NULL DEFAULT 0,
	output_tokens bigint NOT NULL DEFAULT 0,
	started_at    bigint NOT NULL,
	updated_at    bigint NOT NULL,
	pending       bytea
);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, started_at);
CREATE TABLE IF NOT EXISTS run_events (
	run_id text NOT NULL,
	seq    bigint NOT NULL,
	kind   text NOT NULL,
	at     bigint NOT NULL,
	data   bytea NOT NULL,
	PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS run_leases (
	run_id  text PRIMARY KEY,
	owner   text NOT NULL,
	expires bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS blobs (
	digest text PRIMARY KEY,
	data   bytea NOT NULL
);
`

// tables are the tables a schema must have to be a store. run_leases and
// blobs came later and are not among them: a store made before them is
// still one (Open adds them when it may write).
var tables = []string{"idempotency_ledger", "runs", "run_events"}

// Open connects to the database that connString names and opens the store
// in the connection's current schema, creating its tables if needed
// unless opts says Existing or ReadOnly. Errors name the host, port,
// database and schema, never the password.
func Open(ctx context.Context, connString string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		// pgx words this error without the password.
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	name := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	if o.ReadOnly {
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store %s: %w", name, err)
	}
	s := &Store{pool: pool, now: o.Now}
	if err := s.open(ctx, name, o); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// open checks the schema and, unless read-only, creates the tables.
func (s *Store) open(ctx context.Context, name string, o Options) error {
	var (
		current    *string
		searchPath string
	)
	if err := s.pool.QueryRow(ctx, `SELECT current_schema(), current_setting('search_path')`).Scan(&current, &searchPath); err != nil {
		return fmt.Errorf("postgres store %s: %w", name, err)
	}
	if current == nil {
		return fmt.Errorf("postgres store %s: no schema to keep the store in: the search_path (%s) names none that exists", name, searchPath)
	}
	name += " (schema " + *current + ")"
	if o.Existing || o.ReadOnly {
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = ANY($1)`,
			tables).Scan(&n); err != nil {
			return fmt.Errorf("postgres store %s: %w", name, err)
		}
		if n != len(tables) {
			return fmt.Errorf("postgres store %s: not a toolloop store (the schema lacks its tables %s)", name, strings.Join(tables, ", "))
		}
		if o.ReadOnly {
			return nil
		}
	}
	// Workers that start at once all create the tables; IF NOT EXISTS
	// alone races in the catalog, so one at a time per schema.
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('toolloop store ' || current_schema()))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schema)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres store %s: creating tables: %w", name, err)
	}
	return nil
}

// Close closes the pool's connections, waiting for those in use to be
// returned. It returns nil; the error is there so that a Store is an
// io.Closer, as store/sqlite's is.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Pool returns the connection pool, for applications that keep their own
// tables in the same database.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Claim implements store.Ledger.
func (s *Store) Claim(ctx context.Context, rec store.Record) (store.Record, bool, error) {
	updated := rec.UpdatedAt
	if updated.IsZero() {
		updated = rec.CreatedAt
	}
	// A record that is there when the insert looks but gone when the
	// look-up does was released meanwhile: the key is free again, so the
	// claim is tried again, a bounded number of times.
	for range 4 {
		tag, err := s.pool.Exec(ctx, `INSERT INTO idempotency_ledger
			(key, args_hash, state, result, run_id, call_id, tool, created_at, updated_at)
			VALUES ($1, $2, 'in_flight', NULL, $3, $4, $5, $6, $7) ON CONFLICT (key) DO NOTHING`,
			rec.Key, rec.ArgsHash, rec.RunID, rec.CallID, rec.Tool, rec.CreatedAt.UnixNano(), updated.UnixNano())
		if err != nil {
			return store.Record{}, false, fmt.Errorf("claiming idempotency key %q: %w", rec.Key, err)
		}
		if tag.RowsAffected() == 1 {
			return store.Record{}, true, nil
		}
		old, ok, err := s.Lookup(ctx, rec.Key)
		if err != nil {
			return store.Record{}, false, err
		}
		if ok {
			return old, false, nil
		}
	}
	return store.Record{}, false, fmt.Errorf("claiming idempotency key %q: the record kept vanishing during the claim", rec.Key)
}

// Finish implements store.Ledger.
func (s *Store) Finish(ctx context.Context, key string, result json.RawMessage, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE idempotency_ledger SET state = 'done', result = $1, updated_at = $2
		WHERE key = $3 AND state = 'in_flight'`, []byte(result), at.UnixNano(), key)
	return oneRow(tag, err, key, "finishing")
}

// Release implements store.Ledger.
func (s *Store) Release(ctx context.Context, key string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_ledger WHERE key = $1 AND state = 'in_flight'`, key)
	return oneRow(tag, err, key, "releasing")
}

// ReleaseClaim implements store.ClaimReleaser.
func (s *Store) ReleaseClaim(ctx context.Context, claim store.Record) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_ledger WHERE key = $1 AND state = 'in_flight'
		AND run_id = $2 AND call_id = $3 AND created_at = $4`, claim.Key, claim.RunID, claim.CallID, claim.CreatedAt.UnixNano())
	return oneRow(tag, err, claim.Key, "releasing")
}

func oneRow(tag pgconn.CommandTag, err error, key, what string) error {
	if err != nil {
		return fmt.Errorf("%s idempotency key %q: %w", what, key, err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotInFlight
	}
	return nil
}

// Lookup implements store.Ledger.
func (s *Store) Lookup(ctx context.Context, key string) (store.Record, bool, error) {
	var (
		rec              store.Record
		state            string
		result           []byte
		created, updated int64
	)
	err := s.pool.QueryRow(ctx, `SELECT key, args_hash, state, result, run_id, call_id, tool, created_at, updated_at
		FROM idempotency_ledger WHERE key = $1`, key).
		Scan(&rec.Key, &rec.ArgsHash, &state, &result, &rec.RunID, &rec.CallID, &rec.Tool, &created, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
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
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_ledger WHERE state = 'done' AND updated_at < $1`, cutoff.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("pruning the idempotency ledger: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// Append implements store.EventLog: the new events and the summary in one
// transaction.
func (s *Store) Append(ctx context.Context, runID string, events []store.EventRecord, sum store.RunSummary) error {
	return s.append(ctx, runID, "", events, sum)
}

// AppendLeased implements store.Leaser: Append, with the lease checked in
// the same transaction.
func (s *Store) AppendLeased(ctx context.Context, lease store.Lease, events []store.EventRecord, sum store.RunSummary) error {
	if lease.Owner == "" {
		return errors.New("postgres store: AppendLeased needs the lease's owner")
	}
	return s.append(ctx, lease.RunID, lease.Owner, events, sum)
}

// append appends in one transaction; with an owner, only while that owner
// holds the run's lease. The lease row is read FOR SHARE, which keeps
// anyone from taking the lease over until this transaction ends: a new
// holder's reads of the log come after this append or see it fail.
//
// Two appends that both continue the log start at the same sequence
// number, so the primary key (run_id, seq) stops the second, however the
// two interleave: the loser gets store.ErrSeqConflict.
func (s *Store) append(ctx context.Context, runID, owner string, events []store.EventRecord, sum store.RunSummary) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("appending to run %s: %w", runID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // after Commit, a no-op
	if owner != "" {
		holder, expires, err := leaseHolder(ctx, tx, runID, " FOR SHARE")
		if err != nil {
			return fmt.Errorf("appending to run %s: %w", runID, err)
		}
		if holder != owner {
			return store.LeaseLost(runID, owner, holder, expires)
		}
	}
	var last int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE run_id = $1`, runID).Scan(&last); err != nil {
		return fmt.Errorf("appending to run %s: %w", runID, err)
	}
	if len(events) > 0 {
		seqs := make([]int64, len(events))
		kinds := make([]string, len(events))
		ats := make([]int64, len(events))
		datas := make([][]byte, len(events))
		for i, ev := range events {
			if ev.Seq != last+i+1 {
				return store.ErrSeqConflict
			}
			seqs[i], kinds[i], ats[i], datas[i] = int64(ev.Seq), ev.Kind, ev.At.UnixNano(), ev.Data
			if datas[i] == nil {
				datas[i] = []byte{}
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO run_events (run_id, seq, kind, at, data)
			SELECT $1, e.seq, e.kind, e.at, e.data FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bytea[]) AS e (seq, kind, at, data)`,
			runID, seqs, kinds, ats, datas)
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "23505" && pe.TableName == "run_events" {
			// unique_violation: another append took these numbers first.
			return store.ErrSeqConflict
		}
		if err != nil {
			return fmt.Errorf("appending events %d-%d to run %s: %w", events[0].Seq, events[len(events)-1].Seq, runID, err)
		}
	}
	var pending []byte
	if len(sum.Pending) > 0 {
		pending = sum.Pending
	}
	if _, err := tx.Exec(ctx, `INSERT INTO runs (run_id, session_id, status, detail, steps, tool_calls,
		input_tokens, output_tokens, started_at, updated_at, pending) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (run_id) DO UPDATE SET session_id = excluded.session_id, status = excluded.status,
		detail = excluded.detail, steps = excluded.steps, tool_calls = excluded.tool_calls,
		input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
		updated_at = excluded.updated_at, pending = excluded.pending`,
		runID, sum.SessionID, sum.Status, sum.Detail, sum.Steps, sum.ToolCalls, sum.InputTokens, sum.OutputTokens,
		sum.StartedAt.UnixNano(), sum.UpdatedAt.UnixNano(), pending); err != nil {
		return fmt.Errorf("updating run %s: %w", runID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing to run %s: %w", runID, err)
	}
	return nil
}

// serverNow is the server's clock in Unix nanoseconds (now() has
// microseconds). Lease statements read their clock as
// COALESCE($n::bigint, serverNow): the parameter is NULL unless Options.Now
// is set.
const serverNow = `(extract(epoch FROM now()) * 1000000000)::bigint`

// clock is the parameter lease statements read their clock from: nil
// (SQL NULL, so the server's now()) unless a test set Options.Now.
func (s *Store) clock() *int64 {
	if s.now == nil {
		return nil
	}
	t := s.now().UnixNano()
	return &t
}

// AcquireLease implements store.Leaser in one transaction: an upsert that
// changes the row only if it is owner's or has expired (and locks it
// either way), then, if it did not change it, a look at who holds it.
func (s *Store) AcquireLease(ctx context.Context, runID, owner string, ttl time.Duration) (store.Lease, error) {
	if err := store.CheckLeaseArgs(runID, owner, ttl); err != nil {
		return store.Lease{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return store.Lease{}, fmt.Errorf("taking the lease of run %s: %w", runID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // after Commit, a no-op
	var expires int64
	err = tx.QueryRow(ctx, `INSERT INTO run_leases AS l (run_id, owner, expires)
		VALUES ($1, $2, COALESCE($4::bigint, `+serverNow+`) + $3::bigint)
		ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, expires = excluded.expires
		WHERE l.owner = excluded.owner OR l.expires <= COALESCE($4::bigint, `+serverNow+`)
		RETURNING l.expires`, runID, owner, int64(ttl), s.clock()).Scan(&expires)
	if errors.Is(err, pgx.ErrNoRows) {
		// Refused; the upsert locked the row, so it is as it was.
		holder, until, err := leaseHolder(ctx, tx, runID, "")
		if err != nil {
			return store.Lease{}, fmt.Errorf("taking the lease of run %s: %w", runID, err)
		}
		return store.Lease{}, &store.LeaseHeldError{RunID: runID, Owner: holder, Expires: until}
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("taking the lease of run %s: %w", runID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return store.Lease{}, fmt.Errorf("taking the lease of run %s: %w", runID, err)
	}
	return store.Lease{RunID: runID, Owner: owner, Expires: time.Unix(0, expires).UTC()}, nil
}

// RenewLease implements store.Leaser: one update of owner's row, and, if
// owner has none, a look at who holds the lease to say so.
func (s *Store) RenewLease(ctx context.Context, runID, owner string, ttl time.Duration) (store.Lease, error) {
	if err := store.CheckLeaseArgs(runID, owner, ttl); err != nil {
		return store.Lease{}, err
	}
	var expires int64
	err := s.pool.QueryRow(ctx, `UPDATE run_leases SET expires = COALESCE($4::bigint, `+serverNow+`) + $3::bigint
		WHERE run_id = $1 AND owner = $2 RETURNING expires`, runID, owner, int64(ttl), s.clock()).Scan(&expires)
	if errors.Is(err, pgx.ErrNoRows) {
		holder, until, err := leaseHolder(ctx, s.pool, runID, "")
		if err != nil {
			return store.Lease{}, fmt.Errorf("renewing the lease of run %s: %w", runID, err)
		}
		return store.Lease{}, store.LeaseLost(runID, owner, holder, until)
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("renewing the lease of run %s: %w", runID, err)
	}
	return store.Lease{RunID: runID, Owner: owner, Expires: time.Unix(0, expires).UTC()}, nil
}

// ReleaseLease implements store.Leaser.
func (s *Store) ReleaseLease(ctx context.Context, runID, owner string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM run_leases WHERE run_id = $1 AND owner = $2`, runID, owner); err != nil {
		return fmt.Errorf("releasing the lease of run %s: %w", runID, err)
	}
	return nil
}

// querier is what leaseHolder needs of a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// leaseHolder returns who holds runID's lease and until when; "" if no
// one does. lock is appended to the query (" FOR SHARE" or "").
func leaseHolder(ctx context.Context, q querier, runID, lock string) (string, time.Time, error) {
	var (
		owner   string
		expires int64
	)
	err := q.QueryRow(ctx, `SELECT owner, expires FROM run_leases WHERE run_id = $1`+lock, runID).Scan(&owner, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, err
	}
	return owner, time.Unix(0, expires).UTC(), nil
}

// Events implements store.EventLog.
func (s *Store) Events(ctx context.Context, runID string) ([]store.EventRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, kind, at, data FROM run_events WHERE run_id = $1 ORDER BY seq`, runID)
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

// Runs implements store.EventLog. Run IDs of one start time are in byte
// order (COLLATE "C"), whatever the database's collation, as in the other
// stores.
func (s *Store) Runs(ctx context.Context, status string) ([]store.RunSummary, error) {
	rows, err := s.pool.Query(ctx, `SELECT run_id, session_id, status, detail, steps, tool_calls, input_tokens,
		output_tokens, started_at, updated_at, pending FROM runs WHERE $1 = '' OR status = $1
		ORDER BY started_at DESC, run_id COLLATE "C"`, status)
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
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	return out, nil
}

// PutBlob implements store.Blobs.
func (s *Store) PutBlob(ctx context.Context, data []byte) (string, error) {
	d := store.BlobDigest(data)
	if data == nil {
		data = []byte{}
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO blobs (digest, data) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING`, d, data); err != nil {
		return "", fmt.Errorf("storing blob %s: %w", d, err)
	}
	return d, nil
}

// Blob implements store.Blobs.
func (s *Store) Blob(ctx context.Context, digest string) ([]byte, error) {
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM blobs WHERE digest = $1`, digest).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w %s", store.ErrUnknownBlob, digest)
	}
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", digest, err)
	}
	if err := store.CheckBlob(digest, data); err != nil {
		return nil, err
	}
	return data, nil
}
