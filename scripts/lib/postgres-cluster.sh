#!/usr/bin/env bash
# A private PostgreSQL cluster for a test that crashes the server.
#   postgres-cluster.sh start DIR [PORT]   creates or starts the cluster in DIR (on PORT, or a
#                                          free port); prints the port
#   postgres-cluster.sh standby DIR PRIMARY_PORT
#                                          makes DIR a streaming standby of the cluster on
#                                          127.0.0.1:PRIMARY_PORT (pg_basebackup -R) and starts it
#                                          on a free port; prints the port
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
standby)
  primary_port=${3:?the port of the primary}
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
  # initdb's pg_hba.conf lets local replication connections in (trust); a fast checkpoint,
  # so the copy starts at once. A test's standby need not survive a crash of the machine: no
  # fsyncs (they stall every other test on this disk).
  as_postgres "$(postgres_bin)/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres \
    -D "$dir/data" -R -X stream --checkpoint=fast --no-sync >"$dir/basebackup.log" 2>&1
  POSTGRES_PORT= start_postgres "$dir" -c fsync=off >/dev/null
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
  echo "usage: $0 start|standby|crash|stop DIR [PORT]" >&2
  exit 2
  ;;
esac
