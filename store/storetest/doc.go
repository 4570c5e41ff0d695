// Package storetest is the conformance suite for stores: TestEventLog for
// store.EventLog, TestLedger for store.Ledger and TestLeaser for
// store.Leaser (whose open function is given the clock leases expire on).
// An implementation's own test calls them with a function that opens a
// fresh, empty store:
//
//	func TestLedger(t *testing.T) {
//		storetest.TestLedger(t, func(t *testing.T) store.Ledger { return open(t) })
//	}
//
// The suites pin the contract written on the interfaces in package store:
// appends continue the sequence exactly or fail with store.ErrSeqConflict
// and write nothing; a run's events come back in order; summaries list
// newest first and filter by status; a key is claimed once, even by
// concurrent claims; finishing or releasing a key that is not in flight
// fails with store.ErrNotInFlight; pruning never removes an in-flight
// record; a run's lease has one owner at a time, is refused to others
// with a *store.LeaseHeldError naming the holder until it expires, is
// never taken back once lost, and fences AppendLeased.
//
// The package imports only store and the standard library. It is how a
// new adapter (Postgres, a key-value store) proves it can stand in for
// store.Memory or store/sqlite under the durable runner and the executor.
package storetest
