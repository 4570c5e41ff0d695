package main

import (
	"context"
	"flag"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/internal/cli"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/store/postgres"
)

// storeFlags are the worker's --db and --store: where the workers of a
// task queue keep what they must share, the idempotency ledger and the
// order desk's book. A SQLite file (--db, the default) serves workers on
// one machine; a PostgreSQL database (--store) serves workers on several.
type storeFlags struct {
	db, url string
}

func addStoreFlags(fs *flag.FlagSet) *storeFlags {
	f := &storeFlags{}
	fs.StringVar(&f.db, "db", "", "the SQLite store at `PATH`: the order book of --tools orders and the idempotency ledger; "+
		"every worker of a task queue must share it")
	fs.StringVar(&f.url, "store", "", "the PostgreSQL store at `URL` (postgres://...), instead of --db: "+
		"for workers of one task queue on several machines")
	return f
}

// check refuses a command line that names two stores, or a --store that
// is not a PostgreSQL URL, before anything is dialed.
func (f *storeFlags) check() error {
	if f.db != "" && f.url != "" {
		return cli.Usagef("--db and --store both name a store: give --db PATH for a SQLite file shared by workers on one machine, " +
			"or --store postgres://... for a database shared by workers on several")
	}
	if f.url != "" && !strings.HasPrefix(f.url, "postgres://") && !strings.HasPrefix(f.url, "postgresql://") {
		// The value is not repeated: it may hold a password.
		return cli.Usagef("--store takes a PostgreSQL URL, postgres://USER@HOST:PORT/DATABASE (add ?search_path=SCHEMA for a schema of its own)")
	}
	return nil
}

// sharedStore is the store a worker opened: the ledger for the executor,
// the opener of the order book for the tools, and the store's name for
// the startup line (never with a password).
type sharedStore struct {
	// shared is the ledger and the blob store (runs' logs, large tool
	// results) of every worker of the task queue.
	shared workerStore
	book   cli.BookOpener
	name   string
	close  func()
}

// Close closes what the store holds open.
func (s *sharedStore) Close() { s.close() }

// open opens the store the flags name: --store's database, else the
// SQLite file of --db (or the default one), made if missing.
func (f *storeFlags) open(ctx context.Context, k *cli.Kit) (*sharedStore, error) {
	if f.url == "" {
		path, err := k.DBPath(f.db)
		if err != nil {
			return nil, cli.Usagef("%v", err)
		}
		st, err := k.OpenStore(path, true)
		if err != nil {
			return nil, err
		}
		return &sharedStore{shared: st, book: cli.SQLiteBook(st), name: path, close: func() { st.Close() }}, nil
	}
	st, err := postgres.Open(ctx, f.url, nil)
	if err != nil {
		return nil, err
	}
	// The book is kept in the store's database and schema, over its pool
	// (the handle connects only when used, and closing it leaves the pool).
	db := stdlib.OpenDBFromPool(st.Pool())
	book := func(ctx context.Context) (orders.OrderBook, error) { return orders.OpenPostgresBook(ctx, db) }
	return &sharedStore{shared: st, book: book, name: redactStoreURL(f.url), close: func() {
		db.Close()
		st.Close()
	}}, nil
}

// addLogStoreFlags defines --db and --store for a command that reads runs'
// logs (trace, serve): the workers' store, which holds the events of a run
// from before it continued as new.
func addLogStoreFlags(fs *flag.FlagSet) *storeFlags {
	f := &storeFlags{}
	fs.StringVar(&f.db, "db", "", "the workers' SQLite store at `PATH`, to read the events of runs that continued as new")
	fs.StringVar(&f.url, "store", "", "the workers' PostgreSQL store at `URL` (postgres://...), instead of --db")
	return f
}

// openLogs opens the store the flags name for reading runs' logs: nil when
// neither flag was given, and an existing SQLite file only.
func (f *storeFlags) openLogs(ctx context.Context, k *cli.Kit) (store.Blobs, func(), error) {
	if err := f.check(); err != nil {
		return nil, nil, err
	}
	switch {
	case f.url != "":
		st, err := postgres.Open(ctx, f.url, nil)
		if err != nil {
			return nil, nil, err
		}
		return st, func() { st.Close() }, nil
	case f.db != "":
		path, err := k.DBPath(f.db)
		if err != nil {
			return nil, nil, cli.Usagef("%v", err)
		}
		st, err := k.OpenStore(path, false)
		if err != nil {
			return nil, nil, err
		}
		return st, func() { st.Close() }, nil
	}
	return nil, func() {}, nil
}

// redactStoreURL returns a PostgreSQL URL fit to print: the user, host,
// port, database and search_path, without a password (in the user part
// or the query) or any other parameter.
func redactStoreURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := url.Values{}
	if sp := u.Query().Get("search_path"); sp != "" {
		q.Set("search_path", sp)
	}
	u.RawQuery, u.Fragment = q.Encode(), ""
	return u.String()
}
