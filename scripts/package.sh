#!/usr/bin/env bash
# Builds the Debian package dist/herald_<version>_amd64.deb: the herald binary (release build,
# the Swift runtime linked in statically, so hosts need no Swift), the systemd unit, the
# environment file as a conffile, and the documentation. Depends: lists exactly the shared
# libraries the binary links, as dpkg-shlibdeps finds them. The emulator is not packaged: it
# is for tests and demos (`swift run herald-emulator`).
#   scripts/package.sh [output directory, default dist]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
install_herald_dependencies

out=${1:-dist}
echo "==> building herald (release, static Swift runtime)" >&2
# The same flags as the benchmarks, so that they measure what ships and neither rebuilds the other.
swift build -c release --product herald --static-swift-stdlib >&2
binary=$(swift build -c release --show-bin-path)/herald
# The version has one home, HeraldVersion; the binary prints it.
version=$("$binary" --version)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
install -D -m 0755 "$binary" "$root/usr/bin/herald"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/herald"
# The packaged binary lives in /usr/bin, not /usr/local/bin as when built from source.
install -d "$root/lib/systemd/system"
sed 's|/usr/local/bin/herald|/usr/bin/herald|g' deploy/herald.service >"$root/lib/systemd/system/herald.service"
chmod 0644 "$root/lib/systemd/system/herald.service"
install -D -m 0600 deploy/herald.env "$root/etc/herald/herald.env"
doc=$root/usr/share/doc/herald
install -D -m 0644 README.md "$doc/README.md"
install -D -m 0644 CHANGELOG.md "$doc/CHANGELOG.md"
for file in docs/*.md; do install -D -m 0644 "$file" "$doc/$file"; done
install -D -m 0644 deploy/grafana/herald.json "$doc/examples/grafana/herald.json"
install -D -m 0644 deploy/prometheus/herald-alerts.yml "$doc/examples/prometheus/herald-alerts.yml"
cat >"$doc/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: herald
Comment: Built with the Swift runtime linked in statically (Apache-2.0 with
 Runtime Library Exception, Copyright Apple Inc. and the Swift project authors).

Files: *
Copyright: 2026 the Herald developers
License: proprietary
 All rights reserved: the Herald developers have not chosen a licence for it yet.
COPYRIGHT
printf 'herald (%s) unstable; urgency=medium\n\n  * Release %s.\n\n -- Herald developers <herald@example.org>  %s\n' \
  "$version" "$version" "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}")" |
  gzip -9n >"$doc/changelog.gz"
chmod 0644 "$doc/copyright" "$doc/changelog.gz"

# Depends: from the libraries the binary links (dpkg-shlibdeps wants a debian/control beside it).
mkdir -p "$work/shlibs/debian"
printf 'Source: herald\n\nPackage: herald\nArchitecture: amd64\n' >"$work/shlibs/debian/control"
depends=$(cd "$work/shlibs" && dpkg-shlibdeps -O -e"$root/usr/bin/herald" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "dpkg-shlibdeps found no dependencies" >&2; exit 1; }
# libcurl 7 (Debian 12's own) loses multiplexed HTTP/2 transfers under load: require 8.
depends=$(printf '%s' "$depends" | sed -E 's/libcurl4( \([^)]*\))?/libcurl4 (>= 8)/')

install -d "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<CONTROL
Package: herald
Version: $version
Architecture: amd64
Maintainer: Herald developers <herald@example.org>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends
Section: net
Priority: optional
Description: push-notification delivery daemon with a PostgreSQL job queue
 Herald sends push notifications through FCM HTTP v1, straight to APNs (keys
 or certificates) and to browsers with Web Push (RFC 8291, VAPID), from a queue
 that app backends fill with plain SQL inside their own transactions. It keeps an account
 of every delivery, soft-disables dead push tokens, and wakes iOS devices that
 missed notifications.
 .
 Installing the package changes no database and starts nothing: configure
 /etc/herald/herald.env and the service account, run "herald migrate" against
 the database, then "systemctl enable --now herald".
CONTROL
echo /etc/herald/herald.env >"$root/DEBIAN/conffiles"
# Maintainer scripts: systemd learns of the unit (or forgets it); nothing else happens.
for script in postinst postrm; do
  cat >"$root/DEBIAN/$script" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
exit 0
SCRIPT
  chmod 0755 "$root/DEBIAN/$script"
done

mkdir -p "$out"
package=$out/herald_${version}_amd64.deb
fakeroot dpkg-deb --build --root-owner-group -Zxz "$root" "$package" >/dev/null
echo "$package"
