#!/usr/bin/env bash
# End-to-end benchmark: N notifications from the producer's table to the provider's answer,
# through a real `herald run` (ingest and dispatch) against nginx standing in for FCM and its
# token endpoint, APNs and a browser push service (TLS, HTTP/2, fixed answers). Prints
# notifications/s, the daemon's peak RSS and the machine's CPU time per notification (Herald,
# nginx, the rest: PostgreSQL), beside the HTTP floor (h2load against the same nginx) and the
# queue floor (`herald-bench queue` on the same PostgreSQL) in the same run; then the latency
# from the producer's commit to the provider's answer at a steady 1,000 notifications/s (RATE=…).
#   N=100000 scripts/bench-e2e.sh
#   PUSH="fcm apns web" scripts/bench-e2e.sh    # each path in turn, then side by side:
#       fcm  half Android, half iOS, through FCM (the default)
#       apns iPhones, straight to APNs (a .p8 key)
#       web  browsers (Web Push: each message encrypted for its subscription, VAPID-signed)
#   REPORTING=1 scripts/bench-e2e.sh             # devices whose apps report: their stores counted
#   TRICKLE="50 500 2000" scripts/bench-e2e.sh   # no backlog: the daemon's idle CPU, then one
#       notification a commit at each rate in turn (from PRODUCERS=4 connections), each rate's
#       latency, CPU per notification (PostgreSQL's share apart) and context switches; then the
#       same commits with the daemon stopped, what the producers cost alone
#   STATEMENTS=1 scripts/bench-e2e.sh            # after each steady rate, the statements that
#       took PostgreSQL's time (pg_stat_statements): calls and ms per 1,000 notifications
#   HERALD=path/to/herald scripts/bench-e2e.sh   # another build, for a before and after: it
#                                                 # migrates the database itself
#
# The stand-in has no quota, so the per-project rate limit is lifted (HERALD_FCM_RATE_LIMIT):
# FCM's own 600,000 messages a minute would hold one project to 10,000/s.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
install_herald_dependencies

