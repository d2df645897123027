# Shared by the scripts in scripts/: installing what is missing, and a private PostgreSQL.
# Source it; it defines functions and changes nothing by itself.

# Runs a command as root: directly when we are root, through sudo otherwise.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Installs the named Debian packages that are not installed yet.
install_packages() {
  local missing=() package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "==> installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# libcurl 8 or newer. Debian 12's libcurl 7.88 loses multiplexed HTTP/2 transfers under load
# (they never complete until their timeout), so on bookworm it comes from Debian's own
# bookworm-backports; Debian 13 ships 8.x already.
install_libcurl8() {
  local version
  version=$(dpkg-query -W -f='${Version}' libcurl4-openssl-dev 2>/dev/null || true)
  if [ -n "$version" ] && dpkg --compare-versions "$version" ge 8; then return 0; fi
  if grep -q '^VERSION_CODENAME=bookworm' /etc/os-release; then
    if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      echo "deb http://deb.debian.org/debian bookworm-backports main" | as_root tee /etc/apt/sources.list.d/bookworm-backports.list >/dev/null
    fi
    as_root apt-get update -qq
    echo "==> installing libcurl 8 from bookworm-backports"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -t bookworm-backports \
      libcurl4-openssl-dev libcurl4
  else
    install_packages libcurl4-openssl-dev
  fi
}

# What Herald needs to build and test: the C libraries, PostgreSQL 15, and the tools the tests use
# (nginx and nghttp2 as HTTP/2 stand-ins, curl as an app calling the endpoint, systemd for
# systemd-analyze verify, installing systemd starts nothing; procps for pgrep; dpkg-dev, fakeroot
# and lintian to build and check the Debian package; promtool for the alert rules; pg_auto_failover
# and PgBouncer for the failover tests, which run their own).
install_herald_dependencies() {
  install_packages pkg-config libpq-dev libssl-dev libnghttp2-dev openssl postgresql postgresql-contrib python3 \
    nginx-light nghttp2-client curl systemd procps dpkg-dev fakeroot lintian postgresql-15-auto-failover pgbouncer
  install_libcurl8
  install_promtool
  if ! command -v swift >/dev/null; then
    [ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
  fi
  command -v swift >/dev/null || { echo "swift 6.3 is not on PATH (expected /opt/swift/usr/bin)" >&2; exit 1; }
}

# promtool, to check and unit-test deploy/prometheus/. Debian ships it only inside the prometheus
# package, whose installation would start a Prometheus server; so unless prometheus is installed
# already, the package is downloaded and promtool alone extracted into .tools/ (git ignores it).
install_promtool() {
  command -v promtool >/dev/null && return 0
  [ -x .tools/usr/bin/promtool ] && return 0
  echo "==> extracting promtool from Debian's prometheus package into .tools/"
  local download
  download=$(mktemp -d)
  chmod 755 "$download"  # apt hands the download to its own user
  as_root apt-get update -qq
  (cd "$download" && apt-get download -qq prometheus)
  mkdir -p .tools
  dpkg-deb --fsys-tarfile "$download"/prometheus_*.deb | tar -x -C .tools ./usr/bin/promtool
  rm -rf "$download"
}

# The newest PostgreSQL server binaries Debian installed.
postgres_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$dir" ] || { echo "PostgreSQL server binaries not found under /usr/lib/postgresql" >&2; exit 1; }
  echo "$dir"
}

# Runs a PostgreSQL server command as the postgres user when we are root (the server refuses root).
as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# A TCP port nothing listens on.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# start_postgres DIR [extra server options…]: a private cluster in DIR (created if new), on
# 127.0.0.1 and a socket in DIR, on port $POSTGRES_PORT or else a free one. Exports PGHOST,
# PGPORT, PGUSER and PGDATA.
start_postgres() {
  local dir=$1
  shift
  local bin
  bin=$(postgres_bin)
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_postgres "$bin/initdb" -D "$dir/data" --auth=trust --username=postgres --encoding=UTF8 --no-locale >"$dir/initdb.log"
  fi
  # A cluster left running by an earlier run is stopped first, so the port is ours.
  as_postgres "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1 && as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null
  export PGPORT
  PGPORT=${POSTGRES_PORT:-$(free_port)}
  as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $PGPORT -k $dir -c listen_addresses=127.0.0.1 $*" start >/dev/null
  export PGHOST=127.0.0.1 PGUSER=postgres PGDATA="$dir/data"
  echo "==> PostgreSQL running on 127.0.0.1:$PGPORT (data in $dir/data, log in $dir/server.log)"
}

# stop_postgres DIR: stops the cluster started by start_postgres.
stop_postgres() {
  local bin
  bin=$(postgres_bin)
  as_postgres "$bin/pg_ctl" -D "$1/data" -m fast stop >/dev/null 2>&1 || true
}

# CPU time in clock ticks (getconf CLK_TCK a second), for the benchmarks: the whole machine's
# busy time, and one process's.
machine_busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
process_cpu() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
