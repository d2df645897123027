#!/usr/bin/env bash
# Checks a Herald Debian package as an operator's host would see it: its metadata and files,
# lintian, the libraries the binary needs, the binary and the unit as extracted, and an
# install and purge with dpkg (skipped where herald is already installed, so an operator's
# own installation is never touched). Prints "package: N passed, N failed".
#   scripts/check-package.sh dist/herald_<version>_amd64.deb
set -uo pipefail
cd "$(dirname "$0")/.."
deb=$(realpath "$1")
passed=0
failed=0
check() {  # check "what" command…: passes when the command succeeds
  local what=$1
  shift
  if "$@" >/tmp/herald-check.$$ 2>&1; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAILED: $what"
    sed 's/^/    /' /tmp/herald-check.$$ | head -20
  fi
}
has() { grep -q -- "$2" <<<"$1"; }
work=$(mktemp -d)
trap 'rm -rf "$work" /tmp/herald-check.$$' EXIT

info=$(dpkg-deb --info "$deb")
field() { dpkg-deb --field "$deb" "$1"; }
version=$(field Version)
check "package is herald for amd64" test "$(field Package) $(field Architecture)" = "herald amd64"
check "version is the binary's" test -n "$version"
check "depends on libpq5" has "$(field Depends)" 'libpq5'
check "depends on libcurl 8" has "$(field Depends)" 'libcurl4 (>= 8)'
check "depends on OpenSSL 3" has "$(field Depends)" 'libssl3'
check "depends on no Swift runtime" bash -c "! grep -qi swift <<<'$(field Depends)'"
check "the environment file is a conffile" has "$info" '/etc/herald/herald.env'

contents=$(dpkg-deb --contents "$deb")
check "binary in /usr/bin" has "$contents" '^-rwxr-xr-x root/root .* ./usr/bin/herald$'
check "unit in /lib/systemd/system" has "$contents" '^-rw-r--r-- root/root .* ./lib/systemd/system/herald.service$'
check "environment file readable by root only" has "$contents" '^-rw------- root/root .* ./etc/herald/herald.env$'
for doc in README.md CHANGELOG.md copyright changelog.gz docs/scaling.md examples/grafana/herald.json; do
  check "documentation: $doc" has "$contents" "./usr/share/doc/herald/$doc\$"
done

# lintian: no errors (its warnings are printed for the record).
lintian --tag-display-limit 0 "$deb" >"$work/lintian" 2>&1
sed 's/^/    lintian: /' "$work/lintian"
check "lintian reports no errors" bash -c "! grep -q '^E:' '$work/lintian'"

dpkg-deb -x "$deb" "$work/root"
binary=$work/root/usr/bin/herald
check "every library the binary links resolves here" bash -c "ldd '$binary' && ! ldd '$binary' | grep -q 'not found'"
check "the Swift runtime is linked in" bash -c "! ldd '$binary' | grep -q libswift"
check "herald --version prints the package version" test "$("$binary" --version)" = "$version"
check "herald --help lists the commands" bash -c "'$binary' --help | grep -q 'migrate'"
# systemd-analyze checks that ExecStart exists: point it at the extracted binary.
sed "s|/usr/bin/herald|$binary|" "$work/root/lib/systemd/system/herald.service" >"$work/herald.service"
check "the unit passes systemd-analyze verify" bash -c "out=\$(systemd-analyze verify '$work/herald.service' 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"

if dpkg-query -W -f='${Status}' herald 2>/dev/null | grep -q "install ok installed"; then
  echo "herald is installed on this machine already: the install and purge checks are skipped"
else
  if [ "$(id -u)" = 0 ]; then root_do() { "$@"; }; else root_do() { sudo "$@"; }; fi
  check "dpkg installs it" root_do dpkg -i "$deb"
  check "installed: /usr/bin/herald --version" test "$(/usr/bin/herald --version)" = "$version"
  check "installed: the conffile is 0600" test "$(stat -c %a /etc/herald/herald.env)" = 600
  check "installed: the unit verifies" bash -c "out=\$(systemd-analyze verify /lib/systemd/system/herald.service 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"
  # Only a process running the installed binary counts: a demo's or a test's herald, built
  # elsewhere, may run beside this check.
  no_installed_herald_runs() {
    local pid
    for pid in $(pgrep -x herald); do
      [ "$(root_do readlink "/proc/$pid/exe")" != /usr/bin/herald ] || return 1
    done
  }
  check "installing started nothing" no_installed_herald_runs
  check "dpkg purges it" root_do dpkg --purge herald
  check "purged: nothing left" bash -c "[ ! -e /usr/bin/herald ] && [ ! -e /lib/systemd/system/herald.service ] && [ ! -e /etc/herald/herald.env ]"
fi

echo "package: $passed passed, $failed failed"
[ "$failed" = 0 ]
