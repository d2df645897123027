#!/usr/bin/env bash
# A PgBouncer of its own (Debian's pgbouncer) in session mode, for the test that runs Herald
# through a pooler while the database fails over behind it.
#   pgbouncer.sh start DIR SERVER_PORT  starts it in front of the PostgreSQL on
#                                       127.0.0.1:SERVER_PORT; prints its own port
#   pgbouncer.sh repoint DIR SERVER_PORT
#                                       points it at another server and reloads it, as a failover
#                                       hook does: server connections are closed as their clients
#                                       let go of them, and new ones go to the new server
#   pgbouncer.sh stop DIR               stops it
set -euo pipefail
source "$(dirname "$0")/common.sh"
command=${1:?start, repoint or stop}
dir=${2:?a directory}

write_config() {
  local server_port=$1
  cat >"$dir/pgbouncer.ini.new" <<EOF
[databases]
* = host=127.0.0.1 port=$server_port
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $(cat "$dir/port")
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = session
max_client_conn = 200
default_pool_size = 50
server_reset_query = DISCARD ALL
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
  mv "$dir/pgbouncer.ini.new" "$dir/pgbouncer.ini"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir/pgbouncer.ini"
  return 0
}

case "$command" in
start)
  server_port=${3:?the port of the PostgreSQL server}
  mkdir -p "$dir"
  free_port >"$dir/port"
  echo '"postgres" ""' >"$dir/userlist.txt"
  write_config "$server_port"
  [ "$(id -u)" = 0 ] && chown -R postgres:postgres "$dir"
  # PgBouncer refuses to run as root.
  as_postgres /usr/sbin/pgbouncer -d "$dir/pgbouncer.ini"
  for _ in $(seq 100); do
    "$(postgres_bin)/pg_isready" -q -h 127.0.0.1 -p "$(cat "$dir/port")" -U postgres && break
    sleep 0.1
  done
  if ! "$(postgres_bin)/pg_isready" -q -h 127.0.0.1 -p "$(cat "$dir/port")" -U postgres; then
    echo "PgBouncer did not start:" >&2
    tail -n 20 "$dir/pgbouncer.log" >&2 2>/dev/null || true
    exit 1
  fi
  cat "$dir/port"
  ;;
repoint)
  write_config "${3:?the port of the new server}"
  kill -HUP "$(cat "$dir/pgbouncer.pid")"
  ;;
stop)
  [ -f "$dir/pgbouncer.pid" ] && kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
  ;;
*)
  echo "usage: $0 start|repoint|stop DIR [SERVER_PORT]" >&2
  exit 2
  ;;
esac
