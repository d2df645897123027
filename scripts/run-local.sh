#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs Herald against a local PostgreSQL and the
# local emulator: installs what is missing, starts a cluster in .herald-local/ (kept between
# runs), builds herald, migrates, starts herald-emulator with a service account it
# generates (FCM) and nginx in front of it as APNs and a browser push service (TLS, HTTP/2),
# makes an APNs key, a VAPID key and a browser subscription, registers demo devices and sends
# demo notifications with plain SQL (scripts/demo.sql), then runs the daemon in the foreground
# until Ctrl-C.
#
# With HERALD_DATABASE_URL set, it uses that database instead of starting one; with
# HERALD_FCM_ENDPOINT set, that FCM instead of the emulator (the apps then need real
# credentials: GOOGLE_APPLICATION_CREDENTIALS or herald.app_fcm.credentials_file).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
install_herald_dependencies

# What this script started, stopped however it ends: Ctrl-C, SIGTERM or an error.
started_postgres= emulator= push_front= daemon=
cleanup() {
  set +e  # a step that fails (the daemon's exit status, say) must not skip the others
  trap '' INT TERM  # a second Ctrl-C or SIGTERM must not cut the cleanup short
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  [ -n "$push_front" ] && bash scripts/lib/nginx-standin.sh stop "$push_front"
  [ -n "$emulator" ] && kill "$emulator" 2>/dev/null
  [ -n "$started_postgres" ] && stop_postgres "$started_postgres"
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${HERALD_DATABASE_URL:-}" ]; then
  start_postgres "$PWD/.herald-local"
  as_postgres "$(postgres_bin)/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = 'herald'" | grep -q 1 ||
    as_postgres "$(postgres_bin)/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres herald
  export HERALD_DATABASE_URL="host=127.0.0.1 port=$PGPORT user=postgres dbname=herald"
  started_postgres="$PWD/.herald-local"
fi

echo "==> building herald"
swift build --product herald
swift build --product herald-emulator
herald=.build/debug/herald

"$herald" migrate

demo_browser=()
if [ -z "${HERALD_FCM_ENDPOINT:-}" ]; then
  mkdir -p .herald-local
  port=$(free_port)
  .build/debug/herald-emulator --port "$port" --project herald-demo \
    --write-service-account .herald-local/demo-service-account.json >.herald-local/emulator.log 2>&1 &
  emulator=$!
  for _ in $(seq 100); do grep -q "listening" .herald-local/emulator.log && break; sleep 0.1; done
  export HERALD_FCM_ENDPOINT="http://127.0.0.1:$port"
  export GOOGLE_APPLICATION_CREDENTIALS="$PWD/.herald-local/demo-service-account.json"
  echo "==> FCM emulator on $HERALD_FCM_ENDPOINT (what it received: curl $HERALD_FCM_ENDPOINT/emulator/messages)"

  # APNs and browsers' push services are https: nginx is the emulator's TLS and HTTP/2 front.
  push_port=$(bash scripts/lib/nginx-standin.sh start "$PWD/.herald-local/push-service" 10000000 "$port")
  push_front="$PWD/.herald-local/push-service"
  export HERALD_CA_BUNDLE="$PWD/.herald-local/push-service/cert.pem"
  export HERALD_APNS_ENDPOINT="https://127.0.0.1:$push_port"
  export HERALD_APNS_CHANNELS_ENDPOINT="https://127.0.0.1:$push_port"
  # The app's APNs signing key, as Apple's .p8 download (the emulator trusts it for the bundle).
  curl -sf -X POST "$HERALD_FCM_ENDPOINT/emulator/apns-keys" \
    -d '{"team_id": "DEMOTEAM01", "key_id": "DEMOKEY001", "topics": ["com.example.demoshop"]}' \
    >.herald-local/apns-key.p8
  chmod 600 .herald-local/apns-key.p8
  # Alice's iPhone's VoIP, widget, location and Push to Talk tokens, as those frameworks gave
  # them to the app (scripts/demo.sql): APNs takes each for its own push type's topic only.
  for token in "voip ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11" \
    "widgets 3d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e" \
    "location 10ca7e0010ca7e0010ca7e0010ca7e0010ca7e0010ca7e0010ca7e0010ca7e00" \
    "pushtotalk 7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c"; do
    set -- $token
    curl -sf -X POST "$HERALD_FCM_ENDPOINT/emulator/apns-tokens" -d "{\"push_type\": \"$1\", \"token\": \"$2\"}" >/dev/null
  done
  [ -f .herald-local/vapid.pem ] || "$herald" vapid-key .herald-local/vapid.pem >/dev/null
  vapid_public=$("$herald" vapid-key --show .herald-local/vapid.pem)
  # What the web app's `pushManager.subscribe({applicationServerKey})` would hand its server.
  subscription=$(curl -sf -X POST "$HERALD_FCM_ENDPOINT/emulator/subscriptions" \
    -d "{\"base\": \"https://127.0.0.1:$push_port\", \"application_server_key\": \"$vapid_public\"}")
  # What a UnifiedPush connector would hand the app: its distributor's endpoint and keys (the
  # emulator's push service, behind the same front, stands in for the distributor).
  distributor=$(curl -sf -X POST "$HERALD_FCM_ENDPOINT/emulator/subscriptions" \
    -d "{\"base\": \"https://127.0.0.1:$push_port\", \"application_server_key\": \"$vapid_public\"}")
  # A Huawei app's client secret, which the emulator's Push Kit trusts for its client id.
  printf 'demo-hms-secret\n' >.herald-local/hms.secret
  chmod 600 .herald-local/hms.secret
  curl -sf -X POST "$HERALD_FCM_ENDPOINT/emulator/hms-apps" \
    -d '{"client_id": "106892911", "client_secret": "demo-hms-secret"}' >/dev/null
  # A Xiaomi app's AppSecret, which the emulator's Mi Push trusts for its package, with the
  # channels the app registered with Xiaomi.
  printf 'demo-xiaomi-secret==\n' >.herald-local/xiaomi.secret
  chmod 600 .herald-local/xiaomi.secret
  curl -sf -X POST "$HERALD_FCM_ENDPOINT/emulator/xiaomi-apps" \
    -d '{"package_name": "com.example.demoshop", "app_secret": "demo-xiaomi-secret==",
         "channels": {"orders": "private", "deals": "public"}}' >/dev/null
  # An Honor app's OAuth 2.0 client secret, which the emulator's Honor Push trusts.
  printf 'demo-honor-secret\n' >.herald-local/honor.secret
  chmod 600 .herald-local/honor.secret
  curl -sf -X POST "$HERALD_FCM_ENDPOINT/emulator/honor-apps" \
    -d '{"app_id": "104405925", "client_id": "demo-honor-client", "client_secret": "demo-honor-secret"}' >/dev/null
  # An OPPO app's MasterSecret and its channels, and a vivo app's AppSecret, which the
  # emulator's OPPO Push and vivo Push trust.
  printf 'demo-oppo-master-secret\n' >.herald-local/oppo.secret
  printf 'demo-vivo-secret\n' >.herald-local/vivo.secret
  chmod 600 .herald-local/oppo.secret .herald-local/vivo.secret
  curl -sf -X POST "$HERALD_FCM_ENDPOINT/emulator/oppo-apps" \
    -d '{"app_key": "demooppokey42", "master_secret": "demo-oppo-master-secret",
         "channels": {"orders": "private", "deals": "public"}}' >/dev/null
  curl -sf -X POST "$HERALD_FCM_ENDPOINT/emulator/vivo-apps" \
    -d '{"app_id": 105469478, "app_key": "demo-vivo-key", "app_secret": "demo-vivo-secret"}' >/dev/null
  # A HarmonyOS project's service-account key file, as the HUAWEI Developers API Console gives
  # it; the emulator's Push Kit trusts its public key.
  [ -f .herald-local/harmony-key.pem ] ||
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out .herald-local/harmony-key.pem 2>/dev/null
  openssl pkey -in .herald-local/harmony-key.pem -pubout -out .herald-local/harmony-public.pem
  python3 - .herald-local <<'PY'
