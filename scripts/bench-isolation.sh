#!/usr/bin/env bash
# Route isolation benchmark: N Android notifications through a fast FCM stand-in (nginx, as in
# bench-e2e.sh), first alone, then interleaved with M notifications for iPhones whose APNs
# answers take DELAY seconds, then with M for browsers whose push service takes the connection
# and never answers (until the 10 s timeout). For each it prints how long until every Android
# delivery was sent, and the median and 99th percentile of their send times, counted from the
# daemon's start. A healthy route should not notice the slow one.
#   N=10000 M=200 DELAY=2 scripts/bench-isolation.sh
#   HERALD=path/to/herald scripts/bench-isolation.sh   # another build, for a before and after
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
install_herald_dependencies

n=${N:-10000}
m=${M:-200}
delay=${DELAY:-2}
work=$(mktemp -d /tmp/herald-bench-isolation.XXXXXX)
daemon=
helpers=()
cleanup() {
  [ -n "$daemon" ] && kill -9 "$daemon" 2>/dev/null
  for pid in "${helpers[@]}"; do kill "$pid" 2>/dev/null || true; done
  scripts/lib/nginx-standin.sh stop "$work/fcm"
  scripts/lib/nginx-standin.sh stop "$work/apns"
  stop_postgres "$work/pg"
  rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"
mkdir -p "$work/fcm" "$work/apns"
start_postgres "$work/pg" -c shared_buffers=256MB >/dev/null
as_postgres "$(postgres_bin)/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres herald_bench
export HERALD_DATABASE_URL="dbname=herald_bench"

if [ -z "${HERALD:-}" ]; then
  swift build -c release --product herald --static-swift-stdlib >/dev/null
  HERALD=.build/release/herald
fi
swift build -c release --product herald-bench --static-swift-stdlib >/dev/null
bench=.build/release/herald-bench

# APNs that answers after DELAY seconds: a threaded HTTP/1.1 server behind nginx's TLS and HTTP/2.
slow_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 - "$slow_port" "$delay" <<'PY' &
import http.server, sys, time
port, delay = int(sys.argv[1]), float(sys.argv[2])
class Slow(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        time.sleep(delay)
        self.send_response(200)
        self.send_header("apns-id", self.headers.get("apns-id", "0"))
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer.request_queue_size = 1024
http.server.ThreadingHTTPServer(("127.0.0.1", port), Slow).serve_forever()
PY
helpers+=($!)
# A push service that takes connections and never answers: a listening socket nobody accepts on.
hole_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $hole_port)); s.listen(4096)
time.sleep(86400)" &
helpers+=($!)

fcm=$(scripts/lib/nginx-standin.sh start "$work/fcm")
apns=$(scripts/lib/nginx-standin.sh start "$work/apns" 10000000 "$slow_port")
cat "$work/fcm/cert.pem" "$work/apns/cert.pem" >"$work/ca.pem"
$bench prepare-e2e --notifications 0 --token-uri "https://127.0.0.1:$fcm/token" \
  --credentials-out "$work/sa.json" >/dev/null 2>&1
openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$work/apns.p8"
$HERALD vapid-key "$work/vapid.pem" >/dev/null
p256dh=$(openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl ec -pubout -outform DER 2>/dev/null |
  tail -c 65 | basenc --base64url | tr -d '=\n')

q() { "$(postgres_bin)/psql" "$HERALD_DATABASE_URL" -qtA -v ON_ERROR_STOP=1 -c "$1"; }
q "INSERT INTO herald.app_apns (app_id, bundle_id, team_id, key_id, key_file)
   VALUES ('bench', 'com.example.bench', 'TEAM000001', 'KEY0000001', '$work/apns.p8')"
q "UPDATE herald.apps SET ios_transport = 'apns'"
q "INSERT INTO herald.app_webpush (app_id, vapid_key_file, vapid_subject, hosts, private_addresses)
   VALUES ('bench', '$work/vapid.pem', 'mailto:bench@example.org', '{*}', true)"
