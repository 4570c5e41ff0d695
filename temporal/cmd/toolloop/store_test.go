package main

import "testing"

// TestRedactStoreURL checks that the worker's startup line names the
// store by user, host, port, database and schema, and never shows the
// password, whether the URL has it in its user part or its query.
func TestRedactStoreURL(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://toolloop:secret@db.example:5432/runs?sslmode=require&search_path=shop": "postgres://toolloop@db.example:5432/runs?search_path=shop",
		"postgresql://toolloop@db.example/runs?password=secret&sslpassword=secret":         "postgresql://toolloop@db.example/runs",
		"postgres://db.example/runs": "postgres://db.example/runs",
		"postgres://%zz:secret@h/d":  "(unparsable URL)",
	} {
		if got := redactStoreURL(raw); got != want {
			t.Errorf("redactStoreURL(%q) = %q, want %q", raw, got, want)
		}
	}
}
