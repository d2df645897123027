#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs Herald against a local PostgreSQL:
# installs what is missing, starts a cluster in .herald-local/ (kept between runs), builds
# herald, migrates, enqueues a few demo jobs with plain SQL, shows `herald status`, then runs
# the daemon in the foreground until Ctrl-C.
#
# With HERALD_DATABASE_URL set, it uses that database instead of starting one.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
install_herald_dependencies

if [ -z "${HERALD_DATABASE_URL:-}" ]; then
  start_postgres "$PWD/.herald-local"
  as_postgres "$(postgres_bin)/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = 'herald'" | grep -q 1 ||
    as_postgres "$(postgres_bin)/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres herald
  export HERALD_DATABASE_URL="host=127.0.0.1 port=$PGPORT user=postgres dbname=herald"
  trap 'stop_postgres "$PWD/.herald-local"' EXIT
fi

echo "==> building herald"
swift build --product herald
herald=.build/debug/herald

"$herald" migrate
echo "==> enqueueing demo jobs with plain SQL"
psql "$HERALD_DATABASE_URL" -v ON_ERROR_STOP=1 -qc \
  "INSERT INTO herald.jobs (kind, payload) SELECT 'sleep', jsonb_build_object('ms', 50) FROM generate_series(1, 500);"
"$herald" status || true

echo "==> running herald (Ctrl-C to stop); in another shell: $herald status"
export HERALD_WORKERS="${HERALD_WORKERS:-all,sleep}"
"$herald" run
"$herald" status || true
