#!/usr/bin/env bash
# Fuzzes the C that reads bytes from outside Herald with libFuzzer, under AddressSanitizer and
# UndefinedBehaviorSanitizer (the Swift toolchain's clang carries both): the HTTP/2 engine's URL
# splitting (fuzz_url), the address classifier that keeps subscriptions off private addresses
# (fuzz_address), and the engine's response path, frames from a server in, nghttp2's callbacks out
# (fuzz_response, which first checks fixed exchanges: a malformed :status, trailers); and a
# connection's state machine, driven through any order of events (fuzz_connection_state). The
# targets are in Tests/Fuzz/, each seeded from Tests/Fuzz/corpus/<target>/.
#   scripts/fuzz.sh                 # each target for 60 s
#   scripts/fuzz.sh 600 response    # one target for 10 minutes
# What a run finds stays in .build/fuzz/<target>/: new inputs in corpus/ (copy the interesting
# ones into Tests/Fuzz/corpus/), and a crash-*, leak-* or timeout-* file that reproduces a failure
# (`.build/fuzz/<target>/fuzz <file>`), which also fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
install_packages libnghttp2-dev libssl-dev
if ! command -v swift >/dev/null; then
  [ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
fi
clang="$(dirname "$(command -v swift)")/clang"
seconds=${1:-60}
shift || true
targets=${*:-url address response connection_state}
for target in $targets; do
  out=.build/fuzz/$target
  mkdir -p "$out/corpus"
  "$clang" -g -O1 -fuse-ld=lld -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I Sources/CHTTP2/include -I Sources/CAddress/include "Tests/Fuzz/fuzz_$target.c" Sources/CHTTP2/*.c \
    Sources/CAddress/*.c -o "$out/fuzz" \
    -lnghttp2 -lssl -lcrypto -lpthread
  echo "==> fuzzing $target for $seconds s"
  status=0
  (cd "$out" && ./fuzz -max_total_time="$seconds" -print_final_stats=1 corpus "../../../Tests/Fuzz/corpus/$target") \
    >"$out/log" 2>&1 || status=$?
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)|ERROR|SUMMARY|runtime error' "$out/log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$out/log"
    echo "fuzz_$target failed; its log and the input that failed are in $out/" >&2
    exit 1
  fi
done
