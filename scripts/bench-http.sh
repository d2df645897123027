#!/usr/bin/env bash
# HTTP client benchmark: 100,000 FCM-sized POSTs through herald's libcurl HTTP/2 client to an
# nginx stand-in (TLS, HTTP/2, fixed FCM-like answer), beside h2load against the same server
# in the same run. Extra arguments go to `herald bench http`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
install_herald_dependencies

requests=${REQUESTS:-100000}
dir=$(mktemp -d /tmp/herald-bench-http.XXXXXX)
trap 'scripts/lib/nginx-standin.sh stop "$dir"; rm -rf "$dir"' EXIT
port=$(scripts/lib/nginx-standin.sh start "$dir")
url="https://127.0.0.1:$port/v1/projects/bench/messages:send"
body='{"message":{"token":"bench-token","data":{"title":"Hello","body":"A benchmark notification","notification_id":"123456"},"android":{"priority":"HIGH","ttl":"86400s"}}}'
printf '%s' "$body" >"$dir/body.json"

swift build -c release --product herald >/dev/null

echo "h2load (4 connections, 250 streams each, 1 thread):"
h2load -n "$requests" -c 4 -m 250 -t 1 -H 'content-type: application/json' -H 'authorization: Bearer bench' \
  -d "$dir/body.json" "$url" | grep -E "finished in|requests:"
echo "herald (4 connections, 1000 in flight, batches of 250), as configured by default, then on one thread:"
.build/release/herald bench http --url "$url" --ca-bundle "$dir/cert.pem" --requests "$requests" --batch 250 "$@"
.build/release/herald bench http --url "$url" --ca-bundle "$dir/cert.pem" --requests "$requests" --batch 250 --threads 1 "$@"
