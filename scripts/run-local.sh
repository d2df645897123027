#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs Herald against a local PostgreSQL and the
# local FCM emulator: installs what is missing, starts a cluster in .herald-local/ (kept
# between runs), builds herald, migrates, starts herald-fcm-emulator with a service account it
# generates, registers demo devices and sends demo notifications with plain SQL
# (scripts/demo.sql), then runs the daemon in the foreground until Ctrl-C.
#
# With HERALD_DATABASE_URL set, it uses that database instead of starting one; with
# HERALD_FCM_ENDPOINT set, that FCM instead of the emulator (the apps then need real
# credentials: GOOGLE_APPLICATION_CREDENTIALS or herald.apps.credentials_file).
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
swift build --product herald-fcm-emulator
herald=.build/debug/herald

"$herald" migrate

if [ -z "${HERALD_FCM_ENDPOINT:-}" ]; then
  mkdir -p .herald-local
  port=$(free_port)
  .build/debug/herald-fcm-emulator --port "$port" --project herald-demo \
    --write-service-account .herald-local/demo-service-account.json >.herald-local/emulator.log 2>&1 &
  emulator=$!
  trap 'kill $emulator 2>/dev/null; stop_postgres "$PWD/.herald-local"' EXIT
  for _ in $(seq 100); do grep -q "listening" .herald-local/emulator.log && break; sleep 0.1; done
  export HERALD_FCM_ENDPOINT="http://127.0.0.1:$port"
  export GOOGLE_APPLICATION_CREDENTIALS="$PWD/.herald-local/demo-service-account.json"
  echo "==> FCM emulator on $HERALD_FCM_ENDPOINT (what it received: curl $HERALD_FCM_ENDPOINT/emulator/messages)"
fi
# The report endpoint, as the demo payloads name it (herald_report_url).
export HERALD_HTTP_ADDRESS="${HERALD_HTTP_ADDRESS:-127.0.0.1:8480}"
export HERALD_PUBLIC_URL="${HERALD_PUBLIC_URL:-http://$HERALD_HTTP_ADDRESS}"
echo "==> registering demo devices and sending demo notifications (scripts/demo.sql)"
psql "$HERALD_DATABASE_URL" -v ON_ERROR_STOP=1 -q -f scripts/demo.sql >/dev/null

# Show what became of each notification once the daemon has had a moment.
(
  sleep 3
  echo "==> what became of the demo notifications, and of each delivery:"
  psql "$HERALD_DATABASE_URL" -c "SELECT id, coalesce(user_ref, topic) AS target, state, reason
    FROM herald.notifications n ORDER BY id"
  psql "$HERALD_DATABASE_URL" -c "SELECT d.notification_id, coalesce(dev.device_id, '(topic)') AS device,
      d.payload_kind, d.state, d.provider_message_id
    FROM herald.deliveries d LEFT JOIN herald.devices dev ON dev.id = d.device_id ORDER BY d.id"
  reference=$(psql "$HERALD_DATABASE_URL" -tAc "SELECT herald.delivery_reference(d.id, d.device_id)
    FROM herald.deliveries d WHERE d.state = 'sent' AND d.device_id IS NOT NULL ORDER BY d.id DESC LIMIT 1")
  if [ -n "$reference" ]; then
    echo "==> an app reporting its newest delivery: POST $HERALD_PUBLIC_URL/v1/reports/<herald_report>"
    curl -s -X POST -H 'Content-Type: application/json' -d '{"kind": "delivered"}' \
      "$HERALD_PUBLIC_URL/v1/reports/$reference" && echo
  fi
  "$herald" status || true
  echo "==> herald keeps running; Ctrl-C stops it"
) &

echo "==> running herald (Ctrl-C to stop)"
"$herald" run
