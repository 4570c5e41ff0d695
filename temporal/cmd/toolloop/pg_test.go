package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// postgresSchema makes a schema of its own for t on the server that
// TOOLLOOP_POSTGRES_URL (a postgres:// URL) names, dropped with its tables
// when t ends, and returns a URL whose search_path is it, with password
// put in its user part unless empty. Without the variable the test is
// skipped, except in CI (CI=true), which starts a server and must not pass
// by skipping.
func postgresSchema(t *testing.T, password string) (connString, schema string) {
	t.Helper()
	base := os.Getenv("TOOLLOOP_POSTGRES_URL")
	if base == "" {
		const how = "TOOLLOOP_POSTGRES_URL is not set: start a server with eval \"$(scripts/postgres.sh start)\""
		if os.Getenv("CI") == "true" {
			t.Fatal(how + " (CI must run these tests, not skip them)")
		}
		t.Skip(how)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("TOOLLOOP_POSTGRES_URL is not a postgres:// URL (the worker's --store takes one)")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = "toolloop_worker_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	exec := func(stmt string) error {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, stmt)
		return err
	}
	if err := exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("making a schema on the test server (TOOLLOOP_POSTGRES_URL): %v", err)
	}
	t.Cleanup(func() {
		if err := exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	if password != "" && u.User != nil {
		u.User = url.UserPassword(u.User.Username(), password)
	}
	return u.String(), schema
}
