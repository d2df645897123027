#!/usr/bin/env bash
# Builds the suites that drive Herald's C (the HTTP/2 engine and libcurl's shim, the crypto shim,
# Web Push's encryption) with AddressSanitizer and UndefinedBehaviorSanitizer, which reach the C
# targets too, and runs them against a private PostgreSQL: a memory error or undefined behaviour
# in the C fails the run. Its own build directory (.build/sanitize), so the usual build is kept.
#   scripts/sanitize.sh                      # the HTTP, crypto and Web Push suites
#   scripts/sanitize.sh --filter FCMClient   # others, as `swift test` takes them
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh

install_herald_dependencies

cluster=$(mktemp -d /tmp/herald-sanitize.XXXXXX)
trap 'stop_postgres "$cluster"; rm -rf "$cluster"' EXIT
start_postgres "$cluster" -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300

# Swift takes AddressSanitizer only; the C targets take UndefinedBehaviorSanitizer too, and the
# link brings its runtime.
sanitizers=(--sanitize=address -Xcc -fsanitize=undefined -Xcc -fno-sanitize-recover=undefined
  -Xswiftc -Xclang-linker -Xswiftc -fsanitize=undefined --scratch-path .build/sanitize)
# A report is a failure. Leaks are not looked for: the test process exits with the Swift
# runtime's and Foundation's caches still held, which LeakSanitizer reports. Swift's own
# backtracer is off: it reads the crashed process's memory, which AddressSanitizer stops, and
# the run would hang instead of failing.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export SWIFT_BACKTRACE=enable=no
echo "==> building with AddressSanitizer and UndefinedBehaviorSanitizer"
swift build --build-tests "${sanitizers[@]}"
echo "==> testing"
if [ "$#" -gt 0 ]; then
  swift test --skip-build "${sanitizers[@]}" "$@"
else
  swift test --skip-build "${sanitizers[@]}" \
    --filter 'HeraldHTTPTests|HeraldCryptoTests|HeraldWebPushTests|HeraldAPNsTests|HeraldFCMTests' \
    --skip 'StuckConnectionTests'
fi