n=${N:-100000}
work=$(mktemp -d /tmp/herald-bench-e2e.XXXXXX)
daemon=
cleanup() {
  if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; fi
  scripts/lib/nginx-standin.sh stop "$work/nginx"
  stop_postgres "$work/pg"
  rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"
mkdir -p "$work/nginx"
start_postgres "$work/pg" -c shared_buffers=256MB \
  ${STATEMENTS:+-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all}
as_postgres "$(postgres_bin)/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres herald_bench
export HERALD_DATABASE_URL="dbname=herald_bench"
port=$(scripts/lib/nginx-standin.sh start "$work/nginx")
base="https://127.0.0.1:$port"

# HERALD=path/to/herald measures another build (a before and after) with this checkout's bench.
if [ -z "${HERALD:-}" ]; then
  swift build -c release --product herald --static-swift-stdlib >/dev/null
fi
swift build -c release --product herald-bench --static-swift-stdlib >/dev/null
herald=${HERALD:-.build/release/herald}
bench=.build/release/herald-bench
# The build measured makes the schema, so another build runs on its own (the bench's statements
# are plain SQL every schema since the jobs table takes).
HERALD_LOG_LEVEL=warning $herald migrate
# Before the benchmark's own data: the queue benchmark leaves only its emptied jobs table.
echo "Queue floor, on the same PostgreSQL:"
$bench queue --no-migrate --jobs 100000 --batch "${BATCH:-500}" --events 0 | grep -E "floor|engine \("

printf '%s' '{"message":{"token":"t","data":{"title":"Hello"}}}' >"$work/body.json"
echo "HTTP floor, h2load against the same nginx:"
h2load -n 100000 -c 4 -m 250 -t 1 -H 'content-type: application/json' -d "$work/body.json" \
  "$base/v1/projects/bench/messages:send" | grep -E "finished in"

# psql itself, not Debian's wrapper (a Perl start-up per call would count as database CPU).
q() { "$(postgres_bin)/psql" "$HERALD_DATABASE_URL" -qtA -c "$1"; }
# Row writes (inserts, updates, deletes) to Herald's tables so far, and the WAL position.
writes() { q "SELECT sum(n_tup_ins + n_tup_upd + n_tup_del) FROM pg_stat_user_tables WHERE schemaname = 'herald'"; }
wal() { q "SELECT pg_current_wal_lsn() - '0/0'"; }
if [ -n "${STATEMENTS:-}" ]; then q "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null; fi
nginx_pid=$(cat "$work/nginx/nginx.pid")
nginx_worker=$(pgrep -P "$nginx_pid" | head -1)

# PostgreSQL's CPU so far: the postmaster's and its live children's, with the children that
# have exited (the postmaster reaped them, so their time is in its cutime and cstime).
postgres_cpu() {
  local postmaster children
  postmaster=$(head -1 "$work/pg/data/postmaster.pid")
  children=$(pgrep -P "$postmaster" | xargs -r -I{} awk '{print $14 + $15}' /proc/{}/stat 2>/dev/null | paste -sd+)
  echo $(($(awk '{print $14 + $15 + $16 + $17}' "/proc/$postmaster/stat") + ${children:-0}))
}
# Context switches on the whole machine so far, and in the daemon's threads.
machine_switches() { awk '/^ctxt / {print $2}' /proc/stat; }
# (A thread that ends between two readings takes its count with it: the figure errs low.)
daemon_switches() { awk '/ctxt_switches/ {n += $2} END {print n + 0}' /proc/"$1"/task/*/status 2>/dev/null || echo 0; }

start_daemon() {
  # Every other setting at its default; BATCH=… sets HERALD_BATCH_SIZE, the claims' cap.
  env HERALD_FCM_ENDPOINT="$base" HERALD_APNS_ENDPOINT="$base" HERALD_CA_BUNDLE="$work/nginx/cert.pem" \
    ${BATCH:+HERALD_BATCH_SIZE=$BATCH} HERALD_FCM_RATE_LIMIT="${HERALD_FCM_RATE_LIMIT:-1000000}" \
    HERALD_LOG_LEVEL=warning $herald run >"$work/daemon.log" 2>&1 &
  daemon=$!
}

# steady RATE [PER_COMMIT]: the running daemon, sent RATE notifications a second for 10 s (by
# default a commit every 10 ms; PER_COMMIT=1 is a trickle), then the latency from the producer's
# commit to the answer, and what each notification cost at that rate: the machine's CPU, split
# into Herald's, nginx's, the producer's and the rest (PostgreSQL's), and context switches.
steady() {
  local busy_before herald_before nginx_before postgres_before writes_before switches_before herald_switches_before
  busy_before=$(machine_busy)
  postgres_before=$(postgres_cpu)
  herald_before=$(process_cpu "$daemon")
  nginx_before=$(process_cpu "$nginx_worker")
  writes_before=$(writes)
  switches_before=$(machine_switches)
  if [ -n "${STATEMENTS:-}" ]; then q "SELECT pg_stat_statements_reset()" >/dev/null; fi
  herald_switches_before=$(daemon_switches "$daemon")
  $bench latency --rate "$1" --seconds 10 --users "$users" ${2:+--per-commit "$2" --producers "${PRODUCERS:-4}"} |
    tee "$work/latency"
  local busy=$(($(machine_busy) - busy_before)) herald_cpu=$(($(process_cpu "$daemon") - herald_before))
  local nginx_cpu=$(($(process_cpu "$nginx_worker") - nginx_before))
  local postgres=$(($(postgres_cpu) - postgres_before))
  local switches=$(($(machine_switches) - switches_before))
  local herald_switches=$(($(daemon_switches "$daemon") - herald_switches_before))
  sleep 11
  local writes_steady=$(($(writes) - writes_before)) probes producer
  probes=$(sed -n 's/.*(\([0-9]*\) sent).*/\1/p' "$work/latency")
  producer=$(sed -n 's/.*own CPU was \([0-9]*\) µs.*/\1/p' "$work/latency")
  python3 - "$probes" "$busy" "$herald_cpu" "$nginx_cpu" "$(getconf CLK_TCK)" "$writes_steady" "${producer:-0}" \
    "$switches" "$herald_switches" "$postgres" <<'PY'
import sys
n, busy, herald, nginx, tick, writes, producer, switches, herald_switches, postgres = (int(a) for a in sys.argv[1:])
per = lambda ticks: ticks / tick / n * 1e6
rest = per(busy - herald - nginx - postgres) - producer
print(f"  at that rate, CPU per notification: {per(busy):.0f} µs on the machine = herald {per(herald):.0f} µs, "
      f"PostgreSQL {per(postgres):.0f} µs, nginx {per(nginx):.0f} µs, the producer {producer} µs, the rest (the "
      f"machine's own) {rest:.0f} µs; {writes / n:.2f} row writes")
print(f"  context switches per notification: {switches / n:.1f} on the machine, {herald_switches / n:.1f} in herald")
if rest < 0:
    print("  (the machine's total, from /proc/stat, came out below its processes' own in this run: compare theirs)")
PY
  if [ -n "${STATEMENTS:-}" ]; then
    # Nested statements too (track=all); the time executing leaves out each one's executor start.
    echo "  statements, per 1,000 notifications (calls, ms executing):"
    q "SELECT format('  %8s %8s  %s', round(1000.0 * calls / $probes), round((1000 * total_exec_time / $probes)::numeric),
                     left(regexp_replace(query, '\s+', ' ', 'g'), 110))
       FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 25"
  fi
}