import json, os, sys
directory = sys.argv[1]
read = lambda name: open(os.path.join(directory, name)).read()
account = {"project_id": "101653523863785276", "key_id": "demo-key-1", "sub_account": "1016535238637",
           "private_key": read("harmony-key.pem"),
           "token_uri": "https://oauth-login.cloud.huawei.com/oauth2/v3/token"}
descriptor = os.open(os.path.join(directory, "harmony-account.json"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(descriptor, json.dumps(account).encode())
os.close(descriptor)
registration = {k: account[k] for k in ("project_id", "key_id", "sub_account")}
registration["public_key"] = read("harmony-public.pem")
open(os.path.join(directory, "harmony-project.json"), "w").write(json.dumps(registration))
PY
  curl -sf -X POST "$HERALD_FCM_ENDPOINT/emulator/harmony-projects" -d @.herald-local/harmony-project.json >/dev/null
  export HERALD_PROVIDER_ENDPOINTS="hms=$HERALD_FCM_ENDPOINT,harmony=$HERALD_FCM_ENDPOINT,xiaomi=$HERALD_FCM_ENDPOINT,honor=$HERALD_FCM_ENDPOINT,oppo=$HERALD_FCM_ENDPOINT,vivo=$HERALD_FCM_ENDPOINT"
  demo_browser=(-v "vapid_key_file=$PWD/.herald-local/vapid.pem" -v "subscription=$subscription"
    -v "apns_key_file=$PWD/.herald-local/apns-key.p8" -v "hms_secret_file=$PWD/.herald-local/hms.secret"
    -v "harmony_account_file=$PWD/.herald-local/harmony-account.json" -v "distributor=$distributor"
    -v "xiaomi_secret_file=$PWD/.herald-local/xiaomi.secret" -v "honor_secret_file=$PWD/.herald-local/honor.secret"
    -v "oppo_secret_file=$PWD/.herald-local/oppo.secret" -v "vivo_secret_file=$PWD/.herald-local/vivo.secret")
  echo "==> APNs and a Web Push service on https://127.0.0.1:$push_port (what they received:"
  echo "    curl $HERALD_FCM_ENDPOINT/emulator/apns and $HERALD_FCM_ENDPOINT/emulator/web-pushes, decrypted)"
  echo "==> Huawei Push Kit on $HERALD_FCM_ENDPOINT (what it received: curl $HERALD_FCM_ENDPOINT/emulator/hms,"
  echo "    for HarmonyOS phones $HERALD_FCM_ENDPOINT/emulator/harmony, for Xiaomi's $HERALD_FCM_ENDPOINT/emulator/xiaomi,"
  echo "    for Honor's $HERALD_FCM_ENDPOINT/emulator/honor, OPPO's $HERALD_FCM_ENDPOINT/emulator/oppo and vivo's"
  echo "    $HERALD_FCM_ENDPOINT/emulator/vivo)"
fi
# The report endpoint, as the demo payloads name it (herald_report_url).
export HERALD_HTTP_ADDRESS="${HERALD_HTTP_ADDRESS:-127.0.0.1:8480}"
export HERALD_PUBLIC_URL="${HERALD_PUBLIC_URL:-http://$HERALD_HTTP_ADDRESS}"
echo "==> registering demo devices and sending demo notifications (scripts/demo.sql)"
psql "$HERALD_DATABASE_URL" -v ON_ERROR_STOP=1 "${demo_browser[@]}" -q -f scripts/demo.sql >/dev/null

# Show what became of each notification once the daemon has had a moment.
(
  sleep 3
  echo "==> the order's Live Activity: its token, an update and the end (scripts/demo-activity.sql)"
  psql "$HERALD_DATABASE_URL" -v ON_ERROR_STOP=1 -q -f scripts/demo-activity.sql >/dev/null
  sleep 2
  echo "==> what became of the demo notifications, and of each delivery:"
  psql "$HERALD_DATABASE_URL" -c "SELECT id, coalesce(push_type || ' push to ', '') || coalesce(user_ref, topic, 'activity ' || activity_id) AS target, state, reason
    FROM herald.notifications n ORDER BY id"
  psql "$HERALD_DATABASE_URL" -c "SELECT d.notification_id, coalesce(dev.device_id, '(topic)') AS device,
      d.payload_kind, d.state, d.provider_message_id
    FROM herald.deliveries d LEFT JOIN herald.devices dev ON dev.id = d.device_id ORDER BY d.id"
  echo "==> the Live Activities' events and sends:"
  psql "$HERALD_DATABASE_URL" -c "SELECT activity_id, event, notification_state, device_id, token_kind, delivery_state
    FROM herald.live_activity_sends ORDER BY notification_id"
  psql "$HERALD_DATABASE_URL" -c "SELECT name, state, channel_id FROM herald.broadcast_channels"
  psql "$HERALD_DATABASE_URL" -c "SELECT n.activity_channel AS channel, n.state, d.state AS delivery_state
    FROM herald.notifications n JOIN herald.deliveries d ON d.notification_id = n.id
    WHERE d.payload_kind = 'broadcast'"
  reference=$(psql "$HERALD_DATABASE_URL" -tAc "SELECT herald.delivery_reference(d.id, d.device_id)
    FROM herald.deliveries d WHERE d.state = 'sent' AND d.device_id IS NOT NULL AND d.payload_kind <> 'live_activity'
    ORDER BY d.id DESC LIMIT 1")
  if [ -n "$reference" ]; then
    echo "==> an app reporting its newest delivery: POST $HERALD_PUBLIC_URL/v1/reports/<herald_report>"
    curl -s -X POST -H 'Content-Type: application/json' -d '{"kind": "delivered"}' \
      "$HERALD_PUBLIC_URL/v1/reports/$reference" && echo
  fi
  "$herald" status || true
  echo "==> herald keeps running; Ctrl-C stops it"
) &

echo "==> running herald (Ctrl-C to stop)"
# In the background, so that a signal to this script is handled at once, not after herald exits.
"$herald" run &
daemon=$!
wait "$daemon"
