#!/usr/bin/env bash
# HTTP client benchmark: 100,000 FCM-shaped POSTs (FCM's JSON body, a 1,024-character bearer
# token) to an nginx stand-in (TLS, HTTP/2, a fixed FCM-like answer), 1,000 in flight, each client
# on one event-loop thread, taking turns with h2load against the same server: Herald's HTTP/2
# engine, libcurl (as Herald drives it behind an egress proxy), and with ASYNC_HTTP_CLIENT=1
# AsyncHTTPClient (`scripts/ahc-bench`, a package of its own; its first release build takes about
# ten minutes here). Each prints requests a second and its process's CPU time a request.
# BEFORE=<an earlier build's herald-bench> adds that build's engine to the turns, for a change's
# before and after in one run.
#   scripts/bench-http.sh
#   ASYNC_HTTP_CLIENT=1 ROUNDS=5 scripts/bench-http.sh
#   BEFORE=/tmp/herald-bench-before scripts/bench-http.sh
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
token=$(printf 't%.0s' $(seq 1024))

swift build -c release --product herald-bench --static-swift-stdlib >/dev/null
clients=(engine libcurl)
if [ "${ASYNC_HTTP_CLIENT:-0}" = 1 ]; then
  swift build -c release --package-path scripts/ahc-bench >/dev/null
  clients+=(ahc)
fi
if [ -n "${BEFORE:-}" ]; then clients+=(before); fi

run() {
  case $1 in
  h2load) h2load -n "$requests" -c 4 -m 250 -t 1 -H 'content-type: application/json' -H "authorization: Bearer $token" \
    -d "$dir/body.json" "$url" | awk '/finished in/ {gsub(",", "", $4); printf "h2load (4 connections, 250 streams each, 1 thread): %d req/s\n", $4}' ;;
  engine) .build/release/herald-bench http --url "$url" --ca-bundle "$dir/cert.pem" --requests "$requests" \
    --batch 250 --threads 1 ;;
  libcurl) .build/release/herald-bench http --url "$url" --ca-bundle "$dir/cert.pem" --requests "$requests" \
    --batch 250 --threads 1 --libcurl ;;
  ahc) scripts/ahc-bench/.build/release/ahc-bench "$url" "$dir/cert.pem" "$requests" 1000 1 ;;
  before) "$BEFORE" http --url "$url" --ca-bundle "$dir/cert.pem" --requests "$requests" --batch 250 --threads 1 ;;
  esac
}

# This VM's speed drifts by a third between runs: the clients take turns, h2load first in each
# round, and the medians are the figures.
rounds=${ROUNDS:-3}
results=$dir/results
for round in $(seq "$rounds"); do
  for client in h2load "${clients[@]}"; do
    output=$(run "$client")
    sed "s/^/round $round: /" <<<"$output"
    line=$(tail -n 1 <<<"$output")
    rate=$(sed -E 's/.*[ :]([0-9]+) req\/s.*/\1/' <<<"$line")
    cpu=$(sed -nE 's/.* ([0-9.]+) µs CPU a request.*/\1/p' <<<"$line")
    echo "$client $rate ${cpu:--}" >>"$results"
  done
done
echo "medians of $rounds rounds (requests a second; the process's CPU time a request):"
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
for client in h2load "${clients[@]}"; do
  rate=$(awk -v c="$client" '$1 == c {print $2}' "$results" | median)
  cpu=$(awk -v c="$client" '$1 == c && $3 != "-" {print $3}' "$results" | median)
  echo "  $client: $rate req/s${cpu:+, $cpu µs of CPU a request}"
done
