package main

import (
	"net/url"
	"testing"

	"github.com/toolloop/toolloop/store/postgres/pgtest"
)

// postgresSchema makes a schema of its own for t on the server that
// TOOLLOOP_POSTGRES_URL (a postgres:// URL) names, dropped with its tables
// when t ends, and returns a URL whose search_path is it, with password
// put in its user part unless empty. Without the variable the test is
// skipped, except in CI (CI=true), which starts a server and must not pass
// by skipping.
func postgresSchema(t *testing.T, password string) (connString, schema string) {
	t.Helper()
	base, schema := pgtest.FreshSchema(t)
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("TOOLLOOP_POSTGRES_URL is not a postgres:// URL (the worker's --store takes one)")
	}
	if password != "" && u.User != nil {
		u.User = url.UserPassword(u.User.Username(), password)
	}
	return u.String(), schema
}
