#!/usr/bin/env bash
# HTTP client benchmark: 100,000 FCM-sized POSTs through herald's libcurl HTTP/2 client to an
# nginx stand-in (TLS, HTTP/2, fixed FCM-like answer), beside h2load against the same server
# in the same run. Extra arguments go to `herald-bench http`.
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

swift build -c release --product herald-bench --static-swift-stdlib >/dev/null

# This VM's speed drifts by a third between runs, so h2load and herald take turns, and the
# median of the rounds' ratios is the figure.
rounds=${ROUNDS:-3}
ratios=()
for round in $(seq "$rounds"); do
  h2=$(h2load -n "$requests" -c 4 -m 250 -t 1 -H 'content-type: application/json' -H 'authorization: Bearer bench' \
    -d "$dir/body.json" "$url" | awk '/finished in/ {gsub(",", "", $4); print $4}')
  line=$(.build/release/herald-bench http --url "$url" --ca-bundle "$dir/cert.pem" --requests "$requests" --batch 250 "$@")
  ours=$(sed -E 's/.*: ([0-9]+) req\/s.*/\1/' <<<"$line")
  ratio=$(awk -v a="$ours" -v b="$h2" 'BEGIN {printf "%.0f", 100 * a / b}')
  ratios+=("$ratio")
  echo "round $round: h2load (4 connections, 250 streams each, 1 thread) $h2 req/s; herald (4 connections, 1000 in flight, batches of 250) $ours req/s: $ratio% of h2load"
done
echo "herald / h2load, median of $rounds rounds: $(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')%"
echo "herald on one event-loop thread:"
.build/release/herald-bench http --url "$url" --ca-bundle "$dir/cert.pem" --requests "$requests" --batch 250 --threads 1 "$@"
