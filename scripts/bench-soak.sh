#!/usr/bin/env bash
# Soak: a steady stream for minutes, the way a backend sends, into a real `herald run` at its
# defaults (24 h partitions, 7 days' retention) started on an empty database, sending to the nginx
# stand-in for FCM. A producer (PRODUCERS connections, taking turns) commits PER_COMMIT
# notifications a statement through herald.send, RATE a second, to USERS devices (half Android,
# half iOS), for SECONDS_EACH. Every SAMPLE seconds it prints the hot tables' size, their live
# and dead rows, the backlog, the p99 from the producer's commit to FCM's answer, WAL per
# notification, the mean time and buffers of a dispatch claim (pg_stat_statements), and the
# longest transaction the daemon held; then whether the run stayed flat after its warm-up, the
# CPU retention's backend and autovacuum took, how long the daemon took to stop on SIGTERM, and
# the CPU the run took. Each run has a fresh database.
#   scripts/bench-soak.sh                                   # 1,000 and 2,500 a second, 10 minutes each
#   PER_COMMIT=1 PRODUCERS=4 RATES=1000 scripts/bench-soak.sh   # commits of one, from four
#                                                           # connections taking turns
#   PREFILL=1000000 scripts/bench-soak.sh                   # beside a day: the open generation holds a
#                                                           # million finished notifications first
#   RETENTION=60s PARTITION_INTERVAL=20s RATES=2500 scripts/bench-soak.sh   # retention at work all
#                                                           # through the run (figures taken so say so)
#   PG_SETTINGS="-c autovacuum_naptime=10s" scripts/bench-soak.sh   # the server's settings
#   HERALD=path/to/herald scripts/bench-soak.sh   # another build
#   BEFORE=bed7f6c scripts/bench-soak.sh   # that commit's herald too, first at each rate: a before
#                                          # and after on the same server, or BEFORE=path/to/herald
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
install_herald_dependencies

rates=${RATES:-1000 2500}
seconds=${SECONDS_EACH:-600}
sample=${SAMPLE:-60}
per_commit=${PER_COMMIT:-10}
# Producer connections: one commits at most a few hundred statements a second with fsync on.
producers=${PRODUCERS:-1}
users=${USERS:-10000}
prefill=${PREFILL:-0}
# Two samples in: the first minutes fill the tables and bring autovacuum's first rounds.
warm_up=${WARM_UP:-120}
# The daemon's own defaults unless told (HERALD_RETENTION, HERALD_PARTITION_INTERVAL).
retention=${RETENTION:-}
partition_interval=${PARTITION_INTERVAL:-}
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
start_postgres "$work/pg" -c shared_buffers=256MB -c shared_preload_libraries=pg_stat_statements ${PG_SETTINGS:-} >/dev/null
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
  psql -q -d herald_bench -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
  $bench prepare-e2e --no-migrate --notifications 0 --devices "$users" --token-uri "$base/token" \
    --credentials-out "$work/sa.json" >/dev/null
  if [ "$prefill" -gt 0 ]; then
    # A day's finished notifications in the open generation, each sent to one of the devices,
    # vacuumed and analyzed as autovacuum would have left them.
    psql -q -d herald_bench <<SQL
WITH day AS (
    INSERT INTO herald.notifications (app_id, user_ref, title, body, data, state, ingested_at, created_at)
    SELECT 'bench', 'user-' || (g % $users + 1), 'Earlier', 'A notification of the day', '{"order": "41"}',
           'accepted', now() - interval '1 hour', now() - interval '1 hour'
    FROM generate_series(1, $prefill) g
    RETURNING id, user_ref)
INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, state, attempts, sent_at, finished_at)
SELECT day.id, d.id, CASE WHEN d.platform = 'ios' THEN 'ios_alert' ELSE 'android_data' END, 'sent', 1,
       now() - interval '1 hour', now() - interval '1 hour'
FROM day JOIN herald.devices d ON d.app_id = 'bench' AND d.user_ref = day.user_ref;
VACUUM ANALYZE herald.notifications, herald.deliveries;
SQL
  fi
  psql -q -d herald_bench -c "SELECT pg_stat_statements_reset()" >/dev/null
  echo
  settings=()
  [ -n "$retention" ] && settings+=(HERALD_RETENTION="$retention")
  [ -n "$partition_interval" ] && settings+=(HERALD_PARTITION_INTERVAL="$partition_interval")
  echo "$herald ($("$herald" --version 2>/dev/null || echo "?")) at $rate notifications/s in commits of $per_commit from $producers connection(s) to $users devices${settings:+, ${settings[*]}}, ${prefill} notifications of the day before it${PG_SETTINGS:+, PostgreSQL $PG_SETTINGS}:"
  env HERALD_FCM_ENDPOINT="$base" HERALD_CA_BUNDLE="$work/nginx/cert.pem" "${settings[@]}" \
    HERALD_FCM_RATE_LIMIT=1000000 HERALD_LOG_LEVEL=warning "$herald" run >"$work/daemon-$rate.log" 2>&1 &
  daemon=$!
  busy_before=$(machine_busy)
  $bench soak --rate "$rate" --seconds "$seconds" --warm-up "$warm_up" --sample "$sample" \
    --per-statement "$per_commit" --producers "$producers" --users "$users"
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
