#!/usr/bin/env bash
# Noisy-neighbour benchmark: one app's notifications (the victim, `bench`, a trickle of one
# notification a commit) through a real `herald run` at its defaults against nginx standing in
# for FCM, first with nothing else going on, then while a producer login granted another app
# only (`evil`) does what a careless or hostile backend does beside it:
#   locks     holds the advisory keys the workers once took (an app's Live Activities, the
#             generations), with a Live Activity event of the victim's queued
#   open      leaves a transaction open after herald.missed_notifications (its device's row and
#             the deliveries it fetched stay locked), while its own app keeps sending to that
#             device and its reports come in
#   notify    floods NOTIFY on every channel it can name (the old wake-up channel among them)
#   large     inserts a notification with 3 MB of data every second
# For each it prints the victim's commit-to-sent p50, p99 and max, and the daemon's CPU over
# the run (the flood's cost is that figure beside the calm one's).
#   RATE=50 SECONDS=10 scripts/bench-noisy.sh
#   HERALD=path/to/herald scripts/bench-noisy.sh   # another build: it migrates the database itself
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
install_herald_dependencies

rate=${RATE:-50}
seconds=${SECONDS_EACH:-10}
users=1000
work=$(mktemp -d /tmp/herald-bench-noisy.XXXXXX)
daemon=
attacker=
cleanup() {
  if [ -n "$attacker" ]; then kill "$attacker" 2>/dev/null || true; fi
  if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; fi
  scripts/lib/nginx-standin.sh stop "$work/nginx"
  stop_postgres "$work/pg"
  rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"
mkdir -p "$work/nginx"
start_postgres "$work/pg" -c shared_buffers=256MB >/dev/null
as_postgres "$(postgres_bin)/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres herald_bench
export HERALD_DATABASE_URL="dbname=herald_bench"
port=$(scripts/lib/nginx-standin.sh start "$work/nginx")
base="https://127.0.0.1:$port"

if [ -z "${HERALD:-}" ]; then
  swift build -c release --product herald --static-swift-stdlib >/dev/null
fi
swift build -c release --product herald-bench --static-swift-stdlib >/dev/null
herald=${HERALD:-.build/release/herald}
bench=.build/release/herald-bench
HERALD_LOG_LEVEL=warning $herald migrate

q() { "$(postgres_bin)/psql" "$HERALD_DATABASE_URL" -qtA -v ON_ERROR_STOP=1 -c "$1"; }
# The attacker's psql, logged in as the producer of `evil` only.
evil() { PGUSER=evil_backend "$(postgres_bin)/psql" "$HERALD_DATABASE_URL" -qtA "$@"; }

$bench prepare-e2e --notifications 0 --devices "$users" --push fcm --token-uri "$base/token" \
  --credentials-out "$work/account.json" >/dev/null
q "INSERT INTO herald.apps (app_id) VALUES ('evil')"
q "INSERT INTO herald.app_fcm (app_id, project_id, credentials_file) VALUES ('evil', 'bench', '$work/account.json')"
q "CREATE ROLE evil_backend LOGIN IN ROLE herald_producer"
q "INSERT INTO herald.producer_apps (producer, app_id) VALUES ('evil_backend', 'evil')"
evil -c "SELECT herald.register_device('evil', 'e1', 'android', 'evil-token-1', 'mallory')" >/dev/null
# e1 reports, so its deliveries count in its store at FCM, under its device's row lock.
q "UPDATE herald.devices SET last_reported_at = now() WHERE device_id = 'e1'"

env HERALD_FCM_ENDPOINT="$base" HERALD_CA_BUNDLE="$work/nginx/cert.pem" HERALD_FCM_RATE_LIMIT=1000000 \
  HERALD_LOG_LEVEL=warning $herald run >"$work/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 1 100); do
  [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'herald'")" -ge 4 ] && break
  sleep 0.1
done
# One of evil's notifications sent to e1, whose reference its reports use.
evil -c "SELECT herald.send('evil', user_ref => 'mallory', title => 'earlier')" >/dev/null
for _ in $(seq 1 100); do
  [ "$(q "SELECT count(*) FROM herald.deliveries WHERE state = 'sent'")" -ge 1 ] && break
  sleep 0.1
done
reference=$(q "SELECT herald.delivery_reference(id, device_id) FROM herald.deliveries WHERE state = 'sent' LIMIT 1")

# The attacks, each in the background for the length of a run.
attack_locks() {
  q "SELECT herald.start_activity('bench', 'order-' || extract(epoch FROM now())::bigint, 'DeliveryAttributes',
                                  '{}', '{\"eta\": 5}', 'On its way', user_ref => 'user-1')" >/dev/null
  evil -c "SELECT pg_advisory_lock(hashtext('herald.live_activities'), hashtext('bench')),
                  pg_advisory_lock(hashtext('herald.generations'))" -c "SELECT pg_sleep($((seconds + 5)))" >/dev/null
}
attack_open() {
  {
    echo "BEGIN;"
    echo "SELECT count(*) FROM herald.missed_notifications('evil', 'e1');"
    for _ in $(seq 1 "$seconds"); do
      echo "SELECT pg_sleep(1);"
    done
    echo "COMMIT;"
  } | evil >/dev/null &
  for _ in $(seq 1 "$seconds"); do
    evil -c "SELECT herald.send('evil', user_ref => 'mallory', title => 'to e1')" \
      -c "SELECT herald.report_delivery('$reference')" >/dev/null
    sleep 1
  done
  wait
}
attack_notify() {
  # A thousand transactions a second, each with a NOTIFY of each worker's name on every channel a
  # producer can name (within one transaction identical notifications are folded into one).
  for _ in $(seq 1 1000); do
    echo "SELECT pg_notify(c, w) FROM unnest('{herald_jobs,herald_device_changes}'::text[]) c, unnest('{dispatch,ingest,reconcile}'::text[]) w;"
  done >"$work/notify.sql"
  for _ in $(seq 1 "$seconds"); do
    evil -f "$work/notify.sql" >/dev/null &
    sleep 1
  done
  wait
}
attack_large() {
  local data="{\"blob\": \"$(head -c 3000000 /dev/zero | tr '\0' x)\"}"
  printf '%s' "$data" >"$work/large.json"
  for _ in $(seq 1 "$seconds"); do
    # (Through a psql variable: one argument of a command may not hold 3 MB.)
    printf '\\set data `cat %s`\nSELECT herald.send(%s, user_ref => %s, title => %s, data => :%s::jsonb);\n' \
      "$work/large.json" "'evil'" "'mallory'" "'large'" "'data'" | evil >/dev/null 2>&1 || true
    sleep 1
  done
}

