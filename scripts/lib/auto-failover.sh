#!/usr/bin/env bash
# A pg_auto_failover formation of its own (Debian's postgresql-15-auto-failover), on localhost,
# for the failover tests: a monitor and two nodes with synchronous replication, as operators run
# it, with the monitor's timeouts shortened so that a failover takes seconds, not a minute.
#   auto-failover.sh create DIR      makes the monitor and both nodes (database herald) and runs
#                                    their keepers; prints the formation's connection URI
#   auto-failover.sh primary DIR     prints the primary's port
#   auto-failover.sh kill-primary DIR
#                                    SIGKILLs the primary's keeper and its postmaster: its
#                                    processes lost; the monitor promotes the standby
#   auto-failover.sh switchover DIR  a planned switchover (pg_autoctl perform switchover)
#   auto-failover.sh wait-stable DIR waits until one node is primary and the other secondary
#   auto-failover.sh stop DIR        stops every keeper and server
set -euo pipefail
source "$(dirname "$0")/common.sh"
command=${1:?create, primary, kill-primary, switchover, wait-stable or stop}
dir=${2:?a directory}
bin=$(postgres_bin)

autoctl() {
  # Its state files under DIR, not the postgres user's home.
  as_postgres env PATH="$bin:/usr/bin:/bin" XDG_CONFIG_HOME="$dir/config" XDG_DATA_HOME="$dir/share" XDG_RUNTIME_DIR="$dir/run" \
    pg_autoctl "$@"
}

monitor_uri() { echo "postgres://autoctl_node@127.0.0.1:$(cat "$dir/monitor.port")/pg_auto_failover?sslmode=disable"; }

# Runs a keeper (or the monitor) in the background, its log in DIR, in a process group of its
# own (its id in DIR/NAME.pgid): the keeper's children and the PostgreSQL it starts are in it too,
# so one kill reaches them all at once.
run_keeper() {
  local name=$1
  export -f autoctl as_postgres
  export dir bin
  setsid bash -c 'echo $$ >"$dir/'"$name"'.pgid"; exec bash -c "autoctl run --pgdata \"$dir/'"$name"'\""' \
    >>"$dir/$name.log" 2>&1 </dev/null &
  for _ in $(seq 100); do
    [ -s "$dir/$name.pgid" ] && return 0
    sleep 0.1
  done
  echo "the keeper of $name did not start; see $dir/$name.log" >&2
  return 1
}

# The node (node1 or node2) that is in STATE (default primary) and meant to stay so, or nothing.
node_in() {
  "$bin/psql" -X -At -h 127.0.0.1 -p "$(cat "$dir/monitor.port")" -U autoctl_node pg_auto_failover -c \
    "SELECT nodename FROM pgautofailover.node WHERE reportedstate = '$1' AND goalstate = '$1'" 2>/dev/null \
    | head -n 1
}
# The node that takes writes: primary, or wait_primary while it has no standby (its synchronous
# replication suspended, as after its standby was lost).
primary_node() {
  local node
  for state in primary wait_primary single; do
    node=$(node_in "$state")
    [ -n "$node" ] && { echo "$node"; return 0; }
  done
}

wait_stable() {
  for _ in $(seq 1200); do
    local states
    states=$("$bin/psql" -X -At -h 127.0.0.1 -p "$(cat "$dir/monitor.port")" -U autoctl_node pg_auto_failover -c \
      "SELECT string_agg(reportedstate || '/' || goalstate, ' ' ORDER BY reportedstate) FROM pgautofailover.node" \
      2>/dev/null || true)
    [ "$states" = "primary/primary secondary/secondary" ] && return 0
    sleep 0.1
  done
  echo "the formation did not settle: $states" >&2
  return 1
}

