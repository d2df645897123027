#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs Herald against a local PostgreSQL:
# installs what is missing, starts a cluster in .herald-local/ (kept between runs), builds
# herald, migrates, registers demo devices and sends demo notifications with plain SQL
# (scripts/demo.sql), then runs the daemon in the foreground until Ctrl-C.
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
echo "==> registering demo devices and sending demo notifications (scripts/demo.sql)"
psql "$HERALD_DATABASE_URL" -v ON_ERROR_STOP=1 -q -f scripts/demo.sql >/dev/null

# Show what became of each notification once the daemon has had a moment.
(
  sleep 3
  echo "==> what became of the demo notifications:"
  psql "$HERALD_DATABASE_URL" -c "SELECT id, coalesce(user_ref, topic) AS target, state, reason,
      (SELECT count(*) FROM herald.deliveries d WHERE d.notification_id = n.id) AS deliveries
    FROM herald.notifications n ORDER BY id"
  "$herald" status || true
  echo "==> herald keeps running; Ctrl-C stops it"
) &

echo "==> running herald (Ctrl-C to stop)"
"$herald" run