run() {
  local name=$1 cpu_before cpu
  if [ "$name" != calm ]; then
    "attack_$name" &
    attacker=$!
    sleep 1
  fi
  cpu_before=$(process_cpu "$daemon")
  $bench latency --rate "$rate" --seconds "$seconds" --users "$users" --per-commit 1 >"$work/latency"
  cpu=$(($(process_cpu "$daemon") - cpu_before))
  if [ -n "$attacker" ]; then
    wait "$attacker" || true
    attacker=
  fi
  local figures
  figures=$(sed -n 's/.*: p50 \([0-9.]*\) ms, p95 [0-9.]* ms, p99 \([0-9.]*\) ms, max \([0-9.]*\) ms.*/p50 \1 ms, p99 \2 ms, max \3 ms/p' \
    "$work/latency")
  printf '  %-7s %s; the daemon %d ms of CPU a second\n' "$name" "${figures:-no figures (see below)}" \
    $((cpu * 1000 / $(getconf CLK_TCK) / seconds))
  [ -n "$figures" ] || cat "$work/latency"
}

echo "The victim's commit-to-sent at $rate notifications/s, one a commit, ${seconds} s a run:"
for name in calm locks open notify large; do
  run "$name"
done
echo "  ($(grep -c 'locked by another session' "$work/daemon.log" || true) waits on rows another session held, in the daemon's log)"
