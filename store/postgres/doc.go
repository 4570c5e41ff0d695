// Package postgres is the store that workers on many machines share: a
// store.EventLog, store.Ledger, store.Leaser and store.Blobs in one
// PostgreSQL database, through github.com/jackc/pgx/v5 (pgxpool).
//
// Open takes a connection string (a postgres:// URL or key=value pairs)
// and Options (nil is fine) and returns a Store. Its tables are created,
// if missing, in the connection's current schema: the first schema of its
// search_path, which a URL sets with search_path=NAME, so that several
// stores can share one database. Creating them is serialized by an
// advisory lock, so workers that start at once do not trip over each
// other. Options.Existing opens only a schema that already holds a store,
// and Options.ReadOnly one whose every write the server refuses.
//
// The semantics are store/sqlite's, statement for statement where they
// can be. Each Append is one transaction; the events' sequence numbers are
// checked inside it, and the primary key (run, seq) turns the loser of two
// concurrent appends into store.ErrSeqConflict rather than a forked log.
// A ledger claim is one INSERT ... ON CONFLICT DO NOTHING, so of two
// claims of a key, from any number of machines, exactly one wins; the
// Store implements store.ClaimReleaser too. Runs are listed newest first,
// then by run ID in byte order (COLLATE "C"), as store.Memory and
// store/sqlite list them. Times are kept as Unix nanoseconds, so that
// what is stored comes back exactly.
//
// Leases (table run_leases) expire on the database server's clock, now(),
// never a worker's: workers on machines whose clocks disagree still agree
// on who holds a run. Taking a lease is one upsert that changes the row
// only if it is the caller's or has expired; a fenced append
// (AppendLeased) reads the lease row FOR SHARE in the append's
// transaction, so the lease cannot change hands until the append has
// committed or failed. Options.Now replaces the server's clock by the
// caller's, and is for tests only (see its doc).
//
// Blobs (table blobs) are kept by their SHA-256 digest and checked
// against it when read.
//
// The caller gives the connection string; the package reads no
// environment variable of its own, though pgx, like libpq, fills in what
// the string leaves out from PGHOST, PGUSER, PGPASSWORD and the like. The
// string may also set the pool (pool_max_conns=N) and, behind a
// transaction-pooling proxy such as PgBouncer, the query mode
// (default_query_exec_mode=exec), since pgx otherwise prepares and caches
// statements per connection.
//
// It passes the conformance suites of store/storetest. Pool exposes the
// *pgxpool.Pool for applications that keep their own tables in the same
// database.
package postgres