# alone RATE: with no daemon running, RATE commits of one notification a second for 10 s (they
# stay waiting): what the producers' own commits cost, the floor under steady's figures: all of
# PostgreSQL's CPU (its background processes too) and the machine's context switches, not the
# machine's CPU, whose total moves more between runs than this is.
alone() {
  local postgres_before switches_before
  postgres_before=$(postgres_cpu)
  switches_before=$(machine_switches)
  $bench latency --rate "$1" --seconds 10 --users "$users" --per-commit 1 --producers "${PRODUCERS:-4}" \
    --commits-only
  python3 - "$(($1 * 10))" "$(($(postgres_cpu) - postgres_before))" "$(getconf CLK_TCK)" \
    "$(($(machine_switches) - switches_before))" <<'PY'
import sys
n, postgres, tick, switches = (int(a) for a in sys.argv[1:])
print(f"  PostgreSQL's CPU {postgres / tick / n * 1e6:.0f} µs a notification; "
      f"context switches per notification: {switches / n:.1f} on the machine")
PY
}

# idle SECONDS FLOOR: what the running daemon, with nothing to send, costs the machine a second,
# beside FLOOR, the machine's busy ticks in as many seconds before the daemon started.
idle() {
  local busy_before herald_before switches_before
  busy_before=$(machine_busy)
  herald_before=$(process_cpu "$daemon")
  switches_before=$(daemon_switches "$daemon")
  sleep "$1"
  python3 - "$1" "$(($(machine_busy) - busy_before))" "$(($(process_cpu "$daemon") - herald_before))" \
    "$(($(daemon_switches "$daemon") - switches_before))" "$2" "$(getconf CLK_TCK)" <<'PY'
import sys
seconds, busy, herald, switches, floor, tick = (int(a) for a in sys.argv[1:])
ms = lambda ticks: ticks / tick / seconds * 1000
print(f"idle, nothing to send, for {seconds}s: the machine {ms(busy):.1f} ms of CPU a second "
      f"({ms(floor):.1f} ms before the daemon started), herald {ms(herald):.1f} ms, "
      f"PostgreSQL and the rest {ms(busy - herald - floor):.1f} ms over that floor; "
      f"herald's context switches {switches / seconds:.0f} a second")
PY
}

users=$n
if [ -n "${TRICKLE:-}" ]; then
  # The daemon at its defaults, on a database with devices and no notification yet, idle and
  # then at each rate of one notification a commit.
  $bench prepare-e2e --no-migrate --notifications 0 --devices "$n" --token-uri "$base/token" \
    --credentials-out "$work/sa.json" >/dev/null
  if [ -n "${REPORTING:-}" ]; then q "UPDATE herald.devices SET last_reported_at = now()" >/dev/null; fi
  q "VACUUM ANALYZE" >/dev/null
  floor_before=$(machine_busy)
  sleep 20
  floor=$(($(machine_busy) - floor_before))
  start_daemon
  sleep 5
  kill -0 "$daemon" 2>/dev/null || { echo "herald exited:"; cat "$work/daemon.log"; exit 1; }
  idle 20 "$floor"
  for rate in $TRICKLE; do
    echo "== trickle: $rate commits a second, one notification each"
    steady "$rate" 1
  done
  # The floor under those figures: the same commits with the daemon stopped (its LISTEN gone, so
  # a commit's NOTIFY wakes nobody). What Herald adds at a rate is PostgreSQL's CPU there less
  # this, with Herald's own and nginx's.
  kill "$daemon" 2>/dev/null || true
  wait "$daemon" 2>/dev/null || true
  daemon=
  for rate in $TRICKLE; do
    echo "== the producers alone, no daemon: $rate commits a second, one notification each"
    alone "$rate"
  done
  exit 0
