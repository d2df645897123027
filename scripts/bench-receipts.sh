#!/usr/bin/env bash
# Provider receipts: how many the endpoint takes a second and what each costs, this process's
# CPU and PostgreSQL's, on a private PostgreSQL with default durability (fsync on), against the
# daemon's own endpoint code and two connections (`herald-bench receipts`). Extra arguments go
# to it (--count, --per-post, --posters, --rounds).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
install_herald_dependencies

cluster=$(mktemp -d /tmp/herald-bench.XXXXXX)
trap 'stop_postgres "$cluster"; rm -rf "$cluster"' EXIT
start_postgres "$cluster" -c shared_buffers=256MB
as_postgres "$(postgres_bin)/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres herald_bench

swift build -c release --product herald-bench --static-swift-stdlib
HERALD_DATABASE_URL="dbname=herald_bench" .build/release/herald-bench receipts "$@"
