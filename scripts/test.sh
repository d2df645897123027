#!/usr/bin/env bash
# Runs every test against a real, private PostgreSQL. On a fresh machine it first installs
# what is missing (apt, as root or through sudo). Extra arguments go to `swift test`
# (for example `--filter JobQueueTests`), and then only those tests run: not the package's
# check, the fuzzers or the sanitizers.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh

install_herald_dependencies

cluster=$(mktemp -d /tmp/herald-test.XXXXXX)
trap 'stop_postgres "$cluster"; rm -rf "$cluster"' EXIT
# Durability is not under test in this shared cluster, so skip the fsyncs. (The test that
# crashes PostgreSQL starts a cluster of its own, with fsync on.) Every test starts at once and
# many hold several connections (daemons, workers): 300 was outrun once at the start.
start_postgres "$cluster" -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=600

if [ "$#" = 0 ]; then
  echo "==> building the Debian package and checking it"
  package=$(bash scripts/package.sh "$cluster/dist" | tail -n 1)
  bash scripts/check-package.sh "$package"

  echo "==> fuzzing the C that reads outside bytes, 20 s a target"
  bash scripts/fuzz.sh 20

  echo "==> the suites that drive the C, under AddressSanitizer and UndefinedBehaviorSanitizer"
  bash scripts/sanitize.sh
fi

echo "==> building"
swift build --build-tests
echo "==> testing"
if [ "$#" -gt 0 ]; then
  swift test --skip-build "$@"
else
  # One pass, beside load too (scripts/test-under-load.sh). At most 16 tests at once: the
  # stand-in servers most tests start answer on the same two cooperative threads as the tests,
  # and with the whole suite at once one once missed a client's timeout.
  swift test --skip-build --experimental-maximum-parallelization-width 16
fi
