// Package sized allocates a value together with the few elements that go
// with it: a batch with its results, a stage with its call contexts. Most
// batches hold one to four calls, and one allocation sized to fit costs
// less than two, and less than room for a fixed maximum.
//
// New and New2 take a count n and return a zeroed value and slices of
// length and capacity n. What they guarantee is plain Go semantics: the
// slices are ordinary (an append past n copies, as with make), and the
// shared allocation lives as long as any part of it is reachable. The
// trick stays inside this package: no unsafe, no pooling, nothing a caller
// must release.
//
// It is internal plumbing with no place among the five boundaries of
// DESIGN.md: loop and executor use it to size a batch and a stage, and it
// imports nothing.
package sized
