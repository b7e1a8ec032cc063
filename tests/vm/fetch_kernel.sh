#!/usr/bin/env bash
# fetch_kernel.sh NAME CACHE_DIR
#   Fetches the newest Debian kernel package of a series and unpacks it under CACHE_DIR; prints
#   the unpacked folder (it holds boot/vmlinuz-KVER and lib/modules/KVER).
#   NAME: 6.1 (Debian 12's own kernel), 6.12 (bookworm-backports), 5.10 (Debian 11's).
#   A private apt configuration under CACHE_DIR/apt reads bookworm, bookworm-backports and
#   bullseye without touching the machine's own sources. A kernel already unpacked is reused.
set -euo pipefail
NAME=$1
CACHE=$(mkdir -p "$2" && cd "$2" && pwd)
case "$NAME" in
6.1) re='^linux-image-6\.1\.0-[0-9]+-amd64$' ;;
6.12) re='^linux-image-6\.12\.[0-9]+\+(bpo|deb12)-amd64$' ;;
5.10) re='^linux-image-5\.10\.0-[0-9]+-amd64$' ;;
*) echo "fetch_kernel: unknown kernel series '$NAME' (known: 6.1 6.12 5.10)" >&2; exit 2 ;;
esac
A=$CACHE/apt
mkdir -p "$A/lists/partial" "$A/archives/partial" "$A/etc/preferences.d" "$A/etc/sources.list.d"
cat >"$A/etc/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-updates main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-backports main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bullseye-security main
SRC
: >"$A/status"
apt_opts=(-o "Dir::Etc::SourceList=$A/etc/sources.list" -o "Dir::Etc::SourceParts=$A/etc/sources.list.d"
	-o "Dir::Etc::PreferencesParts=$A/etc/preferences.d" -o "Dir::State::Lists=$A/lists"
	-o "Dir::State::status=$A/status" -o "Dir::Cache=$A" -o "Dir::Cache::archives=$A/archives"
	-o "APT::Architecture=amd64" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
# The lists are refreshed once a day at most.
if [ -z "$(find "$A/lists" -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -1)" ]; then
	apt-get "${apt_opts[@]}" -qq update >&2 || { echo "fetch_kernel: cannot read Debian's package lists" >&2; exit 1; }
fi
pkg=$(apt-cache "${apt_opts[@]}" pkgnames linux-image- | grep -E "$re" | sort -V | tail -1)
[ -n "$pkg" ] || { echo "fetch_kernel: no package matches $re in Debian's lists" >&2; exit 1; }
X=$CACHE/$pkg
if [ ! -d "$X/boot" ]; then
	(cd "$A/archives" && apt-get "${apt_opts[@]}" -qq download "$pkg" >&2) ||
		{ echo "fetch_kernel: cannot download $pkg" >&2; exit 1; }
	deb=$(ls -t "$A/archives/${pkg}_"*.deb | head -1)
	rm -rf "$X.tmp" && mkdir -p "$X.tmp" && dpkg-deb -x "$deb" "$X.tmp" && mv "$X.tmp" "$X"
	rm -f "$deb"
fi
echo "$X"
