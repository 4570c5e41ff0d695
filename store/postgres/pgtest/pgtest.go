// Package pgtest gives tests a PostgreSQL server of their own to work in:
// the server TOOLLOOP_POSTGRES_URL names (scripts/postgres.sh starts one),
// and a fresh schema per test, dropped when the test ends, so that tests
// run side by side and leave nothing behind. Without the variable a test
// is skipped, except in CI (CI=true), which starts a server and must not
// pass by skipping.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// ServerURL returns the test server's connection string from
// TOOLLOOP_POSTGRES_URL, skipping the test (or failing it under CI=true)
// when there is none.
func ServerURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("TOOLLOOP_POSTGRES_URL")
	if u == "" {
		const how = "TOOLLOOP_POSTGRES_URL is not set: start a server with eval \"$(scripts/postgres.sh start)\""
		if os.Getenv("CI") == "true" {
			t.Fatal(how + " (CI must run these tests, not skip them)")
		}
		t.Skip(how)
	}
	return u
}

// WithParam returns connString (a URL or key=value pairs) with key set to
// value.
func WithParam(t testing.TB, connString, key, value string) string {
	t.Helper()
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return connString + " " + key + "=" + value
}

// FreshSchema creates an empty schema of its own for t on the test
// server, dropped with everything in it when t ends, and returns a
// connection string whose search_path is it.
func FreshSchema(t testing.TB) (connString, schema string) {
	t.Helper()
	base := ServerURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	schema = "toolloop_test_" + hex.EncodeToString(b[:])
	exec := func(stmt string) error {
		ctx := context.Background()
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
	return WithParam(t, base, "search_path", schema), schema
}
