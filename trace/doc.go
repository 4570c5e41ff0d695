// Package trace turns a run's events into the records a person or a
// tracing back end reads: a JSON Lines run log, spans, a rendering of the
// run for the terminal and a diagnosis of what looks wrong in it.
//
// Everything here is built on loop.Observer and the event log, never on
// hooks inside the loop: an event carries the time the driver read from its
// clock, so the stages of a run are the gaps between its events, and the
// spans of a run can be derived while it runs (NewLogWriter, FileObserver,
// the OpenTelemetry adapter in trace/otel) or afterwards from its log
// (Spans, Show, Diagnose).
//
// Tool arguments and results are summarized, not recorded, unless full
// content is asked for, and the fields a tool marks sensitive, or whose
// names or values match the Redactor's patterns, are masked either way.
//
// The contract: the package takes events (loop.Event values, live through
// an Observer or read back with ReadLog and Open) and gives records; it
// never changes an event (RedactEvent returns a redacted copy), never
// feeds anything back into a run, and an Observer has no error to return,
// so tracing cannot stop or steer a run. Timeline replays the events
// through loop.Next to learn what the decider did, so spans name the same
// budget checks and stop reasons the run met. Start with NewLogWriter or
// FileObserver for recording, Spans and Show for reading, Tokens and
// CacheDrops for what each model turn paid and read from the prompt cache,
// and Diagnose for a log that ended badly.
//
// In the terms of docs/DESIGN.md §1 this is an exporter beside the five
// boundaries: it depends on loop (and the types of llm, tool, policy and
// executor), and none of them depends on it. Heavy dependencies stay out: the
// OpenTelemetry export lives in trace/otel.
package trace
