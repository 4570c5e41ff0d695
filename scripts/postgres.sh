#!/usr/bin/env bash
# A throwaway PostgreSQL server for store/postgres's tests, on loopback.
#
#   scripts/postgres.sh start [DIR]   initdb a cluster in DIR (once), start it,
#                                     create the database toolloop_test, and
#                                     print the line to eval:
#                                     export TOOLLOOP_POSTGRES_URL=postgres://...
#   scripts/postgres.sh env [DIR]     print that line again
#   scripts/postgres.sh stop [DIR]    stop the server and delete its files
#                                     (and DIR, if nothing else is in it)
#
# DIR defaults to ${TMPDIR:-/tmp}/toolloop-pg; the port is
# TOOLLOOP_POSTGRES_PORT, default 15432. The server listens on 127.0.0.1
# only and trusts every local connection (no password): it is for tests,
# and fsync is off, so it must never hold data anyone wants to keep.
#
# It needs Debian's postgresql package (binaries in
# /usr/lib/postgresql/VERSION/bin, or initdb and pg_ctl on PATH). initdb and
# the server refuse to run as root, so as root the cluster is made and run
# as the user postgres, which the package creates.
#
# Typical use:
#   eval "$(scripts/postgres.sh start)"
#   go test -race ./store/postgres
#   scripts/postgres.sh stop
set -euo pipefail

cmd="${1:-}"
dir="${2:-${TMPDIR:-/tmp}/toolloop-pg}"
port="${TOOLLOOP_POSTGRES_PORT:-15432}"
db=toolloop_test
user=postgres

usage() {
	echo "usage: $0 start|stop|env [DIR]" >&2
	exit 2
}

# bindir prints the directory of initdb and pg_ctl: the newest
# /usr/lib/postgresql/VERSION/bin, else the one on PATH.
bindir() {
	local d
	d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
	if [ -n "$d" ] && [ -x "$d/initdb" ]; then
		echo "$d"
		return
	fi
	if command -v initdb >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
		return
	fi
	echo "no PostgreSQL server binaries (initdb): install Debian's postgresql package (apt-get install -y postgresql)" >&2
	return 1
}

# as_owner runs its arguments as the cluster's owner: postgres when we are
# root, else ourselves.
as_owner() {
	if [ "$(id -u)" = 0 ]; then
		if command -v runuser >/dev/null 2>&1; then
			runuser -u postgres -- "$@"
		else
			su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
		fi
	else
		"$@"
	fi
}

url() {
	echo "postgres://$user@127.0.0.1:$port/$db?sslmode=disable"
}

case "$cmd" in
start)
	bin="$(bindir)"
	if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
		echo "running as root, but there is no user postgres to run the server as (Debian's postgresql package creates it)" >&2
		exit 1
	fi
	mkdir -p "$dir"
	dir="$(cd "$dir" && pwd)"
	if [ "$(id -u)" = 0 ]; then
		chown postgres: "$dir"
		if ! as_owner test -w "$dir"; then
			echo "the user postgres cannot write to $dir (is one of its parents private to root?): pass a directory under /tmp" >&2
			exit 1
		fi
	fi
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		as_owner "$bin/initdb" -D "$dir/data" -U "$user" --auth=trust --no-locale -E UTF8 >"$dir/initdb.log" 2>&1 || {
			cat "$dir/initdb.log" >&2
			exit 1
		}
	fi
	if ! as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
		as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
			-o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off -c synchronous_commit=off -c max_connections=200" \
			start >/dev/null || {
			echo "the PostgreSQL server did not start:" >&2
			cat "$dir/server.log" >&2
			exit 1
		}
	fi
	psql="$bin/psql"
	[ -x "$psql" ] || psql=psql
	if [ "$("$psql" -h 127.0.0.1 -p "$port" -U "$user" -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = '$db'")" != 1 ]; then
		"$psql" -h 127.0.0.1 -p "$port" -U "$user" -d postgres -qc "CREATE DATABASE $db" >/dev/null
	fi
	echo "export TOOLLOOP_POSTGRES_URL='$(url)'"
	;;
stop)
	if [ -f "$dir/data/PG_VERSION" ]; then
		bin="$(bindir)"
		as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
	fi
	# Only what start made, so that a mistaken DIR loses nothing else.
	rm -rf "$dir/data" "$dir/initdb.log" "$dir/server.log"
	rmdir "$dir" 2>/dev/null || true
	;;
env)
	echo "export TOOLLOOP_POSTGRES_URL='$(url)'"
	;;
*)
	usage
	;;
esac
