#!/usr/bin/env bash
# A private PostgreSQL cluster for a test that crashes the server.
#   postgres-cluster.sh start DIR [PORT]   creates or starts the cluster in DIR (on PORT, or a
#                                          free port); prints the port
#   postgres-cluster.sh crash DIR          SIGKILLs the server and every backend at once: no
#                                          shutdown checkpoint, so the next start recovers from
#                                          the WAL
#   postgres-cluster.sh stop DIR           stops it
set -euo pipefail
source "$(dirname "$0")/common.sh"
command=${1:?start, crash or stop}
dir=${2:?a directory}

case "$command" in
start)
  POSTGRES_PORT=${3:-} start_postgres "$dir" >/dev/null
  echo "$PGPORT"
  ;;
crash)
  pid=$(head -n 1 "$dir/data/postmaster.pid")
  kill -KILL "$pid" $(pgrep -P "$pid") 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  ;;
stop)
  stop_postgres "$dir"
  ;;
*)
  echo "usage: $0 start|crash|stop DIR [PORT]" >&2
  exit 2
  ;;
esac
