#!/usr/bin/env bash
# What each provider's client costs per delivery, without the database: FCM, APNs and Web Push
# messages of a notification's size through Herald's clients and HTTP/2 client to one nginx
# standing in for all three (TLS, HTTP/2, each provider's answer), taking turns round after
# round (`herald-bench paths`). Extra arguments go to it (--count, --rounds, --batch).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
install_herald_dependencies

dir=$(mktemp -d /tmp/herald-bench-paths.XXXXXX)
trap 'scripts/lib/nginx-standin.sh stop "$dir"; rm -rf "$dir"' EXIT
port=$(scripts/lib/nginx-standin.sh start "$dir")
swift build -c release --product herald-bench --static-swift-stdlib >/dev/null
.build/release/herald-bench paths --base "https://127.0.0.1:$port" --ca-bundle "$dir/cert.pem" "$@"
