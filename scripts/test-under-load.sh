#!/usr/bin/env bash
# Runs the README's test command while another process keeps every core busy (stress-ng from
# Debian, installed if missing): the suite must pass beside load as it does on a quiet machine.
# Extra arguments go to scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh

install_packages stress-ng
cores=$(nproc)
stress-ng --cpu "$cores" --quiet &
load=$!
trap 'kill "$load" 2>/dev/null || true' EXIT
echo "==> stress-ng --cpu $cores is running (pid $load)"
started=$(date +%s)
bash scripts/test.sh "$@"
echo "==> the tests passed beside the load in $(($(date +%s) - started)) s"
