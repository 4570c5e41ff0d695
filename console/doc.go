// Package console is toolloop's web console: an HTTP handler that lists a
// store's runs, shows one run (its message chain, a picture of its spans,
// the planner's decision tables, the policy's decisions, its budgets, why
// it stopped and what trace.Diagnose finds in it), lets a signed-in person
// approve or deny the calls a run paused for, and follows running runs
// live (server-sent events). The pages use a JSON API that scripts can
// call too.
//
// The console reads and drives runs only through Backend, a small
// interface: the toolloop command adapts its backends to it (toolloop
// serve), and LogBackend adapts any store.EventLog, for tests and for
// programs that embed the console.
//
// Nothing about runs is served to a request without a user's token (see
// ParseUsers): scripts send "Authorization: Bearer TOKEN", browsers sign in
// with the token once and get a session cookie, and every form carries a
// CSRF token. Model and tool output is untrusted and every page escapes it
// (html/template); the pages load no script or style from elsewhere, and
// the Content-Security-Policy forbids inline script.
package console
