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
package trace
