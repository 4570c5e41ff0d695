package orders

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/sqlite"
)

// tempLedger is the ledger of a sandbox run that brings none: a SQLite
// ledger (store/sqlite) in a file of its own, in a new temporary directory.
// The file is made on the first use, so that the many scenarios that never
// reach a write cost no disk at all; close closes it and removes the
// directory with the database and its WAL files.
type tempLedger struct {
	once sync.Once
	dir  string
	st   *sqlite.Store
	err  error
}

var _ store.Ledger = (*tempLedger)(nil)

var errLedgerClosed = errors.New("orders: the run's ledger is closed")

func (l *tempLedger) open() {
	dir, err := os.MkdirTemp("", "toolloop-orders-*")
	if err != nil {
		l.err = err
		return
	}
	// NORMAL: the file is thrown away after the run, so surviving a power
	// cut buys nothing, and fewer syncs keep the demo quick.
	st, err := sqlite.Open(filepath.Join(dir, "ledger.db"), &sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		_ = os.RemoveAll(dir)
		l.err = err
		return
	}
	l.dir, l.st = dir, st
}

func (l *tempLedger) store() (*sqlite.Store, error) {
	l.once.Do(l.open)
	return l.st, l.err
}

// close closes the file and removes its directory; a ledger never used
// is only marked closed. Best effort: the run is over, and its result
// stands either way.
func (l *tempLedger) close() {
	l.once.Do(func() { l.err = errLedgerClosed })
	if l.st != nil {
		_ = l.st.Close()
		_ = os.RemoveAll(l.dir)
	}
}

// Claim implements store.Ledger.
func (l *tempLedger) Claim(ctx context.Context, rec store.Record) (store.Record, bool, error) {
	st, err := l.store()
	if err != nil {
		return store.Record{}, false, err
	}
	return st.Claim(ctx, rec)
}

// Finish implements store.Ledger.
func (l *tempLedger) Finish(ctx context.Context, key string, result json.RawMessage, at time.Time) error {
	st, err := l.store()
	if err != nil {
		return err
	}
	return st.Finish(ctx, key, result, at)
}

// Release implements store.Ledger.
func (l *tempLedger) Release(ctx context.Context, key string) error {
	st, err := l.store()
	if err != nil {
		return err
	}
	return st.Release(ctx, key)
}

// ReleaseClaim implements store.ClaimReleaser.
func (l *tempLedger) ReleaseClaim(ctx context.Context, claim store.Record) error {
	st, err := l.store()
	if err != nil {
		return err
	}
	return st.ReleaseClaim(ctx, claim)
}

// Lookup implements store.Ledger.
func (l *tempLedger) Lookup(ctx context.Context, key string) (store.Record, bool, error) {
	st, err := l.store()
	if err != nil {
		return store.Record{}, false, err
	}
	return st.Lookup(ctx, key)
}

// Prune implements store.Ledger.
func (l *tempLedger) Prune(ctx context.Context, cutoff time.Time) (int, error) {
	st, err := l.store()
	if err != nil {
		return 0, err
	}
	return st.Prune(ctx, cutoff)
}