q "INSERT INTO herald.devices (app_id, device_id, platform, push_token, user_ref)
   SELECT 'bench', 'android-' || i, 'android', 'token-' || i, 'android-' || i FROM generate_series(1, $n) AS i"
q "INSERT INTO herald.devices (app_id, device_id, platform, push_token, user_ref, token_kind)
   SELECT 'bench', 'iphone-' || i, 'ios', lpad(to_hex(i), 64, '0'), 'iphone-' || i, 'apns_device_token'
   FROM generate_series(1, $m) AS i"
q "INSERT INTO herald.devices (app_id, device_id, platform, push_token, user_ref, token_kind, web_p256dh, web_auth)
   SELECT 'bench', 'browser-' || i, 'web', 'https://127.0.0.1:$hole_port/push/' || i, 'browser-' || i,
          'web_subscription', herald.base64url_decode('$p256dh'), decode(repeat('00', 16), 'hex')
   FROM generate_series(1, $m) AS i"

# run NAME OTHERS: N Android notifications with M for OTHERS (a user prefix, or none) spread
# evenly among them; the daemon runs until every Android delivery is sent.
run() {
  q "TRUNCATE herald.notifications, herald.deliveries, herald.jobs CASCADE"
  local others=$2 every=$((n / (m > 0 ? m : 1)))
  if [ "$others" = none ]; then
    q "INSERT INTO herald.notifications (app_id, user_ref, title) SELECT 'bench', 'android-' || i, 'Hello'
       FROM generate_series(1, $n) AS i"
  else
    q "INSERT INTO herald.notifications (app_id, user_ref, title)
       SELECT 'bench', CASE WHEN k % ($every + 1) = 0 THEN '$others-' || (k / ($every + 1))
                            ELSE 'android-' || (k - k / ($every + 1)) END, 'Hello'
       FROM generate_series(1, $n + $m) AS k"
  fi
  q "VACUUM ANALYZE herald.notifications"
  local start
  start=$(q "SELECT extract(epoch FROM clock_timestamp())")
  env HERALD_FCM_ENDPOINT="https://127.0.0.1:$fcm" HERALD_APNS_ENDPOINT="https://127.0.0.1:$apns" \
    HERALD_CA_BUNDLE="$work/ca.pem" HERALD_FCM_RATE_LIMIT=1000000 HERALD_LOG_LEVEL=warning \
    "$HERALD" run >"$work/daemon-$1.log" 2>&1 &
  daemon=$!
  while [ "$(q "SELECT count(*) FROM herald.deliveries d JOIN herald.devices dev ON dev.id = d.device_id
                WHERE dev.platform = 'android' AND d.state = 'sent'")" -lt "$n" ]; do
    sleep 0.2
    kill -0 "$daemon" 2>/dev/null || { echo "herald exited:"; cat "$work/daemon-$1.log"; exit 1; }
  done
  kill -9 "$daemon"
  wait "$daemon" 2>/dev/null || true
  daemon=
  [ -n "${DEBUG:-}" ] && q "SELECT dev.platform, d.state, d.attempts, count(*), min(d.last_error) FROM herald.deliveries d
                             JOIN herald.devices dev ON dev.id = d.device_id GROUP BY 1, 2, 3 ORDER BY 1, 2, 3" &&
    grep -E "warning|error" "$work/daemon-$1.log" | cut -c1-300 | sort | uniq -c | sort -rn | head -5
  q "SELECT format('%-28s Android: all %s sent in %s s; p50 %s s, p99 %s s', '$1', count(*),
                   round(max(t)::numeric, 2), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY t)::numeric, 2),
                   round(percentile_cont(0.99) WITHIN GROUP (ORDER BY t)::numeric, 2))
     FROM (SELECT extract(epoch FROM d.sent_at) - $start AS t FROM herald.deliveries d
           JOIN herald.devices dev ON dev.id = d.device_id WHERE dev.platform = 'android') AS sends"
}

echo "$n Android notifications, $m others, $HERALD:"
run "alone" none
run "beside APNs answering in ${delay}s" iphone
run "beside a black-holed push service" browser
