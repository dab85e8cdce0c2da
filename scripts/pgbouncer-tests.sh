#!/usr/bin/env bash
# `npm run test:pgbouncer`: the gateway's and the reliability tests through PgBouncer in transaction pooling,
# as a deployment behind it runs (docs/deploy.md, "Scaling out"), with NEXUS_DATABASE_PREPARED_STATEMENTS=false.
#
# Starts its own PgBouncer (Debian's package; installed with apt-get when missing) on a free port of 127.0.0.1,
# its configuration in a temporary directory, auth_type=any in front of the test PostgreSQL (TEST_DATABASE_URL,
# default postgres://postgres@127.0.0.1:5432/postgres), as the current user (as postgres when that is root:
# PgBouncer refuses to run as root), and stops it at the end. Each test file gets a database of its own, served
# through PgBouncer (test/support/test-db.ts). Arguments go to vitest (a file, say).
#
# Without PgBouncer: with CI=true the step fails; elsewhere it says so and passes.
set -euo pipefail
cd "$(dirname "$0")/.."

find_pgbouncer() { command -v pgbouncer 2>/dev/null || { [ -x /usr/sbin/pgbouncer ] && echo /usr/sbin/pgbouncer; } || true; }

PGBOUNCER=$(find_pgbouncer)
if [ -z "$PGBOUNCER" ]; then
  echo "PgBouncer is not installed: installing Debian's package"
  SUDO=()
  [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO=(sudo -n)
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get install -y -q pgbouncer >/dev/null 2>&1 ||
    { "${SUDO[@]}" apt-get update -q >/dev/null 2>&1 && "${SUDO[@]}" apt-get install -y -q pgbouncer >/dev/null 2>&1; } || true
  PGBOUNCER=$(find_pgbouncer)
fi
if [ -z "$PGBOUNCER" ]; then
  if [ "${CI:-}" = "true" ]; then
    echo "FAILED: PgBouncer could not be installed (apt-get install pgbouncer), so the tests through it cannot run" >&2
    exit 1
  fi
  echo "SKIPPED: no PgBouncer here (apt-get install pgbouncer); CI runs these tests through it"
  exit 0
fi

DIRECT=${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
PG_HOST=$(node -e 'const u = new URL(process.argv[1]); console.log(u.hostname)' "$DIRECT")
PG_PORT=$(node -e 'const u = new URL(process.argv[1]); console.log(u.port || 5432)' "$DIRECT")
PG_USER=$(node -e 'const u = new URL(process.argv[1]); console.log(decodeURIComponent(u.username) || "postgres")' "$DIRECT")
PORT=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')

DIR=$(mktemp -d "${TMPDIR:-/tmp}/nexus-pgbouncer.XXXXXX")
RUN_AS=()
if [ "$(id -u)" -eq 0 ]; then
  RUN_AS=(-u postgres)
  chown postgres "$DIR"
fi
cat > "$DIR/pgbouncer.ini" <<INI
; Every database of the test cluster, as the test user; no password (the test cluster trusts 127.0.0.1).
[databases]
* = host=$PG_HOST port=$PG_PORT user=$PG_USER

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
auth_type = any
pool_mode = transaction
max_client_conn = 2000
; Per test file's database: two files run at once, each of its Nexuses holds up to 20 client connections.
default_pool_size = 16
ignore_startup_parameters = extra_float_digits
logfile = $DIR/pgbouncer.log
pidfile = $DIR/pgbouncer.pid
log_connections = 0
log_disconnections = 0
INI

stop() {
  if [ -f "$DIR/pgbouncer.pid" ]; then kill "$(cat "$DIR/pgbouncer.pid")" 2>/dev/null || true; fi
  for _ in $(seq 1 50); do [ -f "$DIR/pgbouncer.pid" ] || break; sleep 0.1; done
  rm -rf "$DIR"
}
trap stop EXIT

"$PGBOUNCER" -d "${RUN_AS[@]}" "$DIR/pgbouncer.ini"
for _ in $(seq 1 50); do
  node -e 'require("net").connect(Number(process.argv[1]), "127.0.0.1").on("connect", () => process.exit(0)).on("error", () => process.exit(1))' "$PORT" && break
  sleep 0.1
done
echo "$("$PGBOUNCER" --version | head -1) in transaction pooling on 127.0.0.1:$PORT"

TEST_PGBOUNCER_URL="postgres://$PG_USER@127.0.0.1:$PORT/postgres" NEXUS_DATABASE_PREPARED_STATEMENTS=false \
  npx vitest run --config vitest.pgbouncer.config.ts "$@"
