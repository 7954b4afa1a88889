#!/bin/sh
# deps.sh PACKAGE...: install the Debian packages that are missing.
# Used by `make demo` and `make test` so that both work on a fresh machine.
set -e
missing=""
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "libcoll: missing Debian packages:$missing" >&2
    echo "libcoll: run as root: apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
echo "libcoll: installing Debian packages:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing >/dev/null
