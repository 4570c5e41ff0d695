// Package sqlite is the on-disk store: an idempotency ledger in a SQLite
// file (pure Go, through modernc.org/sqlite), in WAL mode so that readers
// never block the writer and several processes can share the file.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
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
}

// Store is a SQLite-backed store.Ledger. It is safe for concurrent use,
// also by several processes on one file.
type Store struct {
	db *sql.DB
}

var _ store.Ledger = (*Store)(nil)

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
`

// Open opens (creating if needed) the store in the file at path.
func Open(path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
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
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	// One writer at a time is all SQLite allows; a small pool keeps lock
	// waits inside SQLite's busy handler rather than piling up connections.
	db.SetMaxOpenConns(4)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite store %s: creating tables: %w", path, err)
	}
	return &Store{db: db}, nil
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
		// Released between our insert and our look-up; let the caller retry
		// from the top rather than guess.
		return store.Record{}, false, fmt.Errorf("claiming idempotency key %q: record vanished during the claim", rec.Key)
	}
	return old, false, nil
}

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
