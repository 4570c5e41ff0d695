// Package sqlite is the store on disk: a store.EventLog and a store.Ledger
// in one SQLite file, through the pure-Go driver modernc.org/sqlite (no
// cgo).
//
// Open takes a file path and Options (nil is fine) and returns a Store.
// The file is opened in WAL mode, so readers never block the writer, and a
// write waits up to Options.BusyTimeout for another process's lock, so
// several processes can share one file: a run paused in one process can be
// approved and resumed from another. With the default Synchronous setting,
// FULL, a committed append survives a power cut; NORMAL trades that for
// speed and survives only a process crash.
//
// Each Append (a batch of events and the run's summary) is one
// transaction, and the events' sequence numbers are checked inside it, so
// a second driver of the same run gets store.ErrSeqConflict rather than a
// forked log. Ledger claims are likewise atomic across processes, and the
// Store implements store.ClaimReleaser. It implements store.Leaser too, in
// the table run_leases: taking a lease is one upsert inside a transaction
// that holds the write lock, and a fenced append checks the lease in its
// own transaction. Leases expire on the clock of the process that takes
// them (Options.Now), which is sound for processes on one machine sharing
// one file; a store opened ReadOnly takes no leases.
//
// The package never interprets what it stores and never reads the
// environment; the caller picks the path. It passes the conformance
// suites of store/storetest. DB exposes the *sql.DB for applications that
// keep their own tables in the same file (examples/orders keeps its order
// book there, so that a run resumed in another process finds the book as
// the first process left it).
package sqlite
