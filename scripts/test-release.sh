#!/usr/bin/env bash
# Runs the workers' concurrency tests against an optimized (release) build, with a real, private
# PostgreSQL. Run it before each release, and after changing a task group, a child task or an
# outcome type: Swift 6.3's optimizer once miscompiled a child task's closure in the channels
# worker (issue #40), and the debug build that scripts/test.sh runs was right all along.
#
# Not part of scripts/test.sh: it is a second whole build of the package and its tests (-O,
# -enable-testing for the tests' @testable imports), about 25 minutes on 2 cores against 10 for
# the debug build; the tests themselves take under a minute. Extra arguments replace the
# filter (for example `WorkerConcurrencyTests`).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh

install_herald_dependencies

cluster=$(mktemp -d /tmp/herald-test-release.XXXXXX)
trap 'stop_postgres "$cluster"; rm -rf "$cluster"' EXIT
start_postgres "$cluster" -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300

filter=${1:-'WorkerConcurrencyTests|JobRecordTests|JobQueueTests|WorkerRunnerTests|WakeupTests|BroadcastChannelTests|DispatchWorkerTests|FCMQuotaTests|RouteWindowsTests|RouteIsolationTests'}
echo "==> building (release, testable)"
swift build -c release --build-tests -Xswiftc -enable-testing
echo "==> testing: $filter"
swift test -c release --skip-build -Xswiftc -enable-testing --filter "$filter"