case "$command" in
create)
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
  free_port >"$dir/monitor.port"
  autoctl create monitor --pgdata "$dir/monitor" --pgport "$(cat "$dir/monitor.port")" --hostname 127.0.0.1 \
    --auth trust --no-ssl >"$dir/monitor.log" 2>&1
  run_keeper monitor
  for _ in $(seq 100); do
    "$bin/pg_isready" -q -h 127.0.0.1 -p "$(cat "$dir/monitor.port")" && break
    sleep 0.1
  done
  # A primary is considered lost after a few seconds rather than 20 (a dead one refuses
  # connections at once; the timeouts leave a busy one time to answer), and its standby promoted
  # without waiting 30 s for it to demote itself (its keeper is dead, or fenced).
  "$bin/psql" -X -q -h 127.0.0.1 -p "$(cat "$dir/monitor.port")" -U postgres pg_auto_failover <<'SQL'
ALTER SYSTEM SET pgautofailover.health_check_period = 1000;
ALTER SYSTEM SET pgautofailover.health_check_timeout = 2000;
ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500;
ALTER SYSTEM SET pgautofailover.health_check_max_retries = 2;
ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 4000;
ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 3000;
SELECT pg_reload_conf();
SQL
  for node in node1 node2; do
    free_port >"$dir/$node.port"
    # No fsyncs: a test's formation need not survive the machine's crash, and they stall
    # every other test on this disk. Replication stays synchronous, as in production.
    autoctl create postgres --pgdata "$dir/$node" --pgport "$(cat "$dir/$node.port")" --hostname 127.0.0.1 \
      --name "$node" --dbname herald --auth trust --no-ssl --monitor "$(monitor_uri)" \
      --pg-hba-lan >"$dir/$node.log" 2>&1
    echo "fsync = off" >>"$dir/$node/postgresql.conf"
    run_keeper "$node"
    if [ "$node" = node1 ]; then
      for _ in $(seq 600); do [ "$(node_in single)" = "node1" ] && break || sleep 0.1; done
    fi
  done
  wait_stable
  autoctl show uri --formation default --monitor "$(monitor_uri)"
  ;;
primary)
  node=$(primary_node)
  [ -n "$node" ] || { echo "no primary" >&2; exit 1; }
  cat "$dir/$node.port"
  ;;
kill-primary)
  node=$(primary_node)
  [ -n "$node" ] || { echo "no primary" >&2; exit 1; }
  # The keeper, its children and its postmaster, in one signal (the backends, in sessions of
  # their own, exit as they see the postmaster gone, closing their sockets: the clients learn
  # of it at once, unlike a host lost from the network, where they wait for their timeouts).
  kill -KILL -- "-$(cat "$dir/$node.pgid")"
  rm -f "$dir/$node.pgid"
  echo "$node"
  ;;
switchover)
  autoctl perform switchover --formation default --monitor "$(monitor_uri)" >>"$dir/switchover.log" 2>&1
  ;;
wait-stable)
  wait_stable
  ;;
stop)
  for name in node1 node2 monitor; do
    [ -s "$dir/$name.pgid" ] && kill -KILL -- "-$(cat "$dir/$name.pgid")" 2>/dev/null || true
  done
  # A server its keeper had not yet started in the group (a create cut short) is stopped too.
  for data in "$dir"/monitor "$dir"/node1 "$dir"/node2; do
    [ -f "$data/postmaster.pid" ] && as_postgres "$bin/pg_ctl" -D "$data" -m immediate stop >/dev/null 2>&1 || true
  done
  # The monitor's health-check worker does not exit when its postmaster is killed (its own
  # session, like every backend's, is out of the group's reach), and keeps the logger alive
  # beside it: every process still working in the formation's directories is stopped too.
  for proc in /proc/[0-9]*; do
    case "$(readlink "$proc/cwd" 2>/dev/null)" in
    "$dir"/*) kill -KILL "${proc#/proc/}" 2>/dev/null || true ;;
    esac
  done
  ;;
*)
  echo "usage: $0 create|primary|kill-primary|switchover|wait-stable|stop DIR" >&2
  exit 2
  ;;
esac
