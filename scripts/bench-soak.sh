#!/usr/bin/env bash
# Soak: what months at a steady rate do to the database, in minutes. A producer sends RATE
# notifications a second through herald.send (25 a statement, to 20,000 devices, half Android,
# half iOS) for SECONDS, while a real `herald run` at its defaults sends them to the nginx
# stand-in for FCM, with the retention cut to RETENTION so that pruning works all through the
# run. Every 15 s it prints the hot tables' size, their live and dead rows, the backlog, the p99
# from the producer's commit to FCM's answer, WAL per notification, and the longest transaction
# the daemon held; then whether the run stayed flat after its warm-up, and how long the daemon
# took to stop on SIGTERM, and the CPU the run took. Each rate runs on a fresh database.
#   RATES="2500 4000" SECONDS_EACH=360 WARM_UP=180 RETENTION=60s scripts/bench-soak.sh
#   PG_SETTINGS="-c autovacuum_naptime=10s" scripts/bench-soak.sh   # the server's settings
#   HERALD=path/to/herald scripts/bench-soak.sh   # another build, for a before and after
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
install_herald_dependencies

rates=${RATES:-2500 4000}
seconds=${SECONDS_EACH:-360}
# The tables fill for the retention, plus the pruner's interval between passes, plus a
# round of autovacuum (a minute apart by default).
warm_up=${WARM_UP:-180}
retention=${RETENTION:-60s}
work=$(mktemp -d /tmp/herald-bench-soak.XXXXXX)
daemon=
cleanup() {
  [ -n "$daemon" ] && kill -9 "$daemon" 2>/dev/null
  scripts/lib/nginx-standin.sh stop "$work/nginx"
  stop_postgres "$work/pg"
  rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"
mkdir -p "$work/nginx"
# Default durability (fsync on), as a production server.
# shellcheck disable=SC2086 # PG_SETTINGS is a list of arguments
start_postgres "$work/pg" -c shared_buffers=256MB ${PG_SETTINGS:-} >/dev/null
export HERALD_DATABASE_URL="dbname=herald_bench"
port=$(scripts/lib/nginx-standin.sh start "$work/nginx")
base="https://127.0.0.1:$port"

if [ -z "${HERALD:-}" ]; then
  swift build -c release --product herald --static-swift-stdlib >/dev/null
  HERALD=.build/release/herald
fi
swift build -c release --product herald-bench --static-swift-stdlib >/dev/null
bench=.build/release/herald-bench


for rate in $rates; do
  as_postgres "$(postgres_bin)/dropdb" -h 127.0.0.1 -p "$PGPORT" -U postgres --if-exists herald_bench
  as_postgres "$(postgres_bin)/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres herald_bench
  # The build measured migrates its own schema; the bench only loads the devices.
  "$HERALD" migrate >"$work/migrate.log" 2>&1 || { cat "$work/migrate.log"; exit 1; }
  $bench prepare-e2e --no-migrate --notifications 0 --devices 20000 --token-uri "$base/token" \
    --credentials-out "$work/sa.json" >/dev/null
  echo
  echo "$HERALD at $rate notifications/s, retention $retention${PG_SETTINGS:+, PostgreSQL $PG_SETTINGS}:"
  env HERALD_FCM_ENDPOINT="$base" HERALD_CA_BUNDLE="$work/nginx/cert.pem" HERALD_RETENTION="$retention" \
    HERALD_FCM_RATE_LIMIT=1000000 HERALD_LOG_LEVEL=warning "$HERALD" run >"$work/daemon-$rate.log" 2>&1 &
  daemon=$!
  busy_before=$(machine_busy)
  $bench soak --rate "$rate" --seconds "$seconds" --warm-up "$warm_up" --users 20000
  busy=$(($(machine_busy) - busy_before))
  herald_cpu=$(process_cpu "$daemon")
  kill -0 "$daemon" 2>/dev/null || { echo "herald exited:"; cat "$work/daemon-$rate.log"; exit 1; }
  # SIGTERM must not wait for retention (or anything else in hand).
  stop_start=$(date +%s.%N)
  kill -TERM "$daemon"
  wait "$daemon" || true
  daemon=
  echo "  herald stopped $(python3 -c "import time; print(f'{time.time() - $stop_start:.2f}')") s after SIGTERM"
  python3 -c "t = $(getconf CLK_TCK) * $seconds; print(f'  CPU: the machine busy {$busy / t:.2f} cores on average, herald {$herald_cpu / t:.2f}')"
  grep -E 'error|critical' "$work/daemon-$rate.log" | cut -c1-200 | sort | uniq -c | sort -rn |
    head -3 || true
done
