#!/usr/bin/env bash
# Soak: what months at a steady rate do to the database, in minutes. A producer sends RATE
# notifications a second through herald.send (25 a statement, to 20,000 devices, half Android,
# half iOS) for SECONDS, while a real `herald run` at its defaults sends them to the nginx
# stand-in for FCM, with the retention cut to RETENTION (and each partition to
# PARTITION_INTERVAL) so that retention works all through the run. Every 15 s it prints the hot
# tables' size, their live and dead rows, the backlog, the p99 from the producer's commit to
# FCM's answer, WAL per notification, and the longest transaction the daemon held; then whether
# the run stayed flat after its warm-up, the CPU that retention's backend and autovacuum took,
# how long the daemon took to stop on SIGTERM, and the CPU the run took. Each run has a fresh
# database.
#   RATES="2500 4000" SECONDS_EACH=360 WARM_UP=180 RETENTION=60s scripts/bench-soak.sh
#   PG_SETTINGS="-c autovacuum_naptime=10s" scripts/bench-soak.sh   # the server's settings
#   HERALD=path/to/herald scripts/bench-soak.sh   # another build
#   BEFORE=66f4d7d scripts/bench-soak.sh   # that commit's herald too, first at each rate: a
#                                          # before and after on the same server (66f4d7d
#                                          # pruned with DELETE, before the partitions), or
#                                          # BEFORE=path/to/herald, a build of it
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
# A third of the retention: the run retires a generation every 20 s (a build that does not
# know the setting prunes as it did).
partition_interval=${PARTITION_INTERVAL:-20s}
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
heralds=("$HERALD")
if [ -n "${BEFORE:-}" ] && [ -x "$BEFORE" ]; then
  heralds=("$BEFORE" "$HERALD")
elif [ -n "${BEFORE:-}" ]; then
  mkdir -p "$work/before"
  git archive "$BEFORE" | tar -x -C "$work/before"
  (cd "$work/before" && swift build -c release --product herald --static-swift-stdlib >/dev/null)
  heralds=("$work/before/.build/release/herald" "$HERALD")
fi


for rate in $rates; do for herald in "${heralds[@]}"; do
  as_postgres "$(postgres_bin)/dropdb" -h 127.0.0.1 -p "$PGPORT" -U postgres --if-exists herald_bench
  as_postgres "$(postgres_bin)/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres herald_bench
  # The build measured migrates its own schema; the bench only loads the devices.
  "$herald" migrate >"$work/migrate.log" 2>&1 || { cat "$work/migrate.log"; exit 1; }
  $bench prepare-e2e --no-migrate --notifications 0 --devices 20000 --token-uri "$base/token" \
    --credentials-out "$work/sa.json" >/dev/null
  echo
  partitions=()
  # Not grep -q: it would stop reading, and pipefail would count the writer's SIGPIPE.
  if "$herald" config 2>/dev/null | grep HERALD_PARTITION_INTERVAL >/dev/null; then
    partitions=(HERALD_PARTITION_INTERVAL="$partition_interval")
  fi
  echo "$herald ($("$herald" --version 2>/dev/null || echo "?")) at $rate notifications/s, retention $retention${partitions:+, partitions of $partition_interval}${PG_SETTINGS:+, PostgreSQL $PG_SETTINGS}:"
  env HERALD_FCM_ENDPOINT="$base" HERALD_CA_BUNDLE="$work/nginx/cert.pem" HERALD_RETENTION="$retention" \
    "${partitions[@]}" HERALD_FCM_RATE_LIMIT=1000000 HERALD_LOG_LEVEL=warning "$herald" run >"$work/daemon-$rate.log" 2>&1 &
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
done; done