fi

for push in ${PUSH:-fcm}; do
  echo "== $push"
  $bench prepare-e2e --no-migrate --push "$push" --notifications "$n" --token-uri "$base/token" \
    --credentials-out "$work/sa.json" --apns-key-out "$work/apns.p8" --vapid-key-out "$work/vapid.pem" \
    --push-service-url "$base"
  # REPORTING=1: every device has reported a delivery, so each Android device's deliveries count
  # in its store at FCM (herald.fill_device_stores), as for an app that reports.
  if [ -n "${REPORTING:-}" ]; then q "UPDATE herald.devices SET last_reported_at = now()" >/dev/null; fi
  writes_before=$(writes)
  wal_before=$(wal)
  busy_before=$(machine_busy)
  nginx_before=$(process_cpu "$nginx_worker")
  start=$(date +%s.%N)
  start_daemon
  peak=0
  while true; do
    sleep 0.5
    rss=$(awk '/VmHWM/ {print $2}' "/proc/$daemon/status" 2>/dev/null || echo 0)
    [ "${rss:-0}" -gt "$peak" ] && peak=$rss
    # Work is left while a notification waits for ingest or a delivery is queued. EXISTS stops at
    # the first (on the partial indexes); a count(*) over 200,000 rows, twice a second, cost
    # PostgreSQL 2% of the run.
    pending=$(q "SELECT EXISTS (SELECT FROM herald.notifications WHERE state = 'received')
                     OR EXISTS (SELECT FROM herald.deliveries WHERE state = 'queued')")
    [ "$pending" = f ] && break
    kill -0 "$daemon" 2>/dev/null || { echo "herald exited:"; cat "$work/daemon.log"; exit 1; }
  done
  end=$(date +%s.%N)
  busy=$(($(machine_busy) - busy_before))
  herald_cpu=$(process_cpu "$daemon")
  nginx_cpu=$(($(process_cpu "$nginx_worker") - nginx_before))
  wal_after=$(wal)
  sent=$(q "SELECT count(*) FROM herald.deliveries WHERE state = 'sent'")
  # The daemon's connections report their row counts when idle for 10 s at the latest.
  sleep 11
  writes_after=$(writes)
  python3 - "$work/summary" "$push" "$start" "$end" "$n" "$sent" "$peak" "$busy" "$herald_cpu" "$nginx_cpu" \
    "$(getconf CLK_TCK)" "$((writes_after - writes_before))" "$((wal_after - wal_before))" <<'PY'
import sys
summary, push = sys.argv[1], sys.argv[2]
start, end = float(sys.argv[3]), float(sys.argv[4])
n, sent, peak, busy, herald, nginx, tick, writes, wal = (int(a) for a in sys.argv[5:])
print(f"herald end to end: {n} notifications, {sent} sent, in {end - start:.2f}s: "
      f"{n / (end - start):.0f} notifications/s; daemon peak RSS {peak / 1024:.1f} MB")
per = lambda ticks: ticks / tick / n * 1e6
print(f"CPU per notification: {per(busy):.0f} µs on the machine = herald {per(herald):.0f} µs, "
      f"nginx {per(nginx):.0f} µs, the rest (PostgreSQL, this script) {per(busy - herald - nginx):.0f} µs")
print(f"database per notification: {writes / n:.2f} row writes, {wal / n:.0f} bytes of WAL")
with open(summary, "a") as lines:
    print(f"{push:<5} {n / (end - start):>8.0f}/s  herald {per(herald):>4.0f} µs  nginx {per(nginx):>3.0f} µs  "
          f"rest {per(busy - herald - nginx):>4.0f} µs  machine {per(busy):>4.0f} µs  {sent}/{n} sent", file=lines)
PY
  # The same daemon, now idle: latency from the producer's commit to the answer at a steady rate.
  steady "${RATE:-1000}"
  kill "$daemon" 2>/dev/null || true
  wait "$daemon" 2>/dev/null || true
  daemon=
done

if [ "$(wc -l <"$work/summary")" -gt 1 ]; then
  echo "== side by side (CPU per notification)"
  cat "$work/summary"
fi
