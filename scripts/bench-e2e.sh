#!/usr/bin/env bash
# End-to-end benchmark: N notifications (half Android, half iOS) from the producer's table to
# FCM's answer, through a real `herald run` (ingest and dispatch) against nginx standing in for
# FCM and its token endpoint (TLS, HTTP/2, fixed 200 answers). Prints notifications/s, the
# daemon's peak RSS, and h2load against the same nginx in the same run; then the latency from
# the producer's commit to FCM's answer at a steady 1,000 notifications/s (RATE=…).
#   N=100000 scripts/bench-e2e.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
install_herald_dependencies

n=${N:-100000}
work=$(mktemp -d /tmp/herald-bench-e2e.XXXXXX)
daemon=
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null
  scripts/lib/nginx-standin.sh stop "$work/nginx"
  stop_postgres "$work/pg"
  rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"
mkdir -p "$work/nginx"
start_postgres "$work/pg" -c shared_buffers=256MB
as_postgres "$(postgres_bin)/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres herald_bench
export HERALD_DATABASE_URL="dbname=herald_bench"
port=$(scripts/lib/nginx-standin.sh start "$work/nginx")
base="https://127.0.0.1:$port"

swift build -c release --product herald >/dev/null
herald=.build/release/herald
$herald bench prepare-e2e --notifications "$n" --token-uri "$base/token" --credentials-out "$work/sa.json"

printf '%s' '{"message":{"token":"t","data":{"title":"Hello"}}}' >"$work/body.json"
echo "h2load against the same nginx:"
h2load -n 100000 -c 4 -m 250 -t 1 -H 'content-type: application/json' -d "$work/body.json" \
  "$base/v1/projects/bench/messages:send" | grep -E "finished in"

q() { psql "$HERALD_DATABASE_URL" -qtA -c "$1"; }
start=$(date +%s.%N)
HERALD_FCM_ENDPOINT="$base" HERALD_FCM_CA_BUNDLE="$work/nginx/cert.pem" HERALD_BATCH_SIZE=${BATCH:-500} \
  HERALD_POLL_INTERVAL=200ms HERALD_LOG_LEVEL=warning $herald run >"$work/daemon.log" 2>&1 &
daemon=$!
peak=0
while true; do
  sleep 0.5
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$daemon/status" 2>/dev/null || echo 0)
  [ "${rss:-0}" -gt "$peak" ] && peak=$rss
  left=$(q "SELECT (SELECT count(*) FROM herald.notifications WHERE state = 'received')
                 + (SELECT count(*) FROM herald.deliveries WHERE state = 'queued')")
  [ "$left" = 0 ] && break
  kill -0 "$daemon" 2>/dev/null || { echo "herald exited:"; cat "$work/daemon.log"; exit 1; }
done
end=$(date +%s.%N)
sent=$(q "SELECT count(*) FROM herald.deliveries WHERE state = 'sent'")
python3 - "$start" "$end" "$n" "$sent" "$peak" <<'PY'
import sys
start, end, n, sent, peak = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
print(f"herald end to end: {n} notifications, {sent} sent, in {end - start:.2f}s: "
      f"{n / (end - start):.0f} notifications/s; daemon peak RSS {peak / 1024:.1f} MB")
PY

# The same daemon, now idle: latency from the producer's commit to FCM's answer at a steady rate.
$herald bench latency --rate "${RATE:-1000}" --seconds 10 --users "$n"
